package builtin

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

// exCollect is an Output that keeps what it is given.
type exCollect struct{ batches []arrow.RecordBatch }

func (c *exCollect) Emit(b arrow.RecordBatch) error {
	b.Retain()
	c.batches = append(c.batches, b)
	return nil
}

func (c *exCollect) release() {
	for _, b := range c.batches {
		b.Release()
	}
	c.batches = nil
}

// exRows returns the rows of the collected batches; nulls are nil,
// timestamps int64.
func (c *exCollect) rows() [][]any {
	var rows [][]any
	for _, b := range c.batches {
		rows = append(rows, exRowsOf(b)...)
	}
	return rows
}

func exRowsOf(rec arrow.RecordBatch) [][]any {
	rows := make([][]any, rec.NumRows())
	for i := range rows {
		row := make([]any, rec.NumCols())
		for c, col := range rec.Columns() {
			if col.IsNull(i) {
				continue
			}
			switch a := col.(type) {
			case *array.Int64:
				row[c] = a.Value(i)
			case *array.Timestamp:
				row[c] = int64(a.Value(i))
			case *array.Float64:
				row[c] = a.Value(i)
			case *array.String:
				row[c] = a.Value(i)
			case *array.Boolean:
				row[c] = a.Value(i)
			}
		}
		rows[i] = row
	}
	return rows
}

func exSameRows(t *testing.T, what string, got, want [][]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		for c := range got[i] {
			if !exSame(got[i][c], want[i][c]) {
				t.Fatalf("%s: row %d: got %v, want %v", what, i, got[i], want[i])
			}
		}
	}
}

func exOpen(t *testing.T, op task.Operator, mem memory.Allocator, log *slog.Logger) *exCollect {
	t.Helper()
	out := &exCollect{}
	if err := op.Open(&task.Context{Node: "op", Mem: mem, Out: out, Logger: log}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := op.Close(); err != nil {
			t.Error(err)
		}
		out.release()
	})
	return out
}

func exFilterOp(t *testing.T, src string, useVM bool) task.Operator {
	t.Helper()
	op, err := NewFilter(&spec.Operator{Name: "f", Filter: src}, exStream(t))
	if err != nil {
		t.Fatal(err)
	}
	op.(*filterOp).useVM = useVM
	return op
}

func TestFilterKeepsMatchingRows(t *testing.T) {
	for _, useVM := range []bool{false, true} {
		mem := exCheckedMem(t)
		op := exFilterOp(t, `fare > 20 && zone != "z-3"`, useVM)
		out := exOpen(t, op, mem, nil)
		rng := rand.New(rand.NewPCG(7, 8))
		var want [][]any
		for i, n := range []int{1, 100, 1000, 5000} {
			rec := exBatch(t, mem, rng, n, 0.1)
			if i == 2 {
				sliced := rec.NewSlice(13, 990)
				rec.Release()
				rec = sliced
			}
			for _, row := range exRowsOf(rec) {
				fare, zone := row[2], row[4]
				if fare != nil && zone != nil && fare.(float64) > 20 && zone.(string) != "z-3" {
					want = append(want, row)
				}
			}
			if err := op.ProcessBatch(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		exSameRows(t, "filter", out.rows(), want)
		if len(out.batches) != 4 {
			t.Errorf("vm=%v: %d batches out, want one per input batch", useVM, len(out.batches))
		}
	}
}

func TestFilterOutputShapes(t *testing.T) {
	mem := exCheckedMem(t)
	s := exStream(t)
	b := array.NewRecordBuilder(mem, s.Schema)
	defer b.Release()
	for i := range 6 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(1000 * i))
		b.Field(2).(*array.Float64Builder).Append(float64(i) * 10)
		b.Field(3).(*array.Float64Builder).AppendNull()
		b.Field(4).(*array.StringBuilder).Append(strings.Repeat("z", i))
		b.Field(5).(*array.BooleanBuilder).Append(i%2 == 0)
		b.Field(6).(*array.Int64Builder).Append(1)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()

	run := func(src string) *exCollect {
		op := exFilterOp(t, src, false)
		out := exOpen(t, op, mem, nil)
		if err := op.ProcessBatch(rec); err != nil {
			t.Fatal(err)
		}
		return out
	}

	if out := run(`ride_id >= 0`); len(out.batches) != 1 || out.batches[0] != rec {
		t.Errorf("all rows kept: want the input batch itself, got %d batches", len(out.batches))
	}
	if out := run(`ride_id > 100`); len(out.batches) != 0 {
		t.Errorf("no rows kept: want nothing emitted, got %d batches", len(out.batches))
	}
	// tip is null in every row: nothing passes.
	if out := run(`tip > 0 || true`); len(out.batches) != 0 {
		t.Errorf("null column: want nothing emitted, got %d batches", len(out.batches))
	}

	all := exRowsOf(rec)
	out := run(`ride_id >= 2 && ride_id < 5`)
	exSameRows(t, "contiguous", out.rows(), all[2:5])
	if got := out.batches[0].Column(0).Data().Buffers()[1]; got != rec.Column(0).Data().Buffers()[1] {
		t.Error("contiguous rows: want a zero-copy slice of the input")
	}

	out = run(`ok`)
	exSameRows(t, "scattered", out.rows(), [][]any{all[0], all[2], all[4]})
}

func TestFilterSchemaErrors(t *testing.T) {
	s := exStream(t)
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{`fare > `, []string{`operators[f].filter: expression "fare > ": unexpected token EOF at column 7`}},
		{`ride_id + 1`, []string{`operators[f].filter`, `filter must be a boolean expression, got int`}},
		{`nope > 1`, []string{`operators[f].filter`, `unknown name nope`}},
		{`zone == 1`, []string{`mismatched types string and int`}},
		{`ok ? 1 : true`, []string{`filter must be a boolean expression, got any`}},
		{` `, []string{`operators[f].filter: empty expression`}},
	} {
		op := &spec.Operator{Name: "f", Filter: tc.src}
		_, err := FilterSchema(op, s)
		if err == nil {
			t.Errorf("%q: no error", tc.src)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not contain %q", tc.src, err, w)
			}
		}
		if _, err2 := NewFilter(op, s); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("%q: NewFilter error %v, FilterSchema error %v", tc.src, err2, err)
		}
	}
	got, err := FilterSchema(&spec.Operator{Name: "f", Filter: "ok"}, s)
	if err != nil || got.Schema != s.Schema || got.TimeColumn != s.TimeColumn {
		t.Errorf("FilterSchema = %+v, %v; want the input stream", got, err)
	}
}

func exSelect(pairs ...string) *spec.Operator {
	m := &spec.OrderedMap{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m.Set(pairs[i], pairs[i+1])
	}
	return &spec.Operator{Name: "s", Select: m}
}

func TestSelectSchema(t *testing.T) {
	in := exStream(t)
	in.TimeOffset = -1
	for _, tc := range []struct {
		op         *spec.Operator
		types      []arrowfmt.Type
		timeColumn int
	}{
		{
			exSelect("id", "ride_id", "fare", "fare * 1.2", "bucket", "ride_id % 10", "zone", "zone", "ok", "!ok", "half", "ride_id / 2"),
			[]arrowfmt.Type{arrowfmt.Int64, arrowfmt.Float64, arrowfmt.Int64, arrowfmt.String, arrowfmt.Bool, arrowfmt.Float64},
			-1,
		},
		{
			exSelect("id", "ride_id", "event_time", "ts", "earlier", "ts - 5000", "again", "ts"),
			[]arrowfmt.Type{arrowfmt.Int64, arrowfmt.TimestampMs, arrowfmt.Int64, arrowfmt.TimestampMs},
			1,
		},
		{
			exSelect("now", "now()", "len", "len(zone)"),
			[]arrowfmt.Type{arrowfmt.TimestampMs, arrowfmt.Int64},
			-1,
		},
	} {
		out, err := SelectSchema(tc.op, in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := arrowfmt.Fields(out.Schema)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tc.types) {
			t.Fatalf("%v: %d columns, want %d", tc.op.Select.Keys, len(got), len(tc.types))
		}
		for i, f := range got {
			if f.Name != tc.op.Select.Keys[i] || f.Type != tc.types[i] {
				t.Errorf("column %d: %s %s, want %s %s", i, f.Name, f.Type, tc.op.Select.Keys[i], tc.types[i])
			}
		}
		if out.TimeColumn != tc.timeColumn {
			t.Errorf("%v: time column %d, want %d", tc.op.Select.Keys, out.TimeColumn, tc.timeColumn)
		}
		if out.HasTime() && out.TimeOffset != in.TimeOffset {
			t.Errorf("time offset %d, want %d", out.TimeOffset, in.TimeOffset)
		}
	}
}

func TestSelectSchemaErrors(t *testing.T) {
	in := exStream(t)
	_, err := SelectSchema(exSelect("a", "fare +", "b", "ok ? 1 : 'x'", "c", "ride_id", "d", "[fare]"), in)
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{
		`operators[s].select.a: expression "fare +"`,
		`operators[s].select.b: expression "ok ? 1 : 'x'" has type any`,
		`operators[s].select.d: expression "[fare]" has type []interface {}`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "select.c") {
		t.Errorf("error %q names a good column", err)
	}
	if _, err := SelectSchema(exSelect(), in); err == nil || !strings.Contains(err.Error(), "operators[s].select: no columns") {
		t.Errorf("empty select: %v", err)
	}
}

func TestSelectComputes(t *testing.T) {
	op := exSelect(
		"id", "ride_id",
		"fare", "fare * 1.2",
		"bucket", "ride_id % 10",
		"label", `zone + "!"`,
		"big", "fare > 20",
		"when", "ts",
		"safe", "ride_id % n2",
		"upper", "upper(zone)", // VM
	)
	for _, useVM := range []bool{false, true} {
		mem := exCheckedMem(t)
		o, err := NewSelect(op, exStream(t))
		if err != nil {
			t.Fatal(err)
		}
		o.(*selectOp).useVM = useVM
		var logs bytes.Buffer
		out := exOpen(t, o, mem, slog.New(slog.NewTextHandler(&logs, nil)))
		rng := rand.New(rand.NewPCG(9, 10))
		var want [][]any
		for _, n := range []int{1, 500, 3000} {
			rec := exBatch(t, mem, rng, n, 0.1)
			for _, r := range exRowsOf(rec) {
				row := make([]any, 8)
				row[0] = r[0]
				if r[2] != nil {
					row[1] = r[2].(float64) * 1.2
					row[4] = r[2].(float64) > 20
				}
				if r[0] != nil {
					row[2] = r[0].(int64) % 10
				}
				if r[4] != nil {
					row[3] = r[4].(string) + "!"
					row[7] = strings.ToUpper(r[4].(string))
				}
				row[5] = r[1]
				if r[0] != nil && r[6] != nil && r[6].(int64) != 0 {
					row[6] = r[0].(int64) % r[6].(int64)
				}
				want = append(want, row)
			}
			if err := o.ProcessBatch(rec); err != nil {
				t.Fatal(err)
			}
			if got := out.batches[len(out.batches)-1]; got.Column(0) != rec.Column(0) || got.Column(5) != rec.Column(1) {
				t.Error("bare column names: want the input arrays reused")
			}
			rec.Release()
		}
		exSameRows(t, "select", out.rows(), want)
		if n := strings.Count(logs.String(), "expression failed"); n != 1 {
			t.Errorf("vm=%v: logged %d failures, want the first only:\n%s", useVM, n, logs.String())
		}
		if !strings.Contains(logs.String(), "operators[s].select.safe") {
			t.Errorf("failure log does not name the field:\n%s", logs.String())
		}
	}
}

// exBench runs op over 8192-row batches and reports rows per second.
func exBench(b *testing.B, op task.Operator) {
	mem := memory.NewGoAllocator()
	rng := rand.New(rand.NewPCG(11, 12))
	recs := []arrow.RecordBatch{exBatch(b, mem, rng, 8192, 0.01), exBatch(b, mem, rng, 8192, 0.01)}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	out := &exDiscard{}
	if err := op.Open(&task.Context{Mem: mem, Out: out}); err != nil {
		b.Fatal(err)
	}
	defer op.Close()
	i := 0
	for b.Loop() {
		if err := op.ProcessBatch(recs[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(8192*b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(out.rows)/float64(8192*b.N), "kept")
}

type exDiscard struct{ rows int64 }

func (d *exDiscard) Emit(b arrow.RecordBatch) error {
	d.rows += b.NumRows()
	return nil
}

func BenchmarkFilter(b *testing.B) {
	for _, path := range []string{"vectorised", "vm"} {
		b.Run(path, func(b *testing.B) {
			op, err := NewFilter(&spec.Operator{Name: "f", Filter: `fare > 20 && zone != "z-3"`}, exStream(b))
			if err != nil {
				b.Fatal(err)
			}
			op.(*filterOp).useVM = path == "vm"
			exBench(b, op)
		})
	}
}

func BenchmarkSelect(b *testing.B) {
	for _, path := range []string{"vectorised", "vm"} {
		b.Run(path, func(b *testing.B) {
			op, err := NewSelect(exSelect("fare", "fare * 1.2", "bucket", "ride_id % 10"), exStream(b))
			if err != nil {
				b.Fatal(err)
			}
			op.(*selectOp).useVM = path == "vm"
			exBench(b, op)
		})
	}
}
