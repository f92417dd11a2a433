package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/integration/testenv"
)

// TestRedisSourcePositionRestore reads part of a stream, takes the
// position, reads on, and checks that a source restored at the position
// reads exactly the rest, including entries added after the position.
func TestRedisSourcePositionRestore(t *testing.T) {
	connectortest.CheckLeaks(t)
	r := testenv.StartRedis(t)
	mem := connectortest.Mem(t)
	src := connRedisSpec("in")
	out := connectortest.SourceSchema(t, src)
	var ids []string
	add := func(fields ...string) { ids = append(ids, connXAdd(t, r, "in", fields...)) }
	add("data", `{"id":1,"fare":1.5,"at":1000}`)
	add("payload", `{"id":2}`) // no data: a dead letter
	add("data", `{"id":3}`)
	add("data", `{"id":4,`) // a dead letter
	add("data", `{"id":5,"at":5000}`)
	row := func(id int64) []any {
		switch id {
		case 1:
			return []any{int64(1), 1.5, time.UnixMilli(1000).UTC()}
		case 5:
			return []any{int64(5), nil, time.UnixMilli(5000).UTC()}
		}
		return []any{id, nil, nil}
	}

	dl := &connectortest.DeadLetters{}
	a := connOpenRedisSource(t, src, out, r.Addr, mem, 0, dl)
	rec, err := a.Poll(context.Background(), 2, time.Second)
	if err != nil || rec == nil {
		t.Fatalf("first poll: %v, %v", rec, err)
	}
	before := connectortest.RowsOf(rec)
	rec.Release()
	pos := connectortest.Position(t, a)
	if want := inPos(ids[1]); pos != want {
		t.Fatalf("position after 2 entries: %s, want %s", pos, want)
	}
	deadBefore := len(dl.Got)
	rest := connPollRows(t, a, 2, 2)
	add("data", `{"id":6}`)
	add("data", `{"id":7`) // a dead letter
	add("data", `{"id":8}`)
	rest = append(rest, connPollRows(t, a, 2, 2)...)

	rdl := &connectortest.DeadLetters{}
	b, err := NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.(task.Resumable).Restore(json.RawMessage(pos)); err != nil {
		t.Fatal(err)
	}
	ctx := connectortest.SourceContext(mem, 0, 1)
	ctx.RedisAddr, ctx.DeadLetter = r.Addr, rdl.Add
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := connectortest.Position(t, b); got != pos {
		t.Errorf("restored source's position %s, want %s", got, pos)
	}
	after := connPollRows(t, b, 4, 3)
	if rec, err := b.Poll(context.Background(), 10, 20*time.Millisecond); rec != nil || err != nil {
		t.Fatalf("poll past the end: %v, %v; want nil, nil", rec, err)
	}
	if want := inPos(ids[len(ids)-1]); connectortest.Position(t, b) != want {
		t.Errorf("position at the end %s, want %s", connectortest.Position(t, b), want)
	}
	var want [][]any
	for _, id := range []int64{1, 3, 5, 6, 8} {
		want = append(want, row(id))
	}
	connectortest.SameRowList(t, "rows after restore vs the rest of the first run", after, rest)
	connectortest.SameRowList(t, "rows before + rows after restore", append(before, after...), want)
	gotDead := append(dl.Got[:deadBefore:deadBefore], rdl.Got...)
	if fmt.Sprint(gotDead) != fmt.Sprint(dl.Got) {
		t.Errorf("dead letters before + after restore:\n%q\nwant\n%q", gotDead, dl.Got)
	}
	if len(dl.Got) != 3 || dl.Got[0].Origin != "in:"+ids[1] {
		t.Errorf("dead letters %q", dl.Got)
	}

	// "0-0" is before the first entry; an idle subtask accepts a position
	// and idles.
	z, err := NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := z.(task.Resumable).Restore(json.RawMessage(inPos("0-0"))); err != nil {
		t.Fatal(err)
	}
	ctx = connectortest.SourceContext(mem, 0, 1)
	ctx.RedisAddr = r.Addr
	if err := z.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	connectortest.SameRowList(t, `restored at "0-0"`, connPollRows(t, z, 5, 100), want)
	connectortest.RestoreRefused(t, z, pos, "already open")
	idle, err := NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.(task.Resumable).Restore(json.RawMessage(pos)); err != nil {
		t.Fatal(err)
	}
	ctx = connectortest.SourceContext(mem, 1, 2)
	ctx.RedisAddr = r.Addr
	if err := idle.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, err := idle.Poll(context.Background(), 10, 0); rec != nil || err != nil {
		t.Errorf("idle subtask after Restore: %v, %v; want nil, nil", rec, err)
	}
	if got := connectortest.Position(t, idle); got != `{"splits":{}}` {
		t.Errorf("idle subtask's position %s: want no streams (it owns none)", got)
	}
	idle.Close()
}

func TestRedisSourceRestoreRefused(t *testing.T) {
	src := connRedisSpec("in")
	out := connectortest.SourceSchema(t, src)
	for _, tc := range []struct {
		pos  string
		want []string
	}{
		{``, []string{"position is empty"}},
		{`{}`, []string{"position.splits: missing"}},
		{`{"id":null}`, []string{"position.splits: missing"}},
		{`{"read":3}`, []string{"position.id: missing"}},
		{`{"splits":{"in":{"id":"1-0"}},"id":"1-0"}`, []string{"splits and id: want one of them"}},
		{`{"splits":{"in":{}}}`, []string{`position.splits["in"].id: missing`}},
		{`{"splits":{"in":{"id":"x"}}}`, []string{`position.splits["in"].id: "x" is not a stream entry id`}},
		{`{"splits":{"in":{"id":"1-0","read":-1}}}`, []string{`position.splits["in"].read: -1 is negative`}},
		{`{"splits":{"":{"id":"1-0"}}}`, []string{`an empty stream name`}},
		{`{"splits":{"in":{"id":"1-0","stream":"in"}}}`, []string{`unknown field "stream"`}},
		{`{"splits":["in"]}`, []string{"position.splits: got array"}},
		{`{"id":""}`, []string{`position.id: "" is not a stream entry id`}},
		{`{"id":"abc"}`, []string{`position.id: "abc" is not a stream entry id`}},
		{`{"id":"1-"}`, []string{`position.id: "1-" is not a stream entry id`}},
		{`{"id":"-1-0"}`, []string{`position.id: "-1-0"`}},
		{`{"id":"+1-0"}`, []string{`position.id: "+1-0"`}},
		{`{"id":"1"}`, []string{`position.id: "1" is not a stream entry id`}},
		{`{"id":"$"}`, []string{`position.id: "$"`}},
		{`{"id":"1-0-0"}`, []string{`position.id: "1-0-0"`}},
		{`{"id":5}`, []string{"position.id: got number, want string"}},
		{`{"id":"1-0","stream":"in"}`, []string{`unknown field "stream"`}},
		{`"1-0"`, []string{"cannot unmarshal string"}},
	} {
		s, err := NewSource(src, out)
		if err != nil {
			t.Fatal(err)
		}
		connectortest.RestoreRefused(t, s, tc.pos, append(tc.want, "restore redis source events")...)
	}
	s, _ := NewSource(src, out)
	if err := s.(task.Resumable).Restore(json.RawMessage(`{"id":"18446744073709551615-18446744073709551615"}`)); err != nil {
		t.Errorf("the largest id: %v", err)
	}
}

// TestRedisSourceBacklog checks the backlog (entries after the position)
// from the start of a trimmed stream, after reads, after a restore and
// as entries arrive; a position without "read" restores with an unknown
// backlog.
func TestRedisSourceBacklog(t *testing.T) {
	connectortest.CheckLeaks(t)
	r := testenv.StartRedis(t)
	mem := connectortest.Mem(t)
	src := connRedisSpec("in")
	out := connectortest.SourceSchema(t, src)
	ctx := context.Background()
	backlog := func(s task.Source, want int64) {
		t.Helper()
		n, unit, ok := s.(task.Backlogged).Backlog(ctx)
		if !ok || unit != "records" || n != want {
			t.Errorf("backlog %d %s (ok %v), want %d records", n, unit, ok, want)
		}
	}
	a := connOpenRedisSource(t, src, out, r.Addr, mem, 0, nil)
	defer a.Close()
	backlog(a, 0) // no stream yet
	for i := range 5 {
		connXAdd(t, r, "in", "data", fmt.Sprintf(`{"id":%d}`, i))
	}
	if _, err := r.Do("XTRIM", "in", "MAXLEN", "3"); err != nil {
		t.Fatal(err)
	}
	backlog(a, 3) // the two trimmed before the source read anything are not its backlog
	connPollRows(t, a, 2, 2)
	backlog(a, 1)
	pos := connectortest.Position(t, a)
	var p struct {
		Splits map[string]struct{ Read int64 }
	}
	if err := json.Unmarshal([]byte(pos), &p); err != nil || p.Splits["in"].Read != 4 {
		t.Fatalf("position %s: want read 4 (2 trimmed + 2 read)", pos)
	}

	b, err := NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.(task.Resumable).Restore(json.RawMessage(pos)); err != nil {
		t.Fatal(err)
	}
	sctx := connectortest.SourceContext(mem, 0, 1)
	sctx.RedisAddr = r.Addr
	if err := b.Open(sctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	backlog(b, 1)
	connXAdd(t, r, "in", "data", `{"id":9}`)
	backlog(b, 2)
	connPollRows(t, b, 2, 10)
	backlog(b, 0)

	old, err := NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.(task.Resumable).Restore(json.RawMessage(`{"id":"0-0"}`)); err != nil {
		t.Fatal(err)
	}
	if err := old.Open(sctx); err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if n, unit, ok := old.(task.Backlogged).Backlog(ctx); ok {
		t.Errorf("backlog after restoring a position without read: %d %s, want unknown", n, unit)
	}
}
