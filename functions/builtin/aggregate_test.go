package builtin

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/offheap"
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
			r, c0, c1 := acc.row(s), &acc.cols[0], &acc.cols[1]
			r[c0.n]++
			setFloat(&r[c0.v], minOf(getFloat(r[c0.v]), v))
			r[c1.n]++
			setFloat(&r[c1.v], maxOf(getFloat(r[c1.v]), v))
		}
		add(a, vals[0])
		add(b, vals[1])
		add(b, vals[2])
		acc.merge(a, b)
		if lo, hi := getFloat(acc.row(a)[acc.cols[0].v]), getFloat(acc.row(a)[acc.cols[1].v]); lo != 1 || !math.IsNaN(hi) {
			t.Errorf("%v: min %v max %v, want 1 and NaN", vals, lo, hi)
		}
	}
	acc := newAccumulators(aggs)
	s := acc.alloc()
	r, c := acc.row(s), &acc.cols[0]
	r[c.n]++
	setFloat(&r[c.v], minOf(getFloat(r[c.v]), nan))
	if got := getFloat(r[c.v]); !math.IsNaN(got) {
		t.Errorf("min of only NaN = %v, want NaN", got)
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

// aggModel is what a slot of TestAccumulatorsAgainstAModel should hold:
// the values each aggregate took, in order.
type aggModel [][]float64

// TestAccumulatorsAgainstAModel: random batches (nulls in n), session
// merges, releases and reuse of slots, and copies into other accumulators
// give every aggregate the result and the state that the values it took
// give, worked out apart. The slots are many and wide (18 words), on an
// arena, so that their words are outside the heap and a slot crosses
// cache lines; float values are whole numbers, so that sums do not
// depend on the order of the additions.
func TestAccumulatorsAgainstAModel(t *testing.T) {
	in := aggTestSchema(t)
	pairs := []spec.Pair{
		{Key: "rows", Value: "count()"}, {Key: "ns", Value: "count(n)"},
		{Key: "total", Value: "sum(n)"}, {Key: "first", Value: "min(ts)"},
		{Key: "last", Value: "max(ts)"}, {Key: "least", Value: "min(n)"},
		{Key: "most", Value: "max(n)"}, {Key: "mean", Value: "avg(n)"},
		{Key: "fares", Value: "sum(fare)"}, {Key: "low", Value: "min(fare)"},
		{Key: "high", Value: "max(fare)"}, {Key: "avgfare", Value: "avg(fare)"},
	}
	for _, agg := range []struct {
		name  string
		pairs []spec.Pair
	}{{"many", pairs}, {"count", pairs[:1]}} {
		t.Run(agg.name, func(t *testing.T) {
			aggs, err := ParseAggregates("aggregate", spec.NewOrderedMap(agg.pairs...), in)
			if err != nil {
				t.Fatal(err)
			}
			var arena offheap.Arena
			defer arena.Close()
			acc := newAccumulators(aggs)
			acc.arena = &arena
			mem := memory.NewGoAllocator()
			rng := rand.New(rand.NewPCG(7, 8))
			const nlive = 3000
			live := make([]int32, nlive)
			model := make([]aggModel, nlive)
			for i := range live {
				live[i], model[i] = acc.alloc(), make(aggModel, len(aggs))
			}
			// The input column each aggregate reads, and whether it
			// skips nulls; count() takes every row.
			value := func(i int, ts int64, fare float64, n int64, nullN bool) (float64, bool) {
				switch aggs[i].col {
				case -1:
					return 1, true
				case 0:
					return float64(ts), true
				case 2:
					return fare, true
				default:
					return float64(n), !nullN
				}
			}
			for round := range 40 {
				b := array.NewRecordBuilder(mem, in)
				var rows, slots []int32
				for r := range 512 {
					ts, fare, n := 1_700_000_000_000+rng.Int64N(1000), float64(rng.IntN(2000)-1000), rng.Int64N(2000)-1000
					nullN := rng.IntN(5) == 0
					b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(ts))
					b.Field(1).(*array.StringBuilder).Append("z")
					b.Field(2).(*array.Float64Builder).Append(fare)
					if nullN {
						b.Field(3).AppendNull()
					} else {
						b.Field(3).(*array.Int64Builder).Append(n)
					}
					b.Field(4).(*array.BooleanBuilder).Append(true)
					j := rng.IntN(nlive)
					rows, slots = append(rows, int32(r)), append(slots, live[j])
					for i := range aggs {
						if v, ok := value(i, ts, fare, n, nullN); ok {
							model[j][i] = append(model[j][i], v)
						}
					}
				}
				rec := b.NewRecordBatch()
				b.Release()
				acc.update(rec, rows, slots)
				rec.Release()
				for range 50 {
					switch i, j := rng.IntN(nlive), rng.IntN(nlive); {
					case rng.IntN(2) == 0 && i != j: // a session merge
						acc.merge(live[i], live[j])
						acc.release(live[j])
						for k := range aggs {
							model[i][k] = append(model[i][k], model[j][k]...)
						}
						live[j], model[j] = acc.alloc(), make(aggModel, len(aggs))
					default: // a window fires and another opens
						acc.release(live[i])
						live[i], model[i] = acc.alloc(), make(aggModel, len(aggs))
					}
				}
				if arena.Mapped() == 0 && agg.name == "many" {
					t.Fatal("the slots are on the heap: want them mapped")
				}
				// Copies (a capture's copies on write) hold the same.
				copies := newAccumulators(aggs)
				copied := make([]int32, nlive)
				for i, s := range live {
					copied[i] = copies.copySlot(acc, s)
				}
				for _, a := range []*accumulators{acc, copies} {
					slots := live
					if a == copies {
						slots = copied
					}
					checkResults(t, a, aggs, slots, model, round)
				}
			}
		})
	}
}

// checkResults compares the results of acc's slots with what the model
// says, and its state written and set again (appendState, setState).
func checkResults(t *testing.T, acc *accumulators, aggs []Aggregate, slots []int32, model []aggModel, round int) {
	t.Helper()
	mem := memory.NewGoAllocator()
	var fields []arrow.Field
	for i := range aggs {
		fields = append(fields, aggs[i].stateFields()...)
	}
	rb := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer rb.Release()
	acc.appendState(rb.Fields(), slots)
	state := rb.NewRecordBatch()
	defer state.Release()
	restored := newAccumulators(aggs)
	var back []int32
	for r := range slots {
		s := restored.alloc()
		restored.setState(s, state.Columns(), r)
		back = append(back, s)
	}
	for i := range aggs {
		for _, a := range []*accumulators{acc, restored} {
			ss := slots
			if a == restored {
				ss = back
			}
			b := array.NewBuilder(mem, aggs[i].Out.Arrow())
			a.appendResults(i, b, ss)
			got := b.NewArray()
			b.Release()
			for j := range ss {
				want, null := modelResult(aggs[i], model[j][i])
				switch {
				case null != got.IsNull(j):
					t.Fatalf("round %d: %s of slot %d: null %v, want %v", round, aggs[i].Name, j, got.IsNull(j), null)
				case !null && arrowfmt.Value(got, j) != want:
					t.Fatalf("round %d: %s of slot %d: %v, want %v", round, aggs[i].Name, j, arrowfmt.Value(got, j), want)
				}
			}
			got.Release()
		}
	}
}

// modelResult is the result of a over vals, as arrowfmt.Value gives it,
// and whether it is null.
func modelResult(a Aggregate, vals []float64) (any, bool) {
	if a.Func == AggCount {
		return int64(len(vals)), false
	}
	if len(vals) == 0 {
		return nil, true
	}
	var r float64
	switch a.Func {
	case AggSum, AggAvg:
		for _, v := range vals {
			r += v
		}
		if a.Func == AggAvg {
			r /= float64(len(vals))
		}
	case AggMin:
		r = slices.Min(vals)
	case AggMax:
		r = slices.Max(vals)
	}
	switch a.Out {
	case arrowfmt.Int64:
		return int64(r), false
	case arrowfmt.TimestampMs:
		return arrow.Timestamp(int64(r)).ToTime(arrow.Millisecond).UTC(), false
	}
	return r, false
}
