package datagen_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/connectors/datagen"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

// idCol is the column of connectortest.DatagenSpec that holds the event
// index; column n of the unbounded test's schema too.
const idCol = 1

// splitsRun is one attempt of a datagen source at a parallelism: every
// subtask restored at pos (unless ""), polled polls times (-1: to the
// end). It returns the rows, checks each subtask's event indexes
// (column idCol) increase, and returns the subtasks' positions.
func splitsRun(t *testing.T, src *spec.Source, out stream.Stream, p int, pos string, polls, maxRows int) (rows [][]any, positions []string) {
	t.Helper()
	mem := connectortest.Mem(t)
	for s := range p {
		g, err := datagen.NewSource(src, out)
		if err != nil {
			t.Fatal(err)
		}
		if pos != "" {
			if err := g.(task.Resumable).Restore(json.RawMessage(pos)); err != nil {
				t.Fatalf("subtask %d of %d: Restore(%.200s): %v", s, p, pos, err)
			}
		}
		if err := g.Open(connectortest.SourceContext(mem, s, p)); err != nil {
			t.Fatalf("subtask %d of %d: %v", s, p, err)
		}
		var got [][]any
		if polls < 0 {
			got = connectortest.Drain(t, g, maxRows)
		} else {
			got, _ = connectortest.PollN(t, g, polls+s, maxRows) // subtasks at unequal points
		}
		for i := 1; i < len(got); i++ {
			if got[i][idCol].(int64) <= got[i-1][idCol].(int64) {
				t.Fatalf("subtask %d of %d: event %v after %v", s, p, got[i][idCol], got[i-1][idCol])
			}
		}
		rows = append(rows, got...)
		positions = append(positions, connectortest.Position(t, g))
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return rows, positions
}

// mergePositions merges positions of splits as task.RestoreFor does
// for a source of splits restored at another parallelism.
func mergePositions(t *testing.T, positions []string) string {
	t.Helper()
	all := map[string]json.RawMessage{}
	for _, pos := range positions {
		var p struct{ Splits map[string]json.RawMessage }
		if err := json.Unmarshal([]byte(pos), &p); err != nil || p.Splits == nil {
			t.Fatalf("position %s: not of splits (%v)", pos, err)
		}
		for id, sp := range p.Splits {
			if _, dup := all[id]; dup {
				t.Fatalf("split %s in two positions", id)
			}
			all[id] = sp
		}
	}
	b, err := json.Marshal(map[string]any{"splits": all})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameRowSet fails unless got holds the rows of want, each as many times.
func sameRowSet(t *testing.T, what string, got, want [][]any) {
	t.Helper()
	count := map[string]int{}
	for _, r := range want {
		count[fmt.Sprint(r)]++
	}
	for _, r := range got {
		k := fmt.Sprint(r)
		if count[k] == 0 {
			t.Fatalf("%s: row %v too many times (twice, or never generated at parallelism 1)", what, r)
		}
		count[k]--
	}
	for k, n := range count {
		if n > 0 {
			t.Fatalf("%s: row %s missing", what, k)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
}

// TestDatagenRescale rescales a bounded datagen source 2 -> 2 -> 3 -> 1
// (and other paths) at positions taken mid-stream, each attempt restored
// from the merged positions of the last, and checks that the rows of all
// attempts are those of one run at parallelism 1: none lost, none twice.
// The same parallelism with every subtask's splits merged (a lead's
// RestoreFor) keeps only the splits each subtask owns.
func TestDatagenRescale(t *testing.T) {
	connectortest.CheckLeaks(t)
	for _, tc := range []struct {
		splits, count int
		path          []int
	}{
		{0, 2000, []int{2, 2, 3, 1}}, // the default 120 splits
		{7, 500, []int{2, 3, 1}},     // 3 subtasks own 3, 2 and 2 splits
		{5, 300, []int{1, 5, 2, 4, 3}},
	} {
		what := fmt.Sprintf("splits %d, path %v", tc.splits, tc.path)
		src := connectortest.DatagenSpec(int64(tc.count))
		src.Splits = tc.splits
		out := connectortest.SourceSchema(t, src)
		want, _ := splitsRun(t, src, out, 1, "", -1, 64)
		if len(want) != tc.count {
			t.Fatalf("%s: parallelism 1 generated %d rows, want %d", what, len(want), tc.count)
		}
		var got [][]any
		pos := ""
		for i, p := range tc.path {
			polls := 2
			if i == len(tc.path)-1 {
				polls = -1
			}
			rows, positions := splitsRun(t, src, out, p, pos, polls, 17)
			got = append(got, rows...)
			pos = mergePositions(t, positions)
		}
		sameRowSet(t, what, got, want)
	}
}

// TestDatagenRescaleUnbounded: an unbounded source rescaled 2 -> 3 -> 1
// goes on from where every split was: the events generated are those
// below each split's last position, once each.
func TestDatagenRescaleUnbounded(t *testing.T) {
	connectortest.CheckLeaks(t)
	src := &spec.Source{Name: "g", Type: spec.SourceDatagen, Splits: 6, Schema: connectortest.Schema("ts", "timestamp_ms", "n", "int64")}
	out := connectortest.SourceSchema(t, src)
	seen := map[int64]int{}
	pos := ""
	for _, p := range []int{2, 3, 1} {
		rows, positions := splitsRun(t, src, out, p, pos, 3, 10)
		for _, r := range rows {
			seen[r[idCol].(int64)]++
		}
		pos = mergePositions(t, positions)
	}
	var last struct {
		Splits map[string]struct{ Next int64 }
	}
	if err := json.Unmarshal([]byte(pos), &last); err != nil {
		t.Fatal(err)
	}
	wantN := 0
	for id, sp := range last.Splits {
		var j int64
		fmt.Sscan(id, &j)
		for n := j; n < sp.Next; n += 6 {
			wantN++
			if seen[n] != 1 {
				t.Errorf("event %d (split %s, next %d) generated %d times", n, id, sp.Next, seen[n])
			}
		}
	}
	if wantN != len(seen) {
		t.Errorf("%d events generated, %d below the splits' positions", len(seen), wantN)
	}
}

// TestDatagenOldPosition: a position from before splits, {"next": i},
// restores at the parallelism it was taken at and goes on with exactly
// the subtask's rest of the old events (event i on subtask i % p): as
// splits when p divides the splits (then it can rescale), else with the
// old position.
func TestDatagenOldPosition(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	const count = 200
	for _, tc := range []struct {
		splits, p int
		asSplits  bool
	}{
		{0, 3, true}, {0, 4, true}, {0, 7, false}, {6, 6, true}, {7, 3, false},
	} {
		src := connectortest.DatagenSpec(count)
		src.Splits = tc.splits
		out := connectortest.SourceSchema(t, src)
		var all [][]any
		var positions []string
		for s := range tc.p {
			next := int64(s + 10*tc.p) // each old subtask had made 10 events
			for i := int64(s); i < next; i += int64(tc.p) {
				all = append(all, datagen.Row(src, out, i))
			}
			g, err := datagen.NewSource(src, out)
			if err != nil {
				t.Fatal(err)
			}
			old := fmt.Sprintf(`{"next":%d}`, next)
			if err := g.(task.Resumable).Restore(json.RawMessage(old)); err != nil {
				t.Fatal(err)
			}
			if err := g.Open(connectortest.SourceContext(mem, s, tc.p)); err != nil {
				t.Fatalf("splits %d p=%d subtask %d: Open after Restore(%s): %v", tc.splits, tc.p, s, old, err)
			}
			rows, _ := connectortest.PollN(t, g, 1, 5)
			var wantRows [][]any
			for i := next; i < count && len(wantRows) < 5; i += int64(tc.p) {
				wantRows = append(wantRows, datagen.Row(src, out, i))
			}
			connectortest.SameRowList(t, fmt.Sprintf("splits %d p=%d subtask %d after %s", tc.splits, tc.p, s, old), rows, wantRows)
			all = append(all, rows...)
			pos := connectortest.Position(t, g)
			if isSplits := strings.HasPrefix(pos, `{"splits":`); isSplits != tc.asSplits {
				t.Errorf("splits %d p=%d: position %.100s, want of splits %v", tc.splits, tc.p, pos, tc.asSplits)
			}
			if !tc.asSplits && pos != fmt.Sprintf(`{"next":%d}`, next+5*int64(tc.p)) {
				t.Errorf("splits %d p=%d subtask %d: position %s", tc.splits, tc.p, s, pos)
			}
			positions = append(positions, pos)
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if !tc.asSplits {
			continue
		}
		// Converted to splits: rescale to 2 and read the rest.
		rest, _ := splitsRun(t, src, out, 2, mergePositions(t, positions), -1, 9)
		want, _ := splitsRun(t, src, out, 1, "", -1, 64)
		sameRowSet(t, fmt.Sprintf("splits %d: p=%d from old positions, then 2", tc.splits, tc.p), append(all, rest...), want)
	}
}

// TestDatagenSplitsChecked: splits below the parallelism, or out of
// range, are refused naming sources[NAME].splits.
func TestDatagenSplitsChecked(t *testing.T) {
	typ := datagen.SourceType()
	if !typ.Splits {
		t.Fatal("datagen is not a source of splits")
	}
	for _, tc := range []struct {
		splits, parallelism int
		want                string
	}{
		{2, 3, "sources[gen].splits: 2 is below the parallelism 3: each subtask generates at least one split; set splits to at least 3"},
		{0, 121, "sources[gen].splits: 120 (the default) is below the parallelism 121"},
		{5000, 1, "sources[gen].splits: 5000 is above the most, 4096"},
	} {
		src := connectortest.DatagenSpec(10)
		src.Name, src.Splits, src.Parallelism = "gen", tc.splits, tc.parallelism
		ps := append(typ.Check(src), typ.Plan(src)...)
		if len(ps) != 1 || !strings.Contains(ps.Error(), tc.want) {
			t.Errorf("splits %d at parallelism %d: %v, want %q", tc.splits, tc.parallelism, ps, tc.want)
		}
	}
	for _, ok := range [][2]int{{3, 3}, {0, 120}, {1, 1}} {
		src := connectortest.DatagenSpec(10)
		src.Splits, src.Parallelism = ok[0], ok[1]
		if ps := append(typ.Check(src), typ.Plan(src)...); len(ps) > 0 {
			t.Errorf("splits %d at parallelism %d: %v", ok[0], ok[1], ps)
		}
	}
	// Shares of the rate follow the splits owned, and add up to the whole.
	src := connectortest.DatagenSpec(10)
	src.Splits = 7
	var sum float64
	for s := range 3 {
		sum += typ.Share(src, s, 3)
	}
	if got := typ.Share(src, 0, 3); got != 3.0/7 || sum < 0.999999 || sum > 1.000001 {
		t.Errorf("share of subtask 0 of 3 of 7 splits %g, want 3/7; all %g", got, sum)
	}
}
