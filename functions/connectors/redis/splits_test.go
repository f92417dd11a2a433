package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/integration/testenv"
)

// splitsSpec is a redis source of streams (a list, or one pattern).
func splitsSpec(streams ...string) *spec.Source {
	src := connRedisSpec("")
	src.Streams = streams
	return src
}

// splitsOpen opens subtask of parallelism of src, restored at pos unless
// pos is "".
func splitsOpen(t *testing.T, r *testenv.Redis, src *spec.Source, subtask, parallelism int, pos string, dl *connectortest.DeadLetters) *redisSource {
	t.Helper()
	s, err := NewSource(src, connectortest.SourceSchema(t, src))
	if err != nil {
		t.Fatal(err)
	}
	if pos != "" {
		if err := s.(task.Resumable).Restore(json.RawMessage(pos)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := connectortest.SourceContext(connectortest.Mem(t), subtask, parallelism)
	ctx.RedisAddr = r.Addr
	if dl != nil {
		ctx.DeadLetter = dl.Add
	}
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s.(*redisSource)
}

// splitsAdd appends n entries {"id": base+j} to stream and returns their ids.
func splitsAdd(t *testing.T, r *testenv.Redis, stream string, base, n int) []int64 {
	t.Helper()
	var ids []int64
	for j := range n {
		connXAdd(t, r, stream, "data", fmt.Sprintf(`{"id":%d}`, base+j))
		ids = append(ids, int64(base+j))
	}
	return ids
}

// splitsPoll polls s once with maxRows and returns the ids it read.
func splitsPoll(t *testing.T, s task.Source, maxRows int, wait time.Duration) []int64 {
	t.Helper()
	rec, err := s.Poll(context.Background(), maxRows, wait)
	if err != nil {
		t.Fatal(err)
	}
	if rec == nil {
		return nil
	}
	defer rec.Release()
	if rec.NumRows() > int64(maxRows) {
		t.Errorf("poll returned %d rows, want at most %d", rec.NumRows(), maxRows)
	}
	var ids []int64
	for _, row := range connectortest.RowsOf(rec) {
		ids = append(ids, row[0].(int64))
	}
	return ids
}

// splitsDrain reads s until a poll finds nothing.
func splitsDrain(t *testing.T, s task.Source, maxRows int) []int64 {
	t.Helper()
	var ids []int64
	for {
		got := splitsPoll(t, s, maxRows, 50*time.Millisecond)
		if len(got) == 0 {
			return ids
		}
		ids = append(ids, got...)
	}
}

// splitsOf returns the streams of a position.
func splitsOf(t *testing.T, pos string) []string {
	t.Helper()
	var p struct{ Splits map[string]json.RawMessage }
	if err := json.Unmarshal([]byte(pos), &p); err != nil || p.Splits == nil {
		t.Fatalf("position %s: want {\"splits\": {...}} (%v)", pos, err)
	}
	return slices.Sorted(maps.Keys(p.Splits))
}

// mergePositions merges the splits of positions, as the runtime does when
// it restores a split source at another parallelism.
func mergePositions(t *testing.T, positions ...string) string {
	t.Helper()
	merged := map[string]json.RawMessage{}
	for _, pos := range positions {
		var p struct{ Splits map[string]json.RawMessage }
		if err := json.Unmarshal([]byte(pos), &p); err != nil {
			t.Fatal(err)
		}
		for k, v := range p.Splits {
			if _, dup := merged[k]; dup {
				t.Fatalf("stream %s is in two subtasks' positions", k)
			}
			merged[k] = v
		}
	}
	b, err := json.Marshal(map[string]any{"splits": merged})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameIDs fails unless got holds each of want exactly once.
func sameIDs(t *testing.T, what string, got, want []int64) {
	t.Helper()
	g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(g, w) {
		t.Errorf("%s: read %d entries %v, want each of %d exactly once: %v", what, len(g), g, len(w), w)
	}
}

// TestRedisSourceStreams reads three streams at parallelism 1 and 2: each
// entry once, each stream in the subtask that owns it (sorted by name,
// the i-th in subtask i mod p), polls sharing maxRows among the streams.
func TestRedisSourceStreams(t *testing.T) {
	connectortest.CheckLeaks(t)
	r := testenv.StartRedis(t)
	var all []int64
	perStream := map[string][]int64{}
	for i, name := range []string{"a", "b", "c"} {
		ids := splitsAdd(t, r, name, 100*i, 5+i)
		perStream[name] = ids
		all = append(all, ids...)
	}
	bad := connXAdd(t, r, "b", "data", `{"id":`)
	src := splitsSpec("c", "a", "b") // the order written does not matter

	dl := &connectortest.DeadLetters{}
	one := splitsOpen(t, r, src, 0, 1, "", dl)
	first := splitsPoll(t, one, 6, time.Second)
	if len(first) != 6 {
		t.Errorf("first poll of 3 backlogged streams, maxRows 6: %d rows %v", len(first), first)
	}
	for name, ids := range perStream {
		n := 0
		for _, id := range first {
			if slices.Contains(ids, id) {
				n++
			}
		}
		if n != 2 {
			t.Errorf("first poll took %d entries of stream %s, want its share 2: %v", n, name, first)
		}
	}
	sameIDs(t, "parallelism 1", append(first, splitsDrain(t, one, 4)...), all)
	if got := splitsOf(t, connectortest.Position(t, one)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("parallelism 1 position streams %v", got)
	}
	if len(dl.Got) != 1 || dl.Got[0].Origin != "b:"+bad {
		t.Errorf("dead letters %q, want one from b:%s", dl.Got, bad)
	}

	s0 := splitsOpen(t, r, src, 0, 2, "", nil)
	s1 := splitsOpen(t, r, src, 1, 2, "", nil)
	got0, got1 := splitsDrain(t, s0, 3), splitsDrain(t, s1, 3)
	sameIDs(t, "subtask 0 of 2", got0, append(slices.Clone(perStream["a"]), perStream["c"]...))
	sameIDs(t, "subtask 1 of 2", got1, perStream["b"])
	if got := splitsOf(t, connectortest.Position(t, s0)); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("subtask 0 of 2 position streams %v, want a, c", got)
	}
	if got := splitsOf(t, connectortest.Position(t, s1)); !slices.Equal(got, []string{"b"}) {
		t.Errorf("subtask 1 of 2 position streams %v, want b", got)
	}

	// New entries are read by the subtask that owns their stream.
	more := splitsAdd(t, r, "c", 900, 3)
	sameIDs(t, "new entries of c in subtask 0", connPollIDs(t, s0, 3), more)
	if got := splitsPoll(t, s1, 10, 20*time.Millisecond); len(got) != 0 {
		t.Errorf("subtask 1 read %v of a stream it does not own", got)
	}
}

// connPollIDs polls s until it has read n entries.
func connPollIDs(t *testing.T, s task.Source, n int) []int64 {
	t.Helper()
	var ids []int64
	for _, row := range connPollRows(t, s, n, 100) {
		ids = append(ids, row[0].(int64))
	}
	return ids
}

// TestRedisSourcePattern reads the streams a pattern matches when the
// source opens: keys of other types and streams it does not match are
// left alone, and a stream created later is read only after a restart.
func TestRedisSourcePattern(t *testing.T) {
	connectortest.CheckLeaks(t)
	r := testenv.StartRedis(t)
	want := map[string][]int64{}
	for i := range 3 {
		name := fmt.Sprintf("rides-%d", i)
		want[name] = splitsAdd(t, r, name, 100*i, 4)
	}
	splitsAdd(t, r, "other", 500, 2)
	if _, err := r.Do("SET", "rides-x", "a string, not a stream"); err != nil {
		t.Fatal(err)
	}
	src := splitsSpec("rides-*")
	s0 := splitsOpen(t, r, src, 0, 2, "", nil)
	s1 := splitsOpen(t, r, src, 1, 2, "", nil)
	sameIDs(t, "subtask 0 of 2", splitsDrain(t, s0, 5), append(slices.Clone(want["rides-0"]), want["rides-2"]...))
	sameIDs(t, "subtask 1 of 2", splitsDrain(t, s1, 5), want["rides-1"])

	late := splitsAdd(t, r, "rides-3", 300, 2)
	if got := append(splitsPoll(t, s0, 10, 20*time.Millisecond), splitsPoll(t, s1, 10, 20*time.Millisecond)...); len(got) != 0 {
		t.Errorf("read %v of a stream created after Open", got)
	}
	// After a restart (restored from the positions), rides-3 is the 4th
	// stream: subtask 1's.
	pos := mergePositions(t, connectortest.Position(t, s0), connectortest.Position(t, s1))
	r0 := splitsOpen(t, r, src, 0, 2, pos, nil)
	r1 := splitsOpen(t, r, src, 1, 2, pos, nil)
	if got := splitsDrain(t, r0, 10); len(got) != 0 {
		t.Errorf("subtask 0 after the restart read %v again", got)
	}
	sameIDs(t, "subtask 1 after the restart", splitsDrain(t, r1, 10), late)

	// A pattern that matches nothing: every subtask idles.
	none := splitsOpen(t, r, splitsSpec("taxis-*"), 0, 1, "", nil)
	if got := splitsPoll(t, none, 10, 20*time.Millisecond); len(got) != 0 {
		t.Errorf("a pattern matching nothing read %v", got)
	}
	if got := connectortest.Position(t, none); got != `{"splits":{}}` {
		t.Errorf("position of a pattern matching nothing: %s", got)
	}
}

// TestRedisSourceRescale reads three streams at parallelism 2, restores
// at 1 from the merged positions, then at 3, as the runtime does when it
// rescales a split source: every entry is read exactly once overall.
func TestRedisSourceRescale(t *testing.T) {
	connectortest.CheckLeaks(t)
	r := testenv.StartRedis(t)
	names := []string{"s0", "s1", "s2"}
	var want []int64
	for i, name := range names {
		want = append(want, splitsAdd(t, r, name, 1000*i, 10)...)
	}
	src := splitsSpec(names...)
	var got []int64

	// Parallelism 2: part of each stream, then a checkpoint.
	var positions []string
	for s := range 2 {
		sub := splitsOpen(t, r, src, s, 2, "", nil)
		got = append(got, splitsPoll(t, sub, 4, time.Second)...)
		positions = append(positions, connectortest.Position(t, sub))
	}
	merged := mergePositions(t, positions...)
	if got := splitsOf(t, merged); !slices.Equal(got, names) {
		t.Fatalf("merged position streams %v", got)
	}

	// 2 -> 1: one subtask owns every stream of the merged position.
	for i, name := range names {
		want = append(want, splitsAdd(t, r, name, 1000*i+100, 3)...)
	}
	one := splitsOpen(t, r, src, 0, 1, merged, nil)
	got = append(got, splitsPoll(t, one, 7, time.Second)...)
	merged = mergePositions(t, connectortest.Position(t, one))

	// 1 -> 3: each subtask keeps its stream of the merged position.
	for i, name := range names {
		want = append(want, splitsAdd(t, r, name, 1000*i+200, 2)...)
	}
	for s := range 3 {
		sub := splitsOpen(t, r, src, s, 3, merged, nil)
		if got := splitsOf(t, connectortest.Position(t, sub)); !slices.Equal(got, names[s:s+1]) {
			t.Errorf("subtask %d of 3 restored with streams %v, want %s", s, got, names[s])
		}
		got = append(got, splitsDrain(t, sub, 5)...)
	}
	sameIDs(t, "over parallelism 2, 1 and 3", got, want)

	// A stream missing from a restored position starts at its beginning.
	var p struct{ Splits map[string]json.RawMessage }
	if err := json.Unmarshal([]byte(merged), &p); err != nil {
		t.Fatal(err)
	}
	delete(p.Splits, "s1")
	partial, _ := json.Marshal(p)
	s1 := splitsOpen(t, r, src, 1, 3, strings.Replace(string(partial), `"Splits"`, `"splits"`, 1), nil)
	if n := len(splitsDrain(t, s1, 100)); n != 15 {
		t.Errorf("s1, missing from the position, read %d entries, want all 15", n)
	}
}

// TestRedisSourceOldPosition restores a position from before splits,
// {"id": ..., "read": n}, into a source of one stream (stream: or a
// streams list of one), and refuses it for a source of several.
func TestRedisSourceOldPosition(t *testing.T) {
	connectortest.CheckLeaks(t)
	r := testenv.StartRedis(t)
	splitsAdd(t, r, "in", 0, 3)
	first := connXAdd(t, r, "in", "data", `{"id":3}`)
	rest := splitsAdd(t, r, "in", 4, 2)
	old := `{"id":"` + first + `","read":4}`
	for _, src := range []*spec.Source{connRedisSpec("in"), splitsSpec("in")} {
		s := splitsOpen(t, r, src, 0, 1, old, nil)
		sameIDs(t, "after an old position", splitsDrain(t, s, 10), rest)
		n, _, ok := s.Backlog(context.Background())
		if !ok || n != 0 {
			t.Errorf("backlog after an old position with read: %d (ok %v), want 0", n, ok)
		}
		if got := splitsOf(t, connectortest.Position(t, s)); !slices.Equal(got, []string{"in"}) {
			t.Errorf("position after an old one: streams %v", got)
		}
	}
	for _, src := range []*spec.Source{splitsSpec("in", "more"), splitsSpec("in*")} {
		s, err := NewSource(src, connectortest.SourceSchema(t, src))
		if err != nil {
			t.Fatal(err)
		}
		connectortest.RestoreRefused(t, s, old, "position.splits: missing", "a position without splits is of a source of one stream")
	}
}

// TestRedisSourceBacklogStreams checks the backlog of a subtask is the
// sum over the streams it owns.
func TestRedisSourceBacklogStreams(t *testing.T) {
	connectortest.CheckLeaks(t)
	r := testenv.StartRedis(t)
	ctx := context.Background()
	backlog := func(s *redisSource, want int64) {
		t.Helper()
		n, unit, ok := s.Backlog(ctx)
		if !ok || unit != "records" || n != want {
			t.Errorf("backlog %d %s (ok %v), want %d records", n, unit, ok, want)
		}
	}
	src := splitsSpec("a", "b", "c")
	one := splitsOpen(t, r, src, 0, 1, "", nil)
	backlog(one, 0) // no streams yet
	splitsAdd(t, r, "a", 0, 4)
	splitsAdd(t, r, "b", 100, 3)
	splitsAdd(t, r, "c", 200, 6)
	if _, err := r.Do("XTRIM", "c", "MAXLEN", "2"); err != nil {
		t.Fatal(err)
	}
	backlog(one, 4+3+2) // what was trimmed before the source read is not backlog
	s0, s1 := splitsOpen(t, r, src, 0, 2, "", nil), splitsOpen(t, r, src, 1, 2, "", nil)
	backlog(s0, 4+2)
	backlog(s1, 3)
	got := splitsPoll(t, one, 3, time.Second)
	backlog(one, 9-int64(len(got)))
	splitsDrain(t, one, 100)
	backlog(one, 0)
	splitsAdd(t, r, "b", 150, 2)
	backlog(one, 2)

	// Restored with one stream's read unknown: the sum is unknown.
	pos := `{"splits":{"a":{"id":"0-0"},"b":{"id":"0-0","read":0}}}`
	u := splitsOpen(t, r, src, 0, 1, pos, nil)
	if n, _, ok := u.Backlog(ctx); ok {
		t.Errorf("backlog with a stream's read unknown: %d, want unknown", n)
	}
}

// TestRedisSourceCheckStreams checks the validation of stream and
// streams, and the parallelism a list allows.
func TestRedisSourceCheckStreams(t *testing.T) {
	check := SourceType().Check
	plan := SourceType().Plan
	for _, tc := range []struct {
		src   *spec.Source
		field string
		msg   string
	}{
		{&spec.Source{Name: "r", Type: "redis"}, "sources[r].stream", "missing: the Redis stream to read"},
		{&spec.Source{Name: "r", Type: "redis", Stream: "a", Streams: spec.StreamNames{"b"}}, "sources[r].streams", "give stream or streams, not both"},
		{&spec.Source{Name: "r", Type: "redis", Streams: spec.StreamNames{"a", ""}}, "sources[r].streams[1]", "empty: want a stream name"},
		{&spec.Source{Name: "r", Type: "redis", Streams: spec.StreamNames{"a", "b?"}}, "sources[r].streams[1]", `"b?" is a pattern`},
		{&spec.Source{Name: "r", Type: "redis", Streams: spec.StreamNames{"a", "a"}}, "sources[r].streams[1]", `"a" is repeated`},
	} {
		ps := check(tc.src)
		if len(ps) != 1 || ps[0].Field != tc.field || !strings.Contains(ps[0].Msg, tc.msg) {
			t.Errorf("Check %+v: %v, want one problem of %s: %s", tc.src, ps, tc.field, tc.msg)
		}
	}
	for _, ok := range []*spec.Source{
		{Name: "r", Type: "redis", Stream: "a*"}, // stream: is a name, taken literally
		{Name: "r", Type: "redis", Streams: spec.StreamNames{"a", "b"}},
		{Name: "r", Type: "redis", Streams: spec.StreamNames{"rides-[0-3]"}},
	} {
		if ps := check(ok); len(ps) > 0 {
			t.Errorf("Check %+v: %v", ok, ps)
		}
	}
	for _, tc := range []struct {
		src *spec.Source
		msg string // "" when the parallelism is fine
	}{
		{&spec.Source{Name: "r", Stream: "a", Parallelism: 1}, ""},
		{&spec.Source{Name: "r", Stream: "a", Parallelism: 2}, "a redis source reads one stream: parallelism must be 1, got 2"},
		{&spec.Source{Name: "r", Streams: spec.StreamNames{"a", "b", "c"}, Parallelism: 3}, ""},
		{&spec.Source{Name: "r", Streams: spec.StreamNames{"a", "b", "c"}, Parallelism: 4}, "each of its 3 streams in one subtask: parallelism must be at most 3, got 4"},
		{&spec.Source{Name: "r", Streams: spec.StreamNames{"a-*"}, Parallelism: 8}, ""}, // known at Open only
	} {
		ps := plan(tc.src)
		switch {
		case tc.msg == "" && len(ps) > 0:
			t.Errorf("Plan %+v: %v", tc.src, ps)
		case tc.msg != "" && (len(ps) != 1 || ps[0].Field != "sources[r].parallelism" || !strings.Contains(ps[0].Msg, tc.msg)):
			t.Errorf("Plan %+v: %v, want %s", tc.src, ps, tc.msg)
		}
	}
	if !SourceType().Splits {
		t.Error("the redis source type is not registered with Splits")
	}
}

func TestRedisDescribePosition(t *testing.T) {
	for pos, want := range map[string]string{
		`{"splits":{"b":{"id":"5-0"},"a":{"id":"7-1","read":4}}}`: "a 7-1 (4 read), b 5-0",
		`{"splits":{}}`:         "no streams",
		`{"id":"7-1","read":4}`: "7-1 (4 read)",
		`not json`:              "not json",
	} {
		if got := describePosition(json.RawMessage(pos)); got != want {
			t.Errorf("describePosition(%s) = %q, want %q", pos, got, want)
		}
	}
}
