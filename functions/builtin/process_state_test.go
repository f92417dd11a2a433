package builtin

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore"
)

// procState is a test function whose output depends on all of its state:
// per key a count (ValueState), the rows' times (ListState) and a map
// (MapState), event-time timers at the next 100ms boundary (deleted and
// moved on every fifth row; late rows set timers at or before the
// watermark), and a processing-time timer 500ms after a key's first row.
// An event-time timer that finds four rows or more clears the key.
type procState struct {
	n    *functions.ValueState[int64]
	seen *functions.ListState[int64]
	m    *functions.MapState[string, int64]
}

func (p *procState) Open(oc *functions.OpenContext) error {
	p.n = functions.Value[int64](oc, "n")
	p.seen = functions.List[int64](oc, "seen")
	p.m = functions.Map[string, int64](oc, "kinds")
	return nil
}

func (p *procState) ProcessElement(ctx *functions.Context, row functions.Row, out *functions.Collector) error {
	ts, _ := ctx.Timestamp()
	n, _ := p.n.Value()
	n++
	p.n.Update(n)
	p.seen.Add(ts % 97)
	p.m.Put(fmt.Sprint(ts%3), n)
	slot := (ts/100 + 1) * 100
	ctx.Timers().RegisterEventTime(slot)
	if n%5 == 0 {
		ctx.Timers().DeleteEventTime(slot)
		ctx.Timers().RegisterEventTime(slot + 250)
	}
	if n == 1 {
		ctx.Timers().RegisterProcessingTime(ctx.Timers().CurrentProcessingTime() + 500)
	}
	return out.Emit(row.String("user"), n, nil, fmt.Sprintf("row wm=%d", ctx.Watermark()))
}

func (p *procState) OnTimer(ctx *functions.Context, t functions.Timer, out *functions.Collector) error {
	n, _ := p.n.Value()
	kind := fmt.Sprintf("%s seen=%v kinds=%d wm=%d", t.Domain, p.seen.Get(), p.m.Len(), ctx.Watermark())
	if n >= 4 && t.Domain == functions.EventTime {
		p.n.Clear()
		p.seen.Clear()
		p.m.Clear()
	}
	return out.Emit(ctx.Key()[0], n, t.Timestamp, kind)
}

func init() {
	functions.Register("test-process-state", functions.Definition{
		New: func(map[string]any) (functions.ProcessFunction, error) { return &procState{}, nil },
		Output: func(*arrow.Schema) ([]arrowfmt.Field, error) {
			return []arrowfmt.Field{
				{Name: "user", Type: arrowfmt.String}, {Name: "n", Type: arrowfmt.Int64},
				{Name: "at", Type: arrowfmt.TimestampMs}, {Name: "kind", Type: arrowfmt.String},
			}, nil
		},
		TimeColumn: "at",
	})
}

// psStep is one step of the input: a batch of rows, a watermark, or a
// clock tick (processing time advances by tick ms).
type psStep struct {
	rows [][]any
	wm   int64
	tick int64
}

// psSteps returns a random input over users: rows out of order (some late),
// watermarks 100ms behind the latest row, and clock ticks.
func psSteps(r *rand.Rand, n, users int) []psStep {
	var steps []psStep
	maxTs := int64(1000)
	for range n {
		switch x := r.IntN(10); {
		case x < 7:
			var rows [][]any
			for range 1 + r.IntN(12) {
				ts := maxTs - 300 + r.Int64N(360)
				maxTs = max(maxTs, ts)
				rows = append(rows, []any{fmt.Sprint("u", r.IntN(users)), ts})
			}
			steps = append(steps, psStep{rows: rows})
		case x < 9:
			steps = append(steps, psStep{wm: maxTs - 100})
		default:
			steps = append(steps, psStep{tick: 100 + r.Int64N(400)})
		}
	}
	return steps
}

func psKeyGroup(user string) int { return arrowfmt.KeyGroup(arrowfmt.HashKeyValues(user), 128) }

// psSubtask is one running process operator.
type psSubtask struct {
	op         task.Operator
	start, end int
	out        *procOut
}

// psRun drives subtasks over steps the way the runtime does: rows routed by
// key group, a watermark only when it advances, processing-time timers
// when the clock reaches them.
type psRun struct {
	t    *testing.T
	mem  memory.Allocator
	in   Stream
	now  int64
	wm   int64
	subs []*psSubtask
	// rows are the output rows of every subtask so far, as strings, in
	// the order emitted per subtask.
	rows []string
}

func newPSRun(t *testing.T, mem memory.Allocator, ranges ...[2]int) *psRun {
	r := &psRun{t: t, mem: mem, in: procStream(t), now: 50_000, wm: task.MinWatermark}
	for _, kr := range ranges {
		r.subs = append(r.subs, r.open(kr[0], kr[1]))
	}
	return r
}

func (r *psRun) open(start, end int) *psSubtask {
	r.t.Helper()
	op, err := NewProcess(procOp("test-process-state"), r.in, ProcessEnv{})
	if err != nil {
		r.t.Fatal(err)
	}
	s := &psSubtask{op: op, start: start, end: end, out: &procOut{}}
	if err := op.Open(&task.Context{
		Node: "p", Parallelism: 1, MaxParallelism: 128, KeyGroupStart: start, KeyGroupEnd: end,
		Mem: r.mem, Now: func() time.Time { return time.UnixMilli(r.now) }, Out: s.out, Counters: &task.Counters{},
	}); err != nil {
		r.t.Fatal(err)
	}
	return s
}

// collect moves the subtasks' output into r.rows.
func (r *psRun) collect() {
	for _, s := range r.subs {
		for _, b := range s.out.batches {
			for _, row := range b {
				r.rows = append(r.rows, fmt.Sprint(row))
			}
		}
		s.out.batches = nil
	}
}

func (r *psRun) step(st psStep) {
	r.t.Helper()
	switch {
	case st.rows != nil:
		for _, s := range r.subs {
			var rows [][]any
			for _, row := range st.rows {
				if kg := psKeyGroup(row[0].(string)); kg >= s.start && kg < s.end {
					rows = append(rows, row)
				}
			}
			if rows == nil {
				continue
			}
			rec := procBatch(r.t, r.mem, r.in, rows...)
			err := s.op.ProcessBatch(rec)
			rec.Release()
			if err != nil {
				r.t.Fatal(err)
			}
		}
	case st.tick != 0:
		r.now += st.tick
		for _, s := range r.subs {
			pt := s.op.(task.ProcessingTimer)
			if next, ok := pt.NextProcessingTime(); ok && !next.After(time.UnixMilli(r.now)) {
				if err := pt.OnProcessingTime(time.UnixMilli(r.now)); err != nil {
					r.t.Fatal(err)
				}
			}
		}
	default:
		r.advance(st.wm)
	}
	r.collect()
}

func (r *psRun) advance(wm int64) {
	r.t.Helper()
	if wm <= r.wm {
		return
	}
	r.wm = wm
	for _, s := range r.subs {
		if err := s.op.ProcessWatermark(wm); err != nil {
			r.t.Fatal(err)
		}
	}
	r.collect()
}

func (r *psRun) finish() {
	r.t.Helper()
	r.advance(task.MaxWatermark)
	for _, s := range r.subs {
		if err := s.op.Finish(); err != nil {
			r.t.Fatal(err)
		}
	}
	r.collect()
	r.close()
}

func (r *psRun) close() {
	for _, s := range r.subs {
		if err := s.op.Close(); err != nil {
			r.t.Error(err)
		}
	}
	r.subs = nil
}

// snapshot takes every subtask's state as an Arrow IPC file (nil when
// there are no rows), as the runtime uploads it.
func (r *psRun) snapshot(full bool) [][]byte {
	r.t.Helper()
	var files [][]byte
	for _, s := range r.subs {
		sf := s.op.(task.Stateful).State()
		recs, err := sf.Snapshot(r.mem, full)
		if err != nil {
			r.t.Fatal(err)
		}
		if len(recs) == 0 {
			files = append(files, nil)
			continue
		}
		var buf bytes.Buffer
		w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(sf.Schema()), ipc.WithAllocator(r.mem))
		if err != nil {
			r.t.Fatal(err)
		}
		for _, rec := range recs {
			if err := w.Write(rec); err != nil {
				r.t.Fatal(err)
			}
			rec.Release()
		}
		if err := w.Close(); err != nil {
			r.t.Fatal(err)
		}
		files = append(files, buf.Bytes())
	}
	return files
}

// restore opens subtasks over ranges and restores into each the files, in
// order, keeping the rows of its key groups, then the watermark wm, as the
// runtime does.
func (r *psRun) restore(files [][]byte, wm int64, ranges ...[2]int) {
	r.t.Helper()
	for _, kr := range ranges {
		s := r.open(kr[0], kr[1])
		sf := s.op.(task.Stateful).State()
		for _, f := range files {
			if f == nil {
				continue
			}
			rd, err := ipc.NewFileReader(bytes.NewReader(f), ipc.WithAllocator(r.mem))
			if err != nil {
				r.t.Fatal(err)
			}
			if !rd.Schema().Equal(sf.Schema()) {
				r.t.Fatalf("file schema %s, state schema %s", rd.Schema(), sf.Schema())
			}
			for i := range rd.NumRecords() {
				rec, err := rd.RecordBatch(i)
				if err != nil {
					r.t.Fatal(err)
				}
				kept := psKeep(r.t, rec, kr[0], kr[1], r.mem)
				if kept == nil {
					continue
				}
				err = sf.Restore(kept)
				kept.Release()
				if err != nil {
					r.t.Fatal(err)
				}
			}
			rd.Close()
		}
		r.subs = append(r.subs, s)
	}
	r.wm = task.MinWatermark
	r.advance(wm)
}

// psKeep returns the rows of rec in key groups [start, end), or nil. (It
// does not use arrowfmt.Take, which has no int32 or binary columns.)
func psKeep(t testing.TB, rec arrow.RecordBatch, start, end int, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	if rec.Schema().Field(0).Name != task.StateKeyGroupField {
		t.Fatalf("first field %s", rec.Schema().Field(0).Name)
	}
	kg := rec.Column(0).(*array.Int32)
	var runs [][2]int64 // kept rows, as half-open runs
	n := 0
	for i := range kg.Len() {
		if g := int(kg.Value(i)); g < start || g >= end {
			continue
		}
		n++
		if k := len(runs); k > 0 && runs[k-1][1] == int64(i) {
			runs[k-1][1]++
		} else {
			runs = append(runs, [2]int64{int64(i), int64(i) + 1})
		}
	}
	if n == 0 {
		return nil
	}
	cols := make([]arrow.Array, rec.NumCols())
	for c := range cols {
		parts := make([]arrow.Array, len(runs))
		for j, r := range runs {
			parts[j] = array.NewSlice(rec.Column(c), r[0], r[1])
		}
		var err error
		cols[c], err = array.Concatenate(parts, mem)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	out := array.NewRecordBatch(rec.Schema(), cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return out
}

// TestProcessStateRestore fails a process operator at random points after
// checkpoints (a base, then deltas, at times a new base) and restores it
// from the checkpoint into a fresh one: the output before the checkpoint
// and the restored operator's output together equal the output of a run
// without failures, row for row and in order.
func TestProcessStateRestore(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			// The checked allocator is slow: every fifth seed checks
			// that every batch is released.
			var mem memory.Allocator = memory.DefaultAllocator
			if seed%5 == 0 {
				checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer checked.AssertSize(t, 0)
				mem = checked
			}
			rng := rand.New(rand.NewPCG(seed, 7))
			steps := psSteps(rng, 100+rng.IntN(150), 1+rng.IntN(30))
			all := [][2]int{{0, 128}}

			ref := newPSRun(t, mem, all...)
			for _, s := range steps {
				ref.step(s)
			}
			ref.finish()

			run := newPSRun(t, mem, all...)
			var chain [][]byte
			var kept []string // output up to the last checkpoint a failure went back to
			failures := 0
			for i := 0; i < len(steps); {
				cut := i + 1 + rng.IntN(40)
				for ; i < cut && i < len(steps); i++ {
					run.step(steps[i])
				}
				full := chain == nil || rng.IntN(4) == 0
				files := run.snapshot(full)
				if full {
					chain = nil
				}
				chain = append(chain, files...)
				ckpt, atCut, wm, now := i, len(run.rows), run.wm, run.now
				if rng.IntN(2) == 0 {
					continue
				}
				// Go on a little, then fail: what came after the
				// checkpoint is lost and replayed.
				for k := rng.IntN(10); k > 0 && i < len(steps); k-- {
					run.step(steps[i])
					i++
				}
				i = ckpt
				kept = append(kept, run.rows[:atCut]...)
				run.close()
				failures++
				run = &psRun{t: t, mem: mem, in: run.in, now: now}
				run.restore(chain, wm, all...)
			}
			run.finish()
			got := append(kept, run.rows...)
			if !slices.Equal(got, ref.rows) {
				t.Fatalf("%d failures: output differs from the run without failures\n%s", failures, psDiff(got, ref.rows))
			}
		})
	}
}

// TestProcessStateLateTimer: a timer set at or before the watermark fires
// with the next watermark, restored or not.
func TestProcessStateLateTimer(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	all := [2]int{0, 128}
	steps := []psStep{
		{rows: [][]any{{"ann", int64(1000)}}},
		{wm: 2000},                            // fires 1100
		{rows: [][]any{{"ann", int64(1040)}}}, // late: its timer (1100) is before the watermark
		{rows: [][]any{{"bob", int64(1950)}}}, // bob's timer (2000) is at the watermark
		{rows: [][]any{{"ann", int64(2500)}}}, // after the checkpoint
		{wm: 2600},                            // fires the late timers, then 2600
	}
	ref := newPSRun(t, mem, all)
	for _, s := range steps {
		ref.step(s)
	}
	ref.finish()

	run := newPSRun(t, mem, all)
	for _, s := range steps[:4] {
		run.step(s)
	}
	files := run.snapshot(true)
	kept := run.rows
	run.close()
	run = &psRun{t: t, mem: mem, in: run.in, now: 50_000}
	run.restore(files, 2000, all)
	if len(run.rows) != 0 {
		t.Fatalf("the restored watermark fired %q", run.rows)
	}
	for _, s := range steps[4:] {
		run.step(s)
	}
	run.finish()
	got := append(kept, run.rows...)
	if !slices.Equal(got, ref.rows) {
		t.Fatalf("output differs\n%s", psDiff(got, ref.rows))
	}
	if !slices.ContainsFunc(ref.rows, func(s string) bool { return strings.HasPrefix(s, "[ann 3 1100 event time") }) {
		t.Errorf("the late timer did not fire as expected: %q", ref.rows)
	}
}

// TestProcessStateRescale checkpoints two subtasks (key groups [0,64) and
// [64,128) of 128) and restores them into three and into one: every key's
// output equals a run without failures.
func TestProcessStateRescale(t *testing.T) {
	for _, p := range []int{3, 1} {
		t.Run(fmt.Sprint("to ", p), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rng := rand.New(rand.NewPCG(uint64(p), 11))
			steps := psSteps(rng, 300, 40)
			two := [][2]int{{0, 64}, {64, 128}}
			var to [][2]int
			for i := range p {
				s, e := arrowfmt.KeyGroupRange(i, 128, p)
				to = append(to, [2]int{s, e})
			}

			ref := newPSRun(t, mem, [2]int{0, 128})
			for _, s := range steps {
				ref.step(s)
			}
			ref.finish()

			run := newPSRun(t, mem, two...)
			for _, s := range steps[:100] {
				run.step(s)
			}
			chain := run.snapshot(true)
			for _, s := range steps[100:180] {
				run.step(s)
			}
			chain = append(chain, run.snapshot(false)...)
			atCut, wm, now := len(run.rows), run.wm, run.now
			for _, s := range steps[180:190] {
				run.step(s)
			}
			kept := run.rows[:atCut]
			run.close()
			run = &psRun{t: t, mem: mem, in: run.in, now: now}
			run.restore(chain, wm, to...)
			for _, s := range steps[180:] {
				run.step(s)
			}
			run.finish()
			got, want := psByUser(append(slices.Clone(kept), run.rows...)), psByUser(ref.rows)
			if len(want) < 30 {
				t.Fatalf("only %d users", len(want))
			}
			for u, w := range want {
				if !slices.Equal(got[u], w) {
					t.Errorf("user %s: output differs\n%s", u, psDiff(got[u], w))
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d users, want %d", len(got), len(want))
			}
		})
	}
}

// psByUser groups output rows by their user, keeping their order.
func psByUser(rows []string) map[string][]string {
	m := map[string][]string{}
	for _, r := range rows {
		u, _, _ := strings.Cut(strings.TrimPrefix(r, "["), " ")
		m[u] = append(m[u], r)
	}
	return m
}

func psDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("first difference at row %d of %d (want %d):\n got %q\nwant %q", i, len(got), len(want), g, w)
		}
	}
	return "equal"
}

func TestProcessStateSchema(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	run := newPSRun(t, mem, [2]int{0, 128})
	defer run.close()
	sf := run.subs[0].op.(task.Stateful).State()
	s := sf.Schema()
	if f := s.Field(0); f.Name != task.StateKeyGroupField || f.Type.ID() != arrow.INT32 {
		t.Errorf("first field %s", f)
	}
	if !s.Equal(statestore.SnapshotSchema()) {
		t.Errorf("schema %s", s)
	}
	if recs, err := sf.Snapshot(mem, true); err != nil || recs != nil {
		t.Errorf("empty state: %d batches, %v", len(recs), err)
	}
	run.step(psStep{rows: [][]any{{"ann", int64(1000)}}})
	recs, err := sf.Snapshot(mem, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rec := range recs {
		tab := rec.Column(1).(*array.String)
		for i := range tab.Len() {
			names = append(names, tab.Value(i))
		}
		rec.Release()
	}
	if want := []string{"kinds", "n", "seen", statestore.EventTimersTable, statestore.ProcessingTimersTable}; !slices.Equal(names, want) {
		t.Errorf("delta tables %q, want %q", names, want)
	}
	if recs, err := sf.Snapshot(mem, false); err != nil || recs != nil {
		t.Errorf("delta without changes: %d batches, %v", len(recs), err)
	}
}

// TestProcessStateNoWatermarkYet: a checkpoint taken before the first
// watermark has none to restore (the runtime calls no ProcessWatermark):
// the first watermark after the restore fires timers as usual.
func TestProcessStateNoWatermarkYet(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	all := [2]int{0, 128}
	steps := []psStep{
		{rows: [][]any{{"ann", int64(1000)}, {"bob", int64(1500)}}},
		{wm: 1200}, // fires ann's 1100
		{rows: [][]any{{"ann", int64(1300)}}},
		{wm: 2000},
	}
	ref := newPSRun(t, mem, all)
	for _, s := range steps {
		ref.step(s)
	}
	ref.finish()

	run := newPSRun(t, mem, all)
	run.step(steps[0])
	files := run.snapshot(true)
	kept := run.rows
	run.close()
	run = &psRun{t: t, mem: mem, in: run.in, now: 50_000}
	run.restore(files, task.MinWatermark, all)
	for _, s := range steps[1:] {
		run.step(s)
	}
	run.finish()
	if got := append(kept, run.rows...); !slices.Equal(got, ref.rows) {
		t.Fatalf("output differs\n%s", psDiff(got, ref.rows))
	}
}
