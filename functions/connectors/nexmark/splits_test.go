package nexmark

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// mergeNexmark merges positions of splits as task.RestoreFor does for a
// source of splits restored at another parallelism.
func mergeNexmark(t *testing.T, positions []json.RawMessage) json.RawMessage {
	t.Helper()
	all := map[string]json.RawMessage{}
	for _, pos := range positions {
		var p struct{ Splits map[string]json.RawMessage }
		if err := json.Unmarshal(pos, &p); err != nil || p.Splits == nil {
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
	return b
}

// TestNexmarkSourceRescale rescales a bounded nexmark source 2 -> 3 -> 1
// (and 1 -> 4 -> 2 with 6 splits, and unequal shares of 7) at positions
// taken mid-stream: the persons, auctions and bids of all attempts are
// those of one run at parallelism 1, none lost, none twice.
func TestNexmarkSourceRescale(t *testing.T) {
	const count = 30_011
	for _, tc := range []struct {
		splits int
		path   []int
	}{
		{0, []int{2, 3, 1}}, {6, []int{1, 4, 2}}, {7, []int{2, 3, 1}}, {5, []int{2, 2, 5}},
	} {
		what := fmt.Sprintf("splits %d, path %v", tc.splits, tc.path)
		src := nexmarkSpec(count)
		src.Splits = tc.splits
		want := drain(t, openNexmark(t, src, 0, 1, nil), 512, -1)
		var got [3][]int64
		var pos json.RawMessage
		for i, p := range tc.path {
			polls := 3
			if i == len(tc.path)-1 {
				polls = -1
			}
			var positions []json.RawMessage
			for s := range p {
				ns := openNexmark(t, src, s, p, pos)
				n := polls
				if n >= 0 {
					n += s // subtasks at unequal points
				}
				ids := drain(t, ns, 333, n)
				for k := range 3 {
					got[k] = append(got[k], ids[k]...)
				}
				pp, err := ns.Position()
				if err != nil {
					t.Fatal(err)
				}
				positions = append(positions, pp)
			}
			pos = mergeNexmark(t, positions)
		}
		for k, kind := range []string{"person ids", "auction ids", "bid times"} {
			g, w := slices.Sorted(slices.Values(got[k])), slices.Sorted(slices.Values(want[k]))
			if !slices.Equal(g, w) {
				t.Errorf("%s: %s: %d across the attempts, %d at parallelism 1, or different", what, kind, len(g), len(w))
			}
		}
	}
}

// TestNexmarkSourceOldPosition: a position from before splits restores at
// the parallelism it was taken at, with exactly the events the subtask
// had left (blocks b % p), as splits when p divides the splits.
func TestNexmarkSourceOldPosition(t *testing.T) {
	const count = 5_000
	for _, tc := range []struct {
		splits, p int
		asSplits  bool
	}{
		{0, 3, true}, {0, 7, false}, {7, 2, false},
	} {
		src := nexmarkSpec(count)
		src.Splits = tc.splits
		base := mustTime(t, DefaultStart)
		for s := range tc.p {
			next := int64(s*nexmarkBlock + 2*tc.p*nexmarkBlock + 37) // 2 blocks and 37 events made
			old := json.RawMessage(fmt.Sprintf(`{"next":%d,"baseTime":%d}`, next, base))
			ns := openNexmark(t, src, s, tc.p, old)
			var wantN int
			Events(s, tc.p, count, func(n int64) {
				if n >= next {
					wantN++
				}
			})
			ids := drain(t, ns, 250, -1)
			if n := len(ids[0]) + len(ids[1]) + len(ids[2]); n != wantN {
				t.Errorf("splits %d p=%d subtask %d: %d events after %s, want %d", tc.splits, tc.p, s, n, old, wantN)
			}
			pos, err := ns.Position()
			if err != nil {
				t.Fatal(err)
			}
			if isSplits := strings.HasPrefix(string(pos), `{"splits":`); isSplits != tc.asSplits {
				t.Errorf("splits %d p=%d: position %.100s, want of splits %v", tc.splits, tc.p, pos, tc.asSplits)
			}
		}
	}
}

func TestNexmarkSplitsChecked(t *testing.T) {
	typ := SourceType()
	src := nexmarkSpec(10)
	src.Splits, src.Parallelism = 2, 3
	if ps := typ.Plan(src); len(ps) != 1 || !strings.Contains(ps.Error(), "sources[nx].splits: 2 is below the parallelism 3") {
		t.Errorf("splits 2 at parallelism 3: %v", ps)
	}
	src.Splits = 3
	if ps := append(typ.Check(src), typ.Plan(src)...); len(ps) > 0 || !typ.Splits {
		t.Errorf("splits 3 at parallelism 3: %v (a source of splits: %v)", ps, typ.Splits)
	}
}
