package builtin

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore"
)

// The join operator on pebble (a job's state: {backend: pebble}): joins
// whose kept rows may be larger than memory. It is the operator NewJoin
// describes, with the same output in the same order, and its rows in a
// store of its own (pebblestate) instead of the heap, checkpointed as
// the store's files, as a pebble window's are.
//
// The store has four tables. Every entry is in the key group of its key,
// K, the key's encoding (arrowfmt), and has no namespace:
//
//	rows        key K: the key's kept rows, the left input's then the
//	            right's, each in arrival order: the length of the left
//	            rows (a uvarint), then the rows, each a uvarint length,
//	            a flags byte (joinRowTime: it has an event time), the
//	            event time (8 bytes, little-endian, the input's offset
//	            added) and the input's columns (appendStoredRow)
//	expiry      key T K, no value: a row of K is forgotten in the
//	            cleanup bucket ending at T (8 bytes, big-endian, sign bit
//	            flipped: sorted by time); regular joins with a ttl and
//	            interval joins
//	windows     key E K, no value: a window of K ending at E (the same
//	            8 bytes) has rows and has not fired; window joins
//	watermarks  key "": the key group's watermark when it was last
//	            captured (8 bytes, little-endian)
//
// A row matches the kept rows of the other input as the heap's join
// does, and is appended to its own input's: one read and one write of
// its key's entry. Reading a key's rows whole is what the heap does too
// (it walks the key's list). A watermark reads the key groups whose
// first expiry or window entry is due (nextClean, nextFire), from their
// starts: due entries are a prefix. Window ends fire in order of (end,
// key) across the subtask's key groups, merged as the pebble window's
// are. A window's firing forgets the key's rows whose last window it
// was; an expiry entry forgets the rows of its key and input whose time
// has come.
//
// The watermarks table does for a restore what the heap's expire entries
// do (join_state.go): a key group goes on from the watermark it had
// until the job's passes it.
const (
	joinRowsTable       = "rows"
	joinExpiryTable     = "expiry"
	joinWindowsTable    = "windows"
	joinWatermarksTable = "watermarks"
)

// joinRowTime is a stored row's flag: it has an event time.
const joinRowTime byte = 1

// joinStoredRef marks a pair's row decoded from the store into the
// side's decoded batch, which the batch's slot replaces at emit.
const joinStoredRef = -2

type joinStoreOp struct {
	cfg    *joinConfig
	layout *joinStateLayout // the heap's state rows
	joinOut
	counters               *task.Counters
	maxPar, kgStart, kgEnd int
	wm                     int64
	shift                  uint // cleanup buckets are 1<<shift ms

	operatorStore
	rows, expiry, windows, marks statestore.StoredTable
	// Per key group (index: key group - kgStart): nextClean and nextFire
	// are at most the least time of its expiry and windows entries
	// (math.MaxInt64: none); saved is the watermark in its watermarks
	// entry; floor, after a restore, the watermark it goes on from while
	// the job's is lower (nil when no group's is above it).
	nextClean, nextFire []int64
	saved, floor        []int64
	maxFloor            int64
	restored            bool
	// heap holds state restored from a heap join's rows (a savepoint of
	// a job whose state was on the heap, or a checkpoint from before
	// joins had a store), moved into the store at settle.
	heap *joinOperator

	// sides hold, while pairs are gathered, the input batch and the
	// batches of rows decoded from the store; dec decode them.
	sides [2]joinSide
	dec   [2]*array.RecordBuilder

	// Scratch.
	hashes []uint64
	key    []byte
	id     []byte
	val    []byte
	val2   []byte
	row    []byte
	right  []joinRef
	due    []int
	merge  dueMerge
}

var (
	_ task.TwoInputOperator = (*joinStoreOp)(nil)
	_ task.Stateful         = (*joinStoreOp)(nil)
)

// NewJoinState returns the join operator of o with inputs left and right
// and its kept rows in the backend st chooses (nil: the heap's): NewJoin's,
// or for state: {backend: pebble} one whose rows are in a pebble store
// under dir ("": the system's temporary directory).
func NewJoinState(o *spec.Operator, left, right Stream, st *spec.State, dir string) (task.Operator, error) {
	if st == nil || st.Backend != spec.StatePebble {
		return NewJoin(o, left, right)
	}
	cfg, err := newJoinConfig(o, left, right)
	if err != nil {
		return nil, err
	}
	op := &joinStoreOp{cfg: cfg, layout: newJoinStateLayout(cfg), wm: task.MinWatermark,
		operatorStore: operatorStore{what: "join " + cfg.name, st: st, dir: dir}}
	for r := cfg.retention() / 64; r > 1 && op.shift < 10; r >>= 1 {
		op.shift++
	}
	return op, nil
}

func (o *joinStoreOp) Open(ctx *task.Context) error {
	if err := o.joinOut.open(o.cfg, ctx); err != nil {
		return err
	}
	o.counters = ctx.Counters
	if o.counters == nil {
		o.counters = new(task.Counters)
	}
	o.maxPar, o.kgStart, o.kgEnd = keyGroupsOf(ctx)
	if err := o.openStore(o.kgStart, o.kgEnd); err != nil {
		return err
	}
	if err := o.openTables(); err != nil {
		return fmt.Errorf("open join %s: state: %w", o.cfg.name, err)
	}
	n := o.kgEnd - o.kgStart
	o.nextClean, o.nextFire, o.saved = make([]int64, n), make([]int64, n), make([]int64, n)
	for g := range n {
		o.nextClean[g], o.nextFire[g], o.saved[g] = math.MaxInt64, math.MaxInt64, task.MinWatermark
	}
	for s := range 2 {
		o.dec[s] = array.NewRecordBuilder(o.mem, o.layout.sides[s])
	}
	return nil
}

func (o *joinStoreOp) openTables() error {
	var err error
	tab := func(name string) statestore.StoredTable {
		if err != nil {
			return nil
		}
		var t statestore.StoredTable
		t, err = o.store.Table(name)
		return t
	}
	o.rows, o.expiry, o.windows, o.marks = tab(joinRowsTable), tab(joinExpiryTable), tab(joinWindowsTable), tab(joinWatermarksTable)
	return err
}

func (o *joinStoreOp) Close() error {
	if o.heap != nil {
		_ = o.heap.Close()
		o.heap = nil
	}
	o.joinOut.close()
	for s := range o.dec {
		if o.dec[s] != nil {
			o.dec[s].Release()
			o.dec[s] = nil
		}
		o.sides[s].release()
	}
	o.rows, o.expiry, o.windows, o.marks = nil, nil, nil, nil
	return o.closeStore()
}

// effWm returns the watermark key group g (index) goes by.
func (o *joinStoreOp) effWm(g int) int64 {
	if o.floor != nil && o.floor[g] > o.wm {
		return o.floor[g]
	}
	return o.wm
}

// ProcessBatch is not used: the runtime gives a join its batches through
// ProcessBatchFrom.
func (o *joinStoreOp) ProcessBatch(arrow.RecordBatch) error {
	return fmt.Errorf("join %s: process batch: a join has two inputs: the runtime must call ProcessBatchFrom", o.cfg.name)
}

func (o *joinStoreOp) ProcessBatchFrom(input int, b arrow.RecordBatch) (err error) {
	if input != 0 && input != 1 {
		return fmt.Errorf("join %s: process batch: input %d, want 0 (left) or 1 (right)", o.cfg.name, input)
	}
	defer o.failed(&err)
	o.settle()
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	c := o.cfg
	if err := c.checkBatch(input, b); err != nil {
		return err
	}
	times, tcol := c.times(input, b)
	timeNulls := tcol != nil && tcol.NullN() > 0
	keyCols := c.keys[input]
	o.hashes = arrowfmt.HashKeys(b, keyCols, o.hashes)
	if err := c.checkRouting(input, o.hashes, o.maxPar, o.kgStart, o.kgEnd); err != nil {
		return err
	}
	keyNulls := hasNulls(b, keyCols)
	cols := make([]joinCol, b.NumCols())
	for i := range cols {
		cols[i] = makeJoinCol(b.Column(i))
	}

	bi := o.sides[input].add(b)
	defer o.sides[input].unref(bi)
	late := 0
	for r := range n {
		hasTs := times != nil && !(timeNulls && tcol.IsNull(r))
		var ts int64
		if hasTs {
			ts = times[r] + c.in[input].TimeOffset
		}
		kg := arrowfmt.KeyGroup(o.hashes[r], o.maxPar)
		g := kg - o.kgStart
		wm := o.effWm(g)
		if c.late(ts, hasTs, wm) {
			late++
			continue
		}
		if keyNulls && joinKeyNull(b, keyCols, r) {
			continue
		}
		o.key = arrowfmt.AppendRowKey(o.key[:0], b, keyCols, r)
		// The key's rows: valid until the next call on the table (a
		// flush makes none).
		v, _ := o.rows.Get(kg, string(o.key), "")
		if c.kind != joinWindow {
			o.match(joinEntrySides(v)[1-input], input, joinRef{bi, int32(r)}, ts, wm)
			if len(o.pl) >= joinBatchRows {
				if err := o.flush(); err != nil {
					return err
				}
			}
		}
		exp := c.expiryOf(input, ts, hasTs)
		if exp <= wm {
			continue // no later row can match it
		}
		o.row = appendStoredRow(o.row[:0], cols, r, ts, hasTs)
		o.keep(kg, input, ts, exp, wm, v)
	}
	if late > 0 {
		o.counters.LateDropped.Add(int64(late))
	}
	return o.flush()
}

// match gathers the pairs of the row me of input, at ts, with v, the
// kept rows of the other input of its key, in their arrival order.
func (o *joinStoreOp) match(v []byte, input int, me joinRef, ts, wm int64) {
	c := o.cfg
	other := 1 - input
	for len(v) > 0 {
		row, rts, hasTs, rest := nextStoredRow(v)
		v = rest
		var m bool
		switch {
		case c.kind == joinRegular:
			m = c.expiryOf(other, rts, hasTs) > wm
		case input == 0:
			m = rts+c.lower <= ts && ts <= rts+c.upper
		default:
			m = ts+c.lower <= rts && rts <= ts+c.upper
		}
		if !m {
			continue
		}
		ref := o.decode(other, row)
		if input == 0 {
			o.pl, o.pr = append(o.pl, me), append(o.pr, ref)
		} else {
			o.pl, o.pr = append(o.pl, ref), append(o.pr, me)
		}
	}
}

// keep appends the row in o.row, of input with key o.key in key group kg,
// to the key's rows, v (its entry, or nil), and notes when it is
// forgotten (exp) or, in a window join, its windows that have not fired
// by wm.
func (o *joinStoreOp) keep(kg, input int, ts, exp, wm int64, v []byte) {
	g := kg - o.kgStart
	sides := joinEntrySides(v)
	if input == 0 {
		o.val = appendJoinEntry(o.val[:0], sides[0], o.row, sides[1])
	} else {
		o.val = append(appendJoinEntry(o.val[:0], sides[0], nil, sides[1]), o.row...)
	}
	o.rows.Put(kg, string(o.key), "", o.val)
	if o.cfg.kind == joinWindow {
		c := o.cfg
		for start := ts - floorMod(ts, c.slide); start > ts-c.size; start -= c.slide {
			end := satAdd(start, c.size)
			if end-1 <= wm {
				break // earlier windows end earlier
			}
			o.id = append(appendWindowTime(o.id[:0], end), o.key...)
			o.windows.Put(kg, string(o.id), "", nil)
			o.nextFire[g] = min(o.nextFire[g], end)
		}
		return
	}
	if exp == math.MaxInt64 {
		return
	}
	at := exp | (1<<o.shift - 1) // the bucket's last millisecond
	o.id = append(appendWindowTime(o.id[:0], at), o.key...)
	o.expiry.Put(kg, string(o.id), "", nil)
	o.nextClean[g] = min(o.nextClean[g], at)
}

// forget drops the rows of key (in key group kg) that are forgotten by
// upTo.
func (o *joinStoreOp) forget(kg int, key string, upTo int64) {
	v, ok := o.rows.Get(kg, key, "")
	if !ok {
		return
	}
	dropped := false
	var kept [2][]byte
	for s, rows := range joinEntrySides(v) {
		start := len(o.val2)
		for len(rows) > 0 {
			_, ts, hasTs, rest := nextStoredRow(rows)
			if o.cfg.expiryOf(s, ts, hasTs) <= upTo {
				dropped = true
			} else {
				o.val2 = append(o.val2, rows[:len(rows)-len(rest)]...)
			}
			rows = rest
		}
		kept[s] = o.val2[start:]
	}
	switch {
	case len(kept[0])+len(kept[1]) == 0:
		o.rows.Delete(kg, key, "")
	case dropped:
		o.val = appendJoinEntry(o.val[:0], kept[0], nil, kept[1])
		o.rows.Put(kg, key, "", o.val)
	}
	o.val2 = o.val2[:0]
}

// A key's entry of the rows table holds the rows of both inputs: the
// length of the left input's rows (a uvarint), the left input's rows,
// then the right input's rows.

// joinEntrySides returns the rows of each input in an entry of the rows
// table (nil: none). It panics on a damaged entry, which fails the task.
func joinEntrySides(v []byte) [2][]byte {
	if len(v) == 0 {
		return [2][]byte{}
	}
	n, w := binary.Uvarint(v)
	if w <= 0 || n > uint64(len(v)-w) {
		panic(fmt.Sprintf("a damaged rows entry: %d bytes of left rows in %d", n, len(v)))
	}
	return [2][]byte{v[w : w+int(n)], v[w+int(n):]}
}

// appendJoinEntry appends the entry of the left rows left+more and the
// right rows right to dst.
func appendJoinEntry(dst, left, more, right []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(left)+len(more)))
	dst = append(dst, left...)
	dst = append(dst, more...)
	return append(dst, right...)
}

// decode appends a stored row of input to the input's decoded rows and
// returns its ref.
func (o *joinStoreOp) decode(input int, row []byte) joinRef {
	d := o.dec[input]
	if err := decodeStoredRow(d.Fields(), row); err != nil {
		panic(fmt.Sprintf("%s row: %v", joinSideNames[input], err))
	}
	return joinRef{joinStoredRef, int32(d.Field(0).Len() - 1)}
}

// flush emits the gathered pairs: the rows decoded from the store become
// a batch of their side for the time it takes.
func (o *joinStoreOp) flush() error {
	if len(o.pl) == 0 {
		// Rows decoded for no pair (a window's right rows when none of
		// its left rows is in it) go with nothing.
		for _, d := range o.dec {
			if d.Field(0).Len() > 0 {
				d.NewRecordBatch().Release()
			}
		}
		return nil
	}
	refs := [2][]joinRef{o.pl, o.pr}
	var slots [2]int32
	for s := range 2 {
		slots[s] = -1
		if o.dec[s].Field(0).Len() == 0 {
			continue
		}
		rec := o.dec[s].NewRecordBatch()
		slots[s] = o.sides[s].add(rec)
		rec.Release()
		for i := range refs[s] {
			if refs[s][i].b == joinStoredRef {
				refs[s][i].b = slots[s]
			}
		}
	}
	err := o.joinOut.emit(&o.sides)
	for s, slot := range slots {
		if slot >= 0 {
			o.sides[s].unref(slot)
		}
	}
	return err
}

// ProcessWatermark fires the windows whose end-1 is at or below wm
// (window joins), then forgets the rows whose time has come.
func (o *joinStoreOp) ProcessWatermark(wm int64) (err error) {
	defer o.failed(&err)
	o.settle()
	if wm <= o.wm {
		return nil
	}
	o.wm = wm
	if o.floor != nil && wm >= o.maxFloor {
		o.floor = nil
	}
	if o.cfg.kind == joinWindow {
		return o.fireWindows()
	}
	for g := range o.nextClean {
		upTo := o.effWm(g)
		if o.nextClean[g] > upTo {
			continue
		}
		kg := g + o.kgStart
		o.nextClean[g] = math.MaxInt64
		o.expiry.Range(kg, func(key, ns string, _ []byte) bool {
			if len(key) < 8 || ns != "" {
				panic(fmt.Sprintf("key group %d: an expiry entry of %d and %d bytes is not a join's", kg, len(key), len(ns)))
			}
			if at := windowTime(key); at > upTo {
				o.nextClean[g] = at
				return false
			}
			o.forget(kg, key[8:], upTo)
			o.expiry.Delete(kg, key, ns)
			return true
		})
	}
	return nil
}

// fireWindows fires the due windows by (end, key), each with the pairs of
// its key's left and right rows in it, and forgets the rows whose last
// window it was.
func (o *joinStoreOp) fireWindows() error {
	due := o.due[:0]
	for g := range o.nextFire {
		if o.nextFire[g]-1 <= o.wm {
			due = append(due, g)
		}
	}
	o.due = due
	if len(due) == 0 {
		return nil
	}
	snap, err := o.store.Snapshot()
	if err != nil {
		return fmt.Errorf("join %s: state: %w", o.cfg.name, err)
	}
	defer snap.Close()
	m := &o.merge
	m.heads = m.heads[:0]
	for _, g := range due {
		o.nextFire[g] = math.MaxInt64
		h := dueHead{it: snap.Iter(joinWindowsTable, g+o.kgStart), g: g}
		if o.advance(&h) {
			m.heads = append(m.heads, h)
		}
	}
	heap.Init(m)
	for m.Len() > 0 {
		h := &m.heads[0]
		kg := h.g + o.kgStart
		end, key := windowTime(h.key), h.key[8:]
		if err := o.fire(kg, key, end); err != nil {
			return err
		}
		o.windows.Delete(kg, h.key, "")
		o.forget(kg, key, end-1)
		if o.advance(h) {
			heap.Fix(m, 0)
		} else {
			heap.Pop(m)
		}
	}
	return o.flush()
}

// advance reads h's next window, and reports whether it is due; once one
// is not, it notes its end as the key group's next and closes h.
func (o *joinStoreOp) advance(h *dueHead) bool {
	key, ns, _, ok := h.it.Next()
	if ok && (len(key) < 8 || ns != "") {
		panic(fmt.Sprintf("key group %d: a windows entry of %d and %d bytes is not a join's", h.g+o.kgStart, len(key), len(ns)))
	}
	if ok && windowTime(key)-1 <= o.wm {
		h.key, h.ns = key, ns
		return true
	}
	if ok {
		o.nextFire[h.g] = min(o.nextFire[h.g], windowTime(key))
	}
	h.it.Close()
	return false
}

// fire gathers the pairs of the window of key (in key group kg) ending
// at end: every left row in it with every right row in it, in arrival
// order.
func (o *joinStoreOp) fire(kg int, key string, end int64) error {
	start := end - o.cfg.size
	e, _ := o.rows.Get(kg, key, "")
	sides := joinEntrySides(e)
	// The right rows are decoded again after each flush, which emits the
	// batch they were decoded into.
	o.right = o.decodeIn(1, sides[1], start, end, o.right[:0])
	if len(o.right) == 0 {
		return nil
	}
	// e is the table's until the next call on it; a flush makes none.
	v := sides[0]
	for len(v) > 0 {
		row, ts, _, rest := nextStoredRow(v)
		v = rest
		if ts < start || ts >= end {
			continue
		}
		l := o.decode(0, row)
		for _, r := range o.right {
			o.pl, o.pr, o.pw = append(o.pl, l), append(o.pr, r), append(o.pw, start)
		}
		if len(o.pl) >= joinBatchRows && len(v) > 0 {
			// v is not the table's to change until the next call on it.
			if err := o.flush(); err != nil {
				return err
			}
			o.right = o.decodeIn(1, sides[1], start, end, o.right[:0])
		}
	}
	return nil
}

// decodeIn decodes the stored rows of input in v whose time is in [start,
// end) and appends their refs to refs.
func (o *joinStoreOp) decodeIn(input int, v []byte, start, end int64, refs []joinRef) []joinRef {
	for len(v) > 0 {
		row, ts, _, rest := nextStoredRow(v)
		v = rest
		if ts >= start && ts < end {
			refs = append(refs, o.decode(input, row))
		}
	}
	return refs
}

// Finish has nothing to do: the final ProcessWatermark(MaxWatermark) has
// fired every window, and other joins emit as rows arrive.
func (o *joinStoreOp) Finish() error { return nil }

// appendStoredRow appends row r of a batch of an input, whose columns are
// cols, as a stored row (see the top of this file): its length, flags,
// event time ts and columns, each a byte 0 for null or 1 and its value:
// 8 bytes little-endian (int64, timestamp_ms, float64 as its bits), a
// byte (bool) or a uvarint length and the bytes (string).
func appendStoredRow(dst []byte, cols []joinCol, r int, ts int64, hasTs bool) []byte {
	n := 9
	for i := range cols {
		c := &cols[i]
		n++
		switch {
		case c.nulls && c.arr.IsNull(r):
		case c.strs != nil:
			s := c.strs.Value(r)
			n += uvarintLen(uint64(len(s))) + len(s)
		case c.bools != nil:
			n++
		default:
			n += 8
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	var flags byte
	if hasTs {
		flags = joinRowTime
	}
	dst = append(dst, flags)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(ts))
	for i := range cols {
		c := &cols[i]
		if c.nulls && c.arr.IsNull(r) {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, 1)
		switch {
		case c.ints != nil:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(c.ints[r]))
		case c.flts != nil:
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.flts[r]))
		case c.strs != nil:
			s := c.strs.Value(r)
			dst = binary.AppendUvarint(dst, uint64(len(s)))
			dst = append(dst, s...)
		case c.bools != nil:
			var b byte
			if c.bools.Value(r) {
				b = 1
			}
			dst = append(dst, b)
		default:
			// An empty int64 or float64 column has nil values.
			dst = binary.LittleEndian.AppendUint64(dst, 0)
		}
	}
	return dst
}

// uvarintLen is the length of x as a uvarint.
func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// nextStoredRow splits the first stored row off v: its columns, its event
// time, and the rows after it. It panics on a damaged entry, which fails
// the task (operatorStore.failed).
func nextStoredRow(v []byte) (cols []byte, ts int64, hasTs bool, rest []byte) {
	n, w := binary.Uvarint(v)
	if w <= 0 || n < 9 || n > uint64(len(v)-w) {
		panic(fmt.Sprintf("a damaged rows entry: a row of %d bytes in %d", n, len(v)))
	}
	row := v[w : w+int(n)]
	return row[9:], int64(binary.LittleEndian.Uint64(row[1:9])), row[0]&joinRowTime != 0, v[w+int(n):]
}

// decodeStoredRow appends the columns of a stored row to bs, a builder
// per column of the row's input.
func decodeStoredRow(bs []array.Builder, row []byte) error {
	for i, f := range bs {
		if len(row) == 0 {
			return fmt.Errorf("truncated at column %d", i)
		}
		tag := row[0]
		row = row[1:]
		if tag == 0 {
			f.AppendNull()
			continue
		}
		if tag != 1 {
			return fmt.Errorf("bad tag %#x at column %d", tag, i)
		}
		switch fb := f.(type) {
		case *array.StringBuilder:
			n, w := binary.Uvarint(row)
			if w <= 0 || n > uint64(len(row)-w) {
				return fmt.Errorf("bad string length at column %d", i)
			}
			fb.Append(string(row[w : w+int(n)]))
			row = row[w+int(n):]
			continue
		case *array.BooleanBuilder:
			if len(row) < 1 || row[0] > 1 {
				return fmt.Errorf("bad bool at column %d", i)
			}
			fb.Append(row[0] == 1)
			row = row[1:]
			continue
		}
		if len(row) < 8 {
			return fmt.Errorf("truncated value at column %d", i)
		}
		u := binary.LittleEndian.Uint64(row)
		row = row[8:]
		switch fb := f.(type) {
		case *array.Int64Builder:
			fb.Append(int64(u))
		case *array.TimestampBuilder:
			fb.Append(arrow.Timestamp(int64(u)))
		case *array.Float64Builder:
			fb.Append(math.Float64frombits(u))
		default:
			return fmt.Errorf("column %d: a %T", i, f)
		}
	}
	if len(row) != 0 {
		return fmt.Errorf("%d trailing bytes", len(row))
	}
	return nil
}

// settle finishes a restore at the first batch, watermark or capture
// after it: it moves the rows restored from a heap join's state into the
// store, and lets each key group go on from its saved watermark.
func (o *joinStoreOp) settle() {
	if !o.restored {
		return
	}
	o.restored = false
	if h := o.heap; h != nil {
		o.heap = nil
		o.moveHeap(h)
		_ = h.Close()
	}
	o.floor, o.maxFloor = nil, task.MinWatermark
	for _, w := range o.saved {
		o.maxFloor = max(o.maxFloor, w)
	}
	if o.maxFloor > o.wm {
		o.floor = slices.Clone(o.saved)
	}
}

// moveHeap writes the rows the heap join h restored into the store, but
// those forgotten by their key group's saved watermark, as h's settle
// would.
func (o *joinStoreOp) moveHeap(h *joinOperator) {
	for g, w := range h.saved {
		if w > o.saved[g] {
			o.saved[g] = w
			o.marks.Put(g+o.kgStart, "", "", binary.LittleEndian.AppendUint64(nil, uint64(w)))
		}
	}
	var cols []joinCol
	for k := range h.keys {
		key := &h.keys[k]
		if key.group < 0 {
			continue
		}
		kg := int(key.group)
		upTo := max(o.saved[kg-o.kgStart], o.wm)
		for s := range 2 {
			in := o.cfg.in[s]
			for e := key.head[s]; e >= 0; e = h.ents[s][e].next {
				ent := &h.ents[s][e]
				if ent.exp <= upTo {
					continue
				}
				bt := &h.sides[s].batches[ent.b]
				cols = append(cols[:0], bt.cols...)
				hasTs := in.HasTime() && !bt.rec.Column(in.TimeColumn).IsNull(int(ent.r))
				o.key = arrowfmt.AppendRowKey(o.key[:0], bt.rec, o.cfg.keys[s], int(ent.r))
				o.row = appendStoredRow(o.row[:0], cols, int(ent.r), ent.ts, hasTs)
				v, _ := o.rows.Get(kg, string(o.key), "")
				o.keep(kg, s, ent.ts, ent.exp, upTo, v)
			}
		}
	}
}

// State returns the operator's state as checkpoints see it: its store,
// captured as files (statestore.StoreCapturer).
func (o *joinStoreOp) State() statestore.Snapshotter { return joinStoreSnapshotter{o} }

// joinStoreSnapshotter is a pebble join's state as checkpoints capture
// and restore it: the store's files, and rows of the store's backend,
// which hold nothing of a join's.
type joinStoreSnapshotter struct{ o *joinStoreOp }

var (
	_ statestore.StoreCapturer      = joinStoreSnapshotter{}
	_ statestore.SteppedSnapshotter = joinStoreSnapshotter{}
	_ statestore.OlderSchemas       = joinStoreSnapshotter{}
)

// open returns the operator, open, settled unless restore.
func (s joinStoreSnapshotter) open(what string, restore bool) (_ *joinStoreOp, err error) {
	if s.o.state == nil {
		return nil, fmt.Errorf("join %s: %s: the operator is not open", s.o.cfg.name, what)
	}
	if !restore {
		defer s.o.failed(&err)
		s.o.settle()
	}
	return s.o, nil
}

// Schema is the store's backend's snapshot schema.
func (s joinStoreSnapshotter) Schema() *arrow.Schema { return statestore.SnapshotSchema() }

// CheckSchema accepts the store's backend's rows, and the heap join's
// state.
func (s joinStoreSnapshotter) CheckSchema(schema *arrow.Schema) error {
	if schema.Equal(statestore.SnapshotSchema()) {
		return nil
	}
	return s.o.layout.Check(schema)
}

func (s joinStoreSnapshotter) Snapshot(mem memory.Allocator, full bool) ([]arrow.RecordBatch, error) {
	o, err := s.open("snapshot", false)
	if err != nil {
		return nil, err
	}
	o.saveWatermarks()
	return o.state.Snapshot(mem, full)
}

func (s joinStoreSnapshotter) BeginSnapshot(mem memory.Allocator, full bool) (statestore.Capture, error) {
	o, err := s.open("snapshot", false)
	if err != nil {
		return nil, err
	}
	o.saveWatermarks()
	return o.state.BeginSnapshot(mem, full)
}

// saveWatermarks writes the watermark of each key group whose watermark
// moved since it was last written.
func (o *joinStoreOp) saveWatermarks() {
	for g := range o.saved {
		if w := o.effWm(g); w > o.saved[g] {
			o.saved[g] = w
			o.marks.Put(g+o.kgStart, "", "", binary.LittleEndian.AppendUint64(o.val[:0], uint64(w)))
		}
	}
}

func (s joinStoreSnapshotter) Restore(b arrow.RecordBatch) error {
	o, err := s.open("restore", true)
	if err != nil {
		return err
	}
	o.restored = true
	if !b.Schema().Equal(statestore.SnapshotSchema()) {
		// A heap join's rows: restored on the heap as that join restores
		// them, then moved into the store (settle).
		if o.heap == nil {
			o.heap = &joinOperator{cfg: o.cfg, wm: task.MinWatermark, state: o.layout, shift: o.shift}
			if err := o.heap.Open(o.ctx); err != nil {
				o.heap = nil
				return err
			}
		}
		return joinSnapshotter{o.heap}.Restore(b)
	}
	if err := o.state.Restore(b); err != nil {
		return fmt.Errorf("join %s: %w", o.cfg.name, err)
	}
	return nil
}

// CaptureStore captures the store into a directory beside it, with each
// key group's watermark.
func (s joinStoreSnapshotter) CaptureStore(id int64) (_ statestore.StoreFileCapture, err error) {
	defer s.o.failed(&err)
	o, err := s.open("capture the store", false)
	if err != nil {
		return nil, err
	}
	o.saveWatermarks()
	return o.captureStore(id)
}

// StoreScratch is the directory the store is in.
func (s joinStoreSnapshotter) StoreScratch() string { return s.o.scratch() }

// RestoreStores makes the operator's store the one captured over its key
// groups, or at a rescale the one sharing the most key groups with it,
// with the rest ingested, and reads each key group's watermark and where
// its expiry and windows entries begin.
func (s joinStoreSnapshotter) RestoreStores(stores []statestore.CapturedStore) (_ int, err error) {
	defer s.o.failed(&err)
	o, err := s.open("restore the store", true)
	if err != nil {
		return -1, err
	}
	kept, err := o.restoreStores(stores, o.kgStart, o.kgEnd)
	if err != nil {
		return -1, err
	}
	if err := o.openTables(); err != nil {
		return -1, fmt.Errorf("join %s: restore the store: %w", o.cfg.name, err)
	}
	first := func(t statestore.StoredTable, kg int) int64 {
		at := int64(math.MaxInt64)
		t.Range(kg, func(key, _ string, _ []byte) bool {
			if len(key) >= 8 {
				at = windowTime(key)
			}
			return false
		})
		return at
	}
	for g := range o.saved {
		kg := g + o.kgStart
		o.nextClean[g], o.nextFire[g] = first(o.expiry, kg), first(o.windows, kg)
		o.saved[g] = task.MinWatermark
		if v, ok := o.marks.Get(kg, "", ""); ok {
			if len(v) != 8 {
				return -1, fmt.Errorf("join %s: restore the store: key group %d: a watermark of %d bytes", o.cfg.name, kg, len(v))
			}
			o.saved[g] = int64(binary.LittleEndian.Uint64(v))
		}
	}
	o.restored = true
	return kept, nil
}

// joinRowsOfStore returns the heap join's state rows (layout l) of b,
// rows of a pebble join's store (statestore.SnapshotSchema, as
// task.OpenStores gives a savepoint's stores to an operator that keeps
// its state on the heap): a row entry for each kept row, in the order of
// its key's entry, and an expire entry for each key group's watermark.
// The expiry and windows entries follow from the rows, and the store's
// backend's timer rows (a join's store has none) are skipped.
func joinRowsOfStore(l *joinStateLayout, mem memory.Allocator, b arrow.RecordBatch) (_ arrow.RecordBatch, err error) {
	groups := b.Column(0).(*array.Int32)
	tables := b.Column(1).(*array.String)
	nss := b.Column(3).(*array.String)
	vals := b.Column(4).(*array.Binary)
	deleted := b.Column(6).(*array.Boolean)
	rb := array.NewRecordBuilder(mem, l.Schema)
	defer rb.Release()
	fields := rb.Fields()
	head := func(kg int32, entry string) {
		fields[joinStateGroup].(*array.Int32Builder).Append(kg)
		fields[joinStateEntry].(*array.StringBuilder).Append(entry)
	}
	nulls := func(from, to int) {
		for _, f := range fields[from:to] {
			f.AppendNull()
		}
	}
	for r := range int(b.NumRows()) {
		table, ns := tables.Value(r), nss.Value(r)
		switch {
		case table == joinExpiryTable || table == joinWindowsTable || len(table) >= 8 && table[:8] == "__timers":
			continue
		case table != joinRowsTable && table != joinWatermarksTable:
			return nil, fmt.Errorf("row %d: table %q: a pebble join's store has tables %q, %q, %q and %q", r, table, joinRowsTable, joinExpiryTable, joinWindowsTable, joinWatermarksTable)
		case deleted.Value(r) || vals.IsNull(r):
			return nil, fmt.Errorf("row %d: a deleted entry: a pebble join's store is restored from its base", r)
		}
		kg, v := groups.Value(r), vals.Value(r)
		if table == joinWatermarksTable {
			if len(v) != 8 {
				return nil, fmt.Errorf("row %d: key group %d: a watermark of %d bytes", r, kg, len(v))
			}
			head(kg, joinEntryExpire)
			fields[joinStateSide].AppendNull()
			fields[joinStateWatermark].(*array.TimestampBuilder).Append(arrow.Timestamp(int64(binary.LittleEndian.Uint64(v))))
			nulls(joinStateInputs, len(fields))
			continue
		}
		if ns != "" {
			return nil, fmt.Errorf("row %d: key group %d: a rows entry of namespace %q, want none", r, kg, ns)
		}
		if err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("%v", p)
				}
			}()
			for s, rows := range joinEntrySides(v) {
				n := l.sides[s].NumFields()
				for len(rows) > 0 {
					row, _, _, rest := nextStoredRow(rows)
					rows = rest
					head(kg, joinEntryRow)
					fields[joinStateSide].(*array.StringBuilder).Append(joinSideNames[s])
					fields[joinStateWatermark].AppendNull()
					nulls(joinStateInputs, l.cols[s])
					if err := decodeStoredRow(fields[l.cols[s]:l.cols[s]+n], row); err != nil {
						return fmt.Errorf("a %s row: %w", joinSideNames[s], err)
					}
					nulls(l.cols[s]+n, len(fields))
				}
			}
			return nil
		}(); err != nil {
			return nil, fmt.Errorf("row %d: key group %d: the rows of a key: %w", r, kg, err)
		}
	}
	return rb.NewRecordBatch(), nil
}

// HeapRows returns the kept rows as the heap's join writes a base
// (join_state.go), key group by key group: each group's entries are read
// into a heap join of that group alone, which forgets the rows whose time
// had come by the group's watermark, as a restore does, and writes its
// base. `weir state export` and `dump` read a pebble join's stores so.
func (s joinStoreSnapshotter) HeapRows(mem memory.Allocator) (out []arrow.RecordBatch, err error) {
	defer s.o.failed(&err)
	o, err := s.open("write the rows as the heap's", false)
	if err != nil {
		return nil, err
	}
	o.saveWatermarks()
	defer func() {
		if err != nil {
			for _, b := range out {
				b.Release()
			}
			out = nil
		}
	}()
	for kg := o.kgStart; kg < o.kgEnd; kg++ {
		recs, err := statestore.NewStored(kg, kg+1, o.store).Snapshot(mem, true)
		if err != nil {
			return out, fmt.Errorf("join %s: key group %d: %w", o.cfg.name, kg, err)
		}
		base, err := o.heapBase(kg, mem, recs)
		for _, rec := range recs {
			rec.Release()
		}
		if err != nil {
			return out, fmt.Errorf("join %s: key group %d: %w", o.cfg.name, kg, err)
		}
		out = append(out, base...)
	}
	return out, nil
}

// heapBase restores recs, the store's entries of key group kg, into a
// heap join of that key group and returns its base.
func (o *joinStoreOp) heapBase(kg int, mem memory.Allocator, recs []arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	ctx := *o.ctx
	ctx.KeyGroupStart, ctx.KeyGroupEnd, ctx.Mem = kg, kg+1, mem
	h := &joinOperator{cfg: o.cfg, wm: task.MinWatermark, state: o.layout, shift: o.shift}
	if err := h.Open(&ctx); err != nil {
		return nil, err
	}
	defer func() { _ = h.Close() }()
	for _, rec := range recs {
		if err := (joinSnapshotter{h}).Restore(rec); err != nil {
			return nil, err
		}
	}
	return joinSnapshotter{h}.Snapshot(mem, true)
}
