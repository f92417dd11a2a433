package builtin

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/offheap"
)

// AggFunc is an aggregate function of a window.
type AggFunc uint8

// The aggregate functions. They follow SQL: nulls are ignored, count()
// counts rows, and sum, min, max and avg over no non-null value are null.
const (
	AggCount AggFunc = iota + 1 // count() or count(col)
	AggSum
	AggMin
	AggMax
	AggAvg
)

var aggNames = [...]string{AggCount: "count", AggSum: "sum", AggMin: "min", AggMax: "max", AggAvg: "avg"}

func (f AggFunc) String() string {
	if int(f) < len(aggNames) && aggNames[f] != "" {
		return aggNames[f]
	}
	return fmt.Sprintf("AggFunc(%d)", uint8(f))
}

const aggAccepted = "count(), count(col), sum(col), min(col), max(col) or avg(col)"

// Aggregate is one parsed entry of an operator's aggregate map.
type Aggregate struct {
	Name string // output column
	Expr string // as written in the spec
	Func AggFunc
	// Column is the input column, "" for count().
	Column string
	// In is the input column's type ("" for count()), Out the result's.
	In, Out arrowfmt.Type

	col int // index of Column in the input, -1 for count()
}

// ParseAggregates parses the aggregate map of an operator against the
// operator's input schema, in order. It reports every problem at once;
// each error is a spec problem of field.<name> (field is the aggregate
// map's, e.g. operators[stats].aggregate) that quotes its expression and
// says what is accepted.
func ParseAggregates(field string, aggs *spec.OrderedMap, in *arrow.Schema) ([]Aggregate, error) {
	out := make([]Aggregate, 0, aggs.Len())
	var errs []error
	for i, name := range aggs.Keys {
		a, err := parseAggregate(name, aggs.Values[i], in)
		if err != nil {
			errs = append(errs, spec.Errorf(field+"."+name, "%w", err))
			continue
		}
		out = append(out, a)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func parseAggregate(name, expr string, in *arrow.Schema) (Aggregate, error) {
	a := Aggregate{Name: name, Expr: expr, col: -1}
	e := strings.TrimSpace(expr)
	open := strings.IndexByte(e, '(')
	if open < 0 || !strings.HasSuffix(e, ")") {
		return a, fmt.Errorf("%q is not an aggregate: want %s", expr, aggAccepted)
	}
	fn := strings.ToLower(strings.TrimSpace(e[:open]))
	arg := strings.TrimSpace(e[open+1 : len(e)-1])
	if strings.ContainsAny(arg, "(),") {
		return a, fmt.Errorf("%q: want one column name as the argument, as in %s", expr, aggAccepted)
	}
	switch fn {
	case "count":
		a.Func = AggCount
	case "sum":
		a.Func = AggSum
	case "min":
		a.Func = AggMin
	case "max":
		a.Func = AggMax
	case "avg":
		a.Func = AggAvg
	default:
		return a, fmt.Errorf("%q: unknown function %q: want %s", expr, fn, aggAccepted)
	}
	if arg == "*" && a.Func == AggCount { // SQL's count(*)
		arg = ""
	}
	if arg == "" {
		if a.Func != AggCount {
			return a, fmt.Errorf("%q: %s needs a column, as in %s(fare)", expr, fn, fn)
		}
		a.Out = arrowfmt.Int64
		return a, nil
	}
	idx := in.FieldIndices(arg)
	if len(idx) == 0 {
		return a, fmt.Errorf("%s(%s): %q is not a column of the input (columns: %s)", fn, arg, arg, columnList(in))
	}
	t, err := arrowfmt.TypeOf(in.Field(idx[0]).Type)
	if err != nil {
		return a, fmt.Errorf("%s(%s): %w", fn, arg, err)
	}
	a.Column, a.In, a.col = arg, t, idx[0]
	var want string
	switch a.Func {
	case AggCount:
		a.Out = arrowfmt.Int64
	case AggSum:
		if t == arrowfmt.Int64 || t == arrowfmt.Float64 {
			a.Out = t
		}
		want = "int64 or float64"
	case AggMin, AggMax:
		if t == arrowfmt.Int64 || t == arrowfmt.Float64 || t == arrowfmt.TimestampMs {
			a.Out = t
		}
		want = "int64, float64 or timestamp_ms"
	case AggAvg:
		if t == arrowfmt.Int64 || t == arrowfmt.Float64 {
			a.Out = arrowfmt.Float64
		}
		want = "int64 or float64"
	}
	if a.Out == "" {
		return a, fmt.Errorf("%s(%s): column %s is %s, want %s", fn, arg, arg, t, want)
	}
	return a, nil
}

// accumulators holds the state of every aggregate of an operator for many
// windows. It is column-wise: a window owns a slot, and slot s's state of
// aggregate i sits at index s of cols[i]'s slices. Updating a batch is then
// a tight loop per aggregate over (row, slot) pairs with no interface call
// or allocation per row, and the state is plain slices of numbers that a
// snapshot can write out as columns.
//
// The state per aggregate:
//
//	count:   n = rows (count()) or non-null values (count(col))
//	sum:     n = non-null values, i or f = sum
//	min/max: n = non-null values, i or f = extreme so far
//	avg:     n = non-null values, i (int64 input) or f (float64) = sum
//
// sum, min, max and avg are null when n is 0. Integer sums wrap on overflow
// like Java's long (and Flink's BIGINT SUM). Float min and max treat NaN as
// larger than every number (as PostgreSQL does), so the result does not
// depend on arrival order: min ignores NaN unless every value is NaN, and
// max of anything with a NaN is NaN.
type accumulators struct {
	aggs []Aggregate
	cols []accColumn
	// arena, if set, holds the columns once they are large (see
	// statestore/offheap): the window operator's accumulators are a slot
	// per window of every key.
	arena *offheap.Arena
	size  int32 // slots the slices hold
	// free is the latest slot released plus one, 0 for none: released
	// slots are reused before the slices grow. A released slot holds the
	// one released before it (plus one) in its first count, so the list
	// takes no memory of its own (at a tumbling period's end every
	// window's slot is released at once). Without aggregates there are
	// no columns, no memory per slot, and none is reused.
	free int32
	used int // slots handed out and not released

	scratch stateScratch // appendState's
}

// stateScratch is what appendState gathers a column into.
type stateScratch struct {
	ints, ints2   []int64
	floats        []float64
	valid, values []bool
	someNull      bool
}

type accColumn struct {
	n []int64
	i []int64   // int64 and timestamp_ms inputs
	f []float64 // float64 inputs
	// The ranges of what the slots have held since the accumulators
	// were made: the highest count (counts are never below 0), and the
	// values of i that count at least one row. A snapshot writes no
	// other value, so a state file may hold them narrowed
	// (arrowfmt.NarrowSchema; see stateRanges).
	nHi  int64
	vals arrowfmt.Range
}

func newAccumulators(aggs []Aggregate) *accumulators {
	return &accumulators{aggs: aggs, cols: make([]accColumn, len(aggs))}
}

// float reports whether aggregate a keeps a value in f, and ints whether
// it keeps one in i; count keeps only n.
func (a *Aggregate) float() bool { return a.Func != AggCount && a.In == arrowfmt.Float64 }
func (a *Aggregate) ints() bool  { return a.Func != AggCount && a.In != arrowfmt.Float64 }

// alloc returns a slot holding the empty state of every aggregate.
func (acc *accumulators) alloc() int32 {
	acc.used++
	var s int32
	if acc.free != 0 {
		s = acc.free - 1
		acc.free = int32(acc.cols[0].n[s])
	} else {
		s = acc.size
		acc.size++
		for i := range acc.cols {
			c := &acc.cols[i]
			c.n = appendZero(acc.arena, c.n)
			if acc.aggs[i].float() {
				c.f = appendZero(acc.arena, c.f)
			} else if acc.aggs[i].ints() {
				c.i = appendZero(acc.arena, c.i)
			}
		}
	}
	acc.reset(s)
	return s
}

// appendZero appends a zero to s, growing it in a (if not nil: outside
// the heap once large, by remapping rather than copying) when it is full.
func appendZero[T int64 | float64](a *offheap.Arena, s []T) []T {
	if a == nil {
		return append(s, 0)
	}
	return offheap.Append(a, s, 0)
}

// reset sets slot s to the empty state: zero sums and counts, and the
// identity of min and max so that updates need not test for a first value.
func (acc *accumulators) reset(s int32) {
	for i := range acc.cols {
		a, c := &acc.aggs[i], &acc.cols[i]
		c.n[s] = 0
		switch {
		case a.Func == AggCount:
		case a.float() && a.Func == AggMin:
			c.f[s] = math.NaN() // gives way to the first value; see minOf
		case a.float() && a.Func == AggMax:
			c.f[s] = math.Inf(-1)
		case a.float():
			c.f[s] = 0
		case a.Func == AggMin:
			c.i[s] = math.MaxInt64
		case a.Func == AggMax:
			c.i[s] = math.MinInt64
		default:
			c.i[s] = 0
		}
	}
}

// release gives slot s back for reuse.
func (acc *accumulators) release(s int32) {
	acc.used--
	if len(acc.cols) > 0 {
		acc.cols[0].n[s] = int64(acc.free)
		acc.free = s + 1
	}
}

// copySlot copies slot s of src, accumulators of the same aggregates,
// into a new slot of acc and returns it.
func (acc *accumulators) copySlot(src *accumulators, s int32) int32 {
	d := acc.alloc()
	for i := range acc.cols {
		c, sc := &acc.cols[i], &src.cols[i]
		c.n[d] = sc.n[s]
		if len(sc.i) > 0 {
			c.i[d] = sc.i[s]
		}
		if len(sc.f) > 0 {
			c.f[d] = sc.f[s]
		}
	}
	return d
}

// truncate drops every slot, keeping the room.
func (acc *accumulators) truncate() {
	for i := range acc.cols {
		c := &acc.cols[i]
		c.n, c.i, c.f = c.n[:0], c.i[:0], c.f[:0]
	}
	acc.size, acc.used, acc.free = 0, 0, 0
}

// merge folds the state of slot src into slot dst (session windows).
func (acc *accumulators) merge(dst, src int32) {
	for i := range acc.cols {
		a, c := &acc.aggs[i], &acc.cols[i]
		if c.n[src] == 0 && a.Func != AggCount {
			continue
		}
		c.n[dst] += c.n[src]
		switch {
		case a.Func == AggCount:
		case a.float() && a.Func == AggMin:
			c.f[dst] = minOf(c.f[dst], c.f[src])
		case a.float() && a.Func == AggMax:
			c.f[dst] = maxOf(c.f[dst], c.f[src])
		case a.float():
			c.f[dst] += c.f[src]
		case a.Func == AggMin:
			c.i[dst] = min(c.i[dst], c.i[src])
		case a.Func == AggMax:
			c.i[dst] = max(c.i[dst], c.i[src])
		default:
			c.i[dst] += c.i[src]
		}
	}
	acc.noteSlot(dst)
}

// noteSlot widens the ranges of every column to what slot s holds.
func (acc *accumulators) noteSlot(s int32) {
	for i := range acc.cols {
		c := &acc.cols[i]
		n := c.n[s]
		c.nHi = max(c.nHi, n)
		if n > 0 && acc.aggs[i].ints() {
			c.vals.Add(c.i[s], c.i[s])
		}
	}
}

// stateRanges widens ranges, one per state column of every aggregate in
// order (stateFields), to the values a snapshot may write: each count's
// from 0 to the highest count held, and the int64 and timestamp_ms
// values held (a float's stays as it is).
func (acc *accumulators) stateRanges(ranges []arrowfmt.Range) {
	k := 0
	for i := range acc.aggs {
		c := &acc.cols[i]
		ranges[k].Add(0, c.nHi)
		k++
		if acc.aggs[i].Func == AggCount {
			continue
		}
		if acc.aggs[i].ints() {
			ranges[k].AddRange(c.vals)
		}
		k++
	}
}

// update adds row rows[j] of rec to slot slots[j] for every j, for every
// aggregate. It goes a block of updateBlock rows at a time, asking for
// the next block's slots (prefetch) before it updates this one's: at
// millions of windows each slot is a load from memory, and these then
// overlap the updates.
func (acc *accumulators) update(rec arrow.RecordBatch, rows, slots []int32) {
	acc.prefetch(slots[:min(updateBlock, len(slots))])
	for lo := 0; lo < len(slots); lo += updateBlock {
		hi := min(lo+updateBlock, len(slots))
		acc.prefetch(slots[hi:min(hi+updateBlock, len(slots))])
		acc.updateBlock(rec, rows[lo:hi], slots[lo:hi])
	}
}

// updateBlock is how many rows update takes at a time.
const updateBlock = 128

// prefetchSlot asks for the cache lines of slot s (prefetch).
func (acc *accumulators) prefetchSlot(s int32) { acc.prefetch([]int32{s}) }

// prefetch asks for the cache lines of slots in every slice the
// aggregates keep.
func (acc *accumulators) prefetch(slots []int32) {
	for i := range acc.aggs {
		c := &acc.cols[i]
		for _, s := range slots {
			offheap.Prefetch(unsafe.Pointer(&c.n[s]))
		}
		switch {
		case c.i != nil:
			for _, s := range slots {
				offheap.Prefetch(unsafe.Pointer(&c.i[s]))
			}
		case c.f != nil:
			for _, s := range slots {
				offheap.Prefetch(unsafe.Pointer(&c.f[s]))
			}
		}
	}
}

func (acc *accumulators) updateBlock(rec arrow.RecordBatch, rows, slots []int32) {
	for i := range acc.aggs {
		a, c := &acc.aggs[i], &acc.cols[i]
		if a.col < 0 {
			hi := c.nHi
			for _, s := range slots {
				v := c.n[s] + 1
				c.n[s] = v
				hi = max(hi, v)
			}
			c.nHi = hi
			continue
		}
		col := rec.Column(a.col)
		if a.Func == AggCount {
			c.nHi = countValid(c.n, c.nHi, col, rows, slots)
			continue
		}
		switch arr := col.(type) {
		case *array.Int64:
			c.updateInts(a.Func, arr.Int64Values(), arr, rows, slots)
		case *array.Timestamp:
			c.updateInts(a.Func, timestampInt64s(arr.TimestampValues()), arr, rows, slots)
		case *array.Float64:
			c.nHi, _, _, _ = updateColumn(a.Func, c.n, c.nHi, c.f, arr.Float64Values(), arr, rows, slots)
		default:
			// ParseAggregates checked the schema; a batch of another schema
			// is a bug of the caller.
			panic(fmt.Sprintf("builtin: aggregate %s over a %v column", a.Name, col.DataType()))
		}
	}
}

// countValid counts the valid rows of col into their slots' counts and
// returns the highest count, or hi if higher.
func countValid(n []int64, hi int64, col arrow.Array, rows, slots []int32) int64 {
	if col.NullN() == 0 {
		for _, s := range slots {
			v := n[s] + 1
			n[s] = v
			hi = max(hi, v)
		}
		return hi
	}
	for j, r := range rows {
		if col.IsValid(int(r)) {
			v := n[slots[j]] + 1
			n[slots[j]] = v
			hi = max(hi, v)
		}
	}
	return hi
}

// updateInts is updateColumn into the int64 accumulators of c, whose
// ranges it widens to the counts and values the slots now hold.
func (c *accColumn) updateInts(fn AggFunc, vals []int64, col arrow.Array, rows, slots []int32) {
	var lo, hi int64
	var any bool
	c.nHi, lo, hi, any = updateColumn(fn, c.n, c.nHi, c.i, vals, col, rows, slots)
	if any {
		c.vals.Add(lo, hi)
	}
}

// updateColumn is the hot loop: one aggregate over one column. It is
// generic so that int64 and float64 each get their own compiled loop. It
// returns the highest count, or nHi if higher, and the lowest and highest
// accumulator it set (any: it set one).
func updateColumn[T int64 | float64](fn AggFunc, n []int64, nHi int64, acc, vals []T, col arrow.Array, rows, slots []int32) (hiN int64, lo, hi T, any bool) {
	nulls := col.NullN() > 0
	// Each loop widens lo and hi to what it sets, from the first value
	// on (a branch taken once).
	switch fn {
	case AggSum, AggAvg:
		for j, r := range rows {
			if nulls && col.IsNull(int(r)) {
				continue
			}
			s := slots[j]
			c, v := n[s]+1, acc[s]+vals[r]
			n[s], acc[s] = c, v
			if !any {
				lo, hi, any = v, v, true
			}
			nHi, lo, hi = max(nHi, c), min(lo, v), max(hi, v)
		}
	case AggMin:
		for j, r := range rows {
			if nulls && col.IsNull(int(r)) {
				continue
			}
			s := slots[j]
			c, v := n[s]+1, minOf(acc[s], vals[r])
			n[s], acc[s] = c, v
			if !any {
				lo, hi, any = v, v, true
			}
			nHi, lo, hi = max(nHi, c), min(lo, v), max(hi, v)
		}
	case AggMax:
		for j, r := range rows {
			if nulls && col.IsNull(int(r)) {
				continue
			}
			s := slots[j]
			c, v := n[s]+1, maxOf(acc[s], vals[r])
			n[s], acc[s] = c, v
			if !any {
				lo, hi, any = v, v, true
			}
			nHi, lo, hi = max(nHi, c), min(lo, v), max(hi, v)
		}
	}
	return nHi, lo, hi, any
}

// minOf is min with NaN above every number: a NaN current value (the empty
// state, or only NaNs so far) gives way to anything.
func minOf[T int64 | float64](cur, v T) T {
	if v < cur || cur != cur {
		return v
	}
	return cur
}

// maxOf is max with NaN above every number.
func maxOf[T int64 | float64](cur, v T) T {
	if v > cur || v != v {
		return v
	}
	return cur
}

// appendResults appends the result of aggregate i for each of slots to b,
// which has the aggregate's output type.
func (acc *accumulators) appendResults(i int, b array.Builder, slots []int32) {
	a, c := &acc.aggs[i], &acc.cols[i]
	switch b := b.(type) {
	case *array.Int64Builder:
		for _, s := range slots {
			switch {
			case a.Func == AggCount:
				b.Append(c.n[s])
			case c.n[s] == 0:
				b.AppendNull()
			default:
				b.Append(c.i[s])
			}
		}
	case *array.TimestampBuilder:
		for _, s := range slots {
			if c.n[s] == 0 {
				b.AppendNull()
			} else {
				b.Append(arrow.Timestamp(c.i[s]))
			}
		}
	case *array.Float64Builder:
		for _, s := range slots {
			switch {
			case c.n[s] == 0:
				b.AppendNull()
			case a.Func == AggAvg && a.float():
				b.Append(c.f[s] / float64(c.n[s]))
			case a.Func == AggAvg:
				b.Append(float64(c.i[s]) / float64(c.n[s]))
			default:
				b.Append(c.f[s])
			}
		}
	default:
		panic(fmt.Sprintf("builtin: aggregate %s into a %T", a.Name, b))
	}
}

// timestampInt64s views timestamps as int64 milliseconds without copying.
func timestampInt64s(ts []arrow.Timestamp) []int64 {
	return arrow.Int64Traits.CastFromBytes(arrow.TimestampTraits.CastToBytes(ts))
}

// State columns. A checkpoint writes the state of aggregate a as the
// columns a.stateFields gives, one row per window:
//
//	<name>__count  int64  n (every aggregate)
//	<name>__sum    the input type: the sum (sum and avg)
//	<name>__min    the input type: the least value so far (min)
//	<name>__max    the input type: the greatest value so far (max)
//
// The value column is null exactly when the count is 0, when the state is
// the empty one. Together they rebuild the accumulator bit for bit.

// stateFields returns the state columns of a (before the operator makes
// their names unique).
func (a *Aggregate) stateFields() []arrow.Field {
	fs := []arrow.Field{{Name: a.Name + "__count", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}
	if a.Func == AggCount {
		return fs
	}
	suffix := "__sum"
	switch a.Func {
	case AggMin:
		suffix = "__min"
	case AggMax:
		suffix = "__max"
	}
	return append(fs, arrow.Field{Name: a.Name + suffix, Type: a.In.Arrow(), Nullable: true})
}

// appendState appends the state of each of slots to bs, the builders of
// the state columns of every aggregate in order; a negative slot appends
// nulls. Each column is gathered into scratch and then appended at once:
// the loads of many slots then overlap, where an Append per slot waited
// for each (the slots of a snapshot are spread over memory).
func (acc *accumulators) appendState(bs []array.Builder, slots []int32) {
	sc := &acc.scratch
	sc.valid, sc.someNull = sc.valid[:0], false
	for _, s := range slots {
		sc.valid = append(sc.valid, s >= 0)
		sc.someNull = sc.someNull || s < 0
	}
	valid := sc.valid
	if !sc.someNull {
		valid = nil
	}
	k := 0
	for i := range acc.aggs {
		a, c := &acc.aggs[i], &acc.cols[i]
		ns := sc.ints[:0]
		for _, s := range slots {
			var v int64
			if s >= 0 {
				v = c.n[s]
			}
			ns = append(ns, v)
		}
		sc.ints = ns
		bs[k].(*array.Int64Builder).AppendValues(ns, valid)
		k++
		if a.Func == AggCount {
			continue
		}
		// A value is null where the slot is, or holds no row yet.
		vv := sc.values[:0]
		for j, s := range slots {
			vv = append(vv, s >= 0 && ns[j] != 0)
		}
		sc.values = vv
		switch b := bs[k].(type) {
		case *array.Int64Builder:
			b.AppendValues(gatherInts(&sc.ints2, c.i, slots, vv), vv)
		case *array.TimestampBuilder:
			is := gatherInts(&sc.ints2, c.i, slots, vv)
			b.AppendValues(unsafe.Slice((*arrow.Timestamp)(unsafe.Pointer(unsafe.SliceData(is))), len(is)), vv)
		case *array.Float64Builder:
			fs := sc.floats[:0]
			for j, s := range slots {
				var v float64
				if vv[j] {
					v = c.f[s]
				}
				fs = append(fs, v)
			}
			sc.floats = fs
			b.AppendValues(fs, vv)
		default:
			panic(fmt.Sprintf("builtin: state of aggregate %s into a %T", a.Name, b))
		}
		k++
	}
}

// gatherInts gathers col[slots[j]] where valid[j] (0 elsewhere) into
// *buf, and returns it.
func gatherInts(buf *[]int64, col []int64, slots []int32, valid []bool) []int64 {
	out := (*buf)[:0]
	for j, s := range slots {
		var v int64
		if valid[j] {
			v = col[s]
		}
		out = append(out, v)
	}
	*buf = out
	return out
}

// checkState reports whether row r of cols, the state columns of every
// aggregate in order (of the types stateFields gives, named names), holds
// a state setState can take. The error names the column and the value.
func (acc *accumulators) checkState(cols []arrow.Array, names []string, r int) error {
	k := 0
	for i := range acc.aggs {
		a := &acc.aggs[i]
		nc := cols[k].(*array.Int64)
		if nc.IsNull(r) {
			return fmt.Errorf("column %s: null, want the count of aggregate %s", names[k], a.Name)
		}
		n := nc.Value(r)
		if n < 0 {
			return fmt.Errorf("column %s: %d is not a count", names[k], n)
		}
		k++
		if a.Func == AggCount {
			continue
		}
		switch null := cols[k].IsNull(r); {
		case null && n > 0:
			return fmt.Errorf("column %s: null with %s %d: want the value of %d rows", names[k], names[k-1], n, n)
		case !null && n == 0:
			return fmt.Errorf("column %s: %v with %s 0: want null", names[k], arrowfmt.Value(cols[k], r), names[k-1])
		}
		k++
	}
	return nil
}

// setState sets slot s to the state in row r of cols, which checkState
// accepted.
func (acc *accumulators) setState(s int32, cols []arrow.Array, r int) {
	acc.reset(s)
	k := 0
	for i := range acc.aggs {
		a, c := &acc.aggs[i], &acc.cols[i]
		c.n[s] = cols[k].(*array.Int64).Value(r)
		k++
		if a.Func == AggCount {
			continue
		}
		if c.n[s] > 0 {
			switch v := cols[k].(type) {
			case *array.Int64:
				c.i[s] = v.Value(r)
			case *array.Timestamp:
				c.i[s] = int64(v.Value(r))
			case *array.Float64:
				c.f[s] = v.Value(r)
			}
		}
		k++
	}
}
