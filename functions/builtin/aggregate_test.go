package builtin

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
)

func aggTestSchema(t *testing.T) *arrow.Schema {
	t.Helper()
	s, err := arrowfmt.NewSchema([]arrowfmt.Field{
		{Name: "ts", Type: arrowfmt.TimestampMs},
		{Name: "zone", Type: arrowfmt.String},
		{Name: "fare", Type: arrowfmt.Float64},
		{Name: "n", Type: arrowfmt.Int64},
		{Name: "ok", Type: arrowfmt.Bool},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAggregateParse(t *testing.T) {
	in := aggTestSchema(t)
	aggs, err := ParseAggregates("aggregate", spec.NewOrderedMap(
		spec.Pair{Key: "rows", Value: "count()"},
		spec.Pair{Key: "rows2", Value: "  COUNT ( * ) "},
		spec.Pair{Key: "zones", Value: "count(zone)"},
		spec.Pair{Key: "total", Value: "sum( fare )"},
		spec.Pair{Key: "ntotal", Value: "sum(n)"},
		spec.Pair{Key: "first", Value: "min(ts)"},
		spec.Pair{Key: "most", Value: "max(n)"},
		spec.Pair{Key: "avg_fare", Value: "avg(fare)"},
		spec.Pair{Key: "avg_n", Value: "\tavg\t(n)"},
		spec.Pair{Key: "oks", Value: "count(ok)"},
	), in)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		fn      AggFunc
		col     string
		in, out arrowfmt.Type
	}{
		{AggCount, "", "", arrowfmt.Int64},
		{AggCount, "", "", arrowfmt.Int64},
		{AggCount, "zone", arrowfmt.String, arrowfmt.Int64},
		{AggSum, "fare", arrowfmt.Float64, arrowfmt.Float64},
		{AggSum, "n", arrowfmt.Int64, arrowfmt.Int64},
		{AggMin, "ts", arrowfmt.TimestampMs, arrowfmt.TimestampMs},
		{AggMax, "n", arrowfmt.Int64, arrowfmt.Int64},
		{AggAvg, "fare", arrowfmt.Float64, arrowfmt.Float64},
		{AggAvg, "n", arrowfmt.Int64, arrowfmt.Float64},
		{AggCount, "ok", arrowfmt.Bool, arrowfmt.Int64},
	}
	if len(aggs) != len(want) {
		t.Fatalf("got %d aggregates, want %d", len(aggs), len(want))
	}
	for i, w := range want {
		a := aggs[i]
		if a.Func != w.fn || a.Column != w.col || a.In != w.in || a.Out != w.out {
			t.Errorf("aggregate %s: got %v(%s) %s -> %s, want %v(%s) %s -> %s", a.Name, a.Func, a.Column, a.In, a.Out, w.fn, w.col, w.in, w.out)
		}
	}
}

func TestAggregateParseErrors(t *testing.T) {
	in := aggTestSchema(t)
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{"avg(zone)", []string{"aggregate.x: ", "avg(zone): column zone is string, want int64 or float64"}},
		{"sum(ok)", []string{"sum(ok): column ok is bool, want int64 or float64"}},
		{"min(zone)", []string{"min(zone): column zone is string, want int64, float64 or timestamp_ms"}},
		{"median(fare)", []string{`unknown function "median"`, "count(), count(col), sum(col)"}},
		{"fare", []string{`"fare" is not an aggregate`, "avg(col)"}},
		{"sum()", []string{"sum needs a column"}},
		{"sum(nope)", []string{`"nope" is not a column`, "fare float64"}},
		{"sum(fare, n)", []string{"one column name"}},
		{"sum(fare))", []string{"one column name"}},
	} {
		_, err := ParseAggregates("aggregate", spec.NewOrderedMap(spec.Pair{Key: "x", Value: tc.expr}), in)
		if err == nil {
			t.Errorf("%s: no error", tc.expr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tc.expr, err, w)
			}
		}
	}
	// Every problem at once.
	_, err := ParseAggregates("aggregate", spec.NewOrderedMap(
		spec.Pair{Key: "a", Value: "avg(zone)"},
		spec.Pair{Key: "b", Value: "count()"},
		spec.Pair{Key: "c", Value: "sum(nope)"},
	), in)
	if err == nil || !strings.Contains(err.Error(), "aggregate.a: ") || !strings.Contains(err.Error(), "aggregate.c: ") {
		t.Errorf("want errors for a and c, got %v", err)
	}
}

// TestAccumulatorsNaN checks that float min and max do not depend on the
// order of NaNs, including across a merge.
func TestAccumulatorsNaN(t *testing.T) {
	in := aggTestSchema(t)
	aggs, err := ParseAggregates("aggregate", spec.NewOrderedMap(
		spec.Pair{Key: "lo", Value: "min(fare)"},
		spec.Pair{Key: "hi", Value: "max(fare)"},
	), in)
	if err != nil {
		t.Fatal(err)
	}
	nan := math.NaN()
	for _, vals := range [][]float64{{nan, 1, 2}, {1, nan, 2}, {2, 1, nan}} {
		acc := newAccumulators(aggs)
		a, b := acc.alloc(), acc.alloc()
		add := func(s int32, v float64) {
			c0, c1 := &acc.cols[0], &acc.cols[1]
			c0.n[s]++
			c0.f[s] = minOf(c0.f[s], v)
			c1.n[s]++
			c1.f[s] = maxOf(c1.f[s], v)
		}
		add(a, vals[0])
		add(b, vals[1])
		add(b, vals[2])
		acc.merge(a, b)
		if lo, hi := acc.cols[0].f[a], acc.cols[1].f[a]; lo != 1 || !math.IsNaN(hi) {
			t.Errorf("%v: min %v max %v, want 1 and NaN", vals, lo, hi)
		}
	}
	acc := newAccumulators(aggs)
	s := acc.alloc()
	acc.cols[0].n[s]++
	acc.cols[0].f[s] = minOf(acc.cols[0].f[s], nan)
	if !math.IsNaN(acc.cols[0].f[s]) {
		t.Errorf("min of only NaN = %v, want NaN", acc.cols[0].f[s])
	}
}

// TestAccumulatorRanges: after random updates (values of both signs,
// nulls), merges and releases, the ranges the accumulators keep
// (stateRanges) hold every count and integer value a snapshot of the
// live slots writes (appendState): a state file narrows its columns to
// them.
func TestAccumulatorRanges(t *testing.T) {
	in := aggTestSchema(t)
	aggs, err := ParseAggregates("aggregate", spec.NewOrderedMap(
		spec.Pair{Key: "rows", Value: "count()"},
		spec.Pair{Key: "ns", Value: "count(n)"},
		spec.Pair{Key: "total", Value: "sum(n)"},
		spec.Pair{Key: "first", Value: "min(ts)"},
		spec.Pair{Key: "most", Value: "max(n)"},
		spec.Pair{Key: "mean", Value: "avg(n)"},
		spec.Pair{Key: "fares", Value: "sum(fare)"},
	), in)
	if err != nil {
		t.Fatal(err)
	}
	var fields []arrow.Field
	for i := range aggs {
		fields = append(fields, aggs[i].stateFields()...)
	}
	state := arrow.NewSchema(fields, nil)
	mem := memory.NewGoAllocator()
	rng := rand.New(rand.NewPCG(5, 6))
	acc := newAccumulators(aggs)
	var live []int32
	for range 20 {
		live = append(live, acc.alloc())
	}
	for round := range 300 {
		spread := int64(1) << (rng.IntN(40))
		b := array.NewRecordBuilder(mem, in)
		var rows, slots []int32
		for r := range 64 {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000 + rng.Int64N(spread)))
			b.Field(1).(*array.StringBuilder).Append("z")
			b.Field(2).(*array.Float64Builder).Append(rng.Float64())
			if rng.IntN(10) < 3*(round%2) { // every other batch has no nulls
				b.Field(3).AppendNull()
			} else {
				b.Field(3).(*array.Int64Builder).Append(rng.Int64N(2*spread) - spread)
			}
			b.Field(4).(*array.BooleanBuilder).Append(true)
			rows = append(rows, int32(r))
			slots = append(slots, live[rng.IntN(len(live))])
		}
		rec := b.NewRecordBatch()
		b.Release()
		acc.update(rec, rows, slots)
		rec.Release()
		switch rng.IntN(4) {
		case 0: // a session merge: src's state goes into dst, src is released
			i, j := rng.IntN(len(live)), rng.IntN(len(live))
			if i != j {
				acc.merge(live[i], live[j])
				acc.release(live[j])
				live[j] = acc.alloc()
			}
		case 1: // a window fires and a new one opens
			i := rng.IntN(len(live))
			acc.release(live[i])
			live[i] = acc.alloc()
		}
		rb := array.NewRecordBuilder(mem, state)
		var bs []array.Builder
		for c := range fields {
			bs = append(bs, rb.Field(c))
		}
		acc.appendState(bs, live)
		snap := rb.NewRecordBatch()
		rb.Release()
		kept := make([]arrowfmt.Range, len(fields))
		acc.stateRanges(kept)
		for c := range fields {
			var held arrowfmt.Range
			held.AddColumn(snap.Column(c))
			if k := kept[c]; held.Set && (!k.Set || held.Lo < k.Lo || held.Hi > k.Hi) {
				t.Fatalf("round %d: column %s holds [%d, %d]; the kept range is %+v", round, fields[c].Name, held.Lo, held.Hi, k)
			}
		}
		snap.Release()
	}
}
