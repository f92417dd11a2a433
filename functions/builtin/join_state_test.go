package builtin

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/rows"
	"github.com/weirstream/weir/statestore/statetest"
)

// joinStateDump renders every kept row, sorted, as a base would have it,
// without touching the operator's change tracking.
func joinStateDump(t testing.TB, h *joinHarness) []string {
	t.Helper()
	j := h.op.(*joinOperator)
	if j.restored {
		j.settle()
	}
	sb := rows.NewWriter(h.mem, j.state.Schema, j.buildStateRows)
	defer sb.Release()
	for k := range j.keys {
		key := &j.keys[k]
		if key.group < 0 {
			continue
		}
		wm := j.effWm(int(key.group) - j.kgStart)
		for s := range 2 {
			for e := key.head[s]; e >= 0; e = j.ents[s][e].next {
				if ent := &j.ents[s][e]; ent.exp > wm {
					sb.Add(joinStateRow{kg: key.group, side: int8(s), ref: joinRef{ent.b, ent.r}})
				}
			}
		}
	}
	var rows []string
	for _, b := range sb.Finish() {
		rows = append(rows, winStateRows(b)...)
		b.Release()
	}
	slices.Sort(rows)
	return rows
}

// joinSnap is a snapshot taken in a run, after steps[:cut].
type joinSnap struct {
	file  []byte
	rows  int
	full  bool
	cut   int
	wm    int64 // the watermark at the cut
	out   int   // rows emitted before the cut
	late  int64
	state []string
}

// TestJoinStateRestore runs an input through a join that takes full and
// delta snapshots at many points, then for every snapshot restores a new
// operator from the base and deltas up to it, gives it the watermark at
// the cut and the rest of the input, and checks that what the first
// operator emitted before the cut and the new one after is exactly what
// an operator that never stopped emits, in the same order, with the same
// count of late rows.
//
// Stepped, each snapshot is captured in steps (BeginSnapshot): one key or
// change per step after each batch and watermark, while the input goes
// on (rows are stored and forgotten), and to the end when the next
// snapshot is due; what it restores must be the state at its barrier all
// the same.
func TestJoinStateRestore(t *testing.T) {
	for _, tc := range joinCases {
		for _, mode := range []string{"int", "multi", "int/stepped", "multi/stepped"} {
			keys, _, stepped := strings.Cut(mode, "/")
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(5, uint64(len(mode))))
				keyCount := 8
				if tc.jn.Type == spec.JoinRegular && tc.jn.TTL == 0 {
					keyCount = 200 // every pair of rows of a key matches
				}
				steps := joinGenerate(rng, 120, keyCount, 8)
				o := joinOp(tc.jn, keys)
				ins := joinStreams(t)

				ref := newJoinHarness(t, o, ins, 0, 128)
				for _, s := range steps {
					ref.step(s, keys, 0, 128)
				}
				ref.finish()
				want, wantLate := ref.out.take(), ref.counters.LateDropped.Load()

				// The run that snapshots, at random cuts, some between a
				// batch and its watermark; every third snapshot is full and
				// the first is a delta (since Open).
				h := newJoinHarness(t, o, ins, 0, 128)
				h.op.(*joinOperator).captureChunk = 1
				var (
					snaps      []joinSnap
					capture    statestore.Capture // stepped: the snapshot being captured
					steps1     int                // steps it took
					stepsTaken []int
					early      [2]int // keys of bases, changes of deltas taken before they changed
				)
				// collect adds the captured snapshot once its last step is done.
				collect := func(deadline time.Time) {
					done, err := capture.Step(deadline)
					if err != nil {
						t.Fatal(err)
					}
					steps1++
					if !done {
						return
					}
					file, rows := h.snapshotFile(capture.Batches())
					snap := &snaps[len(snaps)-1]
					snap.file, snap.rows = file, len(rows)
					if snap.full {
						early[0] += capture.(*joinCapture).early
					} else {
						early[1] += capture.(*joinCapture).early
					}
					capture = nil
					stepsTaken = append(stepsTaken, steps1)
				}
				wm := task.MinWatermark
				for i, s := range steps {
					h.step(s, keys, 0, 128)
					if s.rows == nil {
						wm = s.wm
					}
					if capture != nil {
						collect(time.Now())
					}
					if rng.IntN(12) != 0 {
						continue
					}
					if capture != nil {
						collect(time.Time{})
					}
					full := len(snaps)%3 == 2
					snap := joinSnap{
						full: full, cut: i + 1, wm: wm, state: joinStateDump(t, h),
						out: len(h.out.rows), late: h.counters.LateDropped.Load(),
					}
					if stepped {
						var err error
						capture, err = h.op.(task.Stateful).State().(statestore.SteppedSnapshotter).BeginSnapshot(h.mem, full)
						if err != nil {
							t.Fatal(err)
						}
						steps1 = 0
					} else {
						var rows []string
						snap.file, rows = h.snapshot(full)
						snap.rows = len(rows)
					}
					snaps = append(snaps, snap)
				}
				h.finish()
				if capture != nil {
					collect(time.Time{})
				}
				// Captures must have gone on beside the input, and rows
				// been stored and forgotten before the walk reached them,
				// or the test does not test copying on write.
				if stepped {
					t.Logf("captures took %v steps; %d keys of bases and %d changes of deltas taken before they changed", stepsTaken, early[0], early[1])
					if slices.Max(stepsTaken) < 5 || early[0] == 0 {
						t.Fatalf("captures took %v steps, %d keys taken early: they did not go on beside the input", stepsTaken, early[0])
					}
				}
				if got := h.out.rows; !slices.Equal(got, want) {
					t.Fatalf("snapshots changed the output:\n%s", winDiff(got, want))
				}
				if len(snaps) < 5 {
					t.Fatalf("only %d snapshots", len(snaps))
				}
				var baseRows, deltaRows, bases, deltas int
				for k, snap := range snaps {
					if snap.full {
						baseRows += snap.rows
						bases++
					} else {
						deltaRows += snap.rows
						deltas++
					}
					base := 0
					for j := k; j >= 0; j-- {
						if snaps[j].full {
							base = j
							break
						}
					}
					var files [][]byte
					for _, s := range snaps[base : k+1] {
						files = append(files, s.file)
					}
					r := newJoinHarness(t, o, ins, 0, 128)
					if err := r.restore(files, 0, 128); err != nil {
						t.Fatalf("snapshot %d: %v", k, err)
					}
					if got := joinStateDump(t, r); !slices.Equal(got, snap.state) {
						t.Fatalf("restored from snapshot %d (base %d): the state differs\n%s", k, base, winDiff(got, snap.state))
					}
					if snap.wm > task.MinWatermark {
						r.watermark(snap.wm)
					}
					for _, s := range steps[snap.cut:] {
						r.step(s, keys, 0, 128)
					}
					r.finish()
					got := append(slices.Clone(h.out.rows[:snap.out]), r.out.take()...)
					if !slices.Equal(got, want) {
						t.Fatalf("restored from snapshot %d (cut after step %d of %d, base %d): output differs\n%s", k, snap.cut, len(steps), base, winDiff(got, want))
					}
					if late := snap.late + r.counters.LateDropped.Load(); late != wantLate {
						t.Errorf("restored from snapshot %d: %d late rows, want %d", k, late, wantLate)
					}
				}
				t.Logf("%d output rows, %d late; %d bases of %.0f rows on average, %d deltas of %.0f", len(want), wantLate,
					bases, float64(baseRows)/float64(max(bases, 1)), deltas, float64(deltaRows)/float64(max(deltas, 1)))
			})
		}
	}
}

// TestJoinStateRescale snapshots two subtasks (key groups [0, 64) and
// [64, 128)), restores the state into three subtasks, one and two, and
// checks that the union of what they emit equals what one uninterrupted
// operator emits.
func TestJoinStateRescale(t *testing.T) {
	for _, tc := range joinCases {
		t.Run(tc.name, func(t *testing.T) {
			const keys = "multi"
			rng := rand.New(rand.NewPCG(3, 5))
			nkeys := 16
			if tc.jn.Type == spec.JoinRegular && tc.jn.TTL == 0 {
				nkeys = 100
			}
			steps := joinGenerate(rng, 200, nkeys, 8)
			o := joinOp(tc.jn, keys)
			ins := joinStreams(t)

			ref := newJoinHarness(t, o, ins, 0, 128)
			for _, s := range steps {
				ref.step(s, keys, 0, 128)
			}
			ref.finish()
			want, wantLate := ref.out.take(), ref.counters.LateDropped.Load()
			slices.Sort(want)

			type kgRange struct{ start, end int }
			old := []kgRange{{0, 64}, {64, 128}}
			olds := make([]*joinHarness, len(old))
			files := make([][][]byte, len(old))
			for i, r := range old {
				olds[i] = newJoinHarness(t, o, ins, r.start, r.end)
			}
			// A base a third of the way, deltas at two thirds and at the
			// cut, between a batch and its watermark.
			cut := len(steps) * 3 / 4
			for steps[cut].rows != nil || steps[cut-1].rows == nil {
				cut++
			}
			wm := task.MinWatermark
			for i, s := range steps[:cut] {
				for j, h := range olds {
					h.step(s, keys, old[j].start, old[j].end)
				}
				if s.rows == nil {
					wm = s.wm
				}
				if i == len(steps)/3 || i == len(steps)*2/3 || i == cut-1 {
					for j, h := range olds {
						file, _ := h.snapshot(i == len(steps)/3)
						files[j] = append(files[j], file)
					}
				}
			}
			var pre []string
			var preLate int64
			for _, h := range olds {
				pre = append(pre, h.out.take()...)
				preLate += h.counters.LateDropped.Load()
			}

			for _, p := range []int{3, 1, 2} {
				got := slices.Clone(pre)
				late := preLate
				for i := range p {
					start, end := arrowfmt.KeyGroupRange(i, 128, p)
					h := newJoinHarness(t, o, ins, start, end)
					// Every old subtask's checkpoint chain, each filtered to
					// this subtask's key groups.
					for j := range olds {
						if err := h.restore(files[j], start, end); err != nil {
							t.Fatal(err)
						}
					}
					h.watermark(wm)
					for _, s := range steps[cut:] {
						h.step(s, keys, start, end)
					}
					h.finish()
					got = append(got, h.out.take()...)
					late += h.counters.LateDropped.Load()
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("2 -> %d subtasks: output differs\n%s", p, winDiff(got, want))
				}
				if late != wantLate {
					t.Errorf("2 -> %d subtasks: %d late rows, want %d", p, late, wantLate)
				}
			}
			t.Logf("%d output rows, %d late, %d before the cut", len(want), wantLate, len(pre))
		})
	}
}

// TestJoinStateRows spells out the state of a small example: the schema,
// the rows of a base, a delta with new rows and expire entries, and that a
// row kept and forgotten between two snapshots is in neither.
func TestJoinStateRows(t *testing.T) {
	o := joinOp(spec.Join{Type: spec.JoinInterval, Lower: -winMs(10), Upper: winMs(0)}, "")
	h := newJoinHarness(t, o, joinStreams(t), 0, 128)
	var names []string
	for _, f := range h.op.(task.Stateful).State().Schema().Fields() {
		names = append(names, f.Name+":"+f.Type.String())
	}
	ts := "timestamp[ms, tz=UTC]"
	wantNames := []string{"key_group:int32", "entry:utf8", "side:utf8", "watermark:" + ts,
		"left.ts:" + ts, "left.k:utf8", "left.k2:int64", "left.lv:int64", "left.lf:float64",
		"right.rts:" + ts, "right.rk:utf8", "right.rk2:int64", "right.rv:utf8", "right.rb:bool"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("state schema:\n got %v\nwant %v", names, wantNames)
	}
	kg1 := joinRowGroup([]any{nil, nil, 1}, "")
	kg2 := joinRowGroup([]any{nil, nil, 2}, "")
	nulls := "null null null null null"
	h.side(0, []any{100, "a", 1, 5, 0.5}, []any{104, "b", 2, nil, nil}, []any{103, "c", nil, 1, 1.0})
	h.side(1, []any{105, "x", 1, "r", true})
	h.expect("100 a 1 5 0.5 105 x 1 r true")
	h.watermark(100)
	_, got := h.snapshot(true)
	want := []string{
		fmt.Sprintf("%d row left null 100 a 1 5 0.5 %s", kg1, nulls),
		fmt.Sprintf("%d row right null %s 105 x 1 r true", kg1, nulls),
		fmt.Sprintf("%d row left null 104 b 2 null null %s", kg2, nulls),
		fmt.Sprintf("%d expire null 100 %s %s", kg1, nulls, nulls),
		fmt.Sprintf("%d expire null 100 %s %s", kg2, nulls, nulls),
	}
	if !slices.Equal(joinSortKeyGroups(got), joinSortKeyGroups(want)) {
		t.Fatalf("base:\n got %q\nwant %q", got, want)
	}
	// Left 100 is kept while wm <= 110, right 105 while wm <= 105. A
	// right row at 106 comes and goes before the next snapshot.
	h.side(1, []any{106, "y", 2, "s", nil})
	h.expect("104 b 2 null null 106 y 2 s null")
	h.side(0, []any{120, "d", 1, 7, nil})
	h.watermark(107)
	_, got = h.snapshot(false)
	want = []string{
		fmt.Sprintf("%d row left null 120 d 1 7 null %s", kg1, nulls),
		fmt.Sprintf("%d expire null 107 %s %s", kg1, nulls, nulls),
		fmt.Sprintf("%d expire null 107 %s %s", kg2, nulls, nulls),
	}
	if !slices.Equal(joinSortKeyGroups(got), joinSortKeyGroups(want)) {
		t.Fatalf("delta:\n got %q\nwant %q", got, want)
	}
	if _, rows := h.snapshot(false); len(rows) != 0 {
		t.Fatalf("a delta with no change has %d rows: %q", len(rows), rows)
	}
	// Key 2 has no rows left after watermark 115: its expire entry is the
	// last one.
	h.watermark(115)
	_, got = h.snapshot(false)
	want = []string{
		fmt.Sprintf("%d expire null 115 %s %s", kg1, nulls, nulls),
		fmt.Sprintf("%d expire null 115 %s %s", kg2, nulls, nulls),
	}
	if !slices.Equal(joinSortKeyGroups(got), joinSortKeyGroups(want)) {
		t.Fatalf("delta after cleanup:\n got %q\nwant %q", got, want)
	}
	h.watermark(116)
	_, got = h.snapshot(false)
	if want := []string{fmt.Sprintf("%d expire null 116 %s %s", kg1, nulls, nulls)}; !slices.Equal(got, want) {
		t.Fatalf("delta:\n got %q\nwant %q", got, want)
	}
}

// joinSortKeyGroups sorts state rows by everything but their order.
func joinSortKeyGroups(rows []string) []string {
	rows = slices.Clone(rows)
	slices.Sort(rows)
	return rows
}

// TestJoinStateDeltaSize keeps rows of 10000 keys, adds a row to 1% of
// them, and checks that the delta has those rows (and an expire entry per
// key group with new rows), and that base and delta restore the state.
func TestJoinStateDeltaSize(t *testing.T) {
	for _, ttl := range []spec.Duration{0, spec.Duration(time.Hour)} {
		t.Run(ttl.String(), func(t *testing.T) {
			const keys = 10000
			o := joinOp(spec.Join{Type: spec.JoinRegular, TTL: ttl}, "")
			ins := joinStreams(t)
			h := newJoinHarness(t, o, ins, 0, 128)
			rows := make([][]any, keys)
			for i := range rows {
				rows[i] = []any{i, "a", i, i, nil}
			}
			h.side(0, rows...)
			h.watermark(100)
			base, baseRows := h.snapshot(true)
			var changed [][]any
			for i := 0; i < keys; i += 100 {
				changed = append(changed, []any{500, "r", i, "x", true})
			}
			h.side(1, changed...)
			if got := len(h.out.take()); got != len(changed) {
				t.Fatalf("%d joined rows, want %d", got, len(changed))
			}
			h.watermark(200)
			delta, deltaRows := h.snapshot(false)
			t.Logf("base: %d rows, %d bytes; delta after adding %d rows: %d rows, %d bytes", len(baseRows), len(base), len(changed), len(deltaRows), len(delta))
			// With ttl, an expire entry per key group: every one has rows.
			expires := 0
			if ttl > 0 {
				expires = 128
			}
			if len(baseRows) != keys+expires {
				t.Errorf("base has %d rows, want %d", len(baseRows), keys+expires)
			}
			if want := len(changed) + expires; len(deltaRows) != want {
				t.Errorf("delta has %d rows, want %d", len(deltaRows), want)
			}

			r := newJoinHarness(t, o, ins, 0, 128)
			if err := r.restore([][]byte{base, delta}, 0, 128); err != nil {
				t.Fatal(err)
			}
			r.watermark(200)
			if _, rows := r.snapshot(false); len(rows) != 0 {
				t.Fatalf("a delta right after a restore has %d rows", len(rows))
			}
			if got, want := joinStateDump(t, r), joinStateDump(t, h); !slices.Equal(got, want) {
				t.Fatalf("restored state differs:\n%s", winDiff(got, want))
			}
			r.side(1, []any{600, "r", 0, "y", nil})
			h.side(1, []any{600, "r", 0, "y", nil})
			if got, want := r.out.take(), h.out.take(); !slices.Equal(got, want) || len(want) != 1 {
				t.Fatalf("restored output %q, want %q", got, want)
			}
		})
	}
}

// TestJoinStateLowerWatermark restores a window join whose window has
// fired with a watermark below the window's end, as the runtime does at
// another parallelism: the key group goes on from the watermark it was
// saved at, so the window neither takes rows nor fires again.
func TestJoinStateLowerWatermark(t *testing.T) {
	o := joinOp(spec.Join{Type: spec.JoinWindow, Window: &spec.Window{Type: spec.WindowSliding, Size: winMs(20), Slide: winMs(10)},
		Columns: spec.NewOrderedMap(spec.Pair{Key: "l", Value: "left.lv"}, spec.Pair{Key: "r", Value: "right.rv"})}, "")
	ins := joinStreams(t)
	h := newJoinHarness(t, o, ins, 0, 128)
	h.side(0, []any{5, "a", 1, 5, nil}, []any{15, "a", 1, 15, nil})
	h.side(1, []any{6, "a", 1, "x", nil})
	h.watermark(9)
	h.expect("-10 10 5 x")
	file, _ := h.snapshot(true)

	r := newJoinHarness(t, o, ins, 0, 128)
	if err := r.restore([][]byte{file}, 0, 128); err != nil {
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
}

// TestJoinStateErrors checks that a restore refuses what does not fit,
// naming the operator, the row and what is wrong.
func TestJoinStateErrors(t *testing.T) {
	o := joinOp(spec.Join{Type: spec.JoinInterval, Lower: -winMs(10)}, "")
	ins := joinStreams(t)
	h := newJoinHarness(t, o, ins, 0, 128)
	h.side(0, []any{1, "a", 7, 1, nil})
	base, _ := h.snapshot(true)
	kg := joinRowGroup([]any{nil, nil, 7}, "")
	start := (kg + 1) % 128

	wantErr := func(name string, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", name)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", name, err, w)
			}
		}
	}

	r := newJoinHarness(t, o, ins, start, start+1)
	wantErr("outside the key groups", r.restore([][]byte{base}, 0, 128),
		"join j: restore state: row 0: column key_group", fmt.Sprintf("key group %d is outside this subtask's key groups [%d, %d)", kg, start, start+1))

	r = newJoinHarness(t, o, ins, 0, 128)
	st := r.op.(task.Stateful).State()
	row := func(vals ...any) arrow.RecordBatch {
		full := append(vals, make([]any, st.Schema().NumFields()-len(vals))...)
		return winBatch(t, r.mem, st.Schema(), full)
	}
	for _, tc := range []struct {
		name string
		b    arrow.RecordBatch
		want string
	}{
		{"entry", row(kg, "merge"), `row 0: column entry: "merge" is not an entry: want row or expire`},
		{"no entry", row(kg, nil), `row 0: column entry: null, want row or expire`},
		{"side", row(kg, "row", "middle"), `row 0: column side: "middle", want left or right`},
		{"expire", row(kg, "expire"), `row 0: column watermark: null in an expire entry`},
		{"null key", row(kg, "row", "left", nil, 1, "a", nil), `row 0: left.k2=null: a null key column`},
		{"key group", row((kg+1)%128, "row", "left", nil, 1, "a", 7), fmt.Sprintf("row 0: column key_group: key group %d, but left.k2=7 is in key group %d of 128", (kg+1)%128, kg)},
		{"time", row(kg, "row", "left", nil, nil, "a", 7), "row 0: column left.ts: null: every kept row of an interval join has an event time"},
	} {
		err := st.Restore(tc.b)
		tc.b.Release()
		wantErr(tc.name, err, "join j: restore state: "+tc.want)
	}

	other := newJoinHarness(t, joinOp(spec.Join{Type: spec.JoinInterval, Lower: -winMs(10)}, "multi"), ins, 0, 128)
	b := winBatch(t, other.mem, other.op.(task.Stateful).State().Schema())
	defer b.Release()
	if err := st.Restore(b); err != nil {
		t.Errorf("the same columns: %v", err)
	}
	bad, err := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "key_group", Type: arrowfmt.Int64}})
	if err != nil {
		t.Fatal(err)
	}
	b2 := winBatch(t, r.mem, bad)
	defer b2.Release()
	wantErr("schema", st.Restore(b2), "join j: restore state: 1 columns")

	r.watermark(5)
	wantErr("after input", r.restore([][]byte{base}, 0, 128), "join j: restore state", "input has already come")
}

// BenchmarkJoinCapture measures what a join's snapshot costs the task at
// the barrier: a regular join keeps 1M left rows (bids, one per auction),
// and a base is taken at once (Snapshot, what the barrier did before) or
// begun and captured in steps of 5ms (BeginSnapshot, then Step). It
// reports the barrier's part and the longest step, in ms.
func BenchmarkJoinCapture(b *testing.B) {
	const keys = 1_000_000
	schema := benchBidSchema(b)
	mem := memory.NewGoAllocator()
	ins := [2]Stream{{Schema: schema, TimeColumn: 0}, {Schema: schema, TimeColumn: 0}}
	o := &spec.Operator{Name: "j", Join: &spec.Join{Type: spec.JoinRegular,
		Left:    spec.JoinSide{Input: "l", KeyBy: []string{"auction"}},
		Right:   spec.JoinSide{Input: "r", KeyBy: []string{"auction"}},
		Columns: spec.NewOrderedMap(spec.Pair{Key: "auction", Value: "left.auction"}, spec.Pair{Key: "price", Value: "right.price"})}}
	op, err := NewJoin(o, ins[0], ins[1])
	if err != nil {
		b.Fatal(err)
	}
	if err := op.Open(&task.Context{MaxParallelism: 128, Mem: mem, Out: winDiscard{}, Counters: &task.Counters{}}); err != nil {
		b.Fatal(err)
	}
	defer op.Close()
	for i := 0; i < keys; i += 1 << 16 {
		rec := benchBids(mem, schema, min(1<<16, keys-i), func(r int) (ts, auction, price int64) { return int64(r % 1000), int64(i + r), int64(r % 10000) })
		if err := op.(task.TwoInputOperator).ProcessBatchFrom(0, rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	statetest.BenchmarkCapture(b, op.(task.Stateful).State().(statestore.SteppedSnapshotter), mem, keys, nil)
}

// BenchmarkJoinStateMemory keeps one left row (a bid) for each of
// JOIN_MEM_KEYS keys (1M by default) in a join and reports the memory
// they take per key: the growth of the Go heap (which holds the kept
// batches too, allocated by a Go allocator), what the join maps outside
// the heap (keys, entries and tables: reserved, not all resident), and
// the growth of the process's largest RSS; and the rows/s at which they
// came. Sub-benchmarks: a regular join with a ttl, keyed by an int64 (a
// fast key) or by two columns (an encoded key); a tumbling window join.
func BenchmarkJoinStateMemory(b *testing.B) {
	const batchRows = 8192
	keys := 1_000_000
	if v := os.Getenv("JOIN_MEM_KEYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("JOIN_MEM_KEYS=%q: want a positive number of keys", v)
		}
		keys = n
	}
	day := spec.Duration(24 * time.Hour)
	for _, c := range []struct {
		name string
		jn   spec.Join
		key  []string
	}{
		{"regular/int-key", spec.Join{Type: spec.JoinRegular, TTL: day}, []string{"auction"}},
		{"regular/two-column-key", spec.Join{Type: spec.JoinRegular, TTL: day}, []string{"auction", "price"}},
		{"window/int-key", spec.Join{Type: spec.JoinWindow, Window: &spec.Window{Type: spec.WindowTumbling, Size: day}}, []string{"auction"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			schema := benchBidSchema(b)
			mem := memory.NewGoAllocator()
			jn := c.jn
			jn.Left = spec.JoinSide{Input: "l", KeyBy: c.key}
			jn.Right = spec.JoinSide{Input: "r", KeyBy: c.key}
			jn.Columns = spec.NewOrderedMap(spec.Pair{Key: "auction", Value: "left.auction"}, spec.Pair{Key: "price", Value: "right.price"})
			var heap, off, peak, rate float64
			for range b.N {
				probe := startMemProbe(b)
				in := Stream{Schema: schema, TimeColumn: 0}
				op, err := NewJoin(&spec.Operator{Name: "j", Join: &jn}, in, in)
				if err != nil {
					b.Fatal(err)
				}
				if err := op.Open(&task.Context{MaxParallelism: 128, KeyGroupStart: 0, KeyGroupEnd: 128, Mem: mem, Out: winDiscard{}, Counters: &task.Counters{}}); err != nil {
					b.Fatal(err)
				}
				two := op.(task.TwoInputOperator)
				start := time.Now()
				for i := 0; i < keys; i += batchRows {
					rec := benchBids(mem, schema, min(batchRows, keys-i), func(r int) (ts, auction, price int64) {
						return int64(i + r), int64((i + r) * 7919 % keys), int64(r % 100)
					})
					err := two.ProcessBatchFrom(0, rec)
					rec.Release()
					if err != nil {
						b.Fatal(err)
					}
				}
				rate = float64(keys) / time.Since(start).Seconds()
				heap = float64(probe.heapGrowth()) / float64(keys)
				off = float64(joinOffHeapBytes(op)) / float64(keys)
				peak = float64(probe.rssGrowth(b)) / float64(keys)
				op.Close()
			}
			b.ReportMetric(heap, "heap-B/key")
			b.ReportMetric(off, "offheap-B/key")
			b.ReportMetric(peak, "peak-B/key")
			b.ReportMetric(rate, "rows/s")
		})
	}
}

// joinOffHeapBytes is the memory join o maps outside the Go heap.
func joinOffHeapBytes(o task.Operator) int { return o.(*joinOperator).arena.Mapped() }
