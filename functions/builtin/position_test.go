package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/blob"
)

// connPosition returns a source's position as a string, failing the test
// if it has none or it is not JSON.
func connPosition(t testing.TB, s task.Source) string {
	t.Helper()
	r, ok := s.(task.Resumable)
	if !ok {
		t.Fatalf("%T is not resumable", s)
	}
	pos, err := r.Position()
	if err != nil {
		t.Fatalf("Position: %v", err)
	}
	if !json.Valid(pos) {
		t.Fatalf("Position %q is not JSON", pos)
	}
	return string(pos)
}

// connPollN polls a bounded source n times (fewer if it ends first) and
// returns its rows and whether it ended.
func connPollN(t testing.TB, s task.Source, n, maxRows int) (rows [][]any, ended bool) {
	t.Helper()
	for range n {
		rec, err := s.Poll(context.Background(), maxRows, 0)
		if errors.Is(err, io.EOF) {
			return rows, true
		}
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		rows = append(rows, connRowsOf(rec)...)
		rec.Release()
	}
	return rows, false
}

// connSameRowList fails the test unless got and want hold the same rows in
// the same order.
func connSameRowList(t testing.TB, what string, got, want [][]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d:\n got %v\nwant %v", what, len(got), len(want), got, want)
	}
	for i := range want {
		if !connSameRow(got[i], want[i]) {
			t.Fatalf("%s: row %d: %v, want %v", what, i, got[i], want[i])
		}
	}
}

// connRestoreRefused checks that Restore refuses pos with an error that
// contains every string of want.
func connRestoreRefused(t *testing.T, s task.Source, pos string, want ...string) {
	t.Helper()
	err := s.(task.Resumable).Restore(json.RawMessage(pos))
	if err == nil {
		t.Errorf("Restore(%s): no error", pos)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Restore(%s): error %q does not mention %q", pos, err, w)
		}
	}
}

// TestDatagenPositionRestore takes a position after every number of polls,
// reads on, and checks that a source restored at the position produces
// exactly the rest: the rows before plus the rows after are the subtask's
// events, each once.
func TestDatagenPositionRestore(t *testing.T) {
	connCheckLeaks(t)
	mem := connMem(t)
	const count, maxRows = 100, 7
	src := connDatagenSpec(count)
	out := connSourceSchema(t, src)
	for _, p := range []int{1, 3} {
		for sub := range p {
			var want [][]any
			for i := int64(sub); i < count; i += int64(p) {
				want = append(want, DatagenRow(src, out, i))
			}
			for cut := 0; ; cut++ {
				what := fmt.Sprintf("p=%d subtask %d, position after %d polls", p, sub, cut)
				g, err := NewSource(src, out)
				if err != nil {
					t.Fatal(err)
				}
				if err := g.Open(connSourceContext(mem, sub, p)); err != nil {
					t.Fatal(err)
				}
				before, ended := connPollN(t, g, cut, maxRows)
				pos := connPosition(t, g)
				if wantPos := fmt.Sprintf(`{"next":%d}`, sub+len(before)*p); pos != wantPos {
					t.Fatalf("%s: %s, want %s", what, pos, wantPos)
				}
				rest := connDrain(t, g, maxRows)
				g.Close()

				r, err := NewSource(src, out)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.(task.Resumable).Restore(json.RawMessage(pos)); err != nil {
					t.Fatalf("%s: Restore(%s): %v", what, pos, err)
				}
				if err := r.Open(connSourceContext(mem, sub, p)); err != nil {
					t.Fatalf("%s: Open after Restore(%s): %v", what, pos, err)
				}
				if got := connPosition(t, r); got != pos {
					t.Errorf("%s: restored source's position %s, want %s", what, got, pos)
				}
				after := connDrain(t, r, maxRows)
				r.Close()
				connSameRowList(t, what+": rows after restore vs the rest of the first run", after, rest)
				connSameRowList(t, what+": rows before + rows after restore", append(before, after...), want)
				if ended {
					break
				}
			}
		}
	}
}

func TestDatagenRestoreRefused(t *testing.T) {
	connCheckLeaks(t)
	mem := connMem(t)
	src := &spec.Source{Name: "gen", Type: spec.SourceDatagen, Count: 10, Schema: connSchema("n", "int64")}
	out := connSourceSchema(t, src)
	fresh := func() task.Source {
		g, err := NewSource(src, out)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	for _, tc := range []struct {
		pos  string
		want []string
	}{
		{``, []string{"position is empty"}},
		{`null`, []string{"position.next: missing"}},
		{`{}`, []string{"position.next: missing"}},
		{`{"next":-1}`, []string{"position.next: -1 is negative"}},
		{`{"next":"5"}`, []string{"position.next: got string, want int64"}},
		{`{"next":1.5}`, []string{"position.next: got number 1.5, want int64"}},
		{`{"next":3,"seed":7}`, []string{`unknown field "seed"`}},
		{`{"next":3} {"next":4}`, []string{"more data after the position"}},
		{`not json`, []string{"invalid character"}},
	} {
		connRestoreRefused(t, fresh(), tc.pos, append(tc.want, "restore datagen source gen")...)
	}

	// Positions of the right shape that do not fit the subtask are refused
	// by Open.
	for _, tc := range []struct {
		pos          string
		subtask, par int
		want         string
	}{
		{`{"next":4}`, 0, 3, "position.next 4 is an event of subtask 1, not 0"},
		{`{"next":4}`, 1, 1, "subtask 1 of parallelism 1"},
		{`{"next":15}`, 0, 3, "position.next 15 is past the end"},
		{`{"next":11}`, 0, 1, "position.next 11 is past the end"},
	} {
		g := fresh()
		if err := g.(task.Resumable).Restore(json.RawMessage(tc.pos)); err != nil {
			t.Fatalf("Restore(%s): %v", tc.pos, err)
		}
		err := g.Open(connSourceContext(mem, tc.subtask, tc.par))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open subtask %d of %d after Restore(%s): %v, want an error containing %q", tc.subtask, tc.par, tc.pos, err, tc.want)
		}
		g.Close()
	}

	// The end of a subtask's events is a valid position: nothing is left.
	g := fresh()
	if err := g.(task.Resumable).Restore(json.RawMessage(`{"next":12}`)); err != nil {
		t.Fatal(err)
	}
	if err := g.Open(connSourceContext(mem, 0, 3)); err != nil {
		t.Fatal(err)
	}
	if rows := connDrain(t, g, 5); len(rows) != 0 {
		t.Errorf("restored at the end: rows %v", rows)
	}
	if _, err := g.(task.Resumable).Position(); err != nil {
		t.Fatal(err)
	}
	connRestoreRefused(t, g, `{"next":0}`, "already open")
	g.Close()
	if _, err := fresh().(task.Resumable).Position(); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Errorf("Position before Open: %v", err)
	}
}

// connPositionFiles puts objects with good, malformed, empty, CRLF, long
// and unterminated lines under in/.
func connPositionFiles(t *testing.T) blob.Bucket {
	t.Helper()
	b := connBucket(t)
	connPut(t, b, "in/a.jsonl", `{"id":1,"fare":1,"at":1000}
{"id":2,"fare":"cheap","at":2000}

{"id":3,"at":3000}
not json at all
{"id":4,"fare":4.5}
`+"{\"id\":5}\r\n")
	// A line longer than the 64 KiB read buffer, and no final newline.
	connPut(t, b, "in/b.jsonl", `{"id":10,"pad":"`+strings.Repeat("x", 100_000)+`"}`+"\n"+`{"id":11}
{"id":12.5}

{"id":13,"fare":13}`)
	var sb strings.Builder
	for i := 20; i < 40; i++ {
		if i == 30 {
			sb.WriteString(`{"id":"thirty"}` + "\n")
		}
		fmt.Fprintf(&sb, `{"id":%d,"at":%d}`+"\n", i, i*1000)
	}
	connPut(t, b, "in/sub/c.jsonl", sb.String())
	connPut(t, b, "in/d.jsonl", "")
	connPut(t, b, "in/e.jsonl", "\n\n{\"id\":50}\n")
	connPut(t, b, "in/_staging/x.jsonl", `{"id":100}`+"\n")
	return b
}

// TestFileSourcePositionRestore takes a position after every number of
// polls, at several batch sizes and parallelisms, reads on, and checks that
// a source restored at the position reads exactly the rest: rows and dead
// letters before the position plus those after the restore are those of one
// uninterrupted read, each once.
func TestFileSourcePositionRestore(t *testing.T) {
	connCheckLeaks(t)
	mem := connMem(t)
	b := connPositionFiles(t)
	src := connFilesSpec("in")
	out := connSourceSchema(t, src)
	open := func(sub, p int, pos string) (task.Source, *connDeadLetters) {
		t.Helper()
		fs, err := NewSource(src, out)
		if err != nil {
			t.Fatal(err)
		}
		if pos != "" {
			if err := fs.(task.Resumable).Restore(json.RawMessage(pos)); err != nil {
				t.Fatalf("Restore(%s): %v", pos, err)
			}
		}
		dl := &connDeadLetters{}
		ctx := connSourceContext(mem, sub, p)
		ctx.Bucket, ctx.DeadLetter = b, dl.add
		if err := fs.Open(ctx); err != nil {
			t.Fatalf("Open after Restore(%s): %v", pos, err)
		}
		return fs, dl
	}
	midObject, afterDone := false, false
	for _, p := range []int{1, 2} {
		for sub := range p {
			for _, maxRows := range []int{1, 2, 5} {
				fs, dl := open(sub, p, "")
				want := connDrain(t, fs, maxRows)
				wantDead := dl.got
				fs.Close()
				if len(want) == 0 || len(wantDead) == 0 {
					t.Fatalf("p=%d subtask %d: %d rows, %d dead letters: the test input is too small", p, sub, len(want), len(wantDead))
				}
				for cut := 0; ; cut++ {
					what := fmt.Sprintf("p=%d subtask %d maxRows %d, position after %d polls", p, sub, maxRows, cut)
					fs, dl := open(sub, p, "")
					before, ended := connPollN(t, fs, cut, maxRows)
					pos := connPosition(t, fs)
					deadBefore := len(dl.got)
					rest := connDrain(t, fs, maxRows)
					fs.Close()

					var fp struct {
						Object string
						Offset int64
						Done   []string
					}
					if err := json.Unmarshal([]byte(pos), &fp); err != nil {
						t.Fatal(err)
					}
					midObject = midObject || fp.Offset > 0
					afterDone = afterDone || (len(fp.Done) > 0 && fp.Object != "")

					r, rdl := open(sub, p, pos)
					if got := connPosition(t, r); got != pos {
						t.Errorf("%s: restored source's position %s, want %s", what, got, pos)
					}
					after := connDrain(t, r, maxRows)
					r.Close()
					connSameRowList(t, what+" "+pos+": rows after restore vs the rest of the first run", after, rest)
					connSameRowList(t, what+" "+pos+": rows before + rows after restore", append(before, after...), want)
					gotDead := append(dl.got[:deadBefore:deadBefore], rdl.got...)
					if fmt.Sprint(gotDead) != fmt.Sprint(wantDead) {
						t.Fatalf("%s %s: dead letters before + after restore:\n%q\nwant\n%q", what, pos, gotDead, wantDead)
					}
					if ended {
						break
					}
				}
			}
		}
	}
	if !midObject || !afterDone {
		t.Errorf("no position in the middle of an object (%v) or after a finished one (%v)", midObject, afterDone)
	}
}

func TestFileSourceRestoreRefused(t *testing.T) {
	connCheckLeaks(t)
	mem := connMem(t)
	b := connBucket(t)
	connPut(t, b, "in/a", `{"id":1}`+"\n"+`{"id":2}`+"\n")
	connPut(t, b, "in/b", `{"id":3}`+"\n")
	connPut(t, b, "in/c", `{"id":4}`)
	src := connFilesSpec("in")
	out := connSourceSchema(t, src)
	fresh := func() task.Source {
		fs, err := NewSource(src, out)
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	for _, tc := range []struct {
		pos  string
		want []string
	}{
		{``, []string{"position is empty"}},
		{`null`, []string{"position.object: missing"}},
		{`{}`, []string{"position.object: missing"}},
		{`{"object":"in/a","done":[]}`, []string{"position.offset: missing"}},
		{`{"object":"in/a","offset":0}`, []string{"position.done: missing"}},
		{`{"object":"in/a","offset":-3,"done":[]}`, []string{"position.offset: -3 is negative"}},
		{`{"object":"in/a","offset":"12","done":[]}`, []string{"position.offset: got string, want int64"}},
		{`{"object":"in/a","offset":0,"done":"in/b"}`, []string{"position.done: got string"}},
		{`{"object":"","offset":5,"done":[]}`, []string{`position.offset: 5 with object ""`}},
		{`{"object":"other/a","offset":0,"done":[]}`, []string{`position.object: "other/a" is not an input object under "in"`}},
		{`{"object":"in/_staging/a","offset":0,"done":[]}`, []string{`position.object: "in/_staging/a" is not an input object`}},
		{`{"object":"in/c","offset":0,"done":["in/b","in/a"]}`, []string{`position.done[1]: "in/a" does not sort after "in/b"`}},
		{`{"object":"in/c","offset":0,"done":["in/a","in/a"]}`, []string{`position.done[1]`}},
		{`{"object":"in/a","offset":0,"done":["in/b"]}`, []string{`position.object: "in/a" does not sort after the last done object "in/b"`}},
		{`{"object":"in/a","offset":0,"done":[],"line":3}`, []string{`unknown field "line"`}},
		{`{"object":"in/a","offset":0,"done":[]}]`, []string{"more data after the position"}},
		{`[1,2]`, []string{"cannot unmarshal array"}},
	} {
		connRestoreRefused(t, fresh(), tc.pos, append(tc.want, "restore files source trips")...)
	}

	// Positions of the right shape that do not fit the objects are refused
	// by Open.
	for _, tc := range []struct {
		pos          string
		subtask, par int
		want         string
	}{
		{`{"object":"in/c","offset":0,"done":["in/b"]}`, 0, 2, `position.done[0]: "in/b" is not this subtask's object 0 (subtask 0 of 2 reads 2 objects under "in"; want "in/a")`},
		{`{"object":"in/c","offset":0,"done":[]}`, 0, 1, `position.object: "in/c" is not the object after done`},
		{`{"object":"in/d","offset":0,"done":["in/a","in/b","in/c"]}`, 0, 1, `position.object: "in/d" is not the object after done (subtask 0 of 1 reads 3 objects under "in"; want none`},
		{`{"object":"","offset":0,"done":["in/a","in/b","in/c","in/d"]}`, 0, 1, `position.done[3]: "in/d" is not this subtask's object 3`},
		{`{"object":"in/a","offset":100,"done":[]}`, 0, 1, "position.offset: 100 is past the end of in/a (18 bytes)"},
		{`{"object":"in/a","offset":3,"done":[]}`, 0, 1, "position.offset: 3 is inside line 1 of in/a"},
		{`{"object":"in/a","offset":12,"done":[]}`, 0, 1, "position.offset: 12 is inside line 2 of in/a"},
	} {
		fs := fresh()
		if err := fs.(task.Resumable).Restore(json.RawMessage(tc.pos)); err != nil {
			t.Fatalf("Restore(%s): %v", tc.pos, err)
		}
		ctx := connSourceContext(mem, tc.subtask, tc.par)
		ctx.Bucket = b
		err := fs.Open(ctx)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "files source trips") {
			t.Errorf("Open subtask %d of %d after Restore(%s): %v, want an error containing %q", tc.subtask, tc.par, tc.pos, err, tc.want)
		}
		if err := fs.Close(); err != nil {
			t.Errorf("Close after a refused Open: %v", err)
		}
	}

	// Line starts and object ends are valid offsets, also of an object
	// without a final newline.
	for _, tc := range []struct {
		pos  string
		want []int64
	}{
		{`{"object":"in/a","offset":9,"done":[]}`, []int64{2, 3, 4}},
		{`{"object":"in/a","offset":18,"done":[]}`, []int64{3, 4}},
		{`{"object":"in/c","offset":8,"done":["in/a","in/b"]}`, nil},
		{`{"object":"","offset":0,"done":["in/a","in/b","in/c"]}`, nil},
		{`{"object":"","offset":0,"done":["in/a"]}`, []int64{3, 4}}, // objects listed after done are read
	} {
		fs := fresh()
		if err := fs.(task.Resumable).Restore(json.RawMessage(tc.pos)); err != nil {
			t.Fatalf("Restore(%s): %v", tc.pos, err)
		}
		ctx := connSourceContext(mem, 0, 1)
		ctx.Bucket = b
		if err := fs.Open(ctx); err != nil {
			t.Fatalf("Open after Restore(%s): %v", tc.pos, err)
		}
		var ids []int64
		for _, r := range connDrain(t, fs, 10) {
			ids = append(ids, r[0].(int64))
		}
		if fmt.Sprint(ids) != fmt.Sprint(tc.want) {
			t.Errorf("restored at %s: ids %v, want %v", tc.pos, ids, tc.want)
		}
		connRestoreRefused(t, fs, tc.pos, "already open")
		fs.Close()
	}
	if _, err := fresh().(task.Resumable).Position(); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Errorf("Position before Open: %v", err)
	}
}

// connCountdownCtx is a context whose Err turns to context.Canceled after
// n calls: it ends in the middle of a Poll, deterministically.
type connCountdownCtx struct {
	context.Context
	n int
}

func (c *connCountdownCtx) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// connFailingBucket's objects fail to read after failAfter bytes.
type connFailingBucket struct {
	blob.BucketReader
	failAfter int64
}

var errConnRead = errors.New("injected read error")

func (b connFailingBucket) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	body, err := b.BucketReader.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	r := io.MultiReader(io.LimitReader(body, b.failAfter), iotest.ErrReader(errConnRead))
	return struct {
		io.Reader
		io.Closer
	}{r, body}, nil
}

// TestFileSourcePositionAfterFailedPoll checks that a Poll whose context
// ends returns the rows it read and loses no line, and that the position is
// refused after a failed Poll left rows read but not returned.
func TestFileSourcePositionAfterFailedPoll(t *testing.T) {
	connCheckLeaks(t)
	mem := connMem(t)
	b := connBucket(t)
	const lines = 10_000
	var sb strings.Builder
	for i := range lines {
		fmt.Fprintf(&sb, `{"id":%d}`+"\n", i)
	}
	connPut(t, b, "in/a", sb.String())
	src := connFilesSpec("in")
	open := func(bucket blob.BucketReader) task.Source {
		fs, err := NewSource(src, connSourceSchema(t, src))
		if err != nil {
			t.Fatal(err)
		}
		ctx := connSourceContext(mem, 0, 1)
		ctx.Bucket = bucket
		if err := fs.Open(ctx); err != nil {
			t.Fatal(err)
		}
		return fs
	}

	fs := open(b)
	defer fs.Close()
	ending := &connCountdownCtx{Context: context.Background(), n: 2}
	rec, err := fs.Poll(ending, lines, 0)
	if err != nil {
		t.Fatalf("poll whose context ends: %v, want the rows read so far", err)
	}
	rows := connRowsOf(rec)
	rec.Release()
	if len(rows) == 0 || len(rows) >= lines {
		t.Fatalf("poll whose context ends: %d rows, want some but not all", len(rows))
	}
	if _, err := fs.Poll(ending, lines, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("next poll: %v, want context.Canceled", err)
	}
	pos := connPosition(t, fs)
	rows = append(rows, connDrain(t, fs, 3000)...)
	if len(rows) != lines {
		t.Fatalf("%d rows, want %d", len(rows), lines)
	}
	for i, r := range rows {
		if r[0] != int64(i) {
			t.Fatalf("row %d: %v", i, r)
		}
	}
	if !strings.Contains(pos, `"offset":`) || strings.Contains(pos, `"offset":0`) {
		t.Errorf("position after a poll whose context ended: %s", pos)
	}

	broken := open(connFailingBucket{b, 70_000})
	defer broken.Close()
	if rec, err := broken.Poll(context.Background(), lines, 0); !errors.Is(err, errConnRead) {
		if rec != nil {
			rec.Release()
		}
		t.Fatalf("poll of a failing object: %v, want the read error", err)
	}
	if _, err := broken.(task.Resumable).Position(); err == nil || !strings.Contains(err.Error(), "not returned") {
		t.Errorf("Position after a failed Poll holding rows: %v, want an error", err)
	}
}

// TestRedisSourcePositionRestore reads part of a stream, takes the
// position, reads on, and checks that a source restored at the position
// reads exactly the rest, including entries added after the position.
func TestRedisSourcePositionRestore(t *testing.T) {
	connCheckLeaks(t)
	r := testenv.StartRedis(t)
	mem := connMem(t)
	src := connRedisSpec("in")
	out := connSourceSchema(t, src)
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

	dl := &connDeadLetters{}
	a := connOpenRedisSource(t, src, out, r.Addr, mem, 0, dl)
	rec, err := a.Poll(context.Background(), 2, time.Second)
	if err != nil || rec == nil {
		t.Fatalf("first poll: %v, %v", rec, err)
	}
	before := connRowsOf(rec)
	rec.Release()
	pos := connPosition(t, a)
	if want := `{"id":"` + ids[1] + `"}`; pos != want {
		t.Fatalf("position after 2 entries: %s, want %s", pos, want)
	}
	deadBefore := len(dl.got)
	rest := connPollRows(t, a, 2, 2)
	add("data", `{"id":6}`)
	add("data", `{"id":7`) // a dead letter
	add("data", `{"id":8}`)
	rest = append(rest, connPollRows(t, a, 2, 2)...)

	rdl := &connDeadLetters{}
	b, err := NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.(task.Resumable).Restore(json.RawMessage(pos)); err != nil {
		t.Fatal(err)
	}
	ctx := connSourceContext(mem, 0, 1)
	ctx.RedisAddr, ctx.DeadLetter = r.Addr, rdl.add
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := connPosition(t, b); got != pos {
		t.Errorf("restored source's position %s, want %s", got, pos)
	}
	after := connPollRows(t, b, 4, 3)
	if rec, err := b.Poll(context.Background(), 10, 20*time.Millisecond); rec != nil || err != nil {
		t.Fatalf("poll past the end: %v, %v; want nil, nil", rec, err)
	}
	if want := `{"id":"` + ids[len(ids)-1] + `"}`; connPosition(t, b) != want {
		t.Errorf("position at the end %s, want %s", connPosition(t, b), want)
	}
	var want [][]any
	for _, id := range []int64{1, 3, 5, 6, 8} {
		want = append(want, row(id))
	}
	connSameRowList(t, "rows after restore vs the rest of the first run", after, rest)
	connSameRowList(t, "rows before + rows after restore", append(before, after...), want)
	gotDead := append(dl.got[:deadBefore:deadBefore], rdl.got...)
	if fmt.Sprint(gotDead) != fmt.Sprint(dl.got) {
		t.Errorf("dead letters before + after restore:\n%q\nwant\n%q", gotDead, dl.got)
	}
	if len(dl.got) != 3 || dl.got[0].origin != "in:"+ids[1] {
		t.Errorf("dead letters %q", dl.got)
	}

	// "0-0" is before the first entry; an idle subtask accepts a position
	// and ends.
	z, err := NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := z.(task.Resumable).Restore(json.RawMessage(`{"id":"0-0"}`)); err != nil {
		t.Fatal(err)
	}
	ctx = connSourceContext(mem, 0, 1)
	ctx.RedisAddr = r.Addr
	if err := z.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	connSameRowList(t, `restored at "0-0"`, connPollRows(t, z, 5, 100), want)
	connRestoreRefused(t, z, pos, "already open")
	idle, err := NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.(task.Resumable).Restore(json.RawMessage(pos)); err != nil {
		t.Fatal(err)
	}
	ctx = connSourceContext(mem, 1, 2)
	if err := idle.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := idle.Poll(context.Background(), 10, 0); !errors.Is(err, io.EOF) {
		t.Errorf("idle subtask after Restore: %v, want io.EOF", err)
	}
	idle.Close()
}

func TestRedisSourceRestoreRefused(t *testing.T) {
	src := connRedisSpec("in")
	out := connSourceSchema(t, src)
	for _, tc := range []struct {
		pos  string
		want []string
	}{
		{``, []string{"position is empty"}},
		{`{}`, []string{"position.id: missing"}},
		{`{"id":null}`, []string{"position.id: missing"}},
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
		connRestoreRefused(t, s, tc.pos, append(tc.want, "restore redis source events")...)
	}
	s, _ := NewSource(src, out)
	if err := s.(task.Resumable).Restore(json.RawMessage(`{"id":"18446744073709551615-18446744073709551615"}`)); err != nil {
		t.Errorf("the largest id: %v", err)
	}
}
