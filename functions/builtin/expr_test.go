package builtin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
)

// exStream is the input the expression tests compile against.
func exStream(t testing.TB) Stream {
	t.Helper()
	schema, err := arrowfmt.NewSchema([]arrowfmt.Field{
		{Name: "ride_id", Type: arrowfmt.Int64},
		{Name: "ts", Type: arrowfmt.TimestampMs},
		{Name: "fare", Type: arrowfmt.Float64},
		{Name: "tip", Type: arrowfmt.Float64},
		{Name: "zone", Type: arrowfmt.String},
		{Name: "ok", Type: arrowfmt.Bool},
		{Name: "n2", Type: arrowfmt.Int64},
	})
	if err != nil {
		t.Fatal(err)
	}
	return Stream{Schema: schema, TimeColumn: 1}
}

func exCheckedMem(t testing.TB) *memory.CheckedAllocator {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

var (
	exInts    = []int64{0, 1, -1, 2, 3, 7, 10, -10, 255, 1 << 40, math.MaxInt64, math.MinInt64}
	exFloats  = []float64{0, math.Copysign(0, -1), 1, -1, 1.5, 2.5, 20, 20.5, -3.25, 1e300, math.Inf(1), math.Inf(-1), math.NaN()}
	exStrings = []string{"", "z-1", "z-2", "z-3", "z", "zé", "日本", "a-b"}
)

// exBatch returns n random rows of exStream with about nullRate nulls in
// every column, drawing values from edge cases and random ones.
func exBatch(t testing.TB, mem memory.Allocator, rng *rand.Rand, n int, nullRate float64) arrow.RecordBatch {
	t.Helper()
	s := exStream(t)
	b := array.NewRecordBuilder(mem, s.Schema)
	defer b.Release()
	null := func() bool { return rng.Float64() < nullRate }
	for range n {
		ri := b.Field(0).(*array.Int64Builder)
		if null() {
			ri.AppendNull()
		} else if rng.IntN(2) == 0 {
			ri.Append(exInts[rng.IntN(len(exInts))])
		} else {
			ri.Append(rng.Int64N(2000) - 1000)
		}
		ts := b.Field(1).(*array.TimestampBuilder)
		if null() {
			ts.AppendNull()
		} else {
			ts.Append(arrow.Timestamp(1_767_225_600_000 + rng.Int64N(100_000)))
		}
		for c := 2; c <= 3; c++ {
			f := b.Field(c).(*array.Float64Builder)
			if null() {
				f.AppendNull()
			} else if rng.IntN(2) == 0 {
				f.Append(exFloats[rng.IntN(len(exFloats))])
			} else {
				f.Append(math.Round(rng.Float64()*1000) / 10)
			}
		}
		z := b.Field(4).(*array.StringBuilder)
		if null() {
			z.AppendNull()
		} else {
			z.Append(exStrings[rng.IntN(len(exStrings))])
		}
		ok := b.Field(5).(*array.BooleanBuilder)
		if null() {
			ok.AppendNull()
		} else {
			ok.Append(rng.IntN(2) == 0)
		}
		n2 := b.Field(6).(*array.Int64Builder)
		if null() {
			n2.AppendNull()
		} else {
			n2.Append(rng.Int64N(5) - 2) // often zero: % fails
		}
	}
	return b.NewRecordBatch()
}

// exResult is a copy of one evaluation: values as any, nil where invalid.
type exResult struct {
	vals   []any
	failed int
}

func exSnapshot(res *exprVec, valid []bool, failed, n int) exResult {
	out := exResult{vals: make([]any, n), failed: failed}
	for i := range n {
		if valid != nil && !valid[i] {
			continue
		}
		switch res.kind {
		case exInt, exTime:
			out.vals[i] = res.i[i]
		case exFloat:
			out.vals[i] = res.f[i]
		case exBool:
			out.vals[i] = res.b[i]
		case exString:
			out.vals[i] = res.s[i]
		}
	}
	return out
}

// exSame compares values, with every NaN equal and -0 distinct from 0.
func exSame(a, b any) bool {
	fa, ok1 := a.(float64)
	fb, ok2 := b.(float64)
	if ok1 && ok2 {
		if math.IsNaN(fa) || math.IsNaN(fb) {
			return math.IsNaN(fa) && math.IsNaN(fb)
		}
		return math.Float64bits(fa) == math.Float64bits(fb)
	}
	return a == b
}

// exComparePaths evaluates src over rec with both paths and fails on any
// difference. It reports whether src has a vectorised plan.
func exComparePaths(t *testing.T, src string, rec arrow.RecordBatch) bool {
	t.Helper()
	e, err := compileExpr("test", src, exStream(t))
	if err != nil {
		t.Fatalf("compile %q: %v", src, err)
	}
	if !e.kindOK {
		t.Fatalf("%q: type %v", src, e.typ)
	}
	n := int(rec.NumRows())
	res, valid, failed, _ := e.eval(rec, false)
	vec := exSnapshot(res, valid, failed, n)
	res, valid, failed, _ = e.eval(rec, true)
	ref := exSnapshot(res, valid, failed, n)
	if vec.failed != ref.failed {
		t.Errorf("%q: %d rows failed vectorised, %d with the VM", src, vec.failed, ref.failed)
	}
	bad := 0
	for i := range n {
		if !exSame(vec.vals[i], ref.vals[i]) {
			if bad++; bad <= 3 {
				t.Errorf("%q row %d %v: vectorised %#v, VM %#v", src, i, exRow(rec, i), vec.vals[i], ref.vals[i])
			}
		}
	}
	return e.vec != nil
}

func exRow(rec arrow.RecordBatch, i int) string {
	var b strings.Builder
	for c, col := range rec.Columns() {
		fmt.Fprintf(&b, " %s=%s", rec.ColumnName(c), col.ValueStr(i))
	}
	return b.String()
}

// exVectorised are expressions the vectorised path must handle.
var exVectorised = []string{
	`fare > 20 && zone != "z-3"`,
	`ride_id % 10`,
	`ride_id % n2`,
	`n2 != 0 && ride_id % n2 == 1`,
	`n2 == 0 || ride_id % n2 > 0`,
	`ride_id % n2 == 1 && ok`,
	`ok ? ride_id % n2 : -1`,
	`fare * 1.2`,
	`ride_id * 2 + 1`,
	`ride_id / 2`,
	`ride_id / n2`,
	`fare / tip`,
	`-fare`,
	`-ride_id`,
	`+fare`,
	`ride_id + fare`,
	`fare - ride_id`,
	`100 - ride_id`,
	`2.5 / fare`,
	`ride_id ** 2`,
	`fare ^ 0.5`,
	`ride_id == fare`,
	`ride_id < fare`,
	`fare >= 10`,
	`10 < fare`,
	`fare != fare`,
	`zone < "z-2"`,
	`zone >= zone`,
	`ok == true`,
	`ok != !ok`,
	`not ok`,
	`!ok || fare > 1`,
	`zone + "-x"`,
	`zone + zone`,
	`"a" + zone`,
	`ride_id in [1, 2, 3]`,
	`ride_id in [1, 2.5, 0]`,
	`fare in [0, 1.5, -1]`,
	`zone in ["z-1", "z-3", ""]`,
	`zone not in ["z-1"]`,
	`ok in [true]`,
	`ride_id in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]`,
	`n2 in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10.0, -1.0]`,
	`zone contains "-"`,
	`zone startsWith "z"`,
	`zone endsWith "3"`,
	`zone matches "^z-[12]$"`,
	`abs(ride_id)`,
	`abs(fare)`,
	`max(ride_id, n2)`,
	`min(fare, tip, 3.5)`,
	`max(fare, 0.0)`,
	`ceil(fare)`,
	`floor(ride_id)`,
	`round(fare)`,
	`int(fare)`,
	`float(ride_id)`,
	`len(zone)`,
	`ok ? fare : tip`,
	`fare > 50 ? "hi" : zone`,
	`ts - 5000`,
	`ts % 1000 == 0`,
	`abs(-3) + ride_id`,
	`1 + 2`,
	`true`,
	`fare > 20 and zone != "z-3" or ok`,
	`ok ? (ok ? 1 : 2) : 3`,
}

// exFallback are expressions only the VM evaluates.
var exFallback = []string{
	`upper(zone)`,
	`zone == nil`,
	`let x = fare; x * 2`,
	`$env.fare + 1`,
	`$env["ride_id"] % 7`,
	`max(ride_id, fare)`,
	`string(ride_id)`,
	`int(zone) > 0`,
	`zone[0:1]`,
	`len([fare, tip])`,
	`trim(zone, "z")`,
}

func TestExprVectorisedMatchesVM(t *testing.T) {
	mem := exCheckedMem(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, nullRate := range []float64{0, 0.1, 0.5} {
		for _, n := range []int{1, 7, 300} {
			full := exBatch(t, mem, rng, n, nullRate)
			recs := []arrow.RecordBatch{full}
			if n > 20 {
				// Sliced inputs: bitmaps and offsets not at zero, aligned or not.
				recs = append(recs, full.NewSlice(8, int64(n)), full.NewSlice(3, int64(n-1)))
			}
			for _, rec := range recs {
				for _, src := range exVectorised {
					if !exComparePaths(t, src, rec) {
						t.Errorf("%q is not vectorised", src)
					}
				}
				for _, src := range exFallback {
					if exComparePaths(t, src, rec) {
						t.Errorf("%q is vectorised; expected the VM", src)
					}
				}
				rec.Release()
			}
		}
	}
}

// exGen generates random well-typed expressions from the node kinds the
// vectorised path supports.
type exGen struct{ rng *rand.Rand }

func (g *exGen) pick(opts ...string) string { return opts[g.rng.IntN(len(opts))] }

func (g *exGen) expr(k exprKind, depth int) string {
	leaf := depth <= 0 || g.rng.IntN(4) == 0
	switch k {
	case exInt:
		if leaf {
			return g.pick("ride_id", "n2", "ts", "3", "(-5)", "0", "10", "9223372036854775807")
		}
		a, b := g.expr(exInt, depth-1), g.expr(exInt, depth-1)
		switch g.rng.IntN(11) {
		case 0:
			return "(" + a + " + " + b + ")"
		case 1:
			return "(" + a + " - " + b + ")"
		case 2:
			return "(" + a + " * " + b + ")"
		case 3:
			return "(" + a + " % " + b + ")"
		case 4:
			return "-(" + a + ")"
		case 5:
			return "abs(" + a + ")"
		case 6:
			return g.pick("max", "min") + "(" + a + ", " + b + ")"
		case 7:
			return "int(" + g.expr(exFloat, depth-1) + ")"
		case 8:
			return "len(" + g.expr(exString, depth-1) + ")"
		case 9:
			return "(" + g.expr(exBool, depth-1) + " ? " + a + " : " + b + ")"
		default:
			return "+" + a
		}
	case exFloat:
		if leaf {
			return g.pick("fare", "tip", "1.5", "0.0", "(-2.25)", "1e300")
		}
		num := func() string {
			if g.rng.IntN(2) == 0 {
				return g.expr(exInt, depth-1)
			}
			return g.expr(exFloat, depth-1)
		}
		f := g.expr(exFloat, depth-1)
		switch g.rng.IntN(10) {
		case 0:
			return "(" + f + " " + g.pick("+", "-", "*") + " " + num() + ")"
		case 1:
			return "(" + num() + " " + g.pick("+", "-", "*") + " " + f + ")"
		case 2:
			return "(" + num() + " / " + num() + ")"
		case 3:
			return "(" + num() + " " + g.pick("**", "^") + " " + num() + ")"
		case 4:
			return g.pick("abs", "-") + "(" + f + ")"
		case 5:
			return g.pick("ceil", "floor", "round") + "(" + num() + ")"
		case 6:
			return "float(" + num() + ")"
		case 7:
			return g.pick("max", "min") + "(" + f + ", " + g.expr(exFloat, depth-1) + ")"
		default:
			return "(" + g.expr(exBool, depth-1) + " ? " + f + " : " + g.expr(exFloat, depth-1) + ")"
		}
	case exString:
		if leaf {
			return g.pick("zone", `"z-3"`, `""`, `"é"`)
		}
		a, b := g.expr(exString, depth-1), g.expr(exString, depth-1)
		if g.rng.IntN(2) == 0 {
			return "(" + a + " + " + b + ")"
		}
		return "(" + g.expr(exBool, depth-1) + " ? " + a + " : " + b + ")"
	default:
		if leaf {
			return g.pick("ok", "true", "false")
		}
		num := func() string {
			if g.rng.IntN(2) == 0 {
				return g.expr(exInt, depth-1)
			}
			return g.expr(exFloat, depth-1)
		}
		cmp := g.pick("==", "!=", "<", "<=", ">", ">=")
		switch g.rng.IntN(10) {
		case 9:
			// n2 is often zero: a failing operand for the logic around it.
			return "(" + g.expr(exInt, depth-1) + " % n2 " + cmp + " " + num() + ")"
		case 0:
			return "(" + num() + " " + cmp + " " + num() + ")"
		case 1:
			return "(" + g.expr(exString, depth-1) + " " + cmp + " " + g.expr(exString, depth-1) + ")"
		case 2:
			return "(" + g.expr(exBool, depth-1) + " " + g.pick("&&", "||", "and", "or", "==", "!=") + " " + g.expr(exBool, depth-1) + ")"
		case 3:
			return g.pick("!", "not ") + "(" + g.expr(exBool, depth-1) + ")"
		case 4:
			return "(" + g.expr(exInt, depth-1) + g.pick(" in ", " not in ") + g.pick("[1, 2, 3]", "[0, 2.5]", "[-1, 10, 7, 3, 1, 2, 4, 5, 6, 8, 9]") + ")"
		case 5:
			return "(" + g.expr(exFloat, depth-1) + " in " + g.pick("[1, 2.5, 20]", "[0.0]") + ")"
		case 6:
			return "(" + g.expr(exString, depth-1) + " in " + g.pick(`["z-1", "z-3"]`, `["", "é"]`) + ")"
		case 7:
			return "(" + g.expr(exString, depth-1) + " " + g.pick("contains", "startsWith", "endsWith") + " " + g.expr(exString, depth-1) + ")"
		default:
			return "(" + g.expr(exString, depth-1) + ` matches "^z-[0-9]$")`
		}
	}
}

func TestExprRandomExpressions(t *testing.T) {
	mem := exCheckedMem(t)
	rng := rand.New(rand.NewPCG(3, 4))
	g := &exGen{rng: rng}
	batches := []arrow.RecordBatch{
		exBatch(t, mem, rng, 200, 0),
		exBatch(t, mem, rng, 200, 0.2),
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	count := 1500
	if testing.Short() {
		count = 200
	}
	compiled := 0
	for i := range count {
		k := exprKind(i % 4)
		src := g.expr(k, 4)
		if _, err := compileExpr("test", src, exStream(t)); err != nil {
			// Constant folding refuses e.g. 3 % 0 at compile time.
			if !strings.Contains(err.Error(), "divide by zero") {
				t.Fatalf("generated %q: %v", src, err)
			}
			continue
		}
		compiled++
		for _, rec := range batches {
			if !exComparePaths(t, src, rec) {
				t.Fatalf("generated %q is not vectorised", src)
			}
		}
		if t.Failed() {
			t.Fatalf("first failing expression: %s", src)
		}
	}
	if compiled < count*9/10 {
		t.Fatalf("only %d of %d generated expressions compiled", compiled, count)
	}
}

// FuzzExprPaths checks that any expression with a vectorised plan
// evaluates as the VM does.
func FuzzExprPaths(f *testing.F) {
	for _, src := range exVectorised {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := compileExpr("fuzz", src, exStream(t))
		if err != nil || !e.kindOK || e.vec == nil {
			return
		}
		mem := exCheckedMem(t)
		rec := exBatch(t, mem, rand.New(rand.NewPCG(5, 6)), 64, 0.1)
		defer rec.Release()
		exComparePaths(t, src, rec)
	})
}

func TestExprNullsAndFailures(t *testing.T) {
	mem := exCheckedMem(t)
	s := exStream(t)
	b := array.NewRecordBuilder(mem, s.Schema)
	defer b.Release()
	// row 0: all set; row 1: fare null; row 2: n2 = 0
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{7, 8, 9}, nil)
	b.Field(1).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1, 2, 3}, nil)
	b.Field(2).(*array.Float64Builder).AppendValues([]float64{1.5, 0, 3}, []bool{true, false, true})
	b.Field(3).(*array.Float64Builder).AppendValues([]float64{1, 1, 1}, nil)
	b.Field(4).(*array.StringBuilder).AppendValues([]string{"a", "b", "c"}, nil)
	b.Field(5).(*array.BooleanBuilder).AppendValues([]bool{false, false, true}, nil)
	b.Field(6).(*array.Int64Builder).AppendValues([]int64{2, 2, 0}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()

	for _, tc := range []struct {
		src    string
		want   []any
		failed int
	}{
		{`fare * 2`, []any{3.0, nil, 6.0}, 0},
		{`ride_id + 1`, []any{int64(8), int64(9), int64(10)}, 0},
		// A null column read anywhere makes the result null, even in a
		// branch not taken.
		{`ok ? fare : 0.0`, []any{0.0, nil, 3.0}, 0},
		{`ride_id % n2`, []any{int64(1), int64(0), nil}, 1},
		{`n2 != 0 && ride_id % n2 == 1`, []any{true, false, false}, 0},
		{`int(zone)`, []any{nil, nil, nil}, 3},
		{`$env.ride_id + 1`, []any{int64(8), nil, int64(10)}, 0},
		{`duration("2s")`, []any{int64(2e9), int64(2e9), int64(2e9)}, 0},
		{`date("2026-01-01T00:00:00Z")`, []any{int64(1767225600000), int64(1767225600000), int64(1767225600000)}, 0},
	} {
		e, err := compileExpr("test", tc.src, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, useVM := range []bool{false, true} {
			res, valid, failed, ferr := e.eval(rec, useVM)
			got := exSnapshot(res, valid, failed, 3)
			for i, w := range tc.want {
				if !exSame(got.vals[i], w) {
					t.Errorf("%q vm=%v row %d: got %#v, want %#v", tc.src, useVM, i, got.vals[i], w)
				}
			}
			if failed != tc.failed || (failed > 0) != (ferr != nil) {
				t.Errorf("%q vm=%v: %d failed (%v), want %d", tc.src, useVM, failed, ferr, tc.failed)
			}
		}
	}
}

// BenchmarkExprEval measures evaluation alone, without building output.
func BenchmarkExprEval(b *testing.B) {
	for _, src := range []string{`fare > 20 && zone != "z-3"`, `fare * 1.2`, `ride_id % 10`} {
		for _, path := range []string{"vectorised", "vm"} {
			b.Run(src+"/"+path, func(b *testing.B) {
				mem := memory.NewGoAllocator()
				rec := exBatch(b, mem, rand.New(rand.NewPCG(1, 1)), 8192, 0.01)
				defer rec.Release()
				e, err := compileExpr("bench", src, exStream(b))
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					e.eval(rec, path == "vm")
				}
				b.ReportMetric(float64(8192*b.N)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}
