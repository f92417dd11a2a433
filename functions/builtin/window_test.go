package builtin

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/integration/testenv"
)

// winFields is the input schema of most window tests.
var winFields = []arrowfmt.Field{
	{Name: "ts", Type: arrowfmt.TimestampMs},
	{Name: "k", Type: arrowfmt.String},
	{Name: "k2", Type: arrowfmt.Int64},
	{Name: "v", Type: arrowfmt.Int64},
	{Name: "f", Type: arrowfmt.Float64},
}

func winStream(t testing.TB) Stream {
	t.Helper()
	s, err := arrowfmt.NewSchema(winFields)
	if err != nil {
		t.Fatal(err)
	}
	return Stream{Schema: s, TimeColumn: 0}
}

// winBatch builds a batch of schema from rows of Go values (int64 or int for
// int64 and timestamp columns, float64, string, bool, nil for null).
func winBatch(t testing.TB, mem memory.Allocator, schema *arrow.Schema, rows ...[]any) arrow.RecordBatch {
	t.Helper()
	rb := array.NewRecordBuilder(mem, schema)
	defer rb.Release()
	for _, row := range rows {
		if len(row) != schema.NumFields() {
			t.Fatalf("row %v: want %d values", row, schema.NumFields())
		}
		for c, v := range row {
			if v == nil {
				rb.Field(c).AppendNull()
				continue
			}
			switch b := rb.Field(c).(type) {
			case *array.Int32Builder: // key groups of state batches
				b.Append(int32(v.(int)))
			case *array.Int64Builder:
				b.Append(int64(v.(int)))
			case *array.TimestampBuilder:
				b.Append(arrow.Timestamp(v.(int)))
			case *array.Float64Builder:
				b.Append(v.(float64))
			case *array.StringBuilder:
				b.Append(v.(string))
			case *array.Int8Builder: // the kind of window state rows
				switch v := v.(type) {
				case string:
					k := slices.Index(windowRowKinds[:], v)
					if k < 0 {
						t.Fatalf("row %v: %q is not a row kind", row, v)
					}
					b.Append(int8(k))
				case int:
					b.Append(int8(v))
				}
			case *array.BooleanBuilder:
				b.Append(v.(bool))
			}
		}
	}
	return rb.NewRecordBatch()
}

// winCollector is an Output that keeps the rows it is given as text: one
// string per row, values separated by spaces, null as "null" and the empty
// string as "".
type winCollector struct {
	rows    []string
	batches int
}

func (c *winCollector) Emit(b arrow.RecordBatch) error {
	c.batches++
	c.rows = append(c.rows, winRows(b)...)
	return nil
}

func (c *winCollector) take() []string {
	r := c.rows
	c.rows = nil
	return r
}

func winRows(b arrow.RecordBatch) []string {
	var out []string
	for r := range int(b.NumRows()) {
		var sb strings.Builder
		for c, col := range b.Columns() {
			if c > 0 {
				sb.WriteByte(' ')
			}
			if col.IsNull(r) {
				sb.WriteString("null")
				continue
			}
			switch a := col.(type) {
			case *array.Int64:
				sb.WriteString(strconv.FormatInt(a.Value(r), 10))
			case *array.Timestamp:
				sb.WriteString(strconv.FormatInt(int64(a.Value(r)), 10))
			case *array.Float64:
				sb.WriteString(strconv.FormatFloat(a.Value(r), 'g', -1, 64))
			case *array.String:
				if a.Value(r) == "" {
					sb.WriteString(`""`)
				}
				sb.WriteString(a.Value(r))
			case *array.Boolean:
				sb.WriteString(strconv.FormatBool(a.Value(r)))
			}
		}
		out = append(out, sb.String())
	}
	return out
}

// winHarness runs one window operator against a checked allocator.
type winHarness struct {
	t        testing.TB
	mem      *memory.CheckedAllocator
	in       Stream
	op       task.Operator
	out      *winCollector
	late     *winCollector
	counters *task.Counters
	// legacyKinds: restore gives the operator its state batches with
	// kind as utf8 names, as weir wrote them before 2026-12-05.
	legacyKinds bool
}

func newWinHarness(t testing.TB, op *spec.Operator, in Stream) *winHarness {
	t.Helper()
	return newWinHarnessRange(t, op, in, 0, 128)
}

// newWinHarnessRange is newWinHarness for the subtask owning key groups
// [kgStart, kgEnd) of 128.
func newWinHarnessRange(t testing.TB, op *spec.Operator, in Stream, kgStart, kgEnd int) *winHarness {
	t.Helper()
	h := &winHarness{
		t:        t,
		mem:      memory.NewCheckedAllocator(memory.NewGoAllocator()),
		in:       in,
		out:      &winCollector{},
		late:     &winCollector{},
		counters: &task.Counters{},
	}
	o, err := newTestWindow(t, op, in)
	if err != nil {
		t.Fatal(err)
	}
	h.op = o
	ctx := &task.Context{
		Job: "test", Node: op.Name, MaxParallelism: 128, KeyGroupStart: kgStart, KeyGroupEnd: kgEnd,
		Mem: h.mem, Out: h.out, Counters: h.counters,
		Side: func(name string) task.Output {
			if op.Window != nil && name == op.Window.LateOutput {
				return h.late
			}
			t.Errorf("side output %q requested", name)
			return nil
		},
	}
	if err := o.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := o.Close(); err != nil {
			t.Error(err)
		}
		h.mem.AssertSize(t, 0)
	})
	return h
}

// batch feeds rows (in winFields order unless the stream differs).
func (h *winHarness) batch(rows ...[]any) {
	h.t.Helper()
	b := winBatch(h.t, h.mem, h.in.Schema, rows...)
	defer b.Release()
	if err := h.op.ProcessBatch(b); err != nil {
		h.t.Fatal(err)
	}
}

func (h *winHarness) watermark(wm int64) {
	h.t.Helper()
	if err := h.op.ProcessWatermark(wm); err != nil {
		h.t.Fatal(err)
	}
}

// expect checks the rows emitted since the last expect.
func (h *winHarness) expect(want ...string) {
	h.t.Helper()
	got := h.out.take()
	if !slices.Equal(got, want) {
		h.t.Fatalf("output:\n got %q\nwant %q", got, want)
	}
}

func winOp(w spec.Window, keyBy []string, aggs ...string) *spec.Operator {
	m := &spec.OrderedMap{}
	for i := 0; i+1 < len(aggs); i += 2 {
		m.Set(aggs[i], aggs[i+1])
	}
	return &spec.Operator{Name: "win", Input: "src", KeyBy: keyBy, Window: &w, Aggregate: m}
}

func winMs(n int) spec.Duration { return spec.Duration(time.Duration(n) * time.Millisecond) }

func TestWindowSchema(t *testing.T) {
	in := winStream(t)
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}, []string{"k2", "k"},
		"rows", "count()", "total", "sum(f)", "first", "min(ts)", "mean", "avg(v)")
	out, err := WindowSchema(op, in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range out.Schema.Fields() {
		typ, err := arrowfmt.TypeOf(f.Type)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f.Name+":"+string(typ))
	}
	want := []string{"window_start:timestamp_ms", "window_end:timestamp_ms", "k2:int64", "k:string",
		"rows:int64", "total:float64", "first:timestamp_ms", "mean:float64"}
	if !slices.Equal(got, want) {
		t.Errorf("schema %v, want %v", got, want)
	}
	if out.TimeColumn != 1 || out.TimeOffset != -1 {
		t.Errorf("time column %d offset %d, want 1 and -1", out.TimeColumn, out.TimeOffset)
	}
	if late := WindowLateSchema(in); !late.Schema.Equal(in.Schema) || late.TimeColumn != in.TimeColumn {
		t.Errorf("late schema %v", late)
	}
}

func TestWindowSchemaErrors(t *testing.T) {
	in := winStream(t)
	noTime := in
	noTime.TimeColumn = -1
	tumble := spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}
	for _, tc := range []struct {
		name string
		op   *spec.Operator
		in   Stream
		want []string
	}{
		{"no event time", winOp(tumble, []string{"k"}, "n", "count()"), noTime,
			[]string{"window win", "no event time", "eventTime"}},
		{"missing key", winOp(tumble, []string{"zone"}, "n", "count()"), in,
			[]string{"window win", `keyBy: "zone" is not a column`}},
		{"key twice", winOp(tumble, []string{"k", "k"}, "n", "count()"), in, []string{`keyBy: "k" collides with key column "k"`}},
		{"aggregate named like a key", winOp(tumble, []string{"k"}, "k", "count()"), in,
			[]string{`operators[win].aggregate.k: the name collides with key column "k"`}},
		{"aggregate named window_end", winOp(tumble, []string{"k"}, "window_end", "max(ts)"), in,
			[]string{"operators[win].aggregate.window_end: the name collides with the window_end column"}},
		{"key named window_start", winOp(tumble, []string{"window_start"}, "n", "count()"), Stream{
			Schema: arrow.NewSchema([]arrow.Field{
				{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
				{Name: "window_start", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			}, nil)}, []string{`keyBy: "window_start" collides with the window_start column`}},
		{"bad aggregate", winOp(tumble, []string{"k"}, "a", "avg(k)"), in,
			[]string{"operators[win].aggregate.a: avg(k): column k is string, want int64 or float64"}},
		{"no aggregates", winOp(tumble, []string{"k"}), in, []string{"aggregate: missing"}},
		{"sub-millisecond size", winOp(spec.Window{Type: spec.WindowTumbling, Size: spec.Duration(1500 * time.Microsecond)}, []string{"k"}, "n", "count()"), in,
			[]string{"window.size: 1.5ms is not a whole number of milliseconds"}},
		{"slide above size", winOp(spec.Window{Type: spec.WindowSliding, Size: winMs(10), Slide: winMs(20)}, []string{"k"}, "n", "count()"), in,
			[]string{"window.slide"}},
		{"no gap", winOp(spec.Window{Type: spec.WindowSession}, []string{"k"}, "n", "count()"), in,
			[]string{"window.gap"}},
		{"bad type", winOp(spec.Window{Type: "hopping"}, []string{"k"}, "n", "count()"), in,
			[]string{`"hopping" is not a window type`}},
	} {
		_, err := WindowSchema(tc.op, tc.in)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tc.name, err, w)
			}
		}
		if _, err := NewWindow(tc.op, tc.in); err == nil {
			t.Errorf("%s: NewWindow accepted what WindowSchema refused", tc.name)
		}
	}
}

// TestWindowOrderByKeyEncoding: results of one end go out in the order of
// their keys' encodings, also where keys share long prefixes or differ
// only past the 8 bytes after their common prefix that emit sorts by
// first.
func TestWindowOrderByKeyEncoding(t *testing.T) {
	type key struct {
		k  string
		k2 int64
	}
	for _, keys := range [][]key{
		// Strings of many lengths: the length in the encoding differs.
		{{"b", 0}, {"a", 0}, {"-", 0}, {"a\x00", 0}, {"abcdefgh1", 0}, {"abcdefgh0", 0}, {"abcdefg", 0},
			{"abcdefghijklmnop-2", 0}, {"abcdefghijklmnop-10", 0}, {"\xff", 0}, {"abcdefgh", 0}},
		// One length, a long shared prefix, and int64s after it.
		{{"shared-prefix-0001", 5}, {"shared-prefix-0001", -5}, {"shared-prefix-0002", 0}, {"shared-prefix-0001", 1 << 40},
			{"shared-prefix-0001", 0}, {"shared-prefix-0000", 7}, {"shared-prefix-0001", -1 << 40}, {"shared-prefix-0001", 4}},
		// The same string, so the int64 decides, past the first 8 bytes.
		{{"x", 3}, {"x", 1}, {"x", 2}, {"x", 256}, {"x", 257}, {"x", 1 << 56}, {"x", 1<<56 + 1}},
	} {
		op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}, []string{"k", "k2"}, "n", "count()")
		schema, err := arrowfmt.NewSchema(winFields[:3])
		if err != nil {
			t.Fatal(err)
		}
		h := newWinHarness(t, op, Stream{Schema: schema, TimeColumn: 0})
		var rows [][]any
		for i, k := range keys {
			rows = append(rows, []any{i % 10, k.k, int(k.k2)})
		}
		h.batch(rows...)
		h.watermark(9)
		sorted := slices.Clone(keys)
		slices.SortFunc(sorted, func(a, b key) int {
			return strings.Compare(string(arrowfmt.AppendKey(nil, a.k, a.k2)), string(arrowfmt.AppendKey(nil, b.k, b.k2)))
		})
		var want []string
		for _, k := range sorted {
			want = append(want, fmt.Sprintf("0 10 %s %d 1", k.k, k.k2))
		}
		h.expect(want...)
	}
}

// TestWindowRefiresInOrder: late rows in one batch re-fire windows of
// several ends, in no order of end or key; their results go out by end,
// then key, in one batch.
func TestWindowRefiresInOrder(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10), AllowedLateness: winMs(20)}, []string{"k"}, "n", "count()")
	h := newWinHarness(t, op, winStream(t))
	h.batch([]any{1, "b", 0, 1, nil}, []any{11, "a", 0, 1, nil}, []any{2, "c", 0, 1, nil}, []any{12, "d", 0, 1, nil})
	h.watermark(25)
	h.expect("0 10 b 1", "0 10 c 1", "10 20 a 1", "10 20 d 1")
	batches := h.out.batches
	h.batch([]any{13, "d", 0, 1, nil}, []any{3, "c", 0, 1, nil}, []any{14, "a", 0, 1, nil}, []any{4, "b", 0, 1, nil}, []any{15, "d", 0, 1, nil})
	h.expect("0 10 b 2", "0 10 c 2", "10 20 a 2", "10 20 d 3")
	if got := h.out.batches - batches; got != 1 {
		t.Errorf("the re-fires went out in %d batches, want 1", got)
	}
}

func TestWindowTumbling(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}, []string{"k"},
		"n", "count()", "sum_v", "sum(v)", "max_f", "max(f)")
	h := newWinHarness(t, op, winStream(t))
	h.batch(
		[]any{1, "b", 0, 1, 1.5},
		[]any{5, "a", 0, 2, 0.5},
		[]any{12, "a", 0, 3, 2.0},
		[]any{9, "b", 0, 4, 9.0},
		[]any{-1, "a", 0, 5, 1.0}, // [-10, 0): floor, not truncation
		[]any{-10, "a", 0, 6, 1.0},
	)
	h.expect()
	h.watermark(-2)
	h.expect()
	h.watermark(-1) // end-1 of [-10, 0)
	h.expect("-10 0 a 2 11 1")
	h.watermark(8)
	h.expect()
	h.watermark(9)
	h.expect("0 10 a 1 2 0.5", "0 10 b 2 5 9") // ordered by key within one end
	h.batch([]any{25, "c", 0, 7, nil}, []any{19, "c", 0, 8, 3.0})
	h.watermark(100)
	h.expect("10 20 a 1 3 2", "10 20 c 1 8 3", "20 30 c 1 7 null")
	if h.out.batches != 3 {
		t.Errorf("%d output batches, want one per watermark that fired: 3", h.out.batches)
	}
	if got := h.counters.WindowsFired.Load(); got != 6 {
		t.Errorf("WindowsFired = %d, want 6", got)
	}
	if err := h.op.Finish(); err != nil {
		t.Fatal(err)
	}
	h.expect()
}

func TestWindowSliding(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowSliding, Size: winMs(10), Slide: winMs(5)}, []string{"k"},
		"n", "count()", "vs", "sum(v)")
	h := newWinHarness(t, op, winStream(t))
	h.batch(
		[]any{3, "a", 0, 1, nil},  // [-5,5) [0,10)
		[]any{7, "a", 0, 2, nil},  // [0,10) [5,15)
		[]any{12, "a", 0, 4, nil}, // [5,15) [10,20)
		[]any{5, "b", 0, 8, nil},  // [0,10) [5,15)
	)
	h.watermark(4)
	h.expect("-5 5 a 1 1")
	h.watermark(14)
	h.expect("0 10 a 2 3", "0 10 b 1 8", "5 15 a 2 6", "5 15 b 1 8")
	h.watermark(19)
	h.expect("10 20 a 1 4")

	// A slide that does not divide the size: [k*3, k*3+7).
	op = winOp(spec.Window{Type: spec.WindowSliding, Size: winMs(7), Slide: winMs(3)}, []string{"k"}, "n", "count()")
	h = newWinHarness(t, op, winStream(t))
	h.batch([]any{6, "a", 0, 0, nil})
	h.watermark(100)
	h.expect("0 7 a 1", "3 10 a 1", "6 13 a 1")
}

func TestWindowSession(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowSession, Gap: winMs(10)}, []string{"k"},
		"n", "count()", "vs", "sum(v)", "first", "min(ts)", "last", "max(ts)")
	h := newWinHarness(t, op, winStream(t))
	h.batch(
		[]any{100, "a", 0, 1, nil},
		[]any{125, "a", 0, 2, nil}, // a separate session
		[]any{105, "a", 0, 4, nil}, // extends [100,110) to [100,115)
		[]any{100, "b", 0, 8, nil},
	)
	h.watermark(109)
	h.expect("100 110 b 1 8 100 100")
	// Out of order: [115,125) bridges [100,115) and [125,135): touching
	// counts (Flink's TimeWindow.intersects is inclusive).
	h.batch([]any{115, "a", 0, 16, nil})
	h.watermark(133)
	h.expect()
	h.watermark(134)
	h.expect("100 135 a 4 23 100 125")

	// Exactly gap apart merges; gap+1 apart does not.
	h.batch([]any{200, "c", 0, 1, nil}, []any{210, "c", 0, 1, nil}, []any{221, "c", 0, 1, nil})
	h.watermark(1000)
	h.expect("200 220 c 2 2 200 210", "221 231 c 1 1 221 221")

	// A row inside an existing session; several sessions merged by one row
	// within the same batch as the rows that made them.
	h.batch(
		[]any{2000, "d", 0, 1, nil},
		[]any{2020, "d", 0, 2, nil},
		[]any{2040, "d", 0, 4, nil},
		[]any{2000, "d", 0, 8, nil},  // inside [2000,2010)
		[]any{2030, "d", 0, 16, nil}, // bridges [2020,2030) and [2040,2050)
		[]any{2010, "d", 0, 32, nil}, // bridges [2000,2010) and [2020,2050)
	)
	h.watermark(3000)
	h.expect("2000 2050 d 6 63 2000 2040")
	if got := h.counters.WindowsRefire.Load(); got != 0 {
		t.Errorf("WindowsRefire = %d, want 0", got)
	}
}

func TestWindowMultiColumnKeyAndNulls(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}, []string{"k", "k2"},
		"n", "count()", "nv", "count(v)", "sv", "sum(v)", "lo", "min(v)", "hi", "max(f)", "av", "avg(v)", "af", "avg(f)", "sf", "sum(f)")
	h := newWinHarness(t, op, winStream(t))
	h.batch(
		[]any{1, "a", 1, 10, 1.5},
		[]any{2, "a", 2, nil, nil},
		[]any{3, "a", 1, nil, 2.5},
		[]any{4, nil, 1, 3, nil},
		[]any{5, "a", nil, 5, -1.0},
		[]any{6, nil, nil, 7, 2.0},
		[]any{7, "a", 1, 4, nil},
		// Strings are not confused across column boundaries: ("a", 1) vs
		// ("a1", ...) and a null vs an empty string.
		[]any{8, "", 1, 1, nil},
	)
	h.watermark(9)
	// Keys order by their encoding: null first, then by value.
	h.expect(
		"0 10 null null 1 1 7 7 2 7 2 2",
		"0 10 null 1 1 1 3 3 null 3 null null",
		`0 10 "" 1 1 1 1 1 null 1 null null`,
		"0 10 a null 1 1 5 5 -1 5 -1 -1",
		"0 10 a 1 3 2 14 4 2.5 7 2 4",
		"0 10 a 2 1 0 null null null null null null",
	)
}

func TestWindowAllowedLateness(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10), AllowedLateness: winMs(20), LateOutput: "late"}, []string{"k"},
		"n", "count()", "vs", "sum(v)")
	h := newWinHarness(t, op, winStream(t))
	h.batch([]any{1, "a", 0, 1, nil}, []any{2, "b", 0, 2, nil})
	h.watermark(9)
	h.expect("0 10 a 1 1", "0 10 b 1 2")
	// Late but within allowedLateness (cleanup at 9+20 = 29): the window
	// fires again with the updated result, once for the whole batch.
	h.batch([]any{3, "a", 0, 4, nil}, []any{15, "a", 0, 100, nil}, []any{4, "a", 0, 8, nil})
	h.expect("0 10 a 3 13")
	h.watermark(28)
	h.expect("10 20 a 1 100")
	// A window that never had rows, late but within lateness: fires at once
	// (a first firing, not a re-fire).
	h.batch([]any{5, "c", 0, 16, nil})
	h.expect("0 10 c 1 16")
	if got, want := h.counters.WindowsRefire.Load(), int64(1); got != want {
		t.Errorf("WindowsRefire = %d, want %d", got, want)
	}
	if got, want := h.counters.WindowsFired.Load(), int64(5); got != want {
		t.Errorf("WindowsFired = %d, want %d", got, want)
	}
	// At 29 the window is cleaned up: rows for it are late now.
	h.watermark(29)
	h.expect()
	// [20,30) is due at 29 already: its first row fires it at once.
	h.batch([]any{6, "a", 0, 32, nil}, []any{25, "a", 0, 64, nil}, []any{9, "d", 0, 1, nil})
	h.expect("20 30 a 1 64")
	if got := h.late.take(); !slices.Equal(got, []string{"6 a 0 32 null", "9 d 0 1 null"}) {
		t.Errorf("late output %q", got)
	}
	if got := h.counters.LateSide.Load(); got != 2 {
		t.Errorf("LateSide = %d, want 2", got)
	}
	h.watermark(29 + 10)
	h.expect()
	if err := h.op.Finish(); err != nil {
		t.Fatal(err)
	}
	h.expect()
}

func TestWindowLateDropped(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}, []string{"k"}, "n", "count()")
	h := newWinHarness(t, op, winStream(t))
	h.batch([]any{1, "a", 0, 0, nil})
	h.watermark(9)
	h.expect("0 10 a 1")
	// Without a late output, late rows and rows without event time are
	// counted and dropped; the rest of the batch is processed.
	h.batch([]any{5, "a", 0, 0, nil}, []any{nil, "a", 0, 0, nil}, []any{10, "a", 0, 0, nil})
	h.watermark(19)
	h.expect("10 20 a 1")
	if got := h.counters.LateDropped.Load(); got != 2 {
		t.Errorf("LateDropped = %d, want 2", got)
	}

	// With a late output, a batch that is entirely late goes there as is.
	op = winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10), LateOutput: "late"}, []string{"k"}, "n", "count()")
	h = newWinHarness(t, op, winStream(t))
	h.watermark(100)
	h.batch([]any{5, "a", 0, 1, 1.0}, []any{nil, "b", 0, 2, nil})
	if got := h.late.take(); !slices.Equal(got, []string{"5 a 0 1 1", "null b 0 2 null"}) {
		t.Errorf("late output %q", got)
	}
	if h.counters.LateSide.Load() != 2 || h.counters.LateDropped.Load() != 0 {
		t.Errorf("LateSide %d LateDropped %d, want 2 and 0", h.counters.LateSide.Load(), h.counters.LateDropped.Load())
	}
}

func TestWindowSessionLateness(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowSession, Gap: winMs(10), AllowedLateness: winMs(50), LateOutput: "late"}, []string{"k"},
		"n", "count()", "vs", "sum(v)")
	h := newWinHarness(t, op, winStream(t))
	h.batch([]any{100, "a", 0, 1, nil})
	h.watermark(109)
	h.expect("100 110 a 1 1")
	// Inside the fired session: re-fires with the same bounds.
	h.batch([]any{100, "a", 0, 2, nil})
	h.expect("100 110 a 2 3")
	// Extends the fired session beyond the watermark: the merged session
	// fires when the watermark reaches its new end, as a re-fire.
	h.batch([]any{108, "a", 0, 4, nil})
	h.expect()
	h.watermark(116)
	h.expect()
	h.watermark(117)
	h.expect("100 118 a 3 7")
	// A row whose own window [50,60) is late (cleanup 59+50 <= 117) and
	// does not touch the session: late output.
	h.batch([]any{50, "a", 0, 8, nil})
	h.expect()
	if got := h.late.take(); !slices.Equal(got, []string{"50 a 0 8 null"}) {
		t.Errorf("late output %q", got)
	}
	// A row whose own window [90,100) is late (cleanup 149 <= 160) but
	// that touches the live session joins it, as in Flink: lateness is
	// judged on the merged window, which is due, so it fires at once.
	h.watermark(160)
	h.batch([]any{90, "a", 0, 16, nil})
	h.expect("90 118 a 4 23")
	if got, want := h.counters.WindowsRefire.Load(), int64(3); got != want {
		t.Errorf("WindowsRefire = %d, want %d", got, want)
	}
	// Cleanup at 117+50: the session is gone and a row for it is late.
	h.watermark(167)
	h.batch([]any{100, "a", 0, 32, nil})
	h.expect()
	if got := h.late.take(); !slices.Equal(got, []string{"100 a 0 32 null"}) {
		t.Errorf("late output %q, want the row after cleanup", got)
	}
}

// TestWindowSessionMergeFired merges two fired sessions, one of which got
// a row earlier in the same batch: the merged session re-fires once at the
// end of the batch.
func TestWindowSessionMergeFired(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowSession, Gap: winMs(10), AllowedLateness: winMs(100)}, []string{"k"},
		"n", "count()", "vs", "sum(v)")
	h := newWinHarness(t, op, winStream(t))
	h.batch([]any{100, "a", 0, 1, nil}, []any{115, "a", 0, 2, nil}, []any{115, "b", 0, 16, nil})
	h.watermark(130)
	h.expect("100 110 a 1 1", "115 125 a 1 2", "115 125 b 1 16")
	h.batch(
		[]any{100, "a", 0, 4, nil}, // inside [100,110): queued to re-fire
		[]any{110, "a", 0, 8, nil}, // [110,120) bridges both sessions
		// A new session, due at once, merged with a fired one: the result
		// is a re-fire although the surviving window never fired.
		[]any{100, "b", 0, 32, nil},
		[]any{110, "b", 0, 64, nil},
	)
	h.expect("100 125 a 4 15", "100 125 b 3 112")
	h.watermark(1000)
	h.expect()
	if got, want := h.counters.WindowsRefire.Load(), int64(2); got != want {
		t.Errorf("WindowsRefire = %d, want %d", got, want)
	}
}

func TestWindowKeyGroupRange(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}, []string{"k"}, "n", "count()")
	in := winStream(t)
	o, err := NewWindow(op, in)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	kg := arrowfmt.KeyGroup(arrowfmt.HashKeyValues("a"), 128)
	ctx := &task.Context{MaxParallelism: 128, KeyGroupStart: kg + 1, KeyGroupEnd: kg + 2, Mem: mem, Out: &winCollector{}, Counters: &task.Counters{}}
	if kg == 127 {
		ctx.KeyGroupStart, ctx.KeyGroupEnd = 0, 1
	}
	if err := o.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	b := winBatch(t, mem, in.Schema, []any{1, "a", 0, 0, nil})
	defer b.Release()
	if err := o.ProcessBatch(b); err == nil || !strings.Contains(err.Error(), "not partitioned") {
		t.Errorf("want a key group error, got %v", err)
	}
}

func TestWindowFinish(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowSession, Gap: winMs(10)}, []string{"k"}, "n", "count()")
	h := newWinHarness(t, op, winStream(t))
	h.batch([]any{100, "a", 0, 0, nil}, []any{50, "b", 0, 0, nil})
	h.watermark(70)
	h.expect("50 60 b 1")
	if err := h.op.Finish(); err != nil {
		t.Fatal(err)
	}
	h.expect("100 110 a 1")
	// A window result stream (time offset -1) as input: a window_end of 10
	// is event time 9.
	in := winStream(t)
	in.TimeOffset = -1
	op = winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}, []string{"k"}, "n", "count()")
	h = newWinHarness(t, op, in)
	h.batch([]any{10, "a", 0, 0, nil}, []any{11, "a", 0, 0, nil})
	h.watermark(task.MaxWatermark)
	h.expect("0 10 a 1", "10 20 a 1")
	if err := h.op.Finish(); err != nil {
		t.Fatal(err)
	}
	h.expect()
}

// winEvent is one generated input row.
type winEvent struct {
	ts    int64
	k     string
	k2    int64
	v     *int64
	f     float64
	fnull bool
}

// TestWindowRandom feeds out-of-order rows with bounded disorder in random
// batches, with the watermark max_ts - bound - 1 after each, and compares
// everything emitted with a recomputation that groups rows by window and
// key in plain maps.
func TestWindowRandom(t *testing.T) {
	for _, w := range []spec.Window{
		{Type: spec.WindowTumbling, Size: winMs(100)},
		{Type: spec.WindowTumbling, Size: winMs(7)},
		{Type: spec.WindowSliding, Size: winMs(100), Slide: winMs(25)},
		{Type: spec.WindowSliding, Size: winMs(50), Slide: winMs(15)},
		{Type: spec.WindowSession, Gap: winMs(30)},
		{Type: spec.WindowSession, Gap: winMs(5)},
	} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/%s/%d", w.Type, w.Size+w.Slide+w.Gap, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 99))
				events := winGenerate(rng, 3000, winBound)
				h := runWinRandom(t, w, rng, events, 200, 10)
				if h.counters.LateDropped.Load()+h.counters.LateSide.Load()+h.counters.WindowsRefire.Load() != 0 {
					t.Errorf("late or re-fired with bounded disorder")
				}
			})
		}
	}
}

// winBound is the disorder of TestWindowRandom's events, and what its
// watermark allows for.
const winBound = 40

// runWinRandom feeds events to a window w keyed by k and k2, in random
// batches of up to maxBatch rows with the watermark max_ts - winBound - 1
// after each, then the last watermark, and checks that what it emitted is
// winNaive's recomputation, of at least minWindows windows.
func runWinRandom(t *testing.T, w spec.Window, rng *rand.Rand, events []winEvent, maxBatch, minWindows int) *winHarness {
	t.Helper()
	h := newWinHarness(t, winOp(w, []string{"k", "k2"}, winRandomAggs...), winStream(t))
	maxTs := int64(-1 << 62)
	for i := 0; i < len(events); {
		n := 1 + rng.IntN(maxBatch)
		batch := events[i:min(i+n, len(events))]
		i += len(batch)
		h.batch(winEventRows(batch)...)
		for _, e := range batch {
			maxTs = max(maxTs, e.ts)
		}
		h.watermark(maxTs - winBound - 1)
	}
	h.watermark(task.MaxWatermark)
	if err := h.op.Finish(); err != nil {
		t.Fatal(err)
	}
	got := h.out.take()
	want := winNaive(w, events, nil)
	if len(want) < minWindows {
		t.Fatalf("only %d windows", len(want))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d rows, want %d\n%s", len(got), len(want), winDiff(got, want))
	}
	return h
}

// TestWindowRandomManyKeys is TestWindowRandom with about 2,500 keys and
// windows long enough that a watermark fires hundreds of them at once,
// and each period's end drops as many keys: the results' batches and the
// cleanup go through their keys in blocks (warmBlock), and a mistake at a
// block's edge shows as a wrong or missing row.
func TestWindowRandomManyKeys(t *testing.T) {
	for _, w := range []spec.Window{
		{Type: spec.WindowTumbling, Size: winMs(5000)},
		{Type: spec.WindowSliding, Size: winMs(5000), Slide: winMs(2000)},
		{Type: spec.WindowSession, Gap: winMs(3000)},
	} {
		t.Run(string(w.Type), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 99))
			n := 30000
			if winTestStore {
				n = 15000 // on pebble (TestWindowStore), under -race, half as many
			}
			events := winGenerate(rng, n, winBound)
			for i := range events {
				events[i].k2 = rng.Int64N(500)
			}
			h := runWinRandom(t, w, rng, events, 2000, 5000)
			if n := windowsLeft(h.op); n != 0 {
				t.Errorf("%d keys left after every window fired", n)
			}
		})
	}
}

// TestWindowRandomLateness is TestWindowRandom with more disorder than the
// watermark allows for and an allowed lateness: rows arrive late, within
// lateness (re-firing windows) or beyond (late output). The last result of
// every window must equal the recomputation over the rows the window
// accepted, and the late output must hold exactly the rows no window took.
func TestWindowRandomLateness(t *testing.T) {
	for _, w := range []spec.Window{
		{Type: spec.WindowTumbling, Size: winMs(50), AllowedLateness: winMs(30), LateOutput: "late"},
		{Type: spec.WindowSliding, Size: winMs(60), Slide: winMs(20), AllowedLateness: winMs(25), LateOutput: "late"},
	} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/%d", w.Type, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				const bound, disorder = 10, 120
				events := winGenerate(rng, 3000, disorder)
				op := winOp(w, []string{"k", "k2"}, winRandomAggs...)
				h := newWinHarness(t, op, winStream(t))
				size, slide, lateness := int64(w.Size.D()/time.Millisecond), int64(w.Slide.D()/time.Millisecond), int64(w.AllowedLateness.D()/time.Millisecond)
				if slide == 0 {
					slide = size
				}
				wm, maxTs := task.MinWatermark, int64(-1<<62)
				// accepted[i][start] says whether event i went into its
				// window starting at start: Flink's rule, cleanup > wm.
				accepted := make([]map[int64]bool, len(events))
				var wantLate []string
				for i := 0; i < len(events); {
					n := 1 + rng.IntN(100)
					batch := events[i:min(i+n, len(events))]
					for j, e := range batch {
						accepted[i+j] = map[int64]bool{}
						took := false
						for _, start := range winStarts(e.ts, size, slide) {
							if start+size-1+lateness > wm {
								accepted[i+j][start] = true
								took = true
							}
						}
						if !took {
							wantLate = append(wantLate, winEventString(e))
						}
					}
					i += len(batch)
					h.batch(winEventRows(batch)...)
					for _, e := range batch {
						maxTs = max(maxTs, e.ts)
					}
					wm = max(wm, maxTs-bound-1)
					h.watermark(wm)
				}
				h.watermark(task.MaxWatermark)
				// The last result of each (window, key).
				last := map[string]string{}
				var order []string
				for _, row := range h.out.take() {
					f := strings.Fields(row)
					id := strings.Join(f[:4], " ")
					if _, ok := last[id]; !ok {
						order = append(order, id)
					}
					last[id] = row
				}
				got := make([]string, 0, len(last))
				for _, id := range order {
					got = append(got, last[id])
				}
				slices.SortFunc(got, winCompareRows)
				want := winNaive(w, events, accepted)
				slices.SortFunc(want, winCompareRows)
				if !slices.Equal(got, want) {
					t.Fatalf("got %d windows, want %d\n%s", len(got), len(want), winDiff(got, want))
				}
				if gotLate := h.late.take(); !slices.Equal(gotLate, wantLate) {
					t.Fatalf("late output: got %d rows, want %d\n%s", len(gotLate), len(wantLate), winDiff(gotLate, wantLate))
				}
				if len(wantLate) == 0 || h.counters.WindowsRefire.Load() == 0 {
					t.Errorf("the test made %d late rows and %d re-fires; want some of each", len(wantLate), h.counters.WindowsRefire.Load())
				}
			})
		}
	}
}

var winRandomAggs = []string{
	"n", "count()", "nv", "count(v)", "sv", "sum(v)", "lo", "min(v)", "hi", "max(v)",
	"av", "avg(v)", "sf", "sum(f)", "mf", "max(f)", "af", "avg(f)", "first", "min(ts)",
}

// winGenerate returns n events whose times trend upwards, each at most
// disorder behind the latest before it, over a few keys (with nulls).
func winGenerate(rng *rand.Rand, n int, disorder int64) []winEvent {
	events := make([]winEvent, n)
	var clock, maxTs int64 = -500, -1 << 62 // start below zero: floor matters
	keys := []string{"a", "b", "c", "ab", ""}
	for i := range events {
		clock += int64(rng.IntN(4))
		ts := clock - int64(rng.IntN(int(disorder)+1))
		ts = max(ts, maxTs-disorder)
		maxTs = max(maxTs, ts)
		e := winEvent{ts: ts, k: keys[rng.IntN(len(keys))], k2: int64(rng.IntN(3)), f: float64(rng.IntN(100) - 50)}
		if rng.IntN(10) > 0 {
			v := int64(rng.IntN(1000) - 300)
			e.v = &v
		}
		e.fnull = rng.IntN(8) == 0
		events[i] = e
	}
	return events
}

func winEventRows(events []winEvent) [][]any {
	rows := make([][]any, len(events))
	for i, e := range events {
		var v, f, k any = nil, e.f, e.k
		if e.v != nil {
			v = int(*e.v)
		}
		if e.fnull {
			f = nil
		}
		if e.k == "" && e.k2 == 2 {
			k = nil // some null keys
		}
		rows[i] = []any{int(e.ts), k, int(e.k2), v, f}
	}
	return rows
}

// winNaive recomputes a window's output: group events by window and key in
// maps, aggregate, and order by (window_end, key encoding, window_start).
// With accepted, an event goes only into the windows it lists (tumbling
// and sliding).
func winNaive(w spec.Window, events []winEvent, accepted []map[int64]bool) []string {
	type key struct {
		k    string
		null bool
		k2   int64
	}
	type win struct {
		key        key
		start, end int64
	}
	size, slide, gap := int64(w.Size.D()/time.Millisecond), int64(w.Slide.D()/time.Millisecond), int64(w.Gap.D()/time.Millisecond)
	byWin := map[win][]winEvent{}
	keyOf := func(e winEvent) key { return key{k: e.k, null: e.k == "" && e.k2 == 2, k2: e.k2} }
	switch w.Type {
	case spec.WindowTumbling, spec.WindowSliding:
		if slide == 0 {
			slide = size
		}
		for i, e := range events {
			for _, start := range winStarts(e.ts, size, slide) {
				if accepted == nil || accepted[i][start] {
					id := win{keyOf(e), start, start + size}
					byWin[id] = append(byWin[id], e)
				}
			}
		}
	case spec.WindowSession:
		// Sort each key's events by time; a gap larger than gap ends a
		// session.
		perKey := map[key][]winEvent{}
		for _, e := range events {
			perKey[keyOf(e)] = append(perKey[keyOf(e)], e)
		}
		for k, es := range perKey {
			slices.SortStableFunc(es, func(a, b winEvent) int { return cmp.Compare(a.ts, b.ts) })
			var cur []winEvent
			flush := func() {
				if len(cur) > 0 {
					id := win{k, cur[0].ts, cur[len(cur)-1].ts + gap}
					byWin[id] = cur
				}
				cur = nil
			}
			for _, e := range es {
				if len(cur) > 0 && e.ts > cur[len(cur)-1].ts+gap {
					flush()
				}
				cur = append(cur, e)
			}
			flush()
		}
	}
	type result struct {
		end   int64
		enc   string
		start int64
		row   string
	}
	var results []result
	for id, es := range byWin {
		var nv, sv, lo, hi, first int64
		var nf int64
		var sf, mf float64
		lo, hi, first = 1<<63-1, -1<<63, 1<<63-1
		for _, e := range es {
			first = min(first, e.ts)
			if e.v != nil {
				nv++
				sv += *e.v
				lo, hi = min(lo, *e.v), max(hi, *e.v)
			}
			if !e.fnull {
				if nf == 0 || e.f > mf {
					mf = e.f
				}
				nf++
				sf += e.f
			}
		}
		null := func(ok bool, s string) string {
			if !ok {
				return "null"
			}
			return s
		}
		kstr := id.key.k
		if kstr == "" {
			kstr = `""`
		}
		var enc []byte
		if id.key.null {
			kstr = "null"
			enc = arrowfmt.AppendKey(nil, nil, id.key.k2)
		} else {
			enc = arrowfmt.AppendKey(nil, id.key.k, id.key.k2)
		}
		i := strconv.FormatInt
		g := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
		row := strings.Join([]string{
			i(id.start, 10), i(id.end, 10), kstr, i(id.key.k2, 10),
			i(int64(len(es)), 10), i(nv, 10),
			null(nv > 0, i(sv, 10)), null(nv > 0, i(lo, 10)), null(nv > 0, i(hi, 10)),
			null(nv > 0, g(float64(sv)/float64(nv))),
			null(nf > 0, g(sf)), null(nf > 0, g(mf)), null(nf > 0, g(sf/float64(nf))),
			i(first, 10),
		}, " ")
		results = append(results, result{id.end, string(enc), id.start, row})
	}
	slices.SortFunc(results, func(a, b result) int {
		return cmp.Or(cmp.Compare(a.end, b.end), strings.Compare(a.enc, b.enc), cmp.Compare(a.start, b.start))
	})
	rows := make([]string, len(results))
	for i, r := range results {
		rows[i] = r.row
	}
	return rows
}

func winCompareRows(a, b string) int { return strings.Compare(a, b) }

// winStarts returns the start of every window [k*slide, k*slide+size)
// that contains ts, found by trying every k from ts-size on.
func winStarts(ts, size, slide int64) []int64 {
	k := (ts - size) / slide
	if (ts-size)%slide != 0 && ts-size < 0 {
		k-- // round towards minus infinity
	}
	var starts []int64
	for ; k*slide <= ts; k++ {
		if start := k * slide; start <= ts && ts < start+size {
			starts = append(starts, start)
		}
	}
	return starts
}

// winEventString formats an event as winRows formats its input row.
func winEventString(e winEvent) string {
	row := winEventRows([]winEvent{e})[0]
	parts := make([]string, len(row))
	for i, v := range row {
		switch v := v.(type) {
		case nil:
			parts[i] = "null"
		case string:
			parts[i] = v
			if v == "" {
				parts[i] = `""`
			}
		case int:
			parts[i] = strconv.Itoa(v)
		case float64:
			parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	return strings.Join(parts, " ")
}

func winDiff(got, want []string) string {
	var sb strings.Builder
	gs, ws := map[string]int{}, map[string]int{}
	for _, g := range got {
		gs[g]++
	}
	for _, w := range want {
		ws[w]++
	}
	n := 0
	for _, g := range got {
		if ws[g] == 0 && n < 10 {
			fmt.Fprintf(&sb, "unexpected: %s\n", g)
			n++
		}
	}
	for _, w := range want {
		if gs[w] == 0 && n < 20 {
			fmt.Fprintf(&sb, "missing:    %s\n", w)
			n++
		}
	}
	if n == 0 {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				fmt.Fprintf(&sb, "first difference in order at row %d:\n got %s\nwant %s\n", i, got[i], want[i])
				break
			}
		}
	}
	return sb.String()
}

// BenchmarkWindowTumbling aggregates 1M rows over 1000 int64 keys into
// 1-second tumbling windows, in batches of 8192 rows with a watermark after
// each, and reports rows per second.
func BenchmarkWindowTumbling(b *testing.B) {
	const rows, keys, batchRows = 1 << 20, 1000, 8192
	schema := benchBidSchema(b)
	in := Stream{Schema: schema, TimeColumn: 0}
	mem := memory.NewGoAllocator()
	rng := rand.New(rand.NewPCG(1, 1))
	var batches []arrow.RecordBatch
	var wms []int64
	for i := 0; i < rows; i += batchRows {
		var maxTs int64
		batches = append(batches, benchBids(mem, schema, batchRows, func(j int) (ts, auction, price int64) {
			t := int64(i+j)/10 - int64(rng.IntN(100)) // 10 rows per ms, up to 100ms out of order
			maxTs = max(maxTs, t)
			return t, int64(rng.IntN(keys)), int64(rng.IntN(10000))
		}))
		wms = append(wms, maxTs-100-1)
	}
	defer func() {
		for _, rec := range batches {
			rec.Release()
		}
	}()
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(1000)}, []string{"auction"},
		"bids", "count()", "total", "sum(price)", "top", "max(price)")
	b.ResetTimer()
	for range b.N {
		o, err := NewWindow(op, in)
		if err != nil {
			b.Fatal(err)
		}
		if err := o.Open(&task.Context{MaxParallelism: 128, Mem: mem, Out: winDiscard{}, Counters: &task.Counters{}}); err != nil {
			b.Fatal(err)
		}
		for i, rec := range batches {
			if err := o.ProcessBatch(rec); err != nil {
				b.Fatal(err)
			}
			if err := o.ProcessWatermark(wms[i]); err != nil {
				b.Fatal(err)
			}
		}
		if err := o.Finish(); err != nil {
			b.Fatal(err)
		}
		o.Close()
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkWindowSnapshot captures the state of a window operator
// holding one open window for each of 200,000 and of 2,000,000 keys (the
// keys and their accumulators then fit a cache, and do not): a base of
// every key, and a delta after a batch that changed a fifth of the keys,
// drawn at random. It reports state rows per second of the capture.
func BenchmarkWindowSnapshot(b *testing.B) {
	for _, keys := range []int{200_000, 2_000_000} {
		for _, full := range []bool{true, false} {
			name := fmt.Sprintf("keys=%d/delta", keys)
			if full {
				name = fmt.Sprintf("keys=%d/base", keys)
			}
			b.Run(name, func(b *testing.B) { benchWindowSnapshot(b, keys, full) })
		}
	}
}

func benchWindowSnapshot(b *testing.B, keys int, full bool) {
	schema := benchBidSchema(b)
	mem := memory.NewGoAllocator()
	rec := benchBids(mem, schema, keys, func(i int) (ts, auction, price int64) { return int64(i % 1000), int64(i), int64(i % 10000) })
	defer rec.Release()
	// A fifth of the keys, at random (the same draws each time).
	rng := rand.New(rand.NewPCG(1, 2))
	changes := benchBids(mem, schema, keys/5, func(i int) (ts, auction, price int64) {
		return int64(i % 1000), rng.Int64N(int64(keys)), int64(i % 10000)
	})
	defer changes.Release()

	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(3_600_000)}, []string{"auction"},
		"bids", "count()", "total", "sum(price)", "top", "max(price)")
	o, err := NewWindow(op, Stream{Schema: schema, TimeColumn: 0})
	if err != nil {
		b.Fatal(err)
	}
	if err := o.Open(&task.Context{MaxParallelism: 128, Mem: mem, Out: winDiscard{}, Counters: &task.Counters{}}); err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	if err := o.ProcessBatch(rec); err != nil {
		b.Fatal(err)
	}
	st := o.(task.Stateful).State()
	snapshot := func(full bool) int {
		batches, err := st.Snapshot(mem, full)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, s := range batches {
			n += int(s.NumRows())
			s.Release()
		}
		return n
	}
	snapshot(true) // changes are listed from the first snapshot on
	rows := 0
	b.ResetTimer()
	for range b.N {
		if !full {
			b.StopTimer()
			if err := o.ProcessBatch(changes); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		n := snapshot(full)
		if full && n != keys || !full && (n == 0 || n > keys/5) {
			b.Fatalf("%d state rows of %d keys", n, keys)
		}
		rows += n
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// benchBidSchema is the schema of the window benchmarks' input: bids of
// (ts, auction, price).
func benchBidSchema(b *testing.B) *arrow.Schema {
	schema, err := arrowfmt.NewSchema([]arrowfmt.Field{
		{Name: "ts", Type: arrowfmt.TimestampMs},
		{Name: "auction", Type: arrowfmt.Int64},
		{Name: "price", Type: arrowfmt.Int64},
	})
	if err != nil {
		b.Fatal(err)
	}
	return schema
}

// benchBids returns a batch of n bids of schema (benchBidSchema), row i
// being bid(i).
func benchBids(mem memory.Allocator, schema *arrow.Schema, n int, bid func(i int) (ts, auction, price int64)) arrow.RecordBatch {
	ts := array.NewTimestampBuilder(mem, arrow.FixedWidthTypes.Timestamp_ms.(*arrow.TimestampType))
	k := array.NewInt64Builder(mem)
	p := array.NewInt64Builder(mem)
	for i := range n {
		t, a, pr := bid(i)
		ts.Append(arrow.Timestamp(t))
		k.Append(a)
		p.Append(pr)
	}
	cols := []arrow.Array{ts.NewArray(), k.NewArray(), p.NewArray()}
	rec := array.NewRecordBatch(schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	ts.Release()
	k.Release()
	p.Release()
	return rec
}

type winDiscard struct{}

func (winDiscard) Emit(arrow.RecordBatch) error { return nil }

// BenchmarkWindowStateMemory keeps one open window of a keyed count for
// each of 1M int64 keys (fed in batches of 8192 rows, a row per key) and
// reports the memory the state holds per key: live Go heap after a
// collection (heap-B/key), memory the operator keeps outside the Go heap
// (offheap-B/key), and the peak of the Go heap's goal while the keys came
// (goal-B/key: what the heap may grow to before the garbage collector
// runs, so what the process needs on top of the rest), and the growth of
// the process's peak resident memory (VmHWM, reset before the operator
// is made) while the keys came (keys-peak-B/key). Then the period ends
// and every window fires: peak-B/key is the growth of the process's
// peak resident memory over the whole run, keys and firing, which is
// what an end-to-end run's RSS per key reached measures.
//
// WINDOW_MEM_KEYS sets another number of keys.
func BenchmarkWindowStateMemory(b *testing.B) {
	const batchRows = 8192
	keys := 1_000_000
	if v := os.Getenv("WINDOW_MEM_KEYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("WINDOW_MEM_KEYS=%q: want a positive number of keys", v)
		}
		keys = n
	}
	schema := benchBidSchema(b)
	mem := memory.NewGoAllocator()
	// Each batch is made just before it goes in and dropped after, so
	// that the heap holds little besides the operator's: with every
	// batch held, the garbage of the results let the heap grow to twice
	// them while the windows fired.
	batch := func(i int) arrow.RecordBatch {
		return benchBids(mem, schema, min(batchRows, keys-i), func(j int) (ts, auction, price int64) {
			return int64(i + j), int64((i + j) * 7919 % keys), 1
		})
	}
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(86_400_000)}, []string{"auction"}, "bids", "count()")
	var heap, off, goal, keysPeak, peak float64
	for range b.N {
		probe := startMemProbe(b)
		o, err := NewWindow(op, Stream{Schema: schema, TimeColumn: 0})
		if err != nil {
			b.Fatal(err)
		}
		if err := o.Open(&task.Context{MaxParallelism: 128, KeyGroupStart: 0, KeyGroupEnd: 128, Mem: mem, Out: winDiscard{}, Counters: &task.Counters{}}); err != nil {
			b.Fatal(err)
		}
		var peakGoal uint64
		for i := 0; i < keys; i += batchRows {
			rec := batch(i)
			err := o.ProcessBatch(rec)
			rec.Release()
			if err != nil {
				b.Fatal(err)
			}
			if i%(16*batchRows) == 0 {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				peakGoal = max(peakGoal, ms.NextGC)
			}
		}
		heap = float64(probe.heapGrowth()) / float64(keys)
		goal = float64(peakGoal-probe.heap) / float64(keys)
		off = float64(offHeapBytes(o)) / float64(keys)
		keysPeak = float64(probe.rssGrowth(b)) / float64(keys)
		if err := o.ProcessWatermark(task.MaxWatermark); err != nil {
			b.Fatal(err)
		}
		peak = float64(probe.rssGrowth(b)) / float64(keys)
		o.Close()
	}
	b.ReportMetric(keysPeak, "keys-peak-B/key")
	b.ReportMetric(peak, "peak-B/key")
	b.ReportMetric(heap, "heap-B/key")
	b.ReportMetric(off, "offheap-B/key")
	b.ReportMetric(goal, "goal-B/key")
}

// memProbe measures how much memory a benchmark's state takes: the growth
// of the live Go heap and of the process's largest RSS since it started.
type memProbe struct {
	heap uint64 // live heap at the start
	rss  int64  // the largest RSS at the start (reset then)
}

// startMemProbe collects the garbage, gives free memory back to the
// system and resets the largest RSS, and notes where they start.
func startMemProbe(b *testing.B) *memProbe {
	b.Helper()
	var ms runtime.MemStats
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&ms)
	if err := testenv.ResetPeakRSS(0); err != nil {
		b.Fatal(err)
	}
	rss, err := testenv.ProcessPeakRSS(0)
	if err != nil {
		b.Fatal(err)
	}
	return &memProbe{heap: ms.HeapAlloc, rss: rss}
}

// heapGrowth collects the garbage and returns how much the live heap grew.
func (p *memProbe) heapGrowth() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc - p.heap
}

// rssGrowth returns how much the largest RSS grew.
func (p *memProbe) rssGrowth(b *testing.B) int64 {
	b.Helper()
	rss, err := testenv.ProcessPeakRSS(0)
	if err != nil {
		b.Fatal(err)
	}
	return rss - p.rss
}

// offHeapBytes is the memory operator o holds outside the Go heap.
func offHeapBytes(o task.Operator) int { return o.(*windowOperator).arena.Mapped() }

// TestSortFirings checks the radix sort of firings against a comparison
// sort, with ends that are negative and positive, few or one; prefixes
// that share bytes, tie, or differ only in their last byte; and parts
// shorter and longer than a radix pass is for. win tells firings apart
// where end and prefix tie.
func TestSortFirings(t *testing.T) {
	byWin := func(a, b windowFiring) int { return cmp.Compare(a.win, b.win) }
	full := func(a, b windowFiring) int {
		if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		return byWin(a, b)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	prefixes := []func() uint64{
		func() uint64 { return rng.Uint64() },
		func() uint64 { return rng.Uint64N(1<<24) << 40 },      // an int64 key's last 3 bytes
		func() uint64 { return 0xabcdef<<40 | rng.Uint64N(4) }, // differ in the last byte
		func() uint64 { return rng.Uint64N(3) << 56 },          // many ties
		func() uint64 { return 0 },                             // all tie
	}
	for _, n := range []int{0, 1, 2, radixMin - 1, radixMin, radixMin + 1, 1000, 100_000} {
		for pi, prefix := range prefixes {
			fs := make([]windowFiring, n)
			for i := range fs {
				fs[i] = windowFiring{prefix: prefix(), win: uint32(i)}
			}
			want := slices.Clone(fs)
			slices.SortFunc(want, full)
			sortFirings(fs, byWin)
			if !slices.Equal(fs, want) {
				t.Fatalf("%d firings, prefixes %d: the radix sort's order differs from a comparison sort's", n, pi)
			}
		}
	}
}

// BenchmarkSortFirings sorts a tumbling period's end at 1M keys (int64
// keys of up to 10M, 3 bytes of prefix), by radix and by comparison.
func BenchmarkSortFirings(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	fs := make([]windowFiring, 1_000_000)
	for i := range fs {
		fs[i] = windowFiring{prefix: rng.Uint64N(10_000_000) << 40, win: uint32(i)}
	}
	byWin := func(a, b windowFiring) int { return cmp.Compare(a.win, b.win) }
	work := make([]windowFiring, len(fs))
	for _, c := range []struct {
		name string
		sort func([]windowFiring)
	}{
		{"radix", func(fs []windowFiring) { sortFirings(fs, byWin) }},
		{"compare", func(fs []windowFiring) {
			slices.SortFunc(fs, func(a, b windowFiring) int {
				if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
					return c
				}
				return byWin(a, b)
			})
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				copy(work, fs)
				c.sort(work)
			}
			b.ReportMetric(float64(len(fs))*float64(b.N)/b.Elapsed().Seconds(), "firings/s")
		})
	}
}

// BenchmarkWindowRestore restores a base of keys int64 keys (one window
// each, a count), then a delta in which every key changed, into a fresh
// window operator as the runtime does (restoreFile), and reports each
// restore's rows per second.
//
//	go test -run '^$' -bench WindowRestore -benchtime 3x ./functions/builtin/
func BenchmarkWindowRestore(b *testing.B) {
	for _, keys := range []int{200_000, 2_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			schema := benchBidSchema(b)
			mem := memory.NewGoAllocator()
			rec := benchBids(mem, schema, keys, func(i int) (ts, auction, price int64) { return int64(i % 1000), int64(i) * 7919, int64(i % 10000) })
			defer rec.Release()
			src := openCount(b, schema, "auction", mem)
			defer src.Close()
			base, delta := countedSnapshot(b, src, rec, mem, true), countedSnapshot(b, src, rec, mem, false)
			var baseTook, deltaTook time.Duration
			for range b.N {
				b.StopTimer()
				dst := openCount(b, schema, "auction", mem)
				b.StartTimer()
				t0 := time.Now()
				if err := restoreFile(dst.State(), base); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := restoreFile(dst.State(), delta); err != nil {
					b.Fatal(err)
				}
				baseTook, deltaTook = baseTook+t1.Sub(t0), deltaTook+time.Since(t1)
				b.StopTimer()
				_ = dst.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(keys*b.N)/baseTook.Seconds(), "base-rows/s")
			b.ReportMetric(float64(keys*b.N)/deltaTook.Seconds(), "delta-rows/s")
		})
	}
}
