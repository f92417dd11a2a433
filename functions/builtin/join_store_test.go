package builtin

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore"
)

// newTestJoin is the join operator the tests' harness runs: the heap's,
// or if store the one on pebble, in a store of the least memory.
func newTestJoin(t testing.TB, store bool, o *spec.Operator, ins [2]Stream) (task.Operator, error) {
	if !store {
		return NewJoin(o, ins[0], ins[1])
	}
	return NewJoinState(o, ins[0], ins[1], &spec.State{Backend: spec.StatePebble, Memory: spec.MinStateMemory}, t.TempDir())
}

// joinStoreEntries counts the entries of a pebble join's tables.
func joinStoreEntries(t testing.TB, o task.Operator) (n [4]int) {
	t.Helper()
	j := o.(*joinStoreOp)
	for i, tab := range []statestore.StoredTable{j.rows, j.expiry, j.windows, j.marks} {
		for kg := j.kgStart; kg < j.kgEnd; kg++ {
			tab.Range(kg, func(string, string, []byte) bool { n[i]++; return true })
		}
	}
	return n
}

// captureJoin captures the store of h's join on pebble, of key groups
// [start, end), as a checkpoint does; the test's cleanup releases it.
func captureJoin(t testing.TB, h *joinHarness, start, end int) statestore.CapturedStore {
	t.Helper()
	fc, err := h.op.(task.Stateful).State().(statestore.StoreCapturer).CaptureStore(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Poll(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fc.Release() })
	return statestore.CapturedStore{Dir: fc.Dir(), KeyGroupStart: start, KeyGroupEnd: end}
}

// TestJoinStore feeds the same random rows of both inputs (out of order,
// late ones, null times, keys and values) to the heap's join and to one
// on pebble, every kind of join, and checks that they emit the same rows
// in the same order and count the same late rows; past the last
// watermark, an interval or window join on pebble has no rows, cleanup
// or window entries left. A regular join without a ttl keeps every row
// of 3,000 keys, more than the store's hot entries (a quarter of 4 MiB)
// hold, and its rows are read from pebble.
func TestJoinStore(t *testing.T) {
	for _, tc := range joinCases {
		for _, keys := range []string{"int", "multi"} {
			sizes := []int{12}
			if tc.jn.Type == spec.JoinRegular && tc.jn.TTL == 0 && keys == "int" {
				sizes = append(sizes, 3000) // every row kept
			}
			for _, nkeys := range sizes {
				t.Run(fmt.Sprintf("%s/%s/%d", tc.name, keys, nkeys), func(t *testing.T) {
					t.Parallel()
					rng := rand.New(rand.NewPCG(uint64(nkeys), 9))
					batches := 150
					if nkeys > 100 {
						batches = 1500
					}
					steps := joinGenerate(rng, batches, nkeys, 8)
					o, ins := joinOp(tc.jn, keys), joinStreams(t)
					var outs [2][]string
					var late [2]int64
					for i, store := range []bool{false, true} {
						h := newJoinHarnessOn(t, store, o, ins, 0, 128)
						for _, s := range steps {
							h.step(s, keys, 0, 128)
						}
						h.finish()
						outs[i], late[i] = h.out.take(), h.counters.LateDropped.Load()
						if store && tc.jn.Type != spec.JoinRegular {
							if n := joinStoreEntries(t, h.op); n[0]+n[1]+n[2] != 0 {
								t.Errorf("%d rows, %d expiry and %d windows entries left after the last watermark", n[0], n[1], n[2])
							}
						}
					}
					if !slices.Equal(outs[1], outs[0]) {
						t.Fatalf("on pebble: %d rows, on the heap %d:\n%s", len(outs[1]), len(outs[0]), winDiff(outs[1], outs[0]))
					}
					if late[1] != late[0] {
						t.Errorf("on pebble: %d late rows, on the heap %d", late[1], late[0])
					}
					if len(outs[0]) < 20 {
						t.Fatalf("only %d output rows: the input tests too little", len(outs[0]))
					}
					t.Logf("%d output rows, %d late", len(outs[0]), late[0])
				})
			}
		}
	}
}

// TestJoinStoreRestore captures pebble joins' stores halfway at two
// subtasks, and restores them rescaled to three, whose middle one takes
// key groups of both old stores. The
// restored subtasks are given a watermark lower than the captured one
// (as a rescale gives the least of the old subtasks'). They emit what
// the captured ones emit after the capture.
func TestJoinStoreRestore(t *testing.T) {
	for _, tc := range joinCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			keys := "multi"
			rng := rand.New(rand.NewPCG(11, 3))
			nkeys := 8
			if tc.jn.Type == spec.JoinRegular && tc.jn.TTL == 0 {
				nkeys = 400
			}
			steps := joinGenerate(rng, 300, nkeys, 8)
			cut := len(steps) / 2
			for steps[cut].rows != nil {
				cut++ // the capture follows a watermark
			}
			var wms []int64
			for _, s := range steps[:cut+1] {
				if s.rows == nil {
					wms = append(wms, s.wm)
				}
			}
			lower := wms[len(wms)-6] // five watermarks back
			o, ins := joinOp(tc.jn, keys), joinStreams(t)
			for _, c := range []struct {
				name     string
				from, to []int // key group bounds of the subtasks
			}{
				// The first new subtask opens the first old store on its
				// files, less the key groups it drops; the others ingest
				// theirs. (TestJoinStoreLowerWatermark restores a store
				// at the same key groups.)
				{"2to3", []int{0, 64, 128}, []int{0, 30, 100, 128}},
			} {
				t.Run(c.name, func(t *testing.T) {
					open := func(bounds []int) []*joinHarness {
						var hs []*joinHarness
						for j := 0; j+1 < len(bounds); j++ {
							hs = append(hs, newJoinHarnessOn(t, true, o, ins, bounds[j], bounds[j+1]))
						}
						return hs
					}
					run := func(hs []*joinHarness, bounds []int, lo, hi int) {
						for _, s := range steps[lo:hi] {
							for j, h := range hs {
								h.step(s, keys, bounds[j], bounds[j+1])
							}
						}
					}
					rest := func(hs []*joinHarness) (out []string, late int64) {
						for _, h := range hs {
							h.finish()
							out = append(out, h.out.take()...)
							late += h.counters.LateDropped.Swap(0)
						}
						return out, late
					}
					from := open(c.from)
					run(from, c.from, 0, cut+1)
					var stores []statestore.CapturedStore
					for j, h := range from {
						h.out.take()
						h.counters.LateDropped.Store(0)
						stores = append(stores, captureJoin(t, h, c.from[j], c.from[j+1]))
					}
					run(from, c.from, cut+1, len(steps))
					wantOut, wantLate := rest(from)

					to := open(c.to)
					for _, h := range to {
						if _, err := h.op.(task.Stateful).State().(statestore.StoreCapturer).RestoreStores(stores); err != nil {
							t.Fatal(err)
						}
						h.watermark(lower)
						h.expect()
					}
					run(to, c.to, cut+1, len(steps))
					gotOut, gotLate := rest(to)
					if len(c.from) > 2 || len(c.to) > 2 {
						slices.Sort(wantOut)
						slices.Sort(gotOut)
					}
					if len(wantOut) < 100 || tc.jn.Type != spec.JoinRegular && wantLate == 0 {
						t.Fatalf("%d rows and %d late rows after the capture: the input tests too little", len(wantOut), wantLate)
					}
					if !slices.Equal(gotOut, wantOut) {
						t.Fatalf("restored: %d rows, want %d\n%s", len(gotOut), len(wantOut), winDiff(gotOut, wantOut))
					}
					if gotLate != wantLate {
						t.Errorf("restored: %d late rows, want %d", gotLate, wantLate)
					}
				})
			}
		})
	}
}

// TestJoinStateAcrossBackends takes a join's state on one backend halfway
// and restores it on the other (a savepoint resumed with another
// state.backend): the heap's state rows into a join on pebble, and a
// pebble join's store, as rows, into the heap's. The restored join emits
// what the one it was taken from emits after it, in the same order, and
// counts the same late rows.
func TestJoinStateAcrossBackends(t *testing.T) {
	for _, tc := range joinCases {
		switch tc.name {
		case "regular", "regular-ttl-where", "interval-negative", "window-sliding":
		default:
			continue // one of each kind, with and without expiry and where
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			keys := "multi"
			rng := rand.New(rand.NewPCG(12, 5))
			nkeys := 8
			if tc.jn.Type == spec.JoinRegular && tc.jn.TTL == 0 {
				nkeys = 400
			}
			steps := joinGenerate(rng, 300, nkeys, 8)
			cut := len(steps) / 2
			for steps[cut].rows != nil {
				cut++
			}
			o, ins := joinOp(tc.jn, keys), joinStreams(t)
			for _, fromStore := range []bool{false, true} {
				name := "heap-to-pebble"
				if fromStore {
					name = "pebble-to-heap"
				}
				t.Run(name, func(t *testing.T) {
					from := newJoinHarnessOn(t, fromStore, o, ins, 0, 128)
					to := newJoinHarnessOn(t, !fromStore, o, ins, 0, 128)
					for _, s := range steps[:cut+1] {
						from.step(s, keys, 0, 128)
					}
					var recs []arrow.RecordBatch
					var err error
					if fromStore {
						j := from.op.(*joinStoreOp)
						j.saveWatermarks() // as a capture does
						recs, err = statestore.NewStored(0, 128, j.store).Snapshot(from.mem, true)
					} else {
						recs, err = from.op.(task.Stateful).State().Snapshot(from.mem, true)
					}
					if err != nil {
						t.Fatal(err)
					}
					rows := 0
					for _, rec := range recs {
						rows += int(rec.NumRows())
						if err := to.op.(task.Stateful).State().Restore(rec); err != nil {
							t.Fatal(err)
						}
						rec.Release()
					}
					from.out.take()
					from.counters.LateDropped.Store(0)
					to.watermark(steps[cut].wm)
					to.expect()
					for _, s := range steps[cut+1:] {
						from.step(s, keys, 0, 128)
						to.step(s, keys, 0, 128)
					}
					from.finish()
					to.finish()
					want, got := from.out.take(), to.out.take()
					if len(want) < 100 || !slices.Equal(got, want) {
						t.Fatalf("restored on the other backend: %d rows, want %d\n%s", len(got), len(want), winDiff(got, want))
					}
					if w, g := from.counters.LateDropped.Load(), to.counters.LateDropped.Load(); g != w {
						t.Errorf("late rows: %d, want %d", g, w)
					}
					t.Logf("%d rows of state, %d rows after the restore", rows, len(want))
				})
			}
		})
	}
}

// TestJoinStoreLowerWatermark is TestJoinStateLowerWatermark on pebble:
// a restored store's key groups go on from the watermark they were
// captured at, not from a lower one the runtime gives (a rescale's
// least), so a fired window does not fire again and a row late then is
// late now.
func TestJoinStoreLowerWatermark(t *testing.T) {
	o := joinOp(spec.Join{Type: spec.JoinWindow, Window: &spec.Window{Type: spec.WindowSliding, Size: winMs(20), Slide: winMs(10)},
		Columns: spec.NewOrderedMap(spec.Pair{Key: "l", Value: "left.lv"}, spec.Pair{Key: "r", Value: "right.rv"})}, "")
	ins := joinStreams(t)
	h := newJoinHarnessOn(t, true, o, ins, 0, 128)
	h.side(0, []any{5, "a", 1, 5, nil}, []any{15, "a", 1, 15, nil})
	h.side(1, []any{6, "a", 1, "x", nil})
	h.watermark(9)
	h.expect("-10 10 5 x")
	captured := captureJoin(t, h, 0, 128)

	r := newJoinHarnessOn(t, true, o, ins, 0, 128)
	if _, err := r.op.(task.Stateful).State().(statestore.StoreCapturer).RestoreStores([]statestore.CapturedStore{captured}); err != nil {
		t.Fatal(err)
	}
	r.watermark(3)
	r.side(1, []any{7, "a", 1, "y", nil}) // [-10, 10) has fired: [0, 20) only
	r.watermark(9)
	r.expect()
	r.watermark(19)
	r.expect("0 20 5 x", "0 20 5 y", "0 20 15 x", "0 20 15 y")
	r.side(1, []any{4, "a", 1, "z", nil})
	if got := r.counters.LateDropped.Load(); got != 1 {
		t.Errorf("%d late rows, want 1", got)
	}
	r.finish()
	r.expect() // x and y are not in [10, 30)
	if n := joinStoreEntries(t, r.op); n[0]+n[1]+n[2] != 0 {
		t.Errorf("%d rows, %d expiry and %d windows entries left after the last watermark", n[0], n[1], n[2])
	}
}

// TestJoinStoreFiresWithoutPairs: a window whose key has right rows but
// no left rows in it emits nothing, and keeps none of the rows it decoded
// to pair (they would pile up until some later window had pairs).
func TestJoinStoreFiresWithoutPairs(t *testing.T) {
	o := joinOp(spec.Join{Type: spec.JoinWindow, Window: &spec.Window{Type: spec.WindowTumbling, Size: winMs(20)},
		Columns: spec.NewOrderedMap(spec.Pair{Key: "l", Value: "left.lv"}, spec.Pair{Key: "r", Value: "right.rv"})}, "")
	h := newJoinHarnessOn(t, true, o, joinStreams(t), 0, 128)
	h.side(1, []any{5, "a", 1, "x", nil}, []any{6, "a", 1, "y", nil})
	h.side(0, []any{25, "a", 1, 7, nil})
	h.watermark(19)
	h.expect()
	if n := h.op.(*joinStoreOp).dec[1].Field(0).Len(); n != 0 {
		t.Errorf("%d right rows decoded and kept after a window without pairs", n)
	}
	h.finish()
	h.expect()
}
