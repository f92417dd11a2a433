package builtin

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/pebblestate"
)

// The window operator on pebble (a job's state: {backend: pebble}):
// windows whose state may be larger than memory. It is the operator
// NewWindow describes, with its state in a store of its own (pebblestate)
// instead of the heap, checkpointed as the store's files, as a process
// function's is.
//
// Each window of each key is one entry of the store's table "windows", in
// the key group of its key:
//
//	key        the window's end (8 bytes, big-endian, sign bit flipped),
//	           then the key's encoding (arrowfmt)
//	namespace  the window's start (the same 8 bytes)
//	value      a flags byte (storeEmitted, storePending), then the
//	           accumulator's words (accumulators), 8 bytes each,
//	           little-endian
//
// A key group's entries are sorted by (end, key, start), the order the
// results go out in, so the windows a watermark makes due are a prefix
// of it: the watermark reads the key groups from their starts, merged,
// and stops at the first window that is not due. No timer is kept. Per
// key group,
// nextFire is at most the least end of a window that has not fired, and
// nextClean at most the least end of any: a watermark reads only the key
// groups where one of them is due.
//
// A batch reads each window it touches from the store once, into a slot
// of the operator's accumulators, updates the slots a column at a time
// as the heap's operator does, and writes each window back once. A
// window that is not due has not fired, and the batch's rows only add to
// it: the batch does not read it, but starts its slot empty and writes
// the slot as a merge operand (pebblestate.Merge), which the store adds
// to the window's words when it next reads or compacts it. So a row
// costs a write, not a Get and a write. The accumulators' words merge as
// their kinds say (accumulators.wordKinds); a float's sum is not
// associative (the result would depend on how pebble grouped the
// operands), so a window with one reads and writes as before.
//
// Sessions merge, so a row must find its key's sessions by key: the table
// "sessions" has an entry per key with sessions (its encoding, namespace
// ""), whose value is their bounds, sorted by start: 16 bytes each, the
// start and the end as in a window's key.
const (
	windowStoreTable  = "windows"
	sessionStoreTable = "sessions"
)

// The flags of a window's entry.
const (
	storeEmitted byte = 1 << iota // a result went downstream
	storePending                  // rows came since the last result
)

// storeWindow is a window a batch touches, or a watermark fires.
type storeWindow struct {
	kg    int
	key   string // the entry's key: the end, then the key's encoding
	start int64
	end   int64
	slot  int32 // its words, in the operator's accumulators
	flags byte
	// refire: the window was due before this batch, and its rows make it
	// fire again at the batch's end. keep: a fired window that stays
	// (its cleanup time has not come). operand: the batch did not read
	// it: its slot holds this batch's rows only, to merge onto the
	// store's entry.
	refire, keep, operand bool
	before                bool // it fired before this firing
	// A window a batch read from the store (stored) is at (origKey,
	// origStart) there: a session whose bounds changed, or that merged
	// into another (gone), leaves that entry.
	stored    bool
	gone      bool
	origKey   string
	origStart int64
}

// storeSessions are the sessions of one key that a batch touches: all of
// the key's, as indexes into the batch's windows, sorted by start.
type storeSessions struct {
	kg   int
	key  string // the key's encoding
	wins []int32
}

type windowStoreOp struct {
	cfg    *windowConfig
	layout *windowStateLayout // the heap's state rows (HeapRows)
	windowIO
	wm int64

	operatorStore
	tab pebblestate.MergeTable
	// kinds are how the accumulators' words merge, nil if they do not
	// (see above).
	kinds []pebblestate.WordKind
	// merged and read count the windows batches merged into the store
	// unread, and those they read.
	merged, read int64
	index        statestore.StoredTable // sessions by key (session windows only)
	// nextFire and nextClean, by key group - kgStart: see above.
	// math.MaxInt64 for none.
	nextFire, nextClean []int64
	// heap holds state restored from a heap window's rows (a savepoint of
	// a job whose state was on the heap), moved into the store before
	// anything else uses it (settleRestore).
	heap *windowOperator

	// Scratch reused across batches and watermarks.
	acc         *accumulators
	batch       map[string]int32 // a batch's windows in wins, by key group, end, key and start (add's id)
	wins        []storeWindow
	sessions    map[string]*storeSessions // a batch's keys' sessions, by key group and key
	fwd         map[int32]int32           // slots merged into others in this batch
	dueGroups   []int                     // ProcessWatermark's
	merge       dueMerge                  // ProcessWatermark's
	bounds      []byte
	rows, slots []int32
	lateRows    []int32
	keyBuf, id  []byte
	val         []byte
	keyBuilders []array.Builder
	fire        []storeWindow
	fireSlots   []int32
	fireStarts  []arrow.Timestamp
	fireEnds    []arrow.Timestamp
}

var (
	_ task.Operator = (*windowStoreOp)(nil)
	_ task.Stateful = (*windowStoreOp)(nil)
)

// NewWindowState returns the window operator of op for input in with its
// keyed state in the backend st chooses (nil: the heap's): NewWindow's,
// or for state: {backend: pebble} one whose windows are in a pebble store
// under dir ("": the system's temporary directory).
func NewWindowState(op *spec.Operator, in Stream, st *spec.State, dir string) (task.Operator, error) {
	if st == nil || st.Backend != spec.StatePebble {
		return NewWindow(op, in)
	}
	cfg, err := newWindowConfig(op, in)
	if err != nil {
		return nil, err
	}
	return &windowStoreOp{cfg: cfg, layout: newWindowStateLayout(cfg, op.KeyBy), wm: task.MinWatermark,
		operatorStore: operatorStore{what: "window " + cfg.name, st: st, dir: dir}}, nil
}

func (w *windowStoreOp) Open(ctx *task.Context) error {
	if err := w.windowIO.open(w.cfg, ctx); err != nil {
		return err
	}
	if err := w.openStore(w.kgStart, w.kgEnd); err != nil {
		return err
	}
	if err := w.openTables(); err != nil {
		return fmt.Errorf("open window %s: state: %w", w.cfg.name, err)
	}
	w.nextFire = make([]int64, w.kgEnd-w.kgStart)
	w.nextClean = make([]int64, w.kgEnd-w.kgStart)
	for g := range w.nextFire {
		w.nextFire[g], w.nextClean[g] = math.MaxInt64, math.MaxInt64
	}
	w.acc = newAccumulators(w.cfg.aggs)
	if w.cfg.kind != kindSession {
		w.kinds = w.acc.wordKinds()
	}
	w.batch = map[string]int32{}
	w.sessions = map[string]*storeSessions{}
	w.fwd = map[int32]int32{}
	return nil
}

// openTables opens the store's tables.
func (w *windowStoreOp) openTables() error {
	var err error
	tab, err := w.store.Table(windowStoreTable)
	if err != nil {
		return err
	}
	w.tab = tab.(pebblestate.MergeTable)
	if w.cfg.kind == kindSession {
		w.index, err = w.store.Table(sessionStoreTable)
	}
	return err
}

func (w *windowStoreOp) Close() error {
	if w.heap != nil {
		_ = w.heap.Close()
		w.heap = nil
	}
	w.windowIO.close()
	w.tab, w.index = nil, nil
	return w.closeStore()
}

// windowLate reports whether a window ending at end is past its cleanup
// time: it takes no more rows.
func (w *windowStoreOp) windowLate(end int64) bool {
	return satAdd(end-1, w.cfg.lateness) <= w.wm
}

func (w *windowStoreOp) ProcessBatch(b arrow.RecordBatch) (err error) {
	defer w.failed(&err)
	w.settleRestore()
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	tcol, times, err := w.readBatch(w.cfg, b)
	if err != nil {
		return err
	}
	timeNulls := tcol.NullN() > 0
	offset := w.cfg.in.TimeOffset
	w.rows, w.slots, w.lateRows = w.rows[:0], w.slots[:0], w.lateRows[:0]
	for r := range n {
		if timeNulls && tcol.IsNull(r) {
			w.lateRows = append(w.lateRows, int32(r))
			continue
		}
		ts := times[r] + offset
		kg := arrowfmt.KeyGroup(w.hashes[r], w.maxPar)
		w.keyBuf = arrowfmt.AppendRowKey(w.keyBuf[:0], b, w.cfg.keyCols, r)
		var taken bool
		switch w.cfg.kind {
		case kindTumbling:
			start := ts - floorMod(ts, w.cfg.size)
			taken = w.add(kg, int32(r), start, start+w.cfg.size)
		case kindSliding:
			for start := ts - floorMod(ts, w.cfg.slide); start > ts-w.cfg.size; start -= w.cfg.slide {
				if w.add(kg, int32(r), start, start+w.cfg.size) {
					taken = true
				}
			}
		case kindSession:
			taken = w.addSession(kg, int32(r), ts)
		}
		if !taken && satAdd(ts, w.cfg.lateness) <= w.wm {
			w.lateRows = append(w.lateRows, int32(r))
		}
	}
	forwardSlots(w.slots, w.fwd)
	w.acc.update(b, w.rows, w.slots)

	// Windows that were due fire again with this batch's rows.
	fire := w.fire[:0]
	for i := range w.wins {
		win := &w.wins[i]
		if win.refire && !win.gone {
			f := *win
			f.before = win.flags&storeEmitted != 0
			fire = append(fire, f)
			win.flags = storeEmitted
		}
	}
	err = w.emit(fire)
	clear(fire)
	w.fire = fire[:0]
	for i := range w.wins {
		win := &w.wins[i]
		if win.stored && (win.gone || win.key != win.origKey || win.start != win.origStart) {
			w.tab.Delete(win.kg, win.origKey, windowNS(win.origStart))
		}
		switch {
		case win.operand:
			w.tab.Merge(win.kg, win.key, windowNS(win.start), w.operandValue(win.flags, win.slot))
		case !win.gone:
			w.tab.Put(win.kg, win.key, windowNS(win.start), w.entryValue(win.flags, win.slot))
		}
	}
	for _, set := range w.sessions {
		w.putSessions(set)
	}
	clear(w.sessions)
	clear(w.batch)
	w.wins = w.wins[:0]
	w.acc.truncate()
	if err != nil {
		return err
	}
	return w.emitLate(w.cfg.name, b, w.lateRows)
}

// add queues row r for the (tumbling or sliding) window [start, end) of
// the key in w.keyBuf, of key group kg, reading it from the store or
// making it the first time the batch touches it. It returns false if the
// window is late.
func (w *windowStoreOp) add(kg int, r int32, start, end int64) bool {
	w.id = binary.BigEndian.AppendUint16(w.id[:0], uint16(kg))
	w.id = appendWindowTime(w.id, end)
	w.id = append(w.id, w.keyBuf...)
	w.id = appendWindowTime(w.id, start)
	i, ok := w.batch[string(w.id)]
	if !ok {
		key := string(w.id[2 : len(w.id)-8])
		slot := w.acc.alloc()
		i = int32(len(w.wins))
		w.batch[string(w.id)] = i
		if w.kinds != nil && end-1 > w.wm {
			// Not due, so not fired: merged onto the store's entry.
			w.noteEnd(kg, end)
			w.merged++
			w.wins = append(w.wins, storeWindow{kg: kg, key: key, start: start, end: end, slot: slot, operand: true})
			return w.addRow(i, r)
		}
		var flags byte
		w.read++
		v, found := w.tab.Get(kg, key, windowNS(start))
		if found {
			var err error
			if flags, err = w.loadEntry(slot, v); err != nil {
				panic(fmt.Sprintf("window %s: key group %d, window [%d, %d): %v", w.cfg.name, kg, start, end, err))
			}
		} else {
			if w.windowLate(end) {
				w.acc.release(slot)
				delete(w.batch, string(w.id))
				return false
			}
			w.noteEnd(kg, end)
		}
		w.wins = append(w.wins, storeWindow{kg: kg, key: key, start: start, end: end, slot: slot, flags: flags, stored: found, origKey: key, origStart: start})
	}
	return w.addRow(i, r)
}

// addRow adds row r to the batch's window i, which takes it.
func (w *windowStoreOp) addRow(i, r int32) bool {
	win := &w.wins[i]
	w.rows = append(w.rows, r)
	w.slots = append(w.slots, win.slot)
	if win.flags&storePending == 0 && win.end-1 <= w.wm {
		win.refire = true
	}
	win.flags |= storePending
	return true
}

// addSession adds row r with event time ts to the sessions of the key in
// w.keyBuf, of key group kg, merging as Flink's MergingWindowSet does
// (see NewWindow and windowOperator.addToSession). It returns false if
// the row's session is late.
func (w *windowStoreOp) addSession(kg int, r int32, ts int64) bool {
	start, end := ts, satAdd(ts, w.cfg.gap)
	set := w.sessionsOf(kg)
	ws := set.wins
	// Sessions [s, e) that intersect [start, end), bounds included: e >=
	// start and s <= end. They are contiguous from the first with e >=
	// start.
	i := 0
	for i < len(ws) && w.wins[ws[i]].end < start {
		i++
	}
	j := i
	for j < len(ws) && w.wins[ws[j]].start <= end {
		j++
	}
	merged := false
	switch {
	case i == j: // a new session
		if w.windowLate(end) {
			return false
		}
		w.id = appendWindowTime(w.id[:0], end)
		w.id = append(w.id, set.key...)
		w.noteEnd(kg, end)
		set.wins = slices.Insert(ws, i, int32(len(w.wins)))
		w.wins = append(w.wins, storeWindow{kg: kg, key: string(w.id), start: start, end: end, slot: w.acc.alloc()})
	case j == i+1 && w.wins[ws[i]].start <= start && end <= w.wins[ws[i]].end:
		// Inside a session.
	default:
		// The row bridges or extends sessions i..j-1: the first survives
		// with the merged bounds and accumulators. It cannot be late: it
		// ends no earlier than a live session.
		t := &w.wins[ws[i]]
		t.start, t.end = min(t.start, start), max(w.wins[ws[j-1]].end, end)
		for _, k := range ws[i+1 : j] {
			m := &w.wins[k]
			w.acc.merge(t.slot, m.slot)
			w.fwd[m.slot] = t.slot
			t.flags |= m.flags
			m.gone = true
		}
		w.id = appendWindowTime(w.id[:0], t.end)
		w.id = append(w.id, set.key...)
		t.key = string(w.id)
		w.noteEnd(kg, t.end)
		set.wins = slices.Delete(ws, i+1, j)
		merged = true
	}
	win := &w.wins[set.wins[i]]
	w.rows = append(w.rows, r)
	w.slots = append(w.slots, win.slot)
	switch {
	case merged:
		// Its bounds changed: it fires again at the batch's end only if
		// it is still due.
		win.refire = win.end-1 <= w.wm
	case win.flags&storePending == 0 && win.end-1 <= w.wm:
		win.refire = true
	}
	win.flags |= storePending
	return true
}

// noteEnd notes that a window of key group kg ends at end.
func (w *windowStoreOp) noteEnd(kg int, end int64) {
	g := kg - w.kgStart
	w.nextFire[g] = min(w.nextFire[g], end)
	w.nextClean[g] = min(w.nextClean[g], end)
}

// sessionsOf returns the sessions of the key in w.keyBuf, of key group
// kg, reading them from the store the first time the batch touches the
// key.
func (w *windowStoreOp) sessionsOf(kg int) *storeSessions {
	w.id = binary.BigEndian.AppendUint16(w.id[:0], uint16(kg))
	w.id = append(w.id, w.keyBuf...)
	if set := w.sessions[string(w.id)]; set != nil {
		return set
	}
	set := &storeSessions{kg: kg, key: string(w.keyBuf)}
	w.sessions[string(w.id)] = set
	v, found := w.index.Get(kg, set.key, "")
	if !found {
		return set
	}
	w.bounds = append(w.bounds[:0], v...) // v is only valid until the next Get
	if len(w.bounds)%16 != 0 {
		panic(fmt.Sprintf("window %s: key group %d: a key's sessions of %d bytes: want 16 a session", w.cfg.name, kg, len(w.bounds)))
	}
	for o := 0; o < len(w.bounds); o += 16 {
		start, end := windowTime(string(w.bounds[o:o+8])), windowTime(string(w.bounds[o+8:o+16]))
		w.id = appendWindowTime(w.id[:0], end)
		w.id = append(w.id, set.key...)
		key := string(w.id)
		slot := w.acc.alloc()
		e, ok := w.tab.Get(kg, key, windowNS(start))
		if !ok {
			panic(fmt.Sprintf("window %s: key group %d: the key's session [%d, %d) has no entry", w.cfg.name, kg, start, end))
		}
		flags, err := w.loadEntry(slot, e)
		if err != nil {
			panic(fmt.Sprintf("window %s: key group %d, session [%d, %d): %v", w.cfg.name, kg, start, end, err))
		}
		set.wins = append(set.wins, int32(len(w.wins)))
		w.wins = append(w.wins, storeWindow{kg: kg, key: key, start: start, end: end, slot: slot, flags: flags, stored: true, origKey: key, origStart: start})
	}
	return set
}

// putSessions writes the bounds of set's sessions to the store's index.
func (w *windowStoreOp) putSessions(set *storeSessions) {
	if len(set.wins) == 0 {
		w.index.Delete(set.kg, set.key, "")
		return
	}
	w.bounds = w.bounds[:0]
	for _, i := range set.wins {
		w.bounds = appendWindowTime(w.bounds, w.wins[i].start)
		w.bounds = appendWindowTime(w.bounds, w.wins[i].end)
	}
	w.index.Put(set.kg, set.key, "", w.bounds)
}

// dropSession removes session [start, ...) of key (its encoding) of key
// group kg from the store's index.
func (w *windowStoreOp) dropSession(kg int, key string, start int64) {
	v, found := w.index.Get(kg, key, "")
	if !found {
		return
	}
	w.bounds = w.bounds[:0]
	for o := 0; o+16 <= len(v); o += 16 {
		if windowTime(string(v[o:o+8])) != start {
			w.bounds = append(w.bounds, v[o:o+16]...)
		}
	}
	if len(w.bounds) == 0 {
		w.index.Delete(kg, key, "")
		return
	}
	w.index.Put(kg, key, "", w.bounds)
}

// appendWindowTime appends t as 8 bytes that sort as t does: big-endian,
// sign bit flipped.
func appendWindowTime(dst []byte, t int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(t)^1<<63)
}

// windowTime reads what appendWindowTime wrote.
func windowTime(b string) int64 {
	var u uint64
	for i := range 8 {
		u = u<<8 | uint64(b[i])
	}
	return int64(u ^ 1<<63)
}

// windowNS returns the namespace of a window starting at start.
func windowNS(start int64) string {
	var b [8]byte
	return string(appendWindowTime(b[:0], start))
}

// operandValue encodes a window's flags and the words of slot s as a
// merge operand.
func (w *windowStoreOp) operandValue(flags byte, s int32) []byte {
	var words []int64
	if w.acc.width > 0 {
		words = w.acc.row(s)
	}
	w.val = pebblestate.AppendOperand(w.val[:0], flags, w.kinds, words)
	return w.val
}

// entryValue encodes a window's flags and the words of slot s.
func (w *windowStoreOp) entryValue(flags byte, s int32) []byte {
	w.val = append(w.val[:0], flags)
	if w.acc.width > 0 {
		for _, word := range w.acc.row(s) {
			w.val = binary.LittleEndian.AppendUint64(w.val, uint64(word))
		}
	}
	return w.val
}

// loadEntry reads an entry's value into slot s and returns its flags.
func (w *windowStoreOp) loadEntry(s int32, v []byte) (byte, error) {
	return loadWindowEntry(w.acc, s, v)
}

// loadWindowEntry reads a window entry's value into slot s of acc and
// returns its flags.
func loadWindowEntry(acc *accumulators, s int32, v []byte) (byte, error) {
	if len(v) != 1+8*acc.width {
		return 0, fmt.Errorf("the state entry has %d bytes, want %d (flags and %d accumulator words)", len(v), 1+8*acc.width, acc.width)
	}
	if acc.width > 0 {
		row := acc.row(s)
		for i := range row {
			row[i] = int64(binary.LittleEndian.Uint64(v[1+8*i:]))
		}
		acc.noteSlot(s)
	}
	return v[0], nil
}

// ProcessWatermark fires every window whose end-1 is at or below wm, in
// order of (window_end, key, window_start), and drops the windows whose
// cleanup time has come. The due windows of each key group are the first
// of its entries, in that order: it merges the key groups where some are
// due (nextFire, nextClean), reading them from a snapshot of the store,
// and sends the results out a batch at a time, so that the end of a
// period of millions of keys takes memory for one batch.
func (w *windowStoreOp) ProcessWatermark(wm int64) (err error) {
	defer w.failed(&err)
	w.settleRestore()
	if wm <= w.wm {
		return nil
	}
	w.wm = wm
	due := w.dueGroups[:0]
	for g := range w.nextFire {
		if w.nextFire[g]-1 <= wm || satAdd(w.nextClean[g]-1, w.cfg.lateness) <= wm {
			due = append(due, g)
		}
	}
	w.dueGroups = due
	if len(due) == 0 {
		return nil
	}
	snap, err := w.store.Snapshot()
	if err != nil {
		return fmt.Errorf("window %s: state: %w", w.cfg.name, err)
	}
	defer snap.Close()
	m := &w.merge
	m.heads = m.heads[:0]
	for _, g := range due {
		w.nextFire[g], w.nextClean[g] = math.MaxInt64, math.MaxInt64
		h := dueHead{it: snap.Iter(windowStoreTable, g+w.kgStart), g: g}
		if w.advance(&h) {
			m.heads = append(m.heads, h)
		}
	}
	heap.Init(m)
	fire := w.fire[:0]
	for m.Len() > 0 {
		h := &m.heads[0]
		kg := h.g + w.kgStart
		end := windowTime(h.key)
		clean := satAdd(end-1, w.cfg.lateness) <= w.wm
		if !clean {
			w.nextClean[h.g] = min(w.nextClean[h.g], end)
		}
		if h.v[0]&storePending != 0 {
			s := w.acc.alloc()
			if _, err := w.loadEntry(s, h.v); err != nil {
				return fmt.Errorf("window %s: key group %d: %w", w.cfg.name, kg, err)
			}
			fire = append(fire, storeWindow{kg: kg, key: h.key, start: windowTime(h.ns), end: end, slot: s, keep: !clean, before: h.v[0]&storeEmitted != 0})
		}
		if clean {
			w.tab.Delete(kg, h.key, h.ns)
			if w.index != nil {
				w.dropSession(kg, h.key[8:], windowTime(h.ns))
			}
		}
		if w.advance(h) {
			heap.Fix(m, 0)
		} else {
			heap.Pop(m)
		}
		if len(fire) == windowBatchRows {
			if err := w.fireBatch(fire); err != nil {
				return err
			}
			fire = fire[:0]
		}
	}
	err = w.fireBatch(fire)
	w.fire = fire[:0]
	return err
}

// advance reads h's next entry, and reports whether it is due; once one
// is not, it notes its end as the key group's next and closes h.
func (w *windowStoreOp) advance(h *dueHead) bool {
	key, ns, v, ok := h.it.Next()
	if ok && (len(key) < 8 || len(ns) != 8 || len(v) == 0) {
		panic(fmt.Sprintf("window %s: key group %d: a state entry of %d, %d and %d bytes is not a window's", w.cfg.name, h.g+w.kgStart, len(key), len(ns), len(v)))
	}
	if ok && windowTime(key)-1 <= w.wm {
		h.key, h.ns, h.v = key, ns, v
		return true
	}
	if ok {
		end := windowTime(key)
		w.nextFire[h.g], w.nextClean[h.g] = min(w.nextFire[h.g], end), min(w.nextClean[h.g], end)
	}
	h.it.Close()
	return false
}

// fireBatch sends the results of fs, in order, writes back those that
// stay, and frees their slots.
func (w *windowStoreOp) fireBatch(fs []storeWindow) error {
	var err error
	if len(fs) > 0 {
		err = w.emitBatch(fs)
	}
	for _, f := range fs {
		if f.keep {
			w.tab.Put(f.kg, f.key, windowNS(f.start), w.entryValue(storeEmitted, f.slot))
		}
	}
	clear(fs)
	w.acc.truncate()
	return err
}

// dueHead is a key group's next due window, in a watermark's merge.
type dueHead struct {
	it      statestore.StoredIter
	g       int
	key, ns string
	v       []byte // valid until it moves
}

// dueMerge is a heap of key groups by their next due window: by its
// entry's key (the end, then the key) and start.
type dueMerge struct{ heads []dueHead }

func (m *dueMerge) Len() int { return len(m.heads) }
func (m *dueMerge) Less(i, j int) bool {
	a, b := &m.heads[i], &m.heads[j]
	if a.key != b.key {
		return a.key < b.key
	}
	return a.ns < b.ns // the starts, as bytes that sort as they do
}
func (m *dueMerge) Swap(i, j int) { m.heads[i], m.heads[j] = m.heads[j], m.heads[i] }
func (m *dueMerge) Push(x any)    { m.heads = append(m.heads, x.(dueHead)) }
func (m *dueMerge) Pop() any {
	h := m.heads[len(m.heads)-1]
	m.heads = m.heads[:len(m.heads)-1]
	return h
}

// Finish fires what is left. The runtime has already called
// ProcessWatermark(MaxWatermark), so usually nothing is.
func (w *windowStoreOp) Finish() error { return w.ProcessWatermark(task.MaxWatermark) }

// emit sorts fs by end, key and start (their entries' keys begin with the
// end), and sends their results downstream in batches of at most
// windowBatchRows.
func (w *windowStoreOp) emit(fs []storeWindow) error {
	if len(fs) == 0 {
		return nil
	}
	slices.SortFunc(fs, func(a, b storeWindow) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.start, b.start)
	})
	for lo := 0; lo < len(fs); lo += windowBatchRows {
		if err := w.emitBatch(fs[lo:min(lo+windowBatchRows, len(fs))]); err != nil {
			return err
		}
	}
	return nil
}

// emitBatch sends the results of fs.
func (w *windowStoreOp) emitBatch(fs []storeWindow) error {
	rb := w.out
	rb.Reserve(len(fs))
	w.keyBuilders = w.keyBuilders[:0]
	for c := range w.cfg.keyCols {
		w.keyBuilders = append(w.keyBuilders, rb.Field(2+c))
	}
	w.fireSlots, w.fireStarts, w.fireEnds = w.fireSlots[:0], w.fireStarts[:0], w.fireEnds[:0]
	refires := 0
	for _, f := range fs {
		w.fireSlots = append(w.fireSlots, f.slot)
		w.fireStarts = append(w.fireStarts, arrow.Timestamp(f.start))
		w.fireEnds = append(w.fireEnds, arrow.Timestamp(f.end))
		if f.before {
			refires++
		}
		if err := arrowfmt.AppendKeyValues(w.keyBuilders, f.key[8:], w.cfg.keyTypes); err != nil {
			panic(fmt.Sprintf("window %s: a key the operator encoded does not decode: %v", w.cfg.name, err))
		}
	}
	rb.Field(0).(*array.TimestampBuilder).AppendValues(w.fireStarts, nil)
	rb.Field(1).(*array.TimestampBuilder).AppendValues(w.fireEnds, nil)
	base := 2 + len(w.cfg.keyCols)
	for i := range w.cfg.aggs {
		w.acc.appendResults(i, rb.Field(base+i), w.fireSlots)
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	w.counters.WindowsFired.Add(int64(len(fs)))
	w.counters.WindowsRefire.Add(int64(refires))
	if err := w.ctx.Out.Emit(rec); err != nil {
		return fmt.Errorf("window %s: emit results: %w", w.cfg.name, err)
	}
	return nil
}

// State returns the operator's state as checkpoints see it: its store,
// captured as files (statestore.StoreCapturer).
func (w *windowStoreOp) State() statestore.Snapshotter { return windowStoreSnapshotter{w} }

// windowStoreSnapshotter is a pebble window's state as checkpoints
// capture and restore it: the store's files, and rows of the store's
// backend, which hold nothing of a window's (no timers).
type windowStoreSnapshotter struct{ w *windowStoreOp }

var (
	_ statestore.StoreCapturer      = windowStoreSnapshotter{}
	_ statestore.SteppedSnapshotter = windowStoreSnapshotter{}
	_ statestore.OlderSchemas       = windowStoreSnapshotter{}
)

// open returns the operator, open, with the state restored from a heap
// window's rows in its store unless restore.
func (s windowStoreSnapshotter) open(what string, restore bool) (_ *windowStoreOp, err error) {
	if s.w.state == nil {
		return nil, fmt.Errorf("window %s: %s: the operator is not open", s.w.cfg.name, what)
	}
	if !restore {
		defer s.w.failed(&err)
		s.w.settleRestore()
	}
	return s.w, nil
}

// settleRestore moves the windows restored from a heap window's rows, if
// any, into the store.
func (w *windowStoreOp) settleRestore() {
	h := w.heap
	if h == nil {
		return
	}
	w.heap = nil
	h.eachKey(func(ks *windowKey) {
		kg, g := int(ks.group), int(ks.group)-w.kgStart
		if w.index != nil {
			w.bounds = w.bounds[:0]
			for _, win := range h.winsOf(ks) {
				w.bounds = appendWindowTime(w.bounds, win.start)
				w.bounds = appendWindowTime(w.bounds, win.end)
			}
			w.index.Put(kg, h.keyOf(ks), "", w.bounds)
		}
		for _, win := range h.winsOf(ks) {
			w.id = appendWindowTime(w.id[:0], win.end)
			w.id = append(w.id, h.keyOf(ks)...)
			var flags byte
			if win.emitted {
				flags |= storeEmitted
			}
			if win.pending {
				flags |= storePending
			}
			w.val = append(w.val[:0], flags)
			if h.acc.width > 0 {
				for _, word := range h.acc.row(win.slot) {
					w.val = binary.LittleEndian.AppendUint64(w.val, uint64(word))
				}
			}
			w.tab.Put(kg, string(w.id), windowNS(win.start), w.val)
			w.nextFire[g] = min(w.nextFire[g], win.end)
			w.nextClean[g] = min(w.nextClean[g], win.end)
		}
	})
	_ = h.Close()
}

// Schema is the store's backend's snapshot schema.
func (s windowStoreSnapshotter) Schema() *arrow.Schema { return statestore.SnapshotSchema() }

// CheckSchema accepts the store's backend's rows, and the heap window's
// state (a savepoint of a job whose state was on the heap).
func (s windowStoreSnapshotter) CheckSchema(schema *arrow.Schema) error {
	if schema.Equal(statestore.SnapshotSchema()) {
		return nil
	}
	return s.w.layout.check(schema)
}

func (s windowStoreSnapshotter) Snapshot(mem memory.Allocator, full bool) ([]arrow.RecordBatch, error) {
	w, err := s.open("snapshot", false)
	if err != nil {
		return nil, err
	}
	return w.state.Snapshot(mem, full)
}

func (s windowStoreSnapshotter) BeginSnapshot(mem memory.Allocator, full bool) (statestore.Capture, error) {
	w, err := s.open("snapshot", false)
	if err != nil {
		return nil, err
	}
	return w.state.BeginSnapshot(mem, full)
}

func (s windowStoreSnapshotter) Restore(b arrow.RecordBatch) error {
	w, err := s.open("restore", true)
	if err != nil {
		return err
	}
	if !b.Schema().Equal(statestore.SnapshotSchema()) {
		// A heap window's rows: restored on the heap, as that window
		// restores them (bases, deltas, kinds of rows), then moved into
		// the store (settleRestore).
		if w.heap == nil {
			w.heap = &windowOperator{cfg: w.cfg, wm: task.MinWatermark, state: w.layout}
			if err := w.heap.Open(w.ctx); err != nil {
				w.heap = nil
				return err
			}
		}
		return windowSnapshotter{w.heap}.Restore(b)
	}
	if err := w.state.Restore(b); err != nil {
		return fmt.Errorf("window %s: %w", w.cfg.name, err)
	}
	return nil
}

// CaptureStore captures the store into a directory beside it.
func (s windowStoreSnapshotter) CaptureStore(id int64) (statestore.StoreFileCapture, error) {
	w, err := s.open("capture the store", false)
	if err != nil {
		return nil, err
	}
	return w.captureStore(id)
}

// StoreScratch is the directory the store is in.
func (s windowStoreSnapshotter) StoreScratch() string { return s.w.scratch() }

// RestoreStores makes the operator's store the one captured over its key
// groups, or at a rescale the one sharing the most key groups with it,
// with the rest ingested (pebblestate.Restore), and reads where each key
// group's windows begin.
func (s windowStoreSnapshotter) RestoreStores(stores []statestore.CapturedStore) (_ int, err error) {
	defer s.w.failed(&err)
	w, err := s.open("restore the store", true)
	if err != nil {
		return -1, err
	}
	kept, err := w.restoreStores(stores, w.kgStart, w.kgEnd)
	if err != nil {
		return -1, err
	}
	if err := w.openTables(); err != nil {
		return -1, fmt.Errorf("window %s: restore the store: %w", w.cfg.name, err)
	}
	// The first window of each key group is due no later than anything
	// after it: a watermark at its end reads the key group.
	for g := range w.nextFire {
		first := int64(math.MaxInt64)
		w.tab.Range(g+w.kgStart, func(key, _ string, _ []byte) bool {
			if len(key) >= 8 {
				first = windowTime(key)
			}
			return false
		})
		w.nextFire[g], w.nextClean[g] = first, first
	}
	return kept, nil
}

// HeapRows returns the windows as the heap's window operator writes a
// base (window_state.go), key group by key group: for each key a replace
// row with its first window by start, and a window row for each further
// one. `weir state export` reads a pebble window's stores so.
func (s windowStoreSnapshotter) HeapRows(mem memory.Allocator) (out []arrow.RecordBatch, err error) {
	defer s.w.failed(&err)
	w, err := s.open("write the windows as rows", false)
	if err != nil {
		return nil, err
	}
	rb := array.NewRecordBuilder(mem, w.layout.Schema)
	defer rb.Release()
	var wins []storeWindow
	defer w.acc.truncate()
	for kg := w.kgStart; kg < w.kgEnd; kg++ {
		wins = wins[:0]
		var bad error
		w.tab.Range(kg, func(key, ns string, v []byte) bool {
			if len(key) < 8 || len(ns) != 8 {
				bad = fmt.Errorf("key group %d: a state entry of %d and %d bytes is not a window's", kg, len(key), len(ns))
				return false
			}
			slot := w.acc.alloc()
			flags, err := w.loadEntry(slot, v)
			if err != nil {
				bad = fmt.Errorf("key group %d: %w", kg, err)
				return false
			}
			wins = append(wins, storeWindow{kg: kg, key: strings.Clone(key), start: windowTime(ns), end: windowTime(key), slot: slot, flags: flags})
			return true
		})
		if bad != nil {
			for _, b := range out {
				b.Release()
			}
			return nil, fmt.Errorf("window %s: %w", w.cfg.name, bad)
		}
		// By key, then start: the entries are by end first.
		slices.SortFunc(wins, func(a, b storeWindow) int {
			if c := strings.Compare(a.key[8:], b.key[8:]); c != 0 {
				return c
			}
			return cmp.Compare(a.start, b.start)
		})
		for lo := 0; lo < len(wins); lo += windowBatchRows {
			out = append(out, w.windowRows(rb, wins[lo:min(lo+windowBatchRows, len(wins))]))
		}
		w.acc.truncate()
	}
	return out, nil
}

// windowRows builds the heap's state rows of wins, sorted by key and
// start, with rb: a replace row where the key changes, else a window row.
func (w *windowStoreOp) windowRows(rb *array.RecordBuilder, wins []storeWindow) arrow.RecordBatch {
	var rec arrow.RecordBatch
	w.fireSlots, rec = buildHeapRows(rb, w.layout, w.cfg, w.acc, wins, true, w.fireSlots)
	return rec
}

// buildHeapRows builds the heap's state rows (layout l) of wins, whose
// words are in acc, with rb. byKey: wins are sorted by key and start,
// and a key's first is a replace row; else every row is a window row.
// slots is scratch, returned for reuse.
func buildHeapRows(rb *array.RecordBuilder, l *windowStateLayout, cfg *windowConfig, acc *accumulators, wins []storeWindow, byKey bool, slots []int32) ([]int32, arrow.RecordBatch) {
	rb.Reserve(len(wins))
	keys := make([]array.Builder, len(l.keyCols))
	for i, c := range l.keyCols {
		keys[i] = rb.Field(c)
	}
	kinds := rb.Field(l.kind).(*array.Int8Builder)
	starts := rb.Field(l.kind + 1).(*array.TimestampBuilder)
	ends := rb.Field(l.kind + 2).(*array.TimestampBuilder)
	emitted := rb.Field(l.kind + 3).(*array.BooleanBuilder)
	pending := rb.Field(l.kind + 4).(*array.BooleanBuilder)
	slots = slots[:0]
	for i, win := range wins {
		rb.Field(0).(*array.Int32Builder).Append(int32(win.kg))
		if err := arrowfmt.AppendKeyValues(keys, win.key[8:], cfg.keyTypes); err != nil {
			panic(fmt.Sprintf("window %s: a key the operator encoded does not decode: %v", cfg.name, err))
		}
		kind := windowRowWindow
		if byKey && (i == 0 || win.key[8:] != wins[i-1].key[8:]) {
			kind = windowRowReplace
		}
		kinds.Append(kind)
		starts.Append(arrow.Timestamp(win.start))
		ends.Append(arrow.Timestamp(win.end))
		emitted.Append(win.flags&storeEmitted != 0)
		pending.Append(win.flags&storePending != 0)
		slots = append(slots, win.slot)
	}
	acc.appendState(rb.Fields()[l.acc:], slots)
	return slots[:0], rb.NewRecordBatch()
}

// windowRowsOfStore returns the heap's window state rows (layout l) of b,
// rows of a pebble window's store (statestore.SnapshotSchema, as
// task.OpenStores gives a savepoint's stores to an operator that keeps
// its state on the heap): a window row for each entry of its table. The
// store's backend's timer rows (a window's store has none) are skipped.
func windowRowsOfStore(cfg *windowConfig, l *windowStateLayout, mem memory.Allocator, b arrow.RecordBatch) (arrow.RecordBatch, error) {
	groups := b.Column(0).(*array.Int32)
	tables := b.Column(1).(*array.String)
	keys := b.Column(2).(*array.Binary)
	nss := b.Column(3).(*array.String)
	vals := b.Column(4).(*array.Binary)
	deleted := b.Column(6).(*array.Boolean)
	acc := newAccumulators(cfg.aggs)
	wins := make([]storeWindow, 0, b.NumRows())
	for r := range int(b.NumRows()) {
		table := tables.Value(r)
		if strings.HasPrefix(table, "__timers") || table == sessionStoreTable {
			continue // no timers; the sessions follow from the windows
		}
		key, ns := keys.ValueString(r), nss.Value(r)
		switch {
		case table != windowStoreTable:
			return nil, fmt.Errorf("row %d: table %q: a pebble window's store has one table, %q", r, table, windowStoreTable)
		case deleted.Value(r) || vals.IsNull(r):
			return nil, fmt.Errorf("row %d: a deleted entry: a pebble window's store is restored from its base", r)
		case len(key) < 8 || len(ns) != 8:
			return nil, fmt.Errorf("row %d: an entry of %d and %d bytes is not a window's", r, len(key), len(ns))
		}
		slot := acc.alloc()
		flags, err := loadWindowEntry(acc, slot, vals.Value(r))
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", r, err)
		}
		wins = append(wins, storeWindow{kg: int(groups.Value(r)), key: key, start: windowTime(ns), end: windowTime(key), slot: slot, flags: flags})
	}
	rb := array.NewRecordBuilder(mem, l.Schema)
	defer rb.Release()
	_, rec := buildHeapRows(rb, l, cfg, acc, wins, false, nil)
	return rec, nil
}
