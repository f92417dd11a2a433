package builtin

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/offheap"
	"github.com/weirstream/weir/statestore/rows"
)

// joinBatchRows caps the rows of one emitted batch.
const joinBatchRows = 1 << 16

type joinKind uint8

const (
	joinRegular joinKind = iota + 1
	joinInterval
	joinWindow
)

// joinSideNames names the inputs as the spec does: join.left, join.right.
var joinSideNames = [2]string{"left", "right"}

// joinOutCol is an output column copied from column col of input side.
type joinOutCol struct{ side, col int }

// joinConfig is what JoinSchema and NewJoin derive from the spec.
type joinConfig struct {
	name  string
	kind  joinKind
	ttl   int64 // ms; regular joins, 0: rows are kept forever
	lower int64 // ms; interval joins
	upper int64
	win   windowKind // window joins: tumbling or sliding
	size  int64      // ms
	slide int64      // ms; size for tumbling windows

	in       [2]Stream
	keys     [2][]int
	keyTypes []arrowfmt.Type
	// fast: the key is one int64 or timestamp_ms column, compared as an
	// int64 instead of by its encoding.
	fast bool
	// cols are the output columns after window_start and window_end
	// (window joins: winCols is 2).
	cols    []joinOutCol
	winCols int
	out     Stream
	where   *compiledExpr // nil without where
}

// JoinSchema checks the join o of the streams left and right and returns
// what it emits and the key columns of each input, by which the runtime
// hash-partitions them (equal keys of equal types hash equally, so they
// meet in one subtask).
//
// The output columns are join.columns in order, each "left.<column>" or
// "right.<column>" with the input's type; by default every left column then
// every right column under its own name, which must then be unique. A
// window join's output starts with window_start and window_end
// (timestamp_ms) and its event time is window_end - 1, as for the window
// operator. The event time of a regular or interval join's output is the
// first output column that is the left input's event-time column, else the
// first that is the right's, else none.
func JoinSchema(o *spec.Operator, left, right Stream) (out Stream, leftKeys, rightKeys []int, err error) {
	cfg, err := newJoinConfig(o, left, right)
	if err != nil {
		return Stream{}, nil, nil, err
	}
	return cfg.out, cfg.keys[0], cfg.keys[1], nil
}

func newJoinConfig(o *spec.Operator, left, right Stream) (*joinConfig, error) {
	jn := o.Join
	if jn == nil {
		return nil, fmt.Errorf("join %s: join: missing", o.Name)
	}
	cfg := &joinConfig{name: o.Name, in: [2]Stream{left, right}}
	var errs []error
	// Every problem names the spec field it is about.
	base := fmt.Sprintf("operators[%s]", o.Name)
	addAt := func(field, format string, args ...any) {
		errs = append(errs, spec.Errorf(base+"."+field, format, args...))
	}
	ms := func(field string, d spec.Duration) int64 {
		if d%spec.Duration(time.Millisecond) != 0 {
			addAt(field, "%s is not a whole number of milliseconds", d)
		}
		return int64(d.D() / time.Millisecond)
	}

	switch jn.Type {
	case spec.JoinRegular:
		cfg.kind = joinRegular
		if jn.TTL < 0 {
			addAt("join.ttl", "%s is negative: want 0 (keep rows forever) or more", jn.TTL)
		}
		cfg.ttl = ms("join.ttl", jn.TTL)
	case spec.JoinInterval:
		cfg.kind = joinInterval
		cfg.lower = ms("join.lower", jn.Lower)
		cfg.upper = ms("join.upper", jn.Upper)
		if jn.Lower > jn.Upper {
			addAt("join.lower", "%s is above upper %s", jn.Lower, jn.Upper)
		}
	case spec.JoinWindow:
		cfg.kind = joinWindow
		w := jn.Window
		if w == nil {
			addAt("join.window", "missing: a window join needs a window: {type: tumbling|sliding, ...}")
			break
		}
		positive := func(field string, d spec.Duration) int64 {
			if d < spec.Duration(time.Millisecond) {
				addAt("join.window."+field, "%s: want at least 1ms", d)
				return 1
			}
			return max(1, ms("join.window."+field, d))
		}
		switch w.Type {
		case spec.WindowTumbling:
			cfg.win = kindTumbling
			cfg.size = positive("size", w.Size)
			cfg.slide = cfg.size
		case spec.WindowSliding:
			cfg.win = kindSliding
			cfg.size = positive("size", w.Size)
			cfg.slide = positive("slide", w.Slide)
			if w.Slide > w.Size {
				addAt("join.window.slide", "%s is longer than size %s", w.Slide, w.Size)
			}
		default:
			addAt("join.window.type", "%q is not supported in joins: want tumbling or sliding", w.Type)
		}
		if w.AllowedLateness != 0 || w.LateOutput != "" {
			addAt("join.window", "allowedLateness and lateOutput are not supported in joins: late rows are counted and dropped")
		}
	default:
		addAt("join.type", "%q is not a join type: want regular, interval or window", jn.Type)
	}

	needTime := cfg.kind == joinInterval || cfg.kind == joinWindow || cfg.kind == joinRegular && cfg.ttl > 0
	inputs := [2]string{jn.Left.Input, jn.Right.Input}
	for s, in := range cfg.in {
		field := "join." + joinSideNames[s] + ".input"
		switch {
		case in.Schema == nil:
			addAt(field, "%q has no schema", inputs[s])
		case !in.HasTime():
			if needTime {
				addAt(field, "%q has no event time: %s needs event time on both inputs (the source's eventTime)", inputs[s], cfg.needsTime())
			}
		case in.TimeColumn >= in.Schema.NumFields():
			addAt(field, "event time column %d is out of range: %q has %d columns", in.TimeColumn, inputs[s], in.Schema.NumFields())
		default:
			if t := in.Schema.Field(in.TimeColumn).Type; t.ID() != arrow.TIMESTAMP && t.ID() != arrow.INT64 {
				addAt(field, "event time column %q is %v, want timestamp_ms", in.Schema.Field(in.TimeColumn).Name, t)
			}
		}
	}
	if len(errs) > 0 && (left.Schema == nil || right.Schema == nil) {
		return nil, fmt.Errorf("join %s: %w", o.Name, errors.Join(errs...))
	}

	// Keys.
	keyBy := [2][]string{jn.Left.KeyBy, jn.Right.KeyBy}
	var keyTypes [2][]arrowfmt.Type
	keysOK := true
	for s := range 2 {
		field := "join." + joinSideNames[s] + ".keyBy"
		if len(keyBy[s]) == 0 {
			addAt(field, "missing: the columns of the %s key", joinSideNames[s])
			keysOK = false
			continue
		}
		idx, err := cfg.in[s].Columns(base+"."+field, keyBy[s])
		if err != nil {
			errs = append(errs, err)
			keysOK = false
			continue
		}
		cfg.keys[s] = idx
		for i, c := range idx {
			t, err := arrowfmt.TypeOf(cfg.in[s].Schema.Field(c).Type)
			if err != nil {
				addAt(field, "column %q: %w", keyBy[s][i], err)
				keysOK = false
			}
			keyTypes[s] = append(keyTypes[s], t)
		}
	}
	if keysOK {
		if len(keyBy[0]) != len(keyBy[1]) {
			addAt("join.right.keyBy", "%d columns %q, but join.left.keyBy has %d %q: the keys must have the same number of columns", len(keyBy[1]), keyBy[1], len(keyBy[0]), keyBy[0])
		} else {
			for i := range keyBy[0] {
				if lt, rt := keyTypes[0][i], keyTypes[1][i]; lt != rt {
					addAt("join.right.keyBy", "column %q is %s, but left key column %q is %s: key columns must have the same types pairwise", keyBy[1][i], rt, keyBy[0][i], lt)
				}
			}
			cfg.keyTypes = keyTypes[0]
			cfg.fast = len(cfg.keyTypes) == 1 && (cfg.keyTypes[0] == arrowfmt.Int64 || cfg.keyTypes[0] == arrowfmt.TimestampMs)
		}
	}

	// Output columns.
	var fields []arrowfmt.Field
	names := map[string]string{}
	if cfg.kind == joinWindow {
		cfg.winCols = 2
		fields = append(fields, arrowfmt.Field{Name: "window_start", Type: arrowfmt.TimestampMs}, arrowfmt.Field{Name: "window_end", Type: arrowfmt.TimestampMs})
		names["window_start"] = "the window_start column"
		names["window_end"] = "the window_end column"
	}
	addCol := func(field, name string, side, col int) {
		t, err := arrowfmt.TypeOf(cfg.in[side].Schema.Field(col).Type)
		if err != nil {
			addAt(field, "%w", err)
			return
		}
		cfg.cols = append(cfg.cols, joinOutCol{side: side, col: col})
		fields = append(fields, arrowfmt.Field{Name: name, Type: t})
	}
	if jn.Columns.Len() == 0 {
		for s := range 2 {
			for c, f := range cfg.in[s].Schema.Fields() {
				from := fmt.Sprintf("%s.%s", joinSideNames[s], f.Name)
				if prev, dup := names[f.Name]; dup {
					addAt("join.columns", "missing, and the default output columns (every left column, then every right column) have %q twice, as %s and %s: list the output columns, e.g. columns: {%s: %s, %s_%s: %s}",
						f.Name, prev, from, f.Name, strings.TrimPrefix(prev, "the "), joinSideNames[s], f.Name, from)
					continue
				}
				names[f.Name] = from
				addCol("join.columns", f.Name, s, c)
			}
		}
	} else {
		for i, name := range jn.Columns.Keys {
			v := jn.Columns.Values[i]
			field := "join.columns." + name
			sideName, col, ok := strings.Cut(v, ".")
			side := slices.Index(joinSideNames[:], sideName)
			if !ok || side < 0 || col == "" {
				addAt(field, "%q: want left.<column> or right.<column>", v)
				continue
			}
			idx := cfg.in[side].Schema.FieldIndices(col)
			if len(idx) == 0 {
				addAt(field, "%q: the %s input has no column %q (columns: %s)", v, sideName, col, columnList(cfg.in[side].Schema))
				continue
			}
			if prev, dup := names[name]; dup {
				addAt(field, "the name collides with %s", prev)
				continue
			}
			names[name] = "column " + name
			addCol(field, name, side, idx[0])
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("join %s: %w", o.Name, errors.Join(errs...))
	}
	schema, err := arrowfmt.NewSchema(fields)
	if err != nil {
		return nil, fmt.Errorf("join %s: build output schema: %w", o.Name, err)
	}
	cfg.out = Stream{Schema: schema, TimeColumn: -1}
	if cfg.kind == joinWindow {
		cfg.out.TimeColumn, cfg.out.TimeOffset = 1, -1
	} else {
		for s := range 2 {
			if !cfg.in[s].HasTime() {
				continue
			}
			if i := slices.Index(cfg.cols, joinOutCol{side: s, col: cfg.in[s].TimeColumn}); i >= 0 {
				cfg.out.TimeColumn, cfg.out.TimeOffset = cfg.winCols+i, cfg.in[s].TimeOffset
				break
			}
		}
	}
	if strings.TrimSpace(jn.Where) != "" {
		field := fmt.Sprintf("operators[%s].join.where", o.Name)
		e, err := compileExpr(field, jn.Where, cfg.out)
		if err != nil {
			return nil, fmt.Errorf("join %s: %w", o.Name, err)
		}
		if !e.kindOK || e.kind != exBool {
			return nil, fmt.Errorf("join %s: %w", o.Name, spec.Errorf(field, "expression %q: where must be a boolean expression, got %s", jn.Where, exprTypeName(e.typ)))
		}
		cfg.where = e
	}
	return cfg, nil
}

func (cfg *joinConfig) needsTime() string {
	switch cfg.kind {
	case joinInterval:
		return "an interval join"
	case joinWindow:
		return "a window join"
	}
	return "a regular join with ttl"
}

// retention is about how long a row is kept: the granularity of cleanup
// is a fraction of it.
func (cfg *joinConfig) retention() int64 {
	switch cfg.kind {
	case joinRegular:
		return cfg.ttl
	case joinInterval:
		return max(cfg.upper-cfg.lower, cfg.upper, -cfg.lower)
	}
	return 0 // window rows expire when a window ends: few distinct times
}

// NewJoin returns the join operator of o with inputs left (input 0) and
// right (input 1); it is a task.TwoInputOperator and a task.Stateful. The
// runtime routes each input's rows by the key groups of its keyBy columns
// (arrowfmt.HashKeys), so equal keys meet in one subtask; a row of a key
// group outside ctx.KeyGroupStart..KeyGroupEnd is an error. A row joins
// the rows of the other input with an equal key: a key with a null in any
// column never matches (SQL), and such rows are not kept. Event time is the
// time column plus the input's TimeOffset; wm below is the watermark, the
// least of both inputs' (ProcessWatermark).
//
// A regular join is Flink's streaming inner join, with a state ttl in
// event time. A row is matched, when it arrives, against every kept row of
// the other input with its key, and the pairs go out at once (one batch
// per input batch). Then the row is kept. With ttl > 0 a row is forgotten
// once ts+ttl <= wm: it no longer matches, and a row that arrives with
// ts+ttl <= wm still matches what is kept but is not kept itself. A row
// with a null event time is kept for good, as all rows are with ttl 0.
// Nothing is late.
//
// An interval join is Flink's IntervalJoinOperator with between(-upper,
// -lower) (Flink bounds the right row's time by the left's, the spec the
// left's by the right's): left l and right r match when
//
//	r.ts + lower <= l.ts <= r.ts + upper
//
// both bounds inclusive, in milliseconds, either may be negative. A row
// with ts < wm (or a null event time) is late: it is counted in
// Counters.LateDropped and dropped. Any other row is matched against the
// kept rows of the other input with its key (the pairs go out at once) and
// kept. A left row is forgotten once wm > l.ts - lower, a right row once
// wm > r.ts + upper: from then on no row of the other input that is not
// late can match it. (Flink's cleanup timer fires at wm >= l.ts - lower,
// or at l.ts if that is later, and can then miss the pair with a row that
// comes with ts = wm exactly; weir keeps a row to the end of its last
// millisecond, so that the output is every matching pair of rows that
// were not late, whatever the order in which rows and watermarks come.)
//
// The output of a regular or interval join carries the event time of the
// column JoinSchema picks. The join does not hold the watermark back, so a
// pair with a row kept from long ago can go out at or behind the
// watermark, and an event-time operator downstream may find it late.
//
// A window join is Flink's window join (a coGroup over windows, without
// allowed lateness): each row
// belongs to every window that contains its event time, tumbling [k*size,
// +size) or sliding [k*slide, k*slide+size), aligned to the epoch. A
// window has fired once wm >= end-1; a row goes to its windows that have
// not, and a row all of whose windows have fired (or with a null event
// time) is late: counted in Counters.LateDropped and dropped. When wm
// reaches a window's end-1, every pair of a left and a right row of one
// key in that window goes out, with window_start and window_end, and the
// window's rows are forgotten (a row stays for its later windows).
// Nothing else is emitted, so Finish, after ProcessWatermark(MaxWatermark),
// has nothing to do.
//
// join.where keeps the output rows for which the expression over the
// output columns is true; a row for which it is null or fails is dropped.
//
// Output order is deterministic: a batch's pairs follow the order of its
// rows, and for each row the order in which the matched rows arrived; a
// watermark's windows go out by (window_end, key), where keys compare by
// their arrowfmt key encoding, and a window's pairs in arrival order of
// the left row, then of the right.
//
// Rows are kept as references into the input batches, which the operator
// retains until none of their rows is kept any more; a key's rows of each
// input form a linked list in arrival order. A forgotten row no longer
// matches at once; its memory goes back at the next watermark that passes
// the end of its cleanup bucket (a fraction of the ttl or interval).
//
// The operator is a task.Stateful; join_state.go describes its state
// batches.
func NewJoin(o *spec.Operator, left, right Stream) (task.Operator, error) {
	cfg, err := newJoinConfig(o, left, right)
	if err != nil {
		return nil, err
	}
	j := &joinOperator{cfg: cfg, wm: task.MinWatermark, state: newJoinStateLayout(cfg)}
	for r := cfg.retention() / 64; r > 1 && j.shift < 10; r >>= 1 {
		j.shift++
	}
	return j, nil
}

// joinRef is row r of the kept batch b of one input; b < 0: none (null).
type joinRef struct{ b, r int32 }

// joinEntry is one kept row of an input. The entries of an input live in
// joinOperator.ents and those of a key chain through prev and next; free
// ones form a list through next, with seq 0.
type joinEntry struct {
	ts   int64 // event time
	exp  int64 // the row is forgotten once the watermark reaches exp
	b, r int32 // the row: batch b of its input, row r
	prev int32 // the key's previous row of the same input, or -1
	next int32 // the key's next row of the same input, or -1
	key  int32
	seq  uint32
}

// joinKey is the state of one key: its rows of each input, as lists of
// entries. It is kept small: a key has often just one row. Its encoding
// (keys that are not fast) is in joinOperator.keyBytes where ikey says;
// its windows are in win1 at the same index.
type joinKey struct {
	hash  uint64
	ikey  int64 // the key value (fast keys), or its encoding's offset in keyBytes
	next  int32 // the next free key (free keys)
	group int32 // key group, or -1 for a free key
	head  [2]int32
	tail  [2]int32
}

// joinCol is a column of a kept batch, typed so that reading a value does
// not box it.
type joinCol struct {
	arr   arrow.Array
	nulls bool
	ints  []int64 // int64 and timestamp_ms
	flts  []float64
	strs  *array.String
	bools *array.Boolean
}

func makeJoinCol(a arrow.Array) joinCol {
	c := joinCol{arr: a, nulls: a.NullN() > 0}
	switch a := a.(type) {
	case *array.Int64:
		c.ints = a.Int64Values()
	case *array.Timestamp:
		c.ints = timestampInt64s(a.TimestampValues())
	case *array.Float64:
		c.flts = a.Float64Values()
	case *array.String:
		c.strs = a
	case *array.Boolean:
		c.bools = a
	}
	return c
}

// joinBatch is a retained input batch with kept rows.
type joinBatch struct {
	rec  arrow.RecordBatch // nil: a free slot
	cols []joinCol
	live int32 // kept rows
}

// joinSide holds the batches of one input with kept rows.
type joinSide struct {
	batches []joinBatch
	free    []int32
}

// add retains rec and returns its slot.
func (s *joinSide) add(rec arrow.RecordBatch) int32 {
	rec.Retain()
	var i int32
	if n := len(s.free); n > 0 {
		i = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		s.batches = append(s.batches, joinBatch{})
		i = int32(len(s.batches) - 1)
	}
	bt := &s.batches[i]
	bt.rec, bt.live = rec, 0
	bt.cols = bt.cols[:0]
	for _, c := range rec.Columns() {
		bt.cols = append(bt.cols, makeJoinCol(c))
	}
	return i
}

// unref releases batch i if none of its rows is kept.
func (s *joinSide) unref(i int32) {
	bt := &s.batches[i]
	if bt.live > 0 {
		return
	}
	bt.rec.Release()
	bt.rec = nil
	clear(bt.cols)
	s.free = append(s.free, i)
}

func (s *joinSide) release() {
	for i := range s.batches {
		if bt := &s.batches[i]; bt.rec != nil {
			bt.rec.Release()
			bt.rec = nil
		}
	}
	s.batches, s.free = nil, nil
}

// cell returns column c of the batch of ref, and whether ref's value in it
// is there (not a null, and ref.b >= 0).
func (s *joinSide) cell(c int, ref joinRef) (*joinCol, bool) {
	if ref.b < 0 {
		return nil, false
	}
	col := &s.batches[ref.b].cols[c]
	return col, !col.nulls || !col.arr.IsNull(int(ref.r))
}

// appendColumn appends column c of the rows refs to bld, a builder of the
// column's type; a ref with b < 0 appends a null.
func (s *joinSide) appendColumn(bld array.Builder, c int, refs []joinRef) {
	bld.Reserve(len(refs))
	switch bb := bld.(type) {
	case *array.Int64Builder:
		for _, ref := range refs {
			if col, ok := s.cell(c, ref); ok {
				bb.UnsafeAppend(col.ints[ref.r])
			} else {
				bb.UnsafeAppendBoolToBitmap(false)
			}
		}
	case *array.TimestampBuilder:
		for _, ref := range refs {
			if col, ok := s.cell(c, ref); ok {
				bb.UnsafeAppend(arrow.Timestamp(col.ints[ref.r]))
			} else {
				bb.UnsafeAppendBoolToBitmap(false)
			}
		}
	case *array.Float64Builder:
		for _, ref := range refs {
			if col, ok := s.cell(c, ref); ok {
				bb.UnsafeAppend(col.flts[ref.r])
			} else {
				bb.UnsafeAppendBoolToBitmap(false)
			}
		}
	case *array.BooleanBuilder:
		for _, ref := range refs {
			if col, ok := s.cell(c, ref); ok {
				bb.UnsafeAppend(col.bools.Value(int(ref.r)))
			} else {
				bb.UnsafeAppendBoolToBitmap(false)
			}
		}
	case *array.StringBuilder:
		for _, ref := range refs {
			if col, ok := s.cell(c, ref); ok {
				bb.Append(col.strs.Value(int(ref.r)))
			} else {
				bb.AppendNull()
			}
		}
	default:
		panic(fmt.Sprintf("builtin: join: gather into a %T", bld))
	}
}

// joinTimers holds lists of keys by time, with a min-heap of the times:
// the window timers (at end-1) and the cleanup buckets of a join. Many
// keys share a time, so adding one is usually an append to the list the
// previous add used.
type joinTimers struct {
	times    timeHeap
	slots    map[int64]int32
	lists    [][]int32
	free     []int32
	lastAt   int64
	lastSlot int32 // -1: none
}

func (q *joinTimers) push(at int64, key int32) {
	s := q.lastSlot
	if s < 0 || q.lastAt != at {
		var ok bool
		if s, ok = q.slots[at]; !ok {
			if q.slots == nil {
				q.slots = map[int64]int32{}
			}
			if n := len(q.free); n > 0 {
				s = q.free[n-1]
				q.free = q.free[:n-1]
			} else {
				q.lists = append(q.lists, nil)
				s = int32(len(q.lists) - 1)
			}
			q.slots[at] = s
			q.times.push(at)
		}
		q.lastAt, q.lastSlot = at, s
	}
	l := q.lists[s]
	if n := len(l); n > 0 && l[n-1] == key {
		return
	}
	q.lists[s] = append(l, key)
}

// popDue removes the earliest time if it is at or before wm and returns
// it with the slot of its keys, which the caller gives back with done.
func (q *joinTimers) popDue(wm int64) (at int64, slot int32, ok bool) {
	at, ok = q.times.popDue(wm)
	if !ok {
		return 0, 0, false
	}
	slot = q.slots[at]
	delete(q.slots, at)
	if q.lastSlot == slot {
		q.lastSlot = -1
	}
	return at, slot, true
}

func (q *joinTimers) done(slot int32) {
	q.lists[slot] = q.lists[slot][:0]
	q.free = append(q.free, slot)
}

func (q *joinTimers) reset() {
	*q = joinTimers{lastSlot: -1}
}

// joinFiring is a window of a key due to fire.
type joinFiring struct {
	end int64
	key int32
}

// joinOperator is the operator NewJoin returns. One goroutine drives it.
type joinOperator struct {
	cfg      *joinConfig
	counters *task.Counters
	maxPar   int
	kgStart  int
	nGroups  int
	wm       int64
	// floor is, after a restore, the watermark each key group (index: key
	// group - kgStart) had when it was saved; a group goes on from it
	// while the watermark is lower (a restore at another parallelism
	// starts at the least of the old subtasks' watermarks). nil when no
	// group's is above wm.
	floor    []int64
	maxFloor int64

	sides [2]joinSide
	// groups holds per key group (index: key group - kgStart) a table of
	// its keys. arena holds the tables, keys and ents once they are large
	// (offheap.Append), so that the collector neither scans them nor
	// lets them double, and a growing list is remapped rather than
	// copied.
	groups []keyTable
	arena  offheap.Arena
	keys   []joinKey
	// keyBytes holds the arrowfmt encodings of the keys that are not
	// fast, each after its length (a uvarint), where the key's ikey says.
	// A dropped key's bytes stay until keyGarbage, their count, is half
	// of keyBytes and at least keyCompactMin (0: joinKeyCompactMin;
	// tests set it low); then the next new key compacts them
	// (compactKeys, counted in keyCompactions).
	keyBytes       []byte
	keyGarbage     int
	keyCompactMin  int
	keyCompactions int
	// win1 and winMore hold per key the ends of the windows with rows of
	// the key that have not fired (window joins; see addWindow).
	win1    []int64
	winMore map[int32][]int64
	free    int32          // first free key, or -1
	ents    [2][]joinEntry // per input
	freeEnt [2]int32       // first free entry of each input, or -1
	rows    []int32        // kept rows per key group (index: key group - kgStart)

	// shift: cleanup buckets are 1<<shift ms; expiry holds, per input and
	// bucket, the entries of the rows forgotten in it.
	shift  uint
	expiry [2]joinTimers
	timers joinTimers // window joins: keys by window end-1

	joinOut

	// Checkpoints (join_state.go). Once on (from the first Snapshot or
	// Restore of State on), changes lists the rows kept since the last
	// snapshot, in order. Per key group: hadRows, the saved state
	// (base and deltas so far) may have rows of it; saved, the watermark
	// of its last expire entry. restored: state was restored and is not
	// settled yet; started: input or a watermark has come.
	state    *joinStateLayout
	changes  rows.ChangeLog[joinDirty]
	seq      uint32
	hadRows  []bool
	saved    []int64
	restored bool
	started  bool
	// capture is the snapshot being captured in steps, or nil;
	// spareChanges a change list a capture is done with.
	capture      *joinCapture
	spareChanges []joinDirty
	// captureChunk is how many keys or changes a capture step takes
	// between looks at the clock (tests set 1).
	captureChunk int
	stateRefs    [2][]joinRef // scratch of buildStateRows

	// Scratch reused across calls.
	hashes   []uint64
	keyBuf   []byte
	fire     []joinFiring
	scratch  []joinRef
	warmRefs []offheap.Ref // warmKeys': the keys it asked for
}

// joinOut is what a join sends downstream: its builder, and the pairs
// gathered for the next batch.
type joinOut struct {
	cfg      *joinConfig
	ctx      *task.Context
	mem      memory.Allocator
	out      *array.RecordBuilder
	failures exprFailures
	sel      []int32
	// The pairs of the output being gathered: left rows, right rows and,
	// for window joins, window starts.
	pl, pr []joinRef
	pw     []int64
}

// open takes what the output needs from ctx.
func (o *joinOut) open(cfg *joinConfig, ctx *task.Context) error {
	if ctx.Out == nil {
		return fmt.Errorf("join %s: open: no output", cfg.name)
	}
	o.cfg, o.ctx = cfg, ctx
	o.mem = exprMem(ctx)
	o.failures.log = exprLogger(ctx)
	o.out = array.NewRecordBuilder(o.mem, cfg.out.Schema)
	return nil
}

func (o *joinOut) close() {
	if o.out != nil {
		o.out.Release()
		o.out = nil
	}
}

var (
	_ task.TwoInputOperator = (*joinOperator)(nil)
	_ task.Stateful         = (*joinOperator)(nil)
)

func (j *joinOperator) Open(ctx *task.Context) error {
	if err := j.joinOut.open(j.cfg, ctx); err != nil {
		return err
	}
	j.counters = ctx.Counters
	if j.counters == nil {
		j.counters = new(task.Counters)
	}
	var end int
	j.maxPar, j.kgStart, end = keyGroupsOf(ctx)
	j.nGroups = end - j.kgStart
	j.rows = make([]int32, j.nGroups)
	j.hadRows = make([]bool, j.nGroups)
	j.saved = make([]int64, j.nGroups)
	for g := range j.saved {
		j.saved[g] = task.MinWatermark
	}
	j.groups = make([]keyTable, j.nGroups)
	j.free, j.freeEnt = -1, [2]int32{-1, -1}
	j.expiry[0].reset()
	j.expiry[1].reset()
	j.timers.reset()
	return nil
}

// keyGroupsOf returns the job's max parallelism and the subtask's key
// groups [start, end) from ctx (every key group if it sets none).
func keyGroupsOf(ctx *task.Context) (maxPar, start, end int) {
	maxPar = ctx.MaxParallelism
	if maxPar <= 0 {
		maxPar = arrowfmt.DefaultMaxParallelism
	}
	start, end = ctx.KeyGroupStart, ctx.KeyGroupEnd
	if end <= start { // not set: every key group
		start, end = 0, maxPar
	}
	return maxPar, start, end
}

// ProcessBatch is not used: the runtime gives a join its batches through
// ProcessBatchFrom.
func (j *joinOperator) ProcessBatch(arrow.RecordBatch) error {
	return fmt.Errorf("join %s: process batch: a join has two inputs: the runtime must call ProcessBatchFrom", j.cfg.name)
}

// effWm returns the watermark key group g (index) goes by: wm, or the
// watermark it was saved at if that is higher.
func (j *joinOperator) effWm(g int) int64 {
	if j.floor != nil && j.floor[g] > j.wm {
		return j.floor[g]
	}
	return j.wm
}

// lastEnd returns the end of the last window that contains ts.
func (cfg *joinConfig) lastEnd(ts int64) int64 {
	return satAdd(ts-floorMod(ts, cfg.slide), cfg.size)
}

// satAddSigned is a+b saturating at the int64 bounds.
func satAddSigned(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// expiryOf returns when a kept row of input side with event time ts is
// forgotten, the least watermark at which it is (see NewJoin);
// math.MaxInt64 for never.
func (j *joinOperator) expiryOf(side int, ts int64, hasTs bool) int64 {
	return j.cfg.expiryOf(side, ts, hasTs)
}

func (c *joinConfig) expiryOf(side int, ts int64, hasTs bool) int64 {
	switch c.kind {
	case joinRegular:
		if c.ttl == 0 || !hasTs {
			return math.MaxInt64
		}
		return satAdd(ts, c.ttl)
	case joinInterval:
		if side == 0 {
			return satAddSigned(satAddSigned(ts, -c.lower), 1)
		}
		return satAddSigned(satAddSigned(ts, c.upper), 1)
	}
	return c.lastEnd(ts) - 1
}

func (j *joinOperator) ProcessBatchFrom(input int, b arrow.RecordBatch) error {
	if input != 0 && input != 1 {
		return fmt.Errorf("join %s: process batch: input %d, want 0 (left) or 1 (right)", j.cfg.name, input)
	}
	j.begin()
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	c := j.cfg
	if err := c.checkBatch(input, b); err != nil {
		return err
	}
	times, tcol := c.times(input, b)
	timeNulls := tcol != nil && tcol.NullN() > 0
	offset := c.in[input].TimeOffset

	keyCols := c.keys[input]
	j.hashes = arrowfmt.HashKeys(b, keyCols, j.hashes)
	if err := c.checkRouting(input, j.hashes, j.maxPar, j.kgStart, j.kgStart+j.nGroups); err != nil {
		return err
	}
	keyNulls := hasNulls(b, keyCols)
	var keyInts []int64
	if c.fast {
		keyInts = makeJoinCol(b.Column(keyCols[0])).ints
	}

	bi := j.sides[input].add(b)
	other := 1 - input
	late := 0
	var err error
	for r := range n {
		if r%warmRows == 0 {
			j.warmKeys(j.hashes[r:min(r+warmRows, n)])
			j.warmEntries(input)
		}
		hasTs := times != nil && !(timeNulls && tcol.IsNull(r))
		var ts int64
		if hasTs {
			ts = times[r] + offset
		}
		g := arrowfmt.KeyGroup(j.hashes[r], j.maxPar) - j.kgStart
		wm := j.wm
		if j.floor != nil {
			wm = j.effWm(g)
		}
		if c.late(ts, hasTs, wm) {
			late++
			continue
		}
		if keyNulls && joinKeyNull(b, keyCols, r) {
			continue
		}
		var ikey int64
		if keyInts != nil {
			ikey = keyInts[r]
		} else {
			j.keyBuf = arrowfmt.AppendRowKey(j.keyBuf[:0], b, keyCols, r)
		}
		k := j.findKey(g, j.hashes[r], ikey)

		if k >= 0 && c.kind != joinWindow {
			me := joinRef{bi, int32(r)}
			ents := j.ents[other]
			for e := j.keys[k].head[other]; e >= 0; {
				ent := &ents[e]
				var match bool
				if c.kind == joinRegular {
					match = ent.exp > wm
				} else if input == 0 {
					match = ent.ts+c.lower <= ts && ts <= ent.ts+c.upper
				} else {
					match = ts+c.lower <= ent.ts && ent.ts <= ts+c.upper
				}
				if match {
					if input == 0 {
						j.pl, j.pr = append(j.pl, me), append(j.pr, joinRef{ent.b, ent.r})
					} else {
						j.pl, j.pr = append(j.pl, joinRef{ent.b, ent.r}), append(j.pr, me)
					}
				}
				e = ent.next
			}
			if len(j.pl) >= joinBatchRows {
				if err = j.flush(); err != nil {
					break
				}
			}
		}

		exp := j.expiryOf(input, ts, hasTs)
		if exp <= wm {
			continue // no later row can match it: past its ttl, say
		}
		if k < 0 {
			k = j.newKey(j.hashes[r], ikey, g)
		}
		j.store(k, input, bi, int32(r), ts, exp)
		if c.kind == joinWindow {
			j.addWindows(k, ts, wm)
		}
	}
	if late > 0 {
		j.counters.LateDropped.Add(int64(late))
	}
	if err == nil {
		err = j.flush()
	}
	j.sides[input].unref(bi)
	return err
}

// late reports whether a row at ts (hasTs: it has an event time) is late
// at watermark wm: in an interval join, behind it; in a window join, when
// every window of it has fired. Nothing is late in a regular join.
func (c *joinConfig) late(ts int64, hasTs bool, wm int64) bool {
	switch c.kind {
	case joinInterval:
		return !hasTs || ts < wm
	case joinWindow:
		return !hasTs || c.lastEnd(ts)-1 <= wm
	}
	return false
}

// checkBatch checks that b has the columns of input.
func (c *joinConfig) checkBatch(input int, b arrow.RecordBatch) error {
	in, side := c.in[input], joinSideNames[input]
	if int(b.NumCols()) != in.Schema.NumFields() {
		return fmt.Errorf("join %s: process %s batch: %d columns, want %d (%s)", c.name, side, b.NumCols(), in.Schema.NumFields(), columnList(in.Schema))
	}
	for i := range in.Schema.NumFields() {
		if f, t := in.Schema.Field(i), b.Column(i).DataType(); !arrow.TypeEqual(t, f.Type) {
			return fmt.Errorf("join %s: process %s batch: column %d %q is %v, want %v", c.name, side, i, f.Name, t, f.Type)
		}
	}
	return nil
}

// times returns the time column of b, a batch of input, and its values
// (without the input's offset); nil if the input has none.
func (c *joinConfig) times(input int, b arrow.RecordBatch) ([]int64, arrow.Array) {
	in := c.in[input]
	if !in.HasTime() {
		return nil, nil
	}
	tcol := b.Column(in.TimeColumn)
	switch a := tcol.(type) {
	case *array.Timestamp:
		return timestampInt64s(a.TimestampValues()), tcol
	case *array.Int64:
		return a.Int64Values(), tcol
	}
	return nil, tcol
}

// checkRouting checks, before any state changes, that the rows of a
// batch of input, whose key hashes are hashes, are all in the subtask's
// key groups [start, end).
func (c *joinConfig) checkRouting(input int, hashes []uint64, maxPar, start, end int) error {
	if start == 0 && end >= maxPar {
		return nil
	}
	for r, h := range hashes {
		if kg := arrowfmt.KeyGroup(h, maxPar); kg < start || kg >= end {
			side := joinSideNames[input]
			return fmt.Errorf("join %s: process %s batch: row %d has key group %d, outside this subtask's key groups [%d, %d): the input is not partitioned by join.%s.keyBy",
				c.name, side, r, kg, start, end, side)
		}
	}
	return nil
}

// hasNulls reports whether a column cols of b has a null.
func hasNulls(b arrow.RecordBatch, cols []int) bool {
	for _, c := range cols {
		if b.Column(c).NullN() > 0 {
			return true
		}
	}
	return false
}

// warmKeys asks for (offheap.Prefetch) the table slot where the lookup
// of each of hashes starts, and then for the key of the first slot on
// from it whose tag matches, as the window operator's warm does: at
// millions of keys each is a load from memory, and a lookup waited for
// its two in turn (docs/benchmarks.md). warmEntries then reads the keys
// asked for (warmRefs), which come together, for the entries the
// block's rows will read.
func (j *joinOperator) warmKeys(hashes []uint64) {
	prefetchHomes(j.groups, hashes, j.maxPar, j.kgStart)
	j.warmRefs = probeTags(j.groups, hashes, j.maxPar, j.kgStart, j.warmRefs[:0])
	for _, k := range j.warmRefs {
		offheap.Prefetch(unsafe.Pointer(&j.keys[k]))
	}
}

// warmEntries asks for the entries that the rows of input whose keys
// warmKeys asked for last will read: each key's last row of input, which
// a new row links to, and its first row of the other input, where the
// matching starts (a window join matches when its windows fire).
func (j *joinOperator) warmEntries(input int) {
	other, window := 1-input, j.cfg.kind == joinWindow
	for _, k := range j.warmRefs {
		key := &j.keys[k]
		if t := key.tail[input]; t >= 0 {
			offheap.Prefetch(unsafe.Pointer(&j.ents[input][t]))
		}
		if h := key.head[other]; h >= 0 && !window {
			offheap.Prefetch(unsafe.Pointer(&j.ents[other][h]))
		}
	}
}

// joinKeyNull reports whether a key column of row r is null.
func joinKeyNull(b arrow.RecordBatch, cols []int, r int) bool {
	for _, c := range cols {
		if b.Column(c).IsNull(r) {
			return true
		}
	}
	return false
}

// findKey returns the key of key group kgStart+g with hash whose value
// is ikey (fast keys) or j.keyBuf, or -1.
func (j *joinOperator) findKey(g int, hash uint64, ikey int64) int32 {
	t := &j.groups[g]
	if t.n == 0 {
		return -1
	}
	tag := tagOf(hash)
	mask := len(t.slots) - 1
	for i := t.home(tag); ; i = (i + 1) & mask {
		sl := t.slots[i]
		if sl == 0 {
			return -1
		}
		if sl.tag() != tag {
			continue
		}
		k := int32(sl.ref())
		if j.cfg.fast && j.keys[k].ikey == ikey || !j.cfg.fast && j.keyOf(k) == string(j.keyBuf) {
			return k
		}
	}
}

// newKey adds a key with no rows: ikey (fast keys) or j.keyBuf.
func (j *joinOperator) newKey(hash uint64, ikey int64, g int) int32 {
	k := j.free
	if k >= 0 {
		j.touch(k) // a capture must not take the slot's new key
		j.free = j.keys[k].next
	} else {
		j.keys = offheap.Append(&j.arena, j.keys, joinKey{})
		k = int32(len(j.keys) - 1)
		if j.cfg.kind == joinWindow {
			j.win1 = offheap.Append(&j.arena, j.win1, winNone)
		}
	}
	key := &j.keys[k]
	key.hash, key.group = hash, int32(j.kgStart+g)
	key.head, key.tail = [2]int32{-1, -1}, [2]int32{-1, -1}
	if j.cfg.fast {
		key.ikey = ikey
	} else {
		key.ikey = j.addKeyBytes(j.keyBuf)
	}
	j.groups[g].insert(&j.arena, makeSlot(tagOf(hash), offheap.Ref(k)))
	return k
}

// joinKeyCompactMin is the least garbage in keyBytes that compactKeys
// gives back.
const joinKeyCompactMin = 64 << 10

// keyOf returns the encoding of key k (keys that are not fast). The
// string aliases keyBytes: it is for comparing at once, and not valid
// after the next new key.
func (j *joinOperator) keyOf(k int32) string {
	e := j.keyEntry(j.keys[k].ikey)
	n, w := binary.Uvarint(e)
	if n == 0 {
		return ""
	}
	return unsafe.String(&e[w], int(n))
}

// keyEntry returns the entry of keyBytes at off: a key's length and
// encoding.
func (j *joinOperator) keyEntry(off int64) []byte { return keyEntryAt(j.keyBytes, off) }

func keyEntryAt(b []byte, off int64) []byte {
	e := b[off:]
	n, w := binary.Uvarint(e)
	return e[:w+int(n)]
}

// addKeyBytes appends the entry of encoding key to keyBytes, compacting
// them first if dropped keys' bytes are half of them, and returns its
// offset.
func (j *joinOperator) addKeyBytes(key []byte) int64 {
	least := j.keyCompactMin
	if least <= 0 {
		least = joinKeyCompactMin
	}
	if j.keyGarbage >= least && 2*j.keyGarbage >= len(j.keyBytes) {
		j.compactKeys()
	}
	j.keyBytes = offheap.Grow(&j.arena, j.keyBytes, binary.MaxVarintLen64+len(key))
	off := int64(len(j.keyBytes))
	j.keyBytes = binary.AppendUvarint(j.keyBytes, uint64(len(key)))
	j.keyBytes = append(j.keyBytes, key...)
	return off
}

// compactKeys copies the entries of the kept keys' encodings into new
// keyBytes, and frees the old. It takes time in proportion to the keys
// kept, once for every half of keyBytes the dropped keys leave.
func (j *joinOperator) compactKeys() {
	old := j.keyBytes
	j.keyBytes = offheap.Grow[byte](&j.arena, nil, len(old)-j.keyGarbage)
	for k := range j.keys {
		key := &j.keys[k]
		if key.group < 0 {
			continue
		}
		e := keyEntryAt(old, key.ikey)
		key.ikey = int64(len(j.keyBytes))
		j.keyBytes = append(j.keyBytes, e...)
	}
	offheap.Free(&j.arena, old)
	j.keyGarbage = 0
	j.keyCompactions++
}

// dropKey removes key k, which has no rows and no windows.
func (j *joinOperator) dropKey(k int32) {
	key := &j.keys[k]
	j.groups[int(key.group)-j.kgStart].remove(makeSlot(tagOf(key.hash), offheap.Ref(k)))
	key.group = -1
	if !j.cfg.fast {
		j.keyGarbage += len(j.keyEntry(key.ikey))
	}
	key.next = j.free
	j.free = k
}

// store keeps row r of batch bi of input side for key k.
func (j *joinOperator) store(k int32, side int, bi, r int32, ts, exp int64) {
	e := j.freeEnt[side]
	if e >= 0 {
		j.freeEnt[side] = j.ents[side][e].next
	} else {
		j.ents[side] = offheap.Append(&j.arena, j.ents[side], joinEntry{})
		e = int32(len(j.ents[side]) - 1)
	}
	j.touch(k)
	j.seq++
	if j.seq == 0 {
		j.seq = 1
	}
	key := &j.keys[k]
	ents := j.ents[side]
	ents[e] = joinEntry{ts: ts, exp: exp, b: bi, r: r, prev: key.tail[side], next: -1, key: k, seq: j.seq}
	if t := key.tail[side]; t >= 0 {
		ents[t].next = e
	} else {
		key.head[side] = e
	}
	key.tail[side] = e
	j.rows[int(key.group)-j.kgStart]++
	j.sides[side].batches[bi].live++
	if exp != math.MaxInt64 {
		j.expiry[side].push(exp|(1<<j.shift-1), e) // the bucket's last millisecond
	}
	j.changes.Add(joinDirty{e: e, seq: j.seq, side: int8(side)})
}

// addWindows registers the windows of a row of key k at ts that have not
// fired by wm.
func (j *joinOperator) addWindows(k int32, ts, wm int64) {
	c := j.cfg
	for start := ts - floorMod(ts, c.slide); start > ts-c.size; start -= c.slide {
		end := satAdd(start, c.size)
		if end-1 <= wm {
			break // earlier windows end earlier
		}
		if j.addWindow(k, end) {
			j.timers.push(end-1, k)
		}
	}
}

// A window join keeps per key the ends of its windows that have not
// fired, each with a timer at end-1. Most keys have one window at a time:
// its end is in win1, 8 bytes a key outside the Go heap. A key with more
// has winSpilled in win1 and its ends, sorted, in winMore. No end is
// winNone or winSpilled: a window is kept only while end-1 is above the
// watermark, which is at least task.MinWatermark (math.MinInt64+1).
const (
	winNone    = math.MinInt64
	winSpilled = math.MinInt64 + 1
)

// hasWindows reports whether key k has windows that have not fired.
func (j *joinOperator) hasWindows(k int32) bool {
	return j.win1 != nil && j.win1[k] != winNone
}

// addWindow adds the window ending at end to key k, and reports whether
// the key did not have it.
func (j *joinOperator) addWindow(k int32, end int64) bool {
	switch w := j.win1[k]; w {
	case winNone:
		j.win1[k] = end
	case end:
		return false
	case winSpilled:
		ends := j.winMore[k]
		i, found := slices.BinarySearch(ends, end)
		if found {
			return false
		}
		j.winMore[k] = slices.Insert(ends, i, end)
	default:
		if j.winMore == nil {
			j.winMore = map[int32][]int64{}
		}
		j.win1[k], j.winMore[k] = winSpilled, []int64{min(w, end), max(w, end)}
	}
	return true
}

// removeWindow removes the window ending at end from key k, if it has it.
func (j *joinOperator) removeWindow(k int32, end int64) {
	switch w := j.win1[k]; w {
	case end:
		j.win1[k] = winNone
	case winSpilled:
		ends := j.winMore[k]
		if i, ok := slices.BinarySearch(ends, end); ok {
			ends = slices.Delete(ends, i, i+1)
		}
		if len(ends) > 1 {
			j.winMore[k] = ends
			return
		}
		j.win1[k] = ends[0]
		delete(j.winMore, k)
	}
}

// flush emits the gathered pairs as one batch, filtered by join.where.
func (j *joinOperator) flush() error { return j.joinOut.emit(&j.sides) }

// emit sends the gathered pairs, whose rows are in sides, as one batch,
// filtered by join.where.
func (j *joinOut) emit(sides *[2]joinSide) error {
	n := len(j.pl)
	if n == 0 {
		return nil
	}
	rb := j.out
	if j.cfg.winCols > 0 {
		starts := rb.Field(0).(*array.TimestampBuilder)
		ends := rb.Field(1).(*array.TimestampBuilder)
		starts.Reserve(n)
		ends.Reserve(n)
		for _, s := range j.pw {
			starts.UnsafeAppend(arrow.Timestamp(s))
			ends.UnsafeAppend(arrow.Timestamp(s + j.cfg.size))
		}
	}
	refs := [2][]joinRef{j.pl, j.pr}
	for i, oc := range j.cfg.cols {
		sides[oc.side].appendColumn(rb.Field(j.cfg.winCols+i), oc.col, refs[oc.side])
	}
	j.pl, j.pr, j.pw = j.pl[:0], j.pr[:0], j.pw[:0]
	rec := rb.NewRecordBatch()
	defer rec.Release()
	if e := j.cfg.where; e != nil {
		res, valid, failed, err := e.eval(rec, false)
		j.failures.note("join.where", e.src, failed, err)
		sel := exprGrow(&j.sel, n)
		m := 0
		for i, keep := range res.b[:n] {
			if keep && (valid == nil || valid[i]) {
				sel[m] = int32(i)
				m++
			}
		}
		switch {
		case m == 0:
			return nil
		case m < n:
			kept := arrowfmt.Take(rec, sel[:m], j.mem)
			defer kept.Release()
			rec = kept
		}
	}
	if err := j.ctx.Out.Emit(rec); err != nil {
		return fmt.Errorf("join %s: emit: %w", j.cfg.name, err)
	}
	return nil
}

// ProcessWatermark fires the windows whose end-1 is at or below wm (window
// joins), then forgets the rows whose time has come.
func (j *joinOperator) ProcessWatermark(wm int64) error {
	j.begin()
	if wm <= j.wm {
		return nil
	}
	j.wm = wm
	if j.floor != nil && wm >= j.maxFloor {
		j.floor = nil
	}
	if j.cfg.kind == joinWindow {
		if err := j.fireWindows(wm); err != nil {
			return err
		}
	}
	for s := range 2 {
		q := &j.expiry[s]
		for {
			_, slot, ok := q.popDue(wm)
			if !ok {
				break
			}
			j.expireAll(s, q.lists[slot])
			q.done(slot)
		}
	}
	return nil
}

// expireAll expires the entries of list, a bucket of input side's
// expiry, a block of expireBlock at a time. Before a block it asks for
// (offheap.Prefetch) the keys of the next block's entries, and for the
// table slots of this block's keys, which the block before asked for:
// an entry's key, and the slot that drops it with its last row, are each
// a load from memory at millions of keys, and these then overlap.
func (j *joinOperator) expireAll(side int, list []int32) {
	j.prefetchEntryKeys(side, list[:min(expireBlock, len(list))])
	for lo := 0; lo < len(list); lo += expireBlock {
		hi := min(lo+expireBlock, len(list))
		j.prefetchEntryKeys(side, list[hi:min(hi+expireBlock, len(list))])
		j.prefetchKeySlots(side, list[lo:hi])
		for _, e := range list[lo:hi] {
			j.expire(side, e)
		}
	}
}

// expireBlock is how many entries expireAll takes at a time.
const expireBlock = 64

// prefetchEntryKeys asks for the keys of entries es of input side, and
// for the entries before and after each in its key's list, which its
// unlink writes.
func (j *joinOperator) prefetchEntryKeys(side int, es []int32) {
	ents := j.ents[side]
	for _, e := range es {
		ent := &ents[e]
		if ent.seq == 0 {
			continue
		}
		offheap.Prefetch(unsafe.Pointer(&j.keys[ent.key]))
		if ent.prev >= 0 {
			offheap.Prefetch(unsafe.Pointer(&ents[ent.prev]))
		}
		if ent.next >= 0 {
			offheap.Prefetch(unsafe.Pointer(&ents[ent.next]))
		}
	}
}

// prefetchKeySlots asks for the home slots of the keys of entries es of
// input side, in their tables.
func (j *joinOperator) prefetchKeySlots(side int, es []int32) {
	ents := j.ents[side]
	for _, e := range es {
		ent := &ents[e]
		if ent.seq == 0 {
			continue
		}
		if key := &j.keys[ent.key]; key.group >= 0 {
			t := &j.groups[int(key.group)-j.kgStart]
			offheap.Prefetch(unsafe.Pointer(&t.slots[t.home(tagOf(key.hash))]))
		}
	}
}

// expire forgets entry e of input side if it is kept and its time has
// come (an entry freed and reused since it was put in its bucket may be
// another row's by now), and its key if nothing is left of it.
func (j *joinOperator) expire(side int, e int32) {
	ent := &j.ents[side][e]
	if ent.seq == 0 {
		return
	}
	k := ent.key
	g := int(j.keys[k].group) - j.kgStart
	if ent.exp > j.effWm(g) {
		return
	}
	j.unlink(side, e)
	j.dropKeyIfEmpty(k)
}

// cleanKey forgets the rows of key k whose time has come, and the key if
// nothing is left.
func (j *joinOperator) cleanKey(k int32) {
	key := &j.keys[k]
	if key.group < 0 {
		return
	}
	wm := j.effWm(int(key.group) - j.kgStart)
	for s := range 2 {
		for e := key.head[s]; e >= 0; {
			ent := &j.ents[s][e]
			next := ent.next
			if ent.exp <= wm {
				j.unlink(s, e)
			}
			e = next
		}
	}
	j.dropKeyIfEmpty(k)
}

// unlink removes entry e of input side from its key and frees it and its
// row's hold on its batch.
func (j *joinOperator) unlink(side int, e int32) {
	j.forgetting(side, e)
	ents := j.ents[side]
	ent := &ents[e]
	key := &j.keys[ent.key]
	if ent.prev >= 0 {
		ents[ent.prev].next = ent.next
	} else {
		key.head[side] = ent.next
	}
	if ent.next >= 0 {
		ents[ent.next].prev = ent.prev
	} else {
		key.tail[side] = ent.prev
	}
	j.rows[int(key.group)-j.kgStart]--
	bi := ent.b
	j.sides[side].batches[bi].live--
	j.sides[side].unref(bi)
	*ent = joinEntry{next: j.freeEnt[side]}
	j.freeEnt[side] = e
}

// dropKeyIfEmpty drops key k if it has no rows and no windows.
func (j *joinOperator) dropKeyIfEmpty(k int32) {
	if key := &j.keys[k]; key.head[0] < 0 && key.head[1] < 0 && !j.hasWindows(k) {
		j.dropKey(k)
	}
}

// fireWindows emits the windows whose timers are due at wm, by (end,
// key). A window's rows are the key's rows in it: a row kept after the
// window fired is in a later window too, and the fired one does not fire
// again.
func (j *joinOperator) fireWindows(wm int64) error {
	j.fire = j.fire[:0]
	for {
		at, slot, ok := j.timers.popDue(wm)
		if !ok {
			break
		}
		for _, k := range j.timers.lists[slot] {
			j.fire = append(j.fire, joinFiring{end: at + 1, key: k})
		}
		j.timers.done(slot)
	}
	if len(j.fire) == 0 {
		return nil
	}
	fast := j.cfg.fast
	slices.SortFunc(j.fire, func(a, b joinFiring) int {
		if c := cmp.Compare(a.end, b.end); c != 0 {
			return c
		}
		if fast {
			return cmp.Compare(j.keys[a.key].ikey, j.keys[b.key].ikey)
		}
		return strings.Compare(j.keyOf(a.key), j.keyOf(b.key))
	})
	for _, f := range j.fire {
		key := &j.keys[f.key]
		j.removeWindow(f.key, f.end)
		if key.head[0] < 0 || key.head[1] < 0 {
			continue
		}
		start := f.end - j.cfg.size
		right := j.scratch[:0]
		for e := key.head[1]; e >= 0; e = j.ents[1][e].next {
			if ent := &j.ents[1][e]; ent.ts >= start && ent.ts < f.end {
				right = append(right, joinRef{ent.b, ent.r})
			}
		}
		j.scratch = right
		if len(right) == 0 {
			continue
		}
		for e := key.head[0]; e >= 0; e = j.ents[0][e].next {
			ent := &j.ents[0][e]
			if ent.ts < start || ent.ts >= f.end {
				continue
			}
			l := joinRef{ent.b, ent.r}
			for _, r := range right {
				j.pl, j.pr, j.pw = append(j.pl, l), append(j.pr, r), append(j.pw, start)
			}
			if len(j.pl) >= joinBatchRows {
				if err := j.flush(); err != nil {
					return err
				}
			}
		}
	}
	return j.flush()
}

// Finish has nothing to do: the final ProcessWatermark(MaxWatermark) has
// fired every window, and other joins emit as rows arrive.
func (j *joinOperator) Finish() error { return nil }

// Close releases the kept batches and the builder; it is safe to call
// twice.
func (j *joinOperator) Close() error {
	if j.capture != nil {
		j.capture.Release()
	}
	j.joinOut.close()
	for s := range j.sides {
		j.sides[s].release()
	}
	j.keys, j.keyBytes, j.win1, j.winMore, j.ents, j.groups, j.changes = nil, nil, nil, nil, [2][]joinEntry{}, nil, rows.ChangeLog[joinDirty]{}
	j.arena.Close()
	j.expiry[0].reset()
	j.expiry[1].reset()
	j.timers.reset()
	return nil
}
