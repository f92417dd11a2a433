package builtin

import (
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore"
)

// winTestStore makes the window tests' harness open windows on pebble
// (TestWindowStore).
var winTestStore bool

// newTestWindow is the window operator the tests' harness runs: the
// heap's, or with winTestStore the one on pebble.
func newTestWindow(t testing.TB, op *spec.Operator, in Stream) (task.Operator, error) {
	if !winTestStore {
		return NewWindow(op, in)
	}
	return NewWindowState(op, in, &spec.State{Backend: spec.StatePebble, Memory: spec.MinStateMemory}, t.TempDir())
}

// windowsLeft returns how many keys (the heap's operator) or windows and
// keys of sessions (on pebble) the operator o holds.
func windowsLeft(o task.Operator) int {
	switch w := o.(type) {
	case *windowOperator:
		return w.keys.Len()
	case *windowStoreOp:
		n := 0
		for kg := w.kgStart; kg < w.kgEnd; kg++ {
			for _, tab := range []statestore.StoredTable{w.tab, w.index} {
				if tab != nil {
					tab.Range(kg, func(string, string, []byte) bool { n++; return true })
				}
			}
		}
		return n
	}
	panic("windowsLeft: not a window operator")
}

// TestWindowStore runs the window operator's tests against the operator
// on pebble: the same rows, in the same order, as the heap's.
func TestWindowStore(t *testing.T) {
	winTestStore = true
	defer func() { winTestStore = false }()
	for _, c := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"OrderByKeyEncoding", TestWindowOrderByKeyEncoding},
		{"RefiresInOrder", TestWindowRefiresInOrder},
		{"Tumbling", TestWindowTumbling},
		{"Sliding", TestWindowSliding},
		{"MultiColumnKeyAndNulls", TestWindowMultiColumnKeyAndNulls},
		{"AllowedLateness", TestWindowAllowedLateness},
		{"LateDropped", TestWindowLateDropped},
		{"KeyGroupRange", TestWindowKeyGroupRange},
		{"Session", TestWindowSession},
		{"SessionLateness", TestWindowSessionLateness},
		{"SessionMergeFired", TestWindowSessionMergeFired},
		{"Finish", TestWindowFinish},
		{"Random", TestWindowRandom},
		{"RandomManyKeys", TestWindowRandomManyKeys},
		{"RandomLateness", TestWindowRandomLateness},
	} {
		t.Run(c.name, c.fn)
	}
}

// winLateBatches returns n events over about 1,500 keys with more
// disorder than the watermark allows for (late rows), in batches of up to
// maxBatch, and the watermark after each batch.
func winLateBatches(rng *rand.Rand, n, maxBatch int) (batches [][]winEvent, wms []int64) {
	events := winGenerate(rng, n, 120)
	for i := range events {
		events[i].k2 = rng.Int64N(300)
	}
	wm, maxTs := task.MinWatermark, int64(-1<<62)
	for i := 0; i < len(events); {
		b := events[i:min(i+1+rng.IntN(maxBatch), len(events))]
		i += len(b)
		for _, e := range b {
			maxTs = max(maxTs, e.ts)
		}
		wm = max(wm, maxTs-11)
		batches, wms = append(batches, b), append(wms, wm)
	}
	return batches, wms
}

// TestWindowStoreRestore checkpoints windows on pebble as their stores'
// files halfway through random input (late rows, re-fires, sliding
// windows), goes on, and restores the capture into new operators, at the
// same parallelism and at others: what the restored operators emit from
// there equals what the first ones did.
//
// The sliding windows run twice: with winRandomAggs, whose float sums
// make every batch read its windows, and with winMergeAggs, whose
// windows not due are merged into the store unread.
func TestWindowStoreRestore(t *testing.T) {
	winTestStore = true
	defer func() { winTestStore = false }()
	sliding := spec.Window{Type: spec.WindowSliding, Size: winMs(60), Slide: winMs(20), AllowedLateness: winMs(25), LateOutput: "late"}
	for _, tc := range []winCase{
		{"sliding", sliding, winRandomAggs},
		{"sliding/merged", sliding, winMergeAggs},
		{"session", spec.Window{Type: spec.WindowSession, Gap: winMs(3000), AllowedLateness: winMs(25), LateOutput: "late"}, winRandomAggs},
	} {
		w := tc.w
		t.Run(tc.name, func(t *testing.T) {
			op := winOp(w, []string{"k", "k2"}, tc.aggs...)
			batches, wms := winLateBatches(rand.New(rand.NewPCG(3, 11)), 3000, 150)
			cut := len(batches) / 2
			for _, c := range []struct {
				name     string
				from, to []int // key group bounds of the subtasks
			}{
				{"same", []int{0, 128}, []int{0, 128}},
				{"1to3", []int{0, 128}, []int{0, 40, 90, 128}},
				{"2to1", []int{0, 64, 128}, []int{0, 128}},
				{"2to3", []int{0, 64, 128}, []int{0, 30, 100, 128}},
			} {
				t.Run(c.name, func(t *testing.T) {
					in := winStream(t)
					run := func(hs []*winHarness, bounds []int, lo, hi int) {
						for i := lo; i < hi; i++ {
							parts := make([][]winEvent, len(hs))
							for _, e := range batches[i] {
								var k any = e.k
								if e.k == "" && e.k2 == 2 {
									k = nil // as winEventRows
								}
								kg := arrowfmt.KeyGroup(arrowfmt.HashKeyValues(k, e.k2), 128)
								j := sort.SearchInts(bounds, kg+1) - 1
								parts[j] = append(parts[j], e)
							}
							for j, h := range hs {
								if len(parts[j]) > 0 {
									h.batch(winEventRows(parts[j])...)
								}
								h.watermark(wms[i])
							}
						}
					}
					open := func(bounds []int) []*winHarness {
						var hs []*winHarness
						for j := 0; j+1 < len(bounds); j++ {
							hs = append(hs, newWinHarnessRange(t, op, in, bounds[j], bounds[j+1]))
						}
						return hs
					}
					rest := func(hs []*winHarness) (out, late []string) {
						for _, h := range hs {
							h.watermark(task.MaxWatermark)
							out, late = append(out, h.out.take()...), append(late, h.late.take()...)
						}
						return out, late
					}
					from := open(c.from)
					run(from, c.from, 0, cut)
					var stores []statestore.CapturedStore
					for j, h := range from {
						h.out.take()
						h.late.take()
						fc, err := h.op.(task.Stateful).State().(statestore.StoreCapturer).CaptureStore(1)
						if err != nil {
							t.Fatal(err)
						}
						if _, err := fc.Poll(true); err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { _ = fc.Release() })
						stores = append(stores, statestore.CapturedStore{Dir: fc.Dir(), KeyGroupStart: c.from[j], KeyGroupEnd: c.from[j+1]})
					}
					run(from, c.from, cut, len(batches))
					wantOut, wantLate := rest(from)

					to := open(c.to)
					for _, h := range to {
						if _, err := h.op.(task.Stateful).State().(statestore.StoreCapturer).RestoreStores(stores); err != nil {
							t.Fatal(err)
						}
						h.watermark(wms[cut-1])
						h.expect() // nothing was due that had not fired
					}
					run(to, c.to, cut, len(batches))
					gotOut, gotLate := rest(to)
					if len(c.from) > 2 || len(c.to) > 2 {
						for _, s := range [][]string{wantOut, wantLate, gotOut, gotLate} {
							slices.Sort(s)
						}
					}
					if len(wantOut) < 1000 || len(wantLate) == 0 && w.Type != spec.WindowSession { // sessions of 3 s take every row
						t.Fatalf("the test emitted %d results and %d late rows after the checkpoint; want more", len(wantOut), len(wantLate))
					}
					if !slices.Equal(gotOut, wantOut) {
						t.Fatalf("restored: got %d results, want %d\n%s", len(gotOut), len(wantOut), winDiff(gotOut, wantOut))
					}
					if !slices.Equal(gotLate, wantLate) {
						t.Fatalf("restored: got %d late rows, want %d\n%s", len(gotLate), len(wantLate), winDiff(gotLate, wantLate))
					}
				})
			}
		})
	}
}

// winMergeAggs are winRandomAggs without the float sums (sum(f), avg(f)):
// every word of their windows merges (accumulators.wordKinds), so a
// window on pebble writes the windows that are not due as merge
// operands, without reading them.
var winMergeAggs = []string{
	"n", "count()", "nv", "count(v)", "sv", "sum(v)", "lo", "min(v)", "hi", "max(v)",
	"av", "avg(v)", "mf", "max(f)", "lf", "min(f)", "first", "min(ts)",
}

// TestWindowStoreMerges feeds the same random rows (late ones among
// them, within the allowed lateness and beyond) to the heap's window and
// to one on pebble whose aggregates all merge, and checks that they emit
// the same rows in the same order, and the same late rows; with few keys
// (their windows stay among the store's hot entries, where operands
// merge in memory) and many (pebble merges them).
func TestWindowStoreMerges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		w      spec.Window
		keys   int64
		events int
	}{
		{"tumbling", spec.Window{Type: spec.WindowTumbling, Size: winMs(50), AllowedLateness: winMs(30), LateOutput: "late"}, 300, 6000},
		{"sliding", spec.Window{Type: spec.WindowSliding, Size: winMs(60), Slide: winMs(20), AllowedLateness: winMs(25), LateOutput: "late"}, 300, 6000},
		{"tumbling/manykeys", spec.Window{Type: spec.WindowTumbling, Size: winMs(100_000)}, 60_000, 40_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := winOp(tc.w, []string{"k", "k2"}, winMergeAggs...)
			rng := rand.New(rand.NewPCG(5, 8))
			batches, wms := winLateBatches(rng, tc.events, 150)
			for _, b := range batches {
				for i := range b {
					b[i].k2 = rng.Int64N(tc.keys)
				}
			}
			heap, store := winBothBackends(t, op, batches, wms)
			for _, h := range []*winHarness{heap, store} {
				h.watermark(task.MaxWatermark)
			}
			want, got := heap.out.take(), store.out.take()
			if len(want) < 1000 || !slices.Equal(got, want) {
				t.Fatalf("got %d results, want %d\n%s", len(got), len(want), winDiff(got, want))
			}
			if want, got := heap.late.take(), store.late.take(); !slices.Equal(got, want) {
				t.Fatalf("late rows: got %d, want %d\n%s", len(got), len(want), winDiff(got, want))
			}
			w := store.op.(*windowStoreOp)
			if w.merged == 0 || w.merged < w.read {
				t.Errorf("the window merged %d windows and read %d: want most merged", w.merged, w.read)
			}
			t.Logf("%d results; %d windows merged, %d read", len(want), w.merged, w.read)
		})
	}
}

// winBothBackends feeds batches, each followed by its watermark, to a
// window operator op on the heap and to one on pebble, and returns
// their harnesses.
func winBothBackends(t *testing.T, op *spec.Operator, batches [][]winEvent, wms []int64) (heap, store *winHarness) {
	t.Helper()
	heap = newWinHarness(t, op, winStream(t))
	winTestStore = true
	store = newWinHarness(t, op, winStream(t))
	winTestStore = false
	for i, b := range batches {
		for _, h := range []*winHarness{heap, store} {
			h.batch(winEventRows(b)...)
			h.watermark(wms[i])
		}
	}
	return heap, store
}

// winCase is a window and its aggregates.
type winCase struct {
	name string
	w    spec.Window
	aggs []string
}

// winBackendCases are the windows the tests across backends run: sliding
// ones with float sums (a window on pebble reads every window) and
// without (it merges those not due), and sessions.
func winBackendCases() []winCase {
	sliding := spec.Window{Type: spec.WindowSliding, Size: winMs(2000), Slide: winMs(500), AllowedLateness: winMs(300), LateOutput: "late"}
	return []winCase{
		{"sliding", sliding, winRandomAggs},
		{"sliding/merged", sliding, winMergeAggs},
		{"session", spec.Window{Type: spec.WindowSession, Gap: winMs(1500), AllowedLateness: winMs(300), LateOutput: "late"}, winRandomAggs},
	}
}

// TestWindowStateAcrossBackends restores a window's state on the other
// backend (a savepoint resumed with the other state.backend): the heap
// window's rows into a window on pebble, and the rows of a pebble
// window's store (as task.OpenStores gives them) into the heap's. The
// restored window goes on as the first one does. The sliding windows
// run with float sums (every window read) and without (merged).
func TestWindowStateAcrossBackends(t *testing.T) {
	for _, tc := range winBackendCases() {
		t.Run(tc.name, func(t *testing.T) {
			op := winOp(tc.w, []string{"k", "k2"}, tc.aggs...)
			batches, wms := winLateBatches(rand.New(rand.NewPCG(4, 4)), 4000, 100)
			cut := len(batches) / 2
			run := func(h *winHarness, lo, hi int) {
				for i := lo; i < hi; i++ {
					h.batch(winEventRows(batches[i])...)
					h.watermark(wms[i])
				}
			}
			for _, fromStore := range []bool{false, true} {
				name := "heap-to-pebble"
				if fromStore {
					name = "pebble-to-heap"
				}
				t.Run(name, func(t *testing.T) {
					winTestStore = fromStore
					from := newWinHarness(t, op, winStream(t))
					winTestStore = !fromStore
					to := newWinHarness(t, op, winStream(t))
					winTestStore = false
					run(from, 0, cut)
					var recs []arrow.RecordBatch
					var err error
					if fromStore {
						recs, err = statestore.NewStored(0, 128, from.op.(*windowStoreOp).store).Snapshot(from.mem, true)
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
					if rows < 500 {
						t.Fatalf("only %d rows of state", rows)
					}
					from.out.take()
					from.late.take()
					to.watermark(wms[cut-1])
					to.expect()
					run(from, cut, len(batches))
					run(to, cut, len(batches))
					from.watermark(task.MaxWatermark)
					to.watermark(task.MaxWatermark)
					want, got := from.out.take(), to.out.take()
					if len(want) < 1000 || !slices.Equal(got, want) {
						t.Fatalf("restored on the other backend: got %d results, want %d\n%s", len(got), len(want), winDiff(got, want))
					}
					if want, got := from.late.take(), to.late.take(); !slices.Equal(got, want) {
						t.Fatalf("late rows: got %d, want %d", len(got), len(want))
					}
					t.Logf("%d rows of state, %d results after the restore", rows, len(want))
				})
			}
		})
	}
}

// TestStoreRows: a pebble window's state, written as the heap's
// window writes its rows (HeapRows, what `weir state export` reads),
// equals the heap's window's state after the same input; the sliding
// windows' with float sums and without (merged).
func TestStoreRows(t *testing.T) {
	for _, tc := range winBackendCases() {
		t.Run(tc.name, func(t *testing.T) {
			op := winOp(tc.w, []string{"k", "k2"}, tc.aggs...)
			batches, wms := winLateBatches(rand.New(rand.NewPCG(9, 1)), 3000, 100)
			heap, store := winBothBackends(t, op, batches, wms)
			rowStrings := func(recs []arrow.RecordBatch) []string {
				var out []string
				for _, rec := range recs {
					for r := range int(rec.NumRows()) {
						var sb strings.Builder
						for _, col := range rec.Columns() {
							sb.WriteString(col.ValueStr(r))
							sb.WriteByte(' ')
						}
						out = append(out, sb.String())
					}
					rec.Release()
				}
				slices.Sort(out)
				return out
			}
			want := rowStrings(heap.op.(*windowOperator).writeState(heap.mem))
			recs, err := store.op.(task.Stateful).State().(windowStoreSnapshotter).HeapRows(store.mem)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) > 0 && !recs[0].Schema().Equal(heap.op.(task.Stateful).State().Schema()) {
				t.Fatalf("schema %v, want the heap's %v", recs[0].Schema(), heap.op.(task.Stateful).State().Schema())
			}
			got := rowStrings(recs)
			if len(want) < 100 {
				t.Fatalf("only %d windows in the state", len(want))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got %d rows, want %d\n%s", len(got), len(want), winDiff(got, want))
			}
			t.Logf("%d windows", len(got))
		})
	}
}

// TestWindowStoreFiresInBatches: a watermark that makes 70,536 windows
// due at once sends them out a batch of windowBatchRows at a time, merged
// from every key group in the order the heap's window sends them.
func TestWindowStoreFiresInBatches(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(1000)}, []string{"k", "k2"}, "n", "count()", "sv", "sum(v)")
	heap := newWinHarness(t, op, winStream(t))
	winTestStore = true
	store := newWinHarness(t, op, winStream(t))
	winTestStore = false
	const keys = windowBatchRows + 5_000 // two batches of results
	rows := make([][]any, 0, 10_000)
	for i := range keys {
		rows = append(rows, []any{i % 1000, "k", i, i % 7, nil})
		if len(rows) == cap(rows) || i == keys-1 {
			for _, h := range []*winHarness{heap, store} {
				h.batch(rows...)
			}
			rows = rows[:0]
		}
	}
	for _, h := range []*winHarness{heap, store} {
		h.out.batches = 0
		h.watermark(999)
	}
	want, got := heap.out.take(), store.out.take()
	if len(want) != keys || !slices.Equal(got, want) {
		t.Fatalf("got %d results, want %d\n%s", len(got), len(want), winDiff(got, want))
	}
	if n := store.out.batches; n != (keys+windowBatchRows-1)/windowBatchRows {
		t.Errorf("the results went out in %d batches, want %d of at most %d rows", n, (keys+windowBatchRows-1)/windowBatchRows, windowBatchRows)
	}
	if n := windowsLeft(store.op); n != 0 {
		t.Errorf("%d windows left after every window fired", n)
	}
}

// TestWindowStoreFailure: a store that fails under the window (its
// database closed, as a full disk would fail it) makes ProcessBatch
// return an error, which fails the task, instead of panicking the
// worker. The failing batch's row is of a new key, in a window that is
// due, which the batch must read from pebble (a row of a window not due
// would only merge in the store's memory).
func TestWindowStoreFailure(t *testing.T) {
	winTestStore = true
	defer func() { winTestStore = false }()
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}, []string{"k"}, "n", "count()")
	h := newWinHarness(t, op, winStream(t))
	h.batch([]any{1, "a", 0, 0, nil})
	h.watermark(15)
	if err := h.op.(*windowStoreOp).store.Close(); err != nil {
		t.Fatal(err)
	}
	b := winBatch(t, h.mem, h.in.Schema, []any{3, "b", 0, 0, nil})
	defer b.Release()
	err := h.op.ProcessBatch(b)
	if err == nil || !strings.HasPrefix(err.Error(), "window win: state: ") {
		t.Fatalf("ProcessBatch on a failed store: %v", err)
	}
	t.Log(err)
}
