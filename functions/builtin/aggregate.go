package builtin

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/offheap"
	"github.com/weirstream/weir/statestore/pebblestate"
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
// windows. A window owns a slot, and a slot is a row of width words
// (int64, a float64 kept as its bits) in one slice: aggregate i's count
// at word cols[i].n of the row and its value at word cols[i].v. Updating
// a batch is then a tight loop per aggregate over (row, slot) pairs with
// no interface call or allocation per row, and a snapshot gathers the
// words into columns.
//
// The words of a slot are side by side, not in a slice per aggregate as
// they were until 2026-12-06: at millions of windows every slot an event
// or a capture reaches is a load from memory, and a window of several
// aggregates took one per slice, five for count, sum and max
// (docs/benchmarks.md); a row of up to eight words is one cache line or
// two neighbours.
//
// The state per aggregate:
//
//	count:   n = rows (count()) or non-null values (count(col))
//	sum:     n = non-null values, v = sum
//	min/max: n = non-null values, v = extreme so far
//	avg:     n = non-null values, v = sum
//
// v is an int64 for int64 and timestamp_ms inputs, a float64 for float64
// ones. sum, min, max and avg are null when n is 0. Integer sums wrap on
// overflow like Java's long (and Flink's BIGINT SUM). Float min and max
// treat NaN as larger than every number (as PostgreSQL does), so the
// result does not depend on arrival order: min ignores NaN unless every
// value is NaN, and max of anything with a NaN is NaN.
type accumulators struct {
	aggs  []Aggregate
	cols  []accColumn
	width int     // words a slot takes
	words []int64 // slot s is words[s*width : (s+1)*width]
	// arena, if set, holds the words once they are many (see
	// statestore/offheap): the window operator's accumulators are a slot
	// per window of every key.
	arena *offheap.Arena
	size  int32 // slots the words hold
	// free is the latest slot released plus one, 0 for none: released
	// slots are reused before the words grow. A released slot holds the
	// one released before it (plus one) in its first word, so the list
	// takes no memory of its own (at a tumbling period's end every
	// window's slot is released at once). Without aggregates a slot has
	// no words and none is reused.
	free int32
	used int // slots handed out and not released
	// lanes, if set (setLanes), hand out slots a lane at a time (allocIn)
	// from blocks of 1<<laneShift slots that hold that lane's only, as the
	// window's key records are (offheap.Slab.SetLanes): a capture walks a
	// key group's records in memory order, and their slots then come in
	// blocks as well. blockLane is the lane of every block, in order: a
	// released slot goes back to its lane.
	lanes     []accLane
	laneShift uint
	blockLane []uint16

	scratch stateScratch // appendState's
}

// stateScratch is what appendState gathers a column into.
type stateScratch struct {
	ints, ints2   []int64
	valid, values []bool
	someNull      bool
}

// accColumn is where an aggregate's state is in a slot, and the ranges of
// what the slots have held.
type accColumn struct {
	n int // the count's word in a slot
	v int // the value's word, -1 for a count (which has none)
	// The ranges of what the slots have held since the accumulators
	// were made: the highest count (counts are never below 0), and the
	// int64 and timestamp_ms values that count at least one row. A
	// snapshot writes no other value, so a state file may hold them
	// narrowed (arrowfmt.NarrowSchema; see stateRanges).
	nHi  int64
	vals arrowfmt.Range
}

func newAccumulators(aggs []Aggregate) *accumulators {
	acc := &accumulators{aggs: aggs, cols: make([]accColumn, len(aggs))}
	for i := range aggs {
		c := &acc.cols[i]
		c.n, c.v = acc.width, -1
		acc.width++
		if aggs[i].Func != AggCount {
			c.v = acc.width
			acc.width++
		}
	}
	return acc
}

// float reports whether aggregate a keeps a float64 value, and ints
// whether it keeps an int64 one; count keeps only n.
func (a *Aggregate) float() bool { return a.Func != AggCount && a.In == arrowfmt.Float64 }
func (a *Aggregate) ints() bool  { return a.Func != AggCount && a.In != arrowfmt.Float64 }

// row returns the words of slot s.
func (acc *accumulators) row(s int32) []int64 {
	o := int(s) * acc.width
	return acc.words[o : o+acc.width : o+acc.width]
}

// floats views words as float64s: the value of an aggregate over a
// float64 column is kept as its bits.
func floats(words []int64) []float64 {
	return unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(words))), len(words))
}

func setFloat(w *int64, f float64) { *w = int64(math.Float64bits(f)) }
func getFloat(w int64) float64     { return math.Float64frombits(uint64(w)) }

// alloc returns a slot holding the empty state of every aggregate (of
// lane 0 if there are lanes).
func (acc *accumulators) alloc() int32 {
	if acc.lanes != nil {
		return acc.allocIn(0)
	}
	acc.used++
	var s int32
	switch {
	case acc.width == 0:
		s = acc.size
		acc.size++
		return s
	case acc.free != 0:
		s = acc.free - 1
		acc.free = int32(acc.words[int(s)*acc.width])
	default:
		s = acc.size
		acc.size++
		if acc.arena == nil {
			acc.words = slices.Grow(acc.words, acc.width)
		} else {
			acc.words = offheap.Grow(acc.arena, acc.words, acc.width)
		}
		acc.words = acc.words[:len(acc.words)+acc.width]
	}
	acc.reset(s)
	return s
}

// accLane is a lane's block being handed out, [next, end), and its
// released slots (as accumulators.free).
type accLane struct{ next, end, free int32 }

// laneBytes is the size of a lane's block of slots, as a block of key
// records (offheap.LaneBlock): 1 KiB.
const laneBytes = 1024

// setLanes makes alloc take slots from n lanes (allocIn); at most 65536.
// It does nothing without aggregates: a slot then has no words.
func (acc *accumulators) setLanes(n int) {
	if acc.width == 0 {
		return
	}
	acc.lanes = make([]accLane, n)
	// A power of two, so that release finds a slot's block by a shift.
	acc.laneShift = uint(max(4, bits.Len(uint(laneBytes/(8*acc.width)))-1))
}

// allocIn returns a slot of lane l holding the empty state of every
// aggregate (alloc without lanes).
func (acc *accumulators) allocIn(l int) int32 {
	if acc.lanes == nil {
		return acc.alloc()
	}
	ln := &acc.lanes[l]
	acc.used++
	var s int32
	if ln.free != 0 {
		s = ln.free - 1
		ln.free = int32(acc.words[int(s)*acc.width])
	} else {
		if ln.next == ln.end {
			n := acc.width << acc.laneShift
			if acc.arena == nil {
				acc.words = slices.Grow(acc.words, n)
			} else {
				acc.words = offheap.Grow(acc.arena, acc.words, n)
			}
			acc.words = acc.words[:len(acc.words)+n]
			ln.next, ln.end = acc.size, acc.size+1<<acc.laneShift
			acc.size = ln.end
			acc.blockLane = append(acc.blockLane, uint16(l))
		}
		s = ln.next
		ln.next++
	}
	acc.reset(s)
	// Ask for the lane's next slot now (see offheap.Slab.NewIn).
	switch {
	case ln.free != 0:
		acc.prefetchSlot(ln.free - 1)
	case ln.next != ln.end:
		acc.prefetchSlot(ln.next)
	}
	return s
}

// reset sets slot s to the empty state: zero sums and counts, and the
// identity of min and max so that updates need not test for a first value.
func (acc *accumulators) reset(s int32) {
	r := acc.row(s)
	for i := range acc.cols {
		a, c := &acc.aggs[i], &acc.cols[i]
		r[c.n] = 0
		switch {
		case a.Func == AggCount:
		case a.float() && a.Func == AggMin:
			setFloat(&r[c.v], math.NaN()) // gives way to the first value; see minOf
		case a.float() && a.Func == AggMax:
			setFloat(&r[c.v], math.Inf(-1))
		case a.float():
			setFloat(&r[c.v], 0)
		case a.Func == AggMin:
			r[c.v] = math.MaxInt64
		case a.Func == AggMax:
			r[c.v] = math.MinInt64
		default:
			r[c.v] = 0
		}
	}
}

// release gives slot s back for reuse.
func (acc *accumulators) release(s int32) {
	acc.used--
	switch {
	case acc.lanes != nil:
		ln := &acc.lanes[acc.blockLane[s>>acc.laneShift]]
		acc.words[int(s)*acc.width] = int64(ln.free)
		ln.free = s + 1
	case acc.width > 0:
		acc.words[int(s)*acc.width] = int64(acc.free)
		acc.free = s + 1
	}
}

// copySlot copies slot s of src, accumulators of the same aggregates,
// into a new slot of acc and returns it.
func (acc *accumulators) copySlot(src *accumulators, s int32) int32 {
	d := acc.alloc()
	if acc.width > 0 {
		copy(acc.row(d), src.row(s))
	}
	return d
}

// truncate drops every slot, keeping the room.
func (acc *accumulators) truncate() {
	acc.words = acc.words[:0]
	acc.size, acc.used, acc.free = 0, 0, 0
	clear(acc.lanes)
	acc.blockLane = acc.blockLane[:0]
}

// wordKinds returns how each word of a slot merges with another's when a
// store merges them (pebblestate.WordKind): as merge folds slots. It is
// nil if some word does not: a float's sum is not associative, and a
// merge must not depend on how the store groups its operands.
func (acc *accumulators) wordKinds() []pebblestate.WordKind {
	kinds := make([]pebblestate.WordKind, acc.width)
	for i := range acc.cols {
		a, c := &acc.aggs[i], &acc.cols[i]
		kinds[c.n] = pebblestate.WordAdd
		switch {
		case a.Func == AggCount:
		case a.float() && a.Func == AggMin:
			kinds[c.v] = pebblestate.WordMinFloat
		case a.float() && a.Func == AggMax:
			kinds[c.v] = pebblestate.WordMaxFloat
		case a.float():
			return nil
		case a.Func == AggMin:
			kinds[c.v] = pebblestate.WordMin
		case a.Func == AggMax:
			kinds[c.v] = pebblestate.WordMax
		default:
			kinds[c.v] = pebblestate.WordAdd
		}
	}
	return kinds
}

// merge folds the state of slot src into slot dst (session windows).
func (acc *accumulators) merge(dst, src int32) {
	d, s := acc.row(dst), acc.row(src)
	for i := range acc.cols {
		a, c := &acc.aggs[i], &acc.cols[i]
		if s[c.n] == 0 && a.Func != AggCount {
			continue
		}
		d[c.n] += s[c.n]
		switch {
		case a.Func == AggCount:
		case a.float() && a.Func == AggMin:
			setFloat(&d[c.v], minOf(getFloat(d[c.v]), getFloat(s[c.v])))
		case a.float() && a.Func == AggMax:
			setFloat(&d[c.v], maxOf(getFloat(d[c.v]), getFloat(s[c.v])))
		case a.float():
			setFloat(&d[c.v], getFloat(d[c.v])+getFloat(s[c.v]))
		case a.Func == AggMin:
			d[c.v] = min(d[c.v], s[c.v])
		case a.Func == AggMax:
			d[c.v] = max(d[c.v], s[c.v])
		default:
			d[c.v] += s[c.v]
		}
	}
	acc.noteSlot(dst)
}

// noteSlot widens the ranges of every column to what slot s holds.
func (acc *accumulators) noteSlot(s int32) {
	r := acc.row(s)
	for i := range acc.cols {
		c := &acc.cols[i]
		n := r[c.n]
		c.nHi = max(c.nHi, n)
		if n > 0 && acc.aggs[i].ints() {
			c.vals.Add(r[c.v], r[c.v])
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

// prefetch asks for the cache lines of slots: a slot's first word's, and
// its last's if that is on the next line.
func (acc *accumulators) prefetch(slots []int32) {
	w := acc.width
	switch {
	case w == 0:
	case w == 1:
		for _, s := range slots {
			offheap.Prefetch(unsafe.Pointer(&acc.words[int(s)]))
		}
	default:
		for _, s := range slots {
			first := &acc.words[int(s)*w]
			last := &acc.words[int(s)*w+w-1]
			offheap.Prefetch(unsafe.Pointer(first))
			if uintptr(unsafe.Pointer(first))>>6 != uintptr(unsafe.Pointer(last))>>6 {
				offheap.Prefetch(unsafe.Pointer(last))
			}
		}
	}
}

func (acc *accumulators) updateBlock(rec arrow.RecordBatch, rows, slots []int32) {
	w, words := acc.width, acc.words
	for i := range acc.aggs {
		a, c := &acc.aggs[i], &acc.cols[i]
		if a.col < 0 {
			hi := c.nHi
			for _, s := range slots {
				k := int(s)*w + c.n
				v := words[k] + 1
				words[k] = v
				hi = max(hi, v)
			}
			c.nHi = hi
			continue
		}
		col := rec.Column(a.col)
		if a.Func == AggCount {
			c.nHi = countValid(words, w, c.n, c.nHi, col, rows, slots)
			continue
		}
		switch arr := col.(type) {
		case *array.Int64:
			acc.updateInts(c, a.Func, arr.Int64Values(), arr, rows, slots)
		case *array.Timestamp:
			acc.updateInts(c, a.Func, timestampInt64s(arr.TimestampValues()), arr, rows, slots)
		case *array.Float64:
			c.nHi, _, _, _ = updateColumn(a.Func, words, floats(words), w, c.n, c.v, c.nHi, arr.Float64Values(), arr, rows, slots)
		default:
			// ParseAggregates checked the schema; a batch of another schema
			// is a bug of the caller.
			panic(fmt.Sprintf("builtin: aggregate %s over a %v column", a.Name, col.DataType()))
		}
	}
}

// countValid counts the valid rows of col into the count at word n of
// their slots (of w words) and returns the highest count, or hi if
// higher.
func countValid(words []int64, w, n int, hi int64, col arrow.Array, rows, slots []int32) int64 {
	if col.NullN() == 0 {
		for _, s := range slots {
			k := int(s)*w + n
			v := words[k] + 1
			words[k] = v
			hi = max(hi, v)
		}
		return hi
	}
	for j, r := range rows {
		if col.IsValid(int(r)) {
			k := int(slots[j])*w + n
			v := words[k] + 1
			words[k] = v
			hi = max(hi, v)
		}
	}
	return hi
}

// updateInts is updateColumn into the int64 state of c, whose ranges it
// widens to the counts and values the slots now hold.
func (acc *accumulators) updateInts(c *accColumn, fn AggFunc, vals []int64, col arrow.Array, rows, slots []int32) {
	var lo, hi int64
	var any bool
	c.nHi, lo, hi, any = updateColumn(fn, acc.words, acc.words, acc.width, c.n, c.v, c.nHi, vals, col, rows, slots)
	if any {
		c.vals.Add(lo, hi)
	}
}

// updateColumn is the hot loop: one aggregate over one column, its count
// at word n and its value at word v of slots of w words; acc is words
// viewed as T. It is generic so that int64 and float64 each get their own
// compiled loop. It returns the highest count, or nHi if higher, and the
// lowest and highest value it set (any: it set one).
func updateColumn[T int64 | float64](fn AggFunc, words []int64, acc []T, w, n, v int, nHi int64, vals []T, col arrow.Array, rows, slots []int32) (hiN int64, lo, hi T, any bool) {
	nulls := col.NullN() > 0
	// Each loop widens lo and hi to what it sets, from the first value
	// on (a branch taken once).
	switch fn {
	case AggSum, AggAvg:
		for j, r := range rows {
			if nulls && col.IsNull(int(r)) {
				continue
			}
			o := int(slots[j]) * w
			c, x := words[o+n]+1, acc[o+v]+vals[r]
			words[o+n], acc[o+v] = c, x
			if !any {
				lo, hi, any = x, x, true
			}
			nHi, lo, hi = max(nHi, c), min(lo, x), max(hi, x)
		}
	case AggMin:
		for j, r := range rows {
			if nulls && col.IsNull(int(r)) {
				continue
			}
			o := int(slots[j]) * w
			c, x := words[o+n]+1, minOf(acc[o+v], vals[r])
			words[o+n], acc[o+v] = c, x
			if !any {
				lo, hi, any = x, x, true
			}
			nHi, lo, hi = max(nHi, c), min(lo, x), max(hi, x)
		}
	case AggMax:
		for j, r := range rows {
			if nulls && col.IsNull(int(r)) {
				continue
			}
			o := int(slots[j]) * w
			c, x := words[o+n]+1, maxOf(acc[o+v], vals[r])
			words[o+n], acc[o+v] = c, x
			if !any {
				lo, hi, any = x, x, true
			}
			nHi, lo, hi = max(nHi, c), min(lo, x), max(hi, x)
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
	w, words := acc.width, acc.words
	switch b := b.(type) {
	case *array.Int64Builder:
		for _, s := range slots {
			o := int(s) * w
			switch {
			case a.Func == AggCount:
				b.Append(words[o+c.n])
			case words[o+c.n] == 0:
				b.AppendNull()
			default:
				b.Append(words[o+c.v])
			}
		}
	case *array.TimestampBuilder:
		for _, s := range slots {
			o := int(s) * w
			if words[o+c.n] == 0 {
				b.AppendNull()
			} else {
				b.Append(arrow.Timestamp(words[o+c.v]))
			}
		}
	case *array.Float64Builder:
		for _, s := range slots {
			o := int(s) * w
			switch n := words[o+c.n]; {
			case n == 0:
				b.AppendNull()
			case a.Func == AggAvg && a.float():
				b.Append(getFloat(words[o+c.v]) / float64(n))
			case a.Func == AggAvg:
				b.Append(float64(words[o+c.v]) / float64(n))
			default:
				b.Append(getFloat(words[o+c.v]))
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
		ns := acc.gather(&sc.ints, c.n, slots, sc.valid)
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
		is := acc.gather(&sc.ints2, c.v, slots, vv)
		switch b := bs[k].(type) {
		case *array.Int64Builder:
			b.AppendValues(is, vv)
		case *array.TimestampBuilder:
			b.AppendValues(unsafe.Slice((*arrow.Timestamp)(unsafe.Pointer(unsafe.SliceData(is))), len(is)), vv)
		case *array.Float64Builder:
			b.AppendValues(floats(is), vv)
		default:
			panic(fmt.Sprintf("builtin: state of aggregate %s into a %T", a.Name, b))
		}
		k++
	}
}

// gather gathers word k of slots[j] where valid[j] (0 elsewhere) into
// *buf, and returns it.
func (acc *accumulators) gather(buf *[]int64, k int, slots []int32, valid []bool) []int64 {
	out := (*buf)[:0]
	w, words := acc.width, acc.words
	for j, s := range slots {
		var v int64
		if valid[j] {
			v = words[int(s)*w+k]
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
	row := acc.row(s)
	k := 0
	for i := range acc.aggs {
		a, c := &acc.aggs[i], &acc.cols[i]
		row[c.n] = cols[k].(*array.Int64).Value(r)
		k++
		if a.Func == AggCount {
			continue
		}
		if row[c.n] > 0 {
			switch v := cols[k].(type) {
			case *array.Int64:
				row[c.v] = v.Value(r)
			case *array.Timestamp:
				row[c.v] = int64(v.Value(r))
			case *array.Float64:
				setFloat(&row[c.v], v.Value(r))
			}
		}
		k++
	}
}
