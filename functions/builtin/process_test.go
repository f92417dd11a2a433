package builtin

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

// procTimeout is a test function: per key it counts rows and, on the first
// row, sets an event-time timer 100ms after the row and a processing-time
// timer 1s after the clock; each timer emits (key, count, timer time, kind).
type procTimeout struct {
	n *functions.ValueState[int64]
}

func (p *procTimeout) Open(oc *functions.OpenContext) error {
	p.n = functions.Value[int64](oc, "n")
	return nil
}

func (p *procTimeout) ProcessElement(ctx *functions.Context, row functions.Row, out *functions.Collector) error {
	n, ok := p.n.Value()
	if !ok {
		ts, _ := ctx.Timestamp()
		ctx.Timers().RegisterEventTime(ts + 100)
		ctx.Timers().RegisterProcessingTime(ctx.Timers().CurrentProcessingTime() + 1000)
	}
	p.n.Update(n + 1)
	return out.Emit(row.String("user"), n+1, nil, "row")
}

func (p *procTimeout) OnTimer(ctx *functions.Context, t functions.Timer, out *functions.Collector) error {
	n, _ := p.n.Value()
	return out.Emit(ctx.Key()[0], n, t.Timestamp, t.Domain.String())
}

func init() {
	functions.Register("test-process-timeout", functions.Definition{
		New: func(cfg map[string]any) (functions.ProcessFunction, error) {
			if len(cfg) > 0 {
				return nil, fmt.Errorf("takes no config, got %v", cfg)
			}
			return &procTimeout{}, nil
		},
		Output: func(in *arrow.Schema) ([]arrowfmt.Field, error) {
			if len(in.FieldIndices("user")) == 0 {
				return nil, errors.New(`input has no column "user"`)
			}
			return []arrowfmt.Field{
				{Name: "user", Type: arrowfmt.String}, {Name: "n", Type: arrowfmt.Int64},
				{Name: "at", Type: arrowfmt.TimestampMs}, {Name: "kind", Type: arrowfmt.String},
			}, nil
		},
		TimeColumn: "at",
	})
	functions.Register("test-process-badtime", functions.Definition{
		New: func(map[string]any) (functions.ProcessFunction, error) { return &procTimeout{}, nil },
		Output: func(*arrow.Schema) ([]arrowfmt.Field, error) {
			return []arrowfmt.Field{{Name: "at", Type: arrowfmt.Int64}}, nil
		},
		TimeColumn: "at",
	})
}

func procStream(t *testing.T) Stream {
	t.Helper()
	s, err := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "user", Type: arrowfmt.String}, {Name: "ts", Type: arrowfmt.TimestampMs}})
	if err != nil {
		t.Fatal(err)
	}
	return Stream{Schema: s, TimeColumn: 1}
}

func procOp(fn string) *spec.Operator {
	return &spec.Operator{Name: "p", Input: "src", KeyBy: []string{"user"}, Function: fn}
}

func TestProcessSchema(t *testing.T) {
	in := procStream(t)
	out, err := ProcessSchema(procOp("test-process-timeout"), in)
	if err != nil {
		t.Fatal(err)
	}
	if fs, _ := arrowfmt.Fields(out.Schema); len(fs) != 4 || out.TimeColumn != 2 || out.TimeOffset != 0 {
		t.Errorf("output %v, time column %d", fs, out.TimeColumn)
	}

	for _, c := range []struct {
		name string
		op   func(*spec.Operator)
		in   Stream
		want []string
	}{
		{"unknown function", func(o *spec.Operator) { o.Function = "nope" }, in, []string{
			`operators[p].function: "nope" is not a registered function (registered: `, "test-process-timeout",
		}},
		{"missing key column", func(o *spec.Operator) { o.KeyBy = []string{"who"} }, in, []string{
			`operators[p].keyBy: "who" is not a column of the input (columns: user utf8, ts timestamp[ms, tz=UTC])`,
		}},
		{"no keyBy", func(o *spec.Operator) { o.KeyBy = nil }, in, []string{"operators[p].keyBy: missing"}},
		{"bad config", func(o *spec.Operator) { o.Config = map[string]any{"x": 1} }, in, []string{
			"operators[p].config: test-process-timeout: takes no config, got map[x:1]",
		}},
		{"output refuses the input", nil, Stream{Schema: arrow.NewSchema([]arrow.Field{{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_ms}}, nil), TimeColumn: -1}, []string{
			`operators[p].function: test-process-timeout: output schema: input has no column "user"`,
		}},
		{"time column of the wrong type", func(o *spec.Operator) { o.Function = "test-process-badtime" }, in, []string{
			`operators[p].function: test-process-badtime: time column "at" is int64, want timestamp_ms`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			op := procOp("test-process-timeout")
			if c.op != nil {
				c.op(op)
			}
			_, err := ProcessSchema(op, c.in)
			for _, frag := range c.want {
				if err == nil || !strings.Contains(err.Error(), frag) {
					t.Errorf("error %v\nwant it to contain %q", err, frag)
				}
			}
			if _, err2 := NewProcess(op, c.in, ProcessEnv{}); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("NewProcess error %v differs from ProcessSchema's %v", err2, err)
			}
		})
	}
}

func TestProcessWatermarkConstants(t *testing.T) {
	if functions.MinWatermark != task.MinWatermark || functions.MaxWatermark != task.MaxWatermark {
		t.Fatal("functions and task disagree on the special watermarks")
	}
}

type procOut struct {
	batches [][][]any
}

func (o *procOut) Emit(b arrow.RecordBatch) error {
	var rows [][]any
	for r := 0; r < int(b.NumRows()); r++ {
		row := make([]any, b.NumCols())
		for c := range row {
			v := arrowfmt.Value(b.Column(c), r)
			if tm, ok := v.(time.Time); ok {
				v = tm.UnixMilli()
			}
			row[c] = v
		}
		rows = append(rows, row)
	}
	o.batches = append(o.batches, rows)
	return nil
}

func (o *procOut) take() []string {
	var out []string
	for i, b := range o.batches {
		for _, r := range b {
			out = append(out, fmt.Sprintf("%d: %v", i, r))
		}
	}
	o.batches = nil
	return out
}

func procBatch(t *testing.T, mem memory.Allocator, in Stream, rows ...[]any) arrow.RecordBatch {
	t.Helper()
	b := arrowfmt.NewBuilder(in.Schema, mem)
	defer b.Release()
	for _, r := range rows {
		for c, v := range r {
			if err := b.AppendAny(c, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.NewBatch()
}

func TestProcessOperator(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in := procStream(t)
	op, err := NewProcess(procOp("test-process-timeout"), in, ProcessEnv{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(50_000)
	out := &procOut{}
	if err := op.Open(&task.Context{
		Node: "p", Parallelism: 1, MaxParallelism: 128, KeyGroupStart: 0, KeyGroupEnd: 128,
		Mem: mem, Now: func() time.Time { return now }, Out: out, Counters: &task.Counters{},
	}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := op.Close(); err != nil {
			t.Error(err)
		}
		if err := op.Close(); err != nil { // twice is fine
			t.Error(err)
		}
	}()
	pt := op.(task.ProcessingTimer)

	send := func(rows ...[]any) {
		t.Helper()
		rec := procBatch(t, mem, in, rows...)
		defer rec.Release()
		if err := op.ProcessBatch(rec); err != nil {
			t.Fatal(err)
		}
	}
	send([]any{"ann", int64(1000)}, []any{"bob", int64(1010)}, []any{"ann", int64(1020)}, []any{"ann", int64(990)})
	send([]any{"cy", int64(2000)})
	// One output batch per input batch.
	want := []string{
		"0: [ann 1 <nil> row]", "0: [bob 1 <nil> row]", "0: [ann 2 <nil> row]", "0: [ann 3 <nil> row]",
		"1: [cy 1 <nil> row]",
	}
	if got := out.take(); !slices.Equal(got, want) {
		t.Fatalf("rows\n got %q\nwant %q", got, want)
	}

	if next, ok := pt.NextProcessingTime(); !ok || !next.Equal(time.UnixMilli(51_000)) {
		t.Errorf("NextProcessingTime = %v, %v", next, ok)
	}
	if err := op.ProcessWatermark(1100); err != nil { // ann's timer (1100) is due, bob's (1110) not
		t.Fatal(err)
	}
	if got, want := out.take(), []string{"0: [ann 3 1100 event time]"}; !slices.Equal(got, want) {
		t.Fatalf("at watermark 1100\n got %q\nwant %q", got, want)
	}
	now = time.UnixMilli(51_000)
	if err := pt.OnProcessingTime(now); err != nil {
		t.Fatal(err)
	}
	// ann and bob were first seen at the same clock time: one batch, in
	// key group order.
	got := out.take()
	slices.Sort(got)
	if want := []string{"0: [ann 3 51000 processing time]", "0: [bob 1 51000 processing time]", "0: [cy 1 51000 processing time]"}; !slices.Equal(got, want) {
		t.Fatalf("processing timers\n got %q\nwant %q", got, want)
	}
	if _, ok := pt.NextProcessingTime(); ok {
		t.Error("processing-time timers left")
	}
	// The end of input: MaxWatermark fires the rest; Finish adds nothing.
	if err := op.ProcessWatermark(task.MaxWatermark); err != nil {
		t.Fatal(err)
	}
	if err := op.Finish(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.take(), []string{"0: [bob 1 1110 event time]", "0: [cy 1 2100 event time]"}; !slices.Equal(got, want) {
		t.Fatalf("at the end\n got %q\nwant %q", got, want)
	}
}

func TestProcessRejectsForeignKeyGroups(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in := procStream(t)
	op, err := NewProcess(procOp("test-process-timeout"), in, ProcessEnv{})
	if err != nil {
		t.Fatal(err)
	}
	// Subtask 1 of 2 owns key groups [64,128).
	kg := arrowfmt.KeyGroup(arrowfmt.HashKeyValues("ann"), 128)
	start, end := 64, 128
	if kg >= 64 {
		start, end = 0, 64
	}
	if err := op.Open(&task.Context{Node: "p", Parallelism: 2, MaxParallelism: 128, KeyGroupStart: start, KeyGroupEnd: end, Mem: mem, Now: time.Now, Out: &procOut{}}); err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	rec := procBatch(t, mem, in, []any{"ann", int64(1)})
	defer rec.Release()
	err = op.ProcessBatch(rec)
	want := fmt.Sprintf("process p: row 0 has key group %d, outside this subtask's key groups [%d,%d): the input is not partitioned by keyBy", kg, start, end)
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
}

func BenchmarkProcessOperator(b *testing.B) {
	s, _ := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "user", Type: arrowfmt.String}, {Name: "ts", Type: arrowfmt.TimestampMs}})
	in := Stream{Schema: s, TimeColumn: 1}
	op, err := NewProcess(procOp("test-process-timeout"), in, ProcessEnv{})
	if err != nil {
		b.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	if err := op.Open(&task.Context{Node: "p", Parallelism: 1, MaxParallelism: 128, Mem: mem, Now: time.Now, Out: &procDiscard{}}); err != nil {
		b.Fatal(err)
	}
	defer op.Close()
	bl := arrowfmt.NewBuilder(s, mem)
	for i := range 4096 {
		bl.String(0, fmt.Sprint("user-", i%500))
		bl.TimestampMs(1, int64(i))
	}
	rec := bl.NewBatch()
	bl.Release()
	defer rec.Release()
	b.ResetTimer()
	for b.Loop() {
		if err := op.ProcessBatch(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*4096)/b.Elapsed().Seconds(), "rows/s")
}

type procDiscard struct{}

func (procDiscard) Emit(arrow.RecordBatch) error { return nil }
