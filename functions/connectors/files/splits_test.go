package files

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
)

// splitsPut writes object key with n lines {"id": base+j}, every seventh
// line malformed (a dead letter), and returns the object's size.
func splitsPut(t *testing.T, b blob.Bucket, key string, base, n int) int64 {
	t.Helper()
	var sb strings.Builder
	for j := range n {
		if j%7 == 3 {
			fmt.Fprintf(&sb, `{"id":"bad-%d"}`+"\n", base+j)
			continue
		}
		fmt.Fprintf(&sb, `{"id":%d,"fare":%d,"at":%d}`+"\n", base+j, j, j)
	}
	connPut(t, b, key, sb.String())
	return int64(sb.Len())
}

// splitsRun is what the runs of a source read: rows and dead-letter
// origins, over all its subtasks and attempts.
type splitsRun struct {
	ids  []int64
	dead []string
}

func (r *splitsRun) add(rows [][]any, dl *connectortest.DeadLetters, deadFrom int) {
	for _, row := range rows {
		r.ids = append(r.ids, row[0].(int64))
	}
	for _, d := range dl.Got[deadFrom:] {
		r.dead = append(r.dead, d.Origin)
	}
}

// check fails unless r read what want did, each row and dead letter once.
func (r *splitsRun) check(t *testing.T, what string, want *splitsRun) {
	t.Helper()
	ids, wantIDs := slices.Sorted(slices.Values(r.ids)), slices.Sorted(slices.Values(want.ids))
	if !slices.Equal(ids, wantIDs) {
		t.Errorf("%s: read %d rows %v, want each of %d exactly once: %v", what, len(ids), ids, len(wantIDs), wantIDs)
	}
	dead, wantDead := slices.Sorted(slices.Values(r.dead)), slices.Sorted(slices.Values(want.dead))
	if !slices.Equal(dead, wantDead) {
		t.Errorf("%s: dead letters %q, want each of %q exactly once", what, dead, wantDead)
	}
}

// splitsOpen opens subtask of parallelism of a files source reading in/,
// restored at pos unless pos is "".
func splitsOpen(t *testing.T, b blob.BucketReader, subtask, parallelism int, pos string) (*fileSource, *connectortest.DeadLetters) {
	t.Helper()
	src := connFilesSpec("in")
	fs, err := NewSource(src, connectortest.SourceSchema(t, src))
	if err != nil {
		t.Fatal(err)
	}
	if pos != "" {
		if err := fs.(task.Resumable).Restore(json.RawMessage(pos)); err != nil {
			t.Fatalf("Restore(%s): %v", pos, err)
		}
	}
	dl := &connectortest.DeadLetters{}
	ctx := connectortest.SourceContext(connectortest.Mem(t), subtask, parallelism)
	ctx.Bucket, ctx.DeadLetter = b, dl.Add
	if err := fs.Open(ctx); err != nil {
		t.Fatalf("Open subtask %d of %d after Restore(%s): %v", subtask, parallelism, pos, err)
	}
	t.Cleanup(func() {
		if err := fs.Close(); err != nil {
			t.Error(err)
		}
	})
	return fs.(*fileSource), dl
}

// splitsOf decodes the splits of a position.
func splitsOf(t *testing.T, pos string) map[string]splitOut {
	t.Helper()
	var p struct{ Splits map[string]splitOut }
	if err := json.Unmarshal([]byte(pos), &p); err != nil || p.Splits == nil {
		t.Fatalf("position %s: want {\"splits\": {...}} (%v)", pos, err)
	}
	return p.Splits
}

// splitsMerge merges the splits of positions, as task.RestoreFor does for
// a source of splits, failing on a split in two positions (which
// RestoreFor refuses).
func splitsMerge(t *testing.T, positions ...string) string {
	t.Helper()
	merged := map[string]splitOut{}
	for _, pos := range positions {
		for k, v := range splitsOf(t, pos) {
			if _, dup := merged[k]; dup {
				t.Fatalf("object %s is in two subtasks' positions", k)
			}
			merged[k] = v
		}
	}
	out, err := json.Marshal(positionOut{Splits: merged})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// splitsAll reads every object under in/ at parallelism 1.
func splitsAll(t *testing.T, b blob.BucketReader) *splitsRun {
	t.Helper()
	fs, dl := splitsOpen(t, b, 0, 1, "")
	all := &splitsRun{}
	all.add(connectortest.Drain(t, fs, 10), dl, 0)
	if len(all.ids) == 0 || len(all.dead) == 0 {
		t.Fatalf("%d rows, %d dead letters: the test input is too small", len(all.ids), len(all.dead))
	}
	return all
}

// TestFileSourceRescale reads at parallelism 2, then 3, then 1, each
// attempt restored at the positions of the one before, taken in the middle
// of objects: every row and dead letter is read exactly once.
func TestFileSourceRescale(t *testing.T) {
	connectortest.CheckLeaks(t)
	b := connBucket(t)
	sizes := map[string]int64{}
	for k, n := range []int{40, 9, 25, 60, 1, 33, 47} {
		key := fmt.Sprintf("in/part-%02d.jsonl", k)
		sizes[key] = splitsPut(t, b, key, k*1000, n)
	}
	connPut(t, b, "in/empty.jsonl", "")
	sizes["in/empty.jsonl"] = 0
	want := splitsAll(t, b)

	got := &splitsRun{}
	merged := ""
	midObject, done := false, false
	for step, tc := range []struct {
		parallelism, polls, maxRows int
	}{
		{2, 5, 9}, {3, 4, 11}, {1, -1, 10},
	} {
		var positions []string
		for sub := range tc.parallelism {
			what := fmt.Sprintf("step %d: subtask %d of %d", step, sub, tc.parallelism)
			fs, dl := splitsOpen(t, b, sub, tc.parallelism, merged)
			if merged != "" {
				splitsCheckProgress(t, what, fs, sizes, sub, tc.parallelism, merged)
			}
			var rows [][]any
			if tc.polls < 0 {
				rows = connectortest.Drain(t, fs, tc.maxRows)
				if n, _, ok := fs.Backlog(context.Background()); !ok || n != 0 {
					t.Errorf("%s: drained, backlog %d (ok %v), want 0", what, n, ok)
				}
			} else {
				rows, _ = connectortest.PollN(t, fs, tc.polls+sub, tc.maxRows)
			}
			got.add(rows, dl, 0)
			pos := connectortest.Position(t, fs)
			for key, sp := range splitsOf(t, pos) {
				i := slices.Index(slices.Sorted(maps.Keys(sizes)), key)
				if !connector.OwnsSplit(i, sub, tc.parallelism) {
					t.Errorf("%s: position %s holds %s, which the subtask does not own", what, pos, key)
				}
				midObject = midObject || (sp.Offset > 0 && sp.Offset < sizes[key] && !sp.Done)
				done = done || sp.Done
			}
			positions = append(positions, pos)
		}
		merged = splitsMerge(t, positions...)
	}
	got.check(t, "2 -> 3 -> 1", want)
	if !midObject || !done {
		t.Errorf("no position in the middle of an object (%v) or with an object done (%v)", midObject, done)
	}
	for key, sp := range splitsOf(t, merged) {
		if !sp.Done || sp.Offset != sizes[key] {
			t.Errorf("at the end: %s at %+v, want done at %d", key, sp, sizes[key])
		}
	}
}

// splitsCheckProgress checks that a source restored at merged counts as
// read what the position says was read of its objects (done: all of one),
// and nothing else.
func splitsCheckProgress(t *testing.T, what string, fs *fileSource, sizes map[string]int64, subtask, parallelism int, merged string) {
	t.Helper()
	restored := splitsOf(t, merged)
	var read, total int64
	for i, key := range slices.Sorted(maps.Keys(sizes)) {
		if !connector.OwnsSplit(i, subtask, parallelism) {
			continue
		}
		total += sizes[key]
		if sp, ok := restored[key]; ok && sp.Done {
			read += sizes[key]
		} else if ok {
			read += sp.Offset
		}
	}
	gotRead, gotTotal, unit, ok := fs.Progress()
	if !ok || unit != "bytes" || gotRead != read || gotTotal != total {
		t.Errorf("%s: restored at %s: progress %d of %d %s (ok %v), want %d of %d bytes", what, merged, gotRead, gotTotal, unit, ok, read, total)
	}
	if n, unit, ok := fs.Backlog(context.Background()); !ok || unit != "bytes" || n != total-read {
		t.Errorf("%s: restored at %s: backlog %d %s (ok %v), want %d bytes", what, merged, n, unit, ok, total-read)
	}
}

// TestFileSourceListingGrew restores at the same parallelism after an
// object was added that sorts between the others, so that some objects
// change owner: given the positions of all the old subtasks merged (as
// task.RestoreFor does for a source of splits), every object keeps its
// progress, the new one is read from its start, and every row is read
// once.
func TestFileSourceListingGrew(t *testing.T) {
	connectortest.CheckLeaks(t)
	b := connBucket(t)
	sizes := map[string]int64{}
	for k, key := range []string{"in/a", "in/c", "in/e", "in/g"} {
		sizes[key] = splitsPut(t, b, key, k*1000, 20)
	}
	// Subtask 0 of 2 owns a and e, subtask 1 c and g.
	got := &splitsRun{}
	var positions []string
	for sub, polls := range []int{5, 2} {
		fs, dl := splitsOpen(t, b, sub, 2, "")
		rows, _ := connectortest.PollN(t, fs, polls, 5)
		got.add(rows, dl, 0)
		positions = append(positions, connectortest.Position(t, fs))
	}
	merged := splitsMerge(t, positions...)
	for _, key := range []string{"in/c", "in/e"} {
		if sp, ok := splitsOf(t, merged)[key]; !ok || sp.Done || sp.Offset == 0 {
			t.Fatalf("position %s: want %s in the middle, so that it changes owner mid-object", merged, key)
		}
	}

	// Now subtask 0 owns a, c and g, subtask 1 b and e.
	sizes["in/b"] = splitsPut(t, b, "in/b", 9000, 20)
	want := splitsAll(t, b)
	var restored []string
	for sub := range 2 {
		what := fmt.Sprintf("subtask %d of 2 after in/b was added", sub)
		fs, dl := splitsOpen(t, b, sub, 2, merged)
		splitsCheckProgress(t, what, fs, sizes, sub, 2, merged)
		restored = append(restored, connectortest.Position(t, fs))
		got.add(connectortest.Drain(t, fs, 7), dl, 0)
	}
	if got := splitsMerge(t, restored...); got != merged {
		t.Errorf("restored positions merged: %s, want the progress kept: %s", got, merged)
	}
	got.check(t, "with in/b added", want)
}

// splitsLegacy returns pos as a files source from before splits wrote it
// for a subtask owning owned (sorted): the objects done, the one after
// them and the offset in it.
func splitsLegacy(t *testing.T, pos string, owned []string) string {
	t.Helper()
	splits := splitsOf(t, pos)
	done := []string{}
	object, offset := "", int64(0)
	for _, key := range owned {
		if splits[key].Done {
			done = append(done, key)
			continue
		}
		object, offset = key, splits[key].Offset
		break
	}
	out, err := json.Marshal(map[string]any{"object": object, "offset": offset, "done": done})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestFileSourceLegacyPosition restores positions in the shape from before
// splits at the parallelism they were taken at: the source goes on where
// they say, its position is that of splits from then on, and every row is
// read once.
func TestFileSourceLegacyPosition(t *testing.T) {
	connectortest.CheckLeaks(t)
	b := connBucket(t)
	sizes := map[string]int64{}
	for k, n := range []int{30, 12, 25, 40, 18} {
		key := fmt.Sprintf("in/part-%02d.jsonl", k)
		sizes[key] = splitsPut(t, b, key, k*1000, n)
	}
	want := splitsAll(t, b)
	keys := slices.Sorted(maps.Keys(sizes))
	for _, tc := range []struct{ polls, maxRows int }{{0, 5}, {3, 5}, {6, 4}, {20, 10}} {
		got := &splitsRun{}
		for sub := range 2 {
			var owned []string
			for i, key := range keys {
				if connector.OwnsSplit(i, sub, 2) {
					owned = append(owned, key)
				}
			}
			fs, dl := splitsOpen(t, b, sub, 2, "")
			rows, _ := connectortest.PollN(t, fs, tc.polls+sub, tc.maxRows)
			got.add(rows, dl, 0)
			pos := connectortest.Position(t, fs)
			legacy := splitsLegacy(t, pos, owned)

			what := fmt.Sprintf("subtask %d of 2 after %d polls of %d, restored at %s", sub, tc.polls+sub, tc.maxRows, legacy)
			r, rdl := splitsOpen(t, b, sub, 2, legacy)
			if got := connectortest.Position(t, r); got != pos {
				t.Errorf("%s: position %s, want %s", what, got, pos)
			}
			splitsCheckProgress(t, what, r, sizes, sub, 2, pos)
			got.add(connectortest.Drain(t, r, tc.maxRows), rdl, 0)
		}
		got.check(t, fmt.Sprintf("restored from positions before splits after %d polls of %d", tc.polls, tc.maxRows), want)
	}
}

// TestFileSourceLaterOffsetRefused checks that a restored offset of an
// object after the first one read is checked when reading reaches it.
func TestFileSourceLaterOffsetRefused(t *testing.T) {
	connectortest.CheckLeaks(t)
	b := connBucket(t)
	connPut(t, b, "in/a", `{"id":1}`+"\n"+`{"id":2}`+"\n")
	connPut(t, b, "in/b", `{"id":3}`+"\n")
	fs, _ := splitsOpen(t, b, 0, 1, `{"splits":{"in/a":{"offset":9},"in/b":{"offset":2}}}`)
	var err error
	for range 3 {
		var rec interface{ Release() }
		if rec, err = fs.Poll(context.Background(), 1, 0); err != nil {
			break
		}
		rec.Release()
	}
	if want := `read files source trips: restored position.splits["in/b"].offset: 2 is inside line 1 of in/b`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("poll reaching in/b: %v, want an error containing %q", err, want)
	}
}
