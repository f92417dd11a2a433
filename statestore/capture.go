package statestore

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/statestore/offheap"
)

// A backend's snapshot captured in steps (SteppedSnapshotter).
//
// Copy on write, per entry, walked key group by key group. At the barrier
// BeginSnapshot takes the dirty sets (a delta needs them as they were),
// decides the watermark rows, and hooks itself into the tables and the
// timers. Each Step then writes whole key groups, in order, until its
// deadline, exactly as Snapshot writes them. Before a table entry or a
// timer of a key group the walk has not reached changes, the capture
// copies what the snapshot needs of it: the entry's encoded value, or
// whether the timer was set (a base always; a delta only for what is in
// its dirty set). The walk then writes the copy in the entry's place.
// Since a step writes a key group in one go, nothing changes under it.
//
// A heap table's values may be changed in place before they are Put
// back (Table.Get), so a copy made at the Put would hold the new value.
// A backend with a heap table whose value type can be changed in place
// (a slice, a map, a pointer; see immutable) therefore captures to the
// end in BeginSnapshot. Strings and numbers cannot be.
//
// A backend over a store (pebble) copies nothing of its tables: it takes
// the store's snapshot at the barrier (SnapshotStore) and the walk reads
// them from it. A store that takes no snapshots is captured to the end
// in BeginSnapshot.

// captureBatchBytes caps the variable-length bytes of a capture's batches
// below snapshotBatchBytes: a builder's buffers double as they fill, and
// copying a large one would be a long step.
const captureBatchBytes = 8 << 20

// entryCopy is a table entry as it was at the barrier: its encoded
// value, n bytes at off in its view's arena, or absent (n < 0). A copy
// per entry changed cost a slice header and an allocation of its own.
type entryCopy struct {
	off uint64
	n   int32
}

func (c entryCopy) present() bool { return c.n >= 0 }

// value returns the copy's encoded value, nil if absent.
func (v *groupView) value(c entryCopy) []byte {
	if c.n < 0 {
		return nil
	}
	end := c.off + uint64(c.n)
	return v.arena[c.off:end:end]
}

// groupView is what a snapshot of one key group of a table reads besides
// the table: the dirty set taken at the barrier (a delta) and the entries
// copied before they changed, by their cells' positions (only a heap
// table's entries change during a capture).
type groupView struct {
	dirty  dirtySet // nil: none
	copies cellCopies
	arena  []byte // the copies' values
}

// cellCopies holds the copies of a key group's entries by the positions
// of their cells: an open-addressing table of 16-byte slots outside the
// Go heap once large. A Go map of (key, namespace) strings held a
// 48-byte entry per copy, with pointers for the collector to scan: 89 MB
// live at the peak of a capture of 10M keys, which the collector let
// grow to twice that. A copied entry's cell is neither freed nor reused
// before the capture ends: it was marked in the capture's epoch, and
// only tombstones of earlier epochs are dropped.
type cellCopies struct {
	slots []cellCopy // a power of two long, or nil
	n     int
}

type cellCopy struct {
	cell uint32 // the cell's position + 1; 0: an empty slot
	n    int32
	off  uint64
}

func (m *cellCopies) slot(cell uint32) int {
	mask := len(m.slots) - 1
	for j := int(uint64(cell)*0x9e3779b97f4a7c15>>32) & mask; ; j = (j + 1) & mask {
		if s := m.slots[j].cell; s == 0 || s == cell+1 {
			return j
		}
	}
}

// get returns the copy of the entry in cell position cell, if it has one.
func (m *cellCopies) get(cell int) (entryCopy, bool) {
	if m.n == 0 {
		return entryCopy{}, false
	}
	s := &m.slots[m.slot(uint32(cell))]
	return entryCopy{off: s.off, n: s.n}, s.cell != 0
}

// put records c as the copy of the entry in cell position cell, which has
// none.
func (m *cellCopies) put(a *offheap.Arena, cell int, c entryCopy) {
	if (m.n+1)*4 > len(m.slots)*3 {
		old := m.slots
		m.slots = offheap.Make[cellCopy](a, max(64, 2*len(old)))
		for _, s := range old {
			if s.cell != 0 {
				m.slots[m.slot(s.cell-1)] = s
			}
		}
		offheap.Free(a, old)
	}
	m.slots[m.slot(uint32(cell))] = cellCopy{cell: uint32(cell) + 1, n: c.n, off: c.off}
	m.n++
}

// free gives back the slots.
func (m *cellCopies) free(a *offheap.Arena) {
	offheap.Free(a, m.slots)
	*m = cellCopies{}
}

// dirtySet is the dirty set of one key group of a table, as a capture
// holds it from the barrier on.
type dirtySet interface {
	// has reports whether k is in the set.
	has(k entryKey) bool
	// appendTo appends the set's keys to dst, in no particular order.
	appendTo(dst []entryKey) []entryKey
	// settle tells the set that the walk has written its key group: it
	// is only read again to be given back (restoreDirty).
	settle()
	// release frees the set when the capture ends, after any
	// restoreDirty: it must not be used after.
	release()
}

// keySet is a dirtySet held as a map (a store's tables).
type keySet map[entryKey]struct{}

func (s keySet) has(k entryKey) bool { _, ok := s[k]; return ok }

func (s keySet) appendTo(dst []entryKey) []entryKey {
	for k := range s {
		dst = append(dst, k)
	}
	return dst
}

func (keySet) settle()  {}
func (keySet) release() {}

// timerView is groupView for the timers of one key group, per domain.
type timerView struct {
	dirty  [2]map[timerKey]struct{}
	copies [2]map[timerKey]bool // whether the timer was set
}

// memCapture is a Memory's snapshot being captured (statestore.Capture).
type memCapture struct {
	b      *Memory
	full   bool
	w      *snapWriter
	tables []capturedTable
	// mem holds the views' copies (cellCopies); the capture's goroutine
	// is the tables'.
	mem    offheap.Arena
	timers []timerView // per key group (index: kg - start)
	wm     int64       // the timers' watermark at the barrier
	// marked: the key groups given a watermark row, decided at the
	// barrier.
	marked []bool
	// The walk is at key group next (index), in part part of it: its
	// tables' rows in order, then its timers' (part len(tables)), then
	// its watermark row; seg or tseg is the part's writing once begun.
	next int
	part int
	seg  segment
	tseg *timerSegment
	keys []entryKey // room for a segment's keys
	// reserve is how many rows the first step reserves room for (up to
	// snapshotReserveRows); reserving is slow enough not to do it at the
	// barrier.
	reserve int
	done    bool
	err     error // the first copy that failed
	copied  int64 // entries copied on write
	out     []arrow.RecordBatch
	// Parts (PartedCapture): partBytes is where a part ends (0: one
	// part, handed out by Batches), partStart the index of the first key
	// group of the part being written, parts those ended and not taken.
	partBytes int
	partStart int
	parts     []Part
	// snap is the store's snapshot at the barrier, which a capture in
	// steps reads a store's tables from (storedTable).
	snap StoreSnapshot
}

type capturedTable struct {
	name  string
	t     snapTable
	views []groupView // per key group
}

var (
	_ SteppedSnapshotter = (*Memory)(nil)
	_ PartedCapture      = (*memCapture)(nil)
)

// BeginSnapshot starts a capture of every entry and timer (full) or of
// what changed since the previous snapshot, as Snapshot would write it
// now, and starts tracking changes afresh (see the top of capture.go).
func (b *Memory) BeginSnapshot(mem memory.Allocator, full bool) (Capture, error) {
	if b.capture != nil {
		return nil, errors.New("statestore: snapshot: the previous snapshot is still being captured")
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	n := b.end - b.start
	c := &memCapture{b: b, full: full, w: newSnapWriter(mem, min(b.batchBytes, captureBatchBytes)), timers: make([]timerView, n), marked: make([]bool, n)}
	for name, t := range b.tables {
		c.tables = append(c.tables, capturedTable{name: name, t: t})
	}
	if full {
		for name, t := range b.pending {
			c.tables = append(c.tables, capturedTable{name: name, t: t})
		}
	}
	if b.storeFiles {
		c.tables = nil // captured as the store's files (CaptureStore)
	}
	slices.SortFunc(c.tables, func(x, y capturedTable) int { return strings.Compare(x.name, y.name) })

	c.reserve = b.timers.rows(full)
	for _, t := range c.tables {
		c.reserve += t.t.rows(full)
	}

	// The watermark rows, as of now.
	c.wm = b.timers.watermark
	late := b.timers.lateGroups(c.wm)
	for i := range n {
		c.marked[i] = late[b.start+i] && (full || b.timers.rowWatermark[i] < c.wm)
	}

	// Take the dirty sets; the views keep them, and the copies to come.
	steppable := true
	for i := range c.tables {
		t := &c.tables[i]
		t.views = make([]groupView, n)
		for g, d := range t.t.takeDirtyGroups() {
			t.views[g].dirty = d
		}
		if !t.t.copyOnWrite() {
			steppable = false
		}
	}
	for g, d := range b.timers.takeDirtyGroups() {
		c.timers[g].dirty = d
	}

	b.capture = c
	if steppable {
		if ss, ok := b.store.(SnapshotStore); ok && len(c.tables) > 0 {
			snap, err := ss.Snapshot()
			if err != nil {
				return nil, c.fail(fmt.Errorf("statestore: snapshot of the store: %w", err))
			}
			c.snap = snap
		}
		for i := range c.tables {
			c.tables[i].t.hook(c, i)
		}
		b.timers.capture = c
		return c, nil
	}
	if _, err := c.Step(time.Time{}); err != nil {
		c.Release()
		return nil, err
	}
	return c, nil
}

// immutable reports whether a value of type t cannot be changed in place
// by whoever holds a copy of it: no slice, map, pointer, channel,
// function or interface in it.
func immutable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return true
	case reflect.Array:
		return immutable(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !immutable(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// entryWritten reports whether the walk has written the row of entry k,
// in cell position cell, of key group kg of table i, or is past where it
// would be.
func (c *memCapture) entryWritten(i, kg int, k entryKey, cell int) bool {
	if g := kg - c.b.start; g != c.next {
		return g < c.next
	}
	switch {
	case c.part != i:
		return c.part > i
	case c.seg == nil:
		return false
	}
	return c.seg.written(k, cell)
}

// timerWritten is entryWritten for timer k of domain d.
func (c *memCapture) timerWritten(d Domain, kg int, k timerKey) bool {
	if g := kg - c.b.start; g != c.next {
		return g < c.next
	}
	switch {
	case c.part != len(c.tables):
		return c.part > len(c.tables)
	case c.tseg == nil:
		return false
	}
	return c.tseg.written(d, k)
}

// copyEntry keeps entry k of key group kg of table i, in cell position
// cell, as it is, before it changes, if the capture needs it and has not
// walked or copied it yet.
func (c *memCapture) copyEntry(i, kg int, k entryKey, cell int) {
	v := c.wantsCopy(i, kg, k, cell)
	if v == nil {
		return
	}
	if _, ok := v.copies.get(cell); ok {
		return
	}
	off := len(v.arena)
	arena, present, err := c.tables[i].t.appendEncoded(v.arena, kg, k.key, k.ns)
	if err != nil {
		if c.err == nil {
			c.err = fmt.Errorf("statestore: snapshot of table %q, key group %d: key %q, namespace %q: %w", c.tables[i].name, kg, k.key, k.ns, err)
		}
		return
	}
	cp := entryCopy{off: uint64(off), n: -1}
	if present {
		cp.n = int32(len(arena) - off)
		v.arena = arena
	}
	v.copies.put(&c.mem, cell, cp)
	c.copied++
}

var _ CopyingCapture = (*memCapture)(nil)

// Copies reports the entries the capture copied on write so far, a row
// each (a new key's absence at a base's barrier is not counted: it is no
// row). It encodes none ahead of its part.
func (c *memCapture) Copies() CopyCounts { return CopyCounts{Rows: c.copied} }

// wantsCopy returns the view of key group kg of table i if the capture
// needs entry k, in cell position cell, as it is now, before it changes
// (it has not walked it yet, and a delta holds it), else nil.
func (c *memCapture) wantsCopy(i, kg int, k entryKey, cell int) *groupView {
	if c.entryWritten(i, kg, k, cell) {
		return nil
	}
	v := &c.tables[i].views[kg-c.b.start]
	if !c.full && (v.dirty == nil || !v.dirty.has(k)) {
		return nil
	}
	return v
}

// copyAbsent records that the entry now in cell position cell, made
// since the barrier, was absent at it (wantsCopy returned v for it).
func (c *memCapture) copyAbsent(v *groupView, cell int) {
	v.copies.put(&c.mem, cell, entryCopy{n: -1})
}

// copyTimer keeps whether timer k of domain d and key group kg is set,
// before it changes, if the capture needs it and has not walked or copied
// it yet.
func (c *memCapture) copyTimer(d Domain, kg int, k timerKey, set bool) {
	if c.timerWritten(d, kg, k) {
		return
	}
	v := &c.timers[kg-c.b.start]
	if !c.full {
		if _, ok := v.dirty[d][k]; !ok {
			return
		}
	}
	if _, ok := v.copies[d][k]; ok {
		return
	}
	if v.copies[d] == nil {
		v.copies[d] = map[timerKey]bool{}
	}
	v.copies[d][k] = set
}

// stepRows is how many rows a step writes between looks at the clock
// (tests lower it).
var stepRows = 256

// Step writes rows until deadline (see Capture): key group by key group,
// each in the order Snapshot writes them.
func (c *memCapture) Step(deadline time.Time) (bool, error) {
	if c.done {
		return true, nil
	}
	b := c.b
	if c.reserve > 0 && deadline.IsZero() {
		c.w.rb.Reserve(min(c.reserve, snapshotReserveRows))
		c.reserve = 0
	}
	for c.next < b.end-b.start {
		if c.err != nil {
			return false, c.fail(c.err)
		}
		g := c.next
		kg := b.start + g
		switch {
		case c.part < len(c.tables):
			t := &c.tables[c.part]
			if c.seg == nil {
				c.seg = t.t.segment(t.name, kg, c.full, &t.views[g], c.keys[:0])
			}
			done, err := c.seg.write(c.w, stepRows)
			if err != nil {
				return false, c.fail(fmt.Errorf("statestore: snapshot of table %q, key group %d: %w", t.name, kg, err))
			}
			if done {
				c.keys = c.seg.release()
				c.seg = nil
				// The dirty set stays until the end: a failure gives it
				// back.
				t.views[g].copies.free(&c.mem)
				t.views[g].arena = nil
				if d := t.views[g].dirty; d != nil {
					d.settle()
				}
				c.part++
			}
		case c.part == len(c.tables):
			if c.tseg == nil {
				c.tseg = b.timers.segment(kg, c.full, &c.timers[g])
			}
			done, err := c.tseg.write(c.w, stepRows)
			if err != nil {
				return false, c.fail(fmt.Errorf("statestore: snapshot of the timers, key group %d: %w", kg, err))
			}
			if done {
				c.tseg = nil
				c.timers[g].copies = [2]map[timerKey]bool{}
				c.part++
			}
		default:
			if c.marked[g] {
				if err := c.w.timer(kg, WatermarkTable, timerKey{ts: c.wm}, true); err != nil {
					return false, c.fail(err)
				}
			}
			c.next++
			c.part = 0
			if c.partBytes > 0 && c.w.held >= c.partBytes && c.next < b.end-b.start {
				c.endPart()
			}
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) && c.next < b.end-b.start {
			return false, nil
		}
	}
	if c.err != nil {
		return false, c.fail(c.err)
	}
	if c.partBytes > 0 {
		c.endPart()
	} else {
		c.out = c.w.finish()
	}
	if c.full {
		for i := range b.timers.rowWatermark {
			b.timers.rowWatermark[i] = math.MinInt64
		}
	}
	for g, m := range c.marked {
		if m {
			b.timers.rowWatermark[g] = c.wm
		}
	}
	c.done = true
	c.detach()
	return true, nil
}

// segment is the writing of one table's rows of one key group, in the
// order Snapshot writes them, over as many steps as it takes.
type segment interface {
	// write writes up to n rows (or all, for a segment that cannot
	// stop) and reports whether the segment is done.
	write(w *snapWriter, n int) (bool, error)
	// written reports whether the row of k, in cell position cell of a
	// heap table, was written, or would have been by now.
	written(k entryKey, cell int) bool
	// release returns the segment's keys, for the next one to reuse.
	release() []entryKey
}

// keySegment writes the rows of keys, sorted, as value has them (the
// tables of a store and those restored but not opened yet, which do not
// change during a capture). It sorts them in steps too (stepSort): a key
// group of a large state has many.
type keySegment struct {
	name  string
	kg    int
	keys  []entryKey
	sort  stepSort
	pos   int
	value func(dst []byte, kg int, key, ns string) ([]byte, bool, error)
	enc   []byte
	after func() // if set, called after each write
}

func newKeySegment(name string, kg int, keys []entryKey, value func([]byte, int, string, string) ([]byte, bool, error)) *keySegment {
	return &keySegment{name: name, kg: kg, keys: keys, sort: stepSort{a: keys}, value: value}
}

// sortWork is how many keys a segment's write sorts or merges for each
// row it may write.
const sortWork = 4

func (s *keySegment) write(w *snapWriter, n int) (bool, error) {
	if s.after != nil {
		defer s.after()
	}
	if !s.sort.done() {
		if !s.sort.step(n * sortWork) {
			return false, nil
		}
		s.keys = s.sort.a
	}
	for ; s.pos < len(s.keys) && n > 0; s.pos, n = s.pos+1, n-1 {
		k := s.keys[s.pos]
		enc, ok, err := s.value(s.enc[:0], s.kg, k.key, k.ns)
		if err != nil {
			return false, fmt.Errorf("key %q, namespace %q: %w", k.key, k.ns, err)
		}
		s.enc = enc
		if err := w.entry(s.kg, s.name, k.key, k.ns, enc, ok); err != nil {
			return false, err
		}
	}
	return s.pos == len(s.keys), nil
}

func (s *keySegment) written(k entryKey, _ int) bool {
	return s.pos > 0 && compareEntryKeys(k, s.keys[s.pos-1]) <= 0
}

func (s *keySegment) release() []entryKey {
	if s.after != nil {
		s.after()
	}
	keys := s.keys
	clear(keys)
	clear(s.sort.buf)
	s.keys, s.sort = nil, stepSort{}
	return keys[:0]
}

// stepSort sorts a by compareEntryKeys in steps of bounded work: runs of
// sortRun keys sorted in place, then merged bottom-up, pair by pair,
// between a and buf; a merge can stop anywhere and go on.
type stepSort struct {
	a, buf []entryKey
	width  int // the runs of width keys are sorted; 0: none yet
	lo     int // the pair of runs being merged starts at lo
	li, ri int // the next key of each run of the pair
	oi     int // where the next merged key goes in buf
	begun  bool
}

const sortRun = 256

func (s *stepSort) done() bool { return s.width >= len(s.a) }

// step does about work keys' worth of sorting and reports whether a is
// sorted.
func (s *stepSort) step(work int) bool {
	n := len(s.a)
	for work > 0 && !s.done() {
		if s.width == 0 {
			hi := min(s.lo+sortRun, n)
			slices.SortFunc(s.a[s.lo:hi], compareEntryKeys)
			work -= hi - s.lo
			if s.lo = hi; s.lo == n {
				s.width, s.lo = sortRun, 0
				if s.width < n {
					s.buf = slices.Grow(s.buf[:0], n)[:n]
				}
			}
			continue
		}
		mid, hi := min(s.lo+s.width, n), min(s.lo+2*s.width, n)
		if !s.begun {
			s.li, s.ri, s.oi, s.begun = s.lo, mid, s.lo, true
		}
		for ; work > 0 && s.oi < hi; s.oi, work = s.oi+1, work-1 {
			if s.ri == hi || s.li < mid && compareEntryKeys(s.a[s.li], s.a[s.ri]) <= 0 {
				s.buf[s.oi] = s.a[s.li]
				s.li++
			} else {
				s.buf[s.oi] = s.a[s.ri]
				s.ri++
			}
		}
		if s.oi < hi {
			continue // out of work: go on here
		}
		s.begun = false
		if s.lo = hi; s.lo == n { // a pass is done
			s.a, s.buf = s.buf, s.a
			s.width, s.lo = 2*s.width, 0
		}
	}
	return s.done()
}

// wholeSegment writes its rows in one go, at its first write.
type wholeSegment struct {
	fn   func(w *snapWriter) error
	done bool
}

func (s *wholeSegment) write(w *snapWriter, _ int) (bool, error) {
	s.done = true
	return true, s.fn(w)
}

func (s *wholeSegment) written(entryKey, int) bool { return s.done }

func (s *wholeSegment) release() []entryKey { return nil }

// timerSegment writes the timer rows of one key group, event time then
// processing time, each sorted.
type timerSegment struct {
	kg   int
	v    *timerView
	keys [2][]timerKey
	set  [2]func(timerKey) bool // whether a timer is set now
	d    int                    // the domain being written
	pos  int
}

func (s *timerSegment) write(w *snapWriter, n int) (bool, error) {
	for ; s.d < len(s.keys); s.d, s.pos = s.d+1, 0 {
		for ; s.pos < len(s.keys[s.d]) && n > 0; s.pos, n = s.pos+1, n-1 {
			k := s.keys[s.d][s.pos]
			set, copied := s.v.copies[s.d][k]
			if !copied {
				set = s.set[s.d](k)
			}
			if err := w.timer(s.kg, timerTables[s.d], k, set); err != nil {
				return false, err
			}
		}
		if n == 0 && s.pos < len(s.keys[s.d]) {
			return false, nil
		}
	}
	return true, nil
}

func (s *timerSegment) written(d Domain, k timerKey) bool {
	switch {
	case int(d) != s.d:
		return int(d) < s.d
	case s.pos == 0:
		return false
	}
	return compareTimerKeys(k, s.keys[d][s.pos-1]) <= 0
}

// fail gives the dirty sets the capture took back to the tables and
// timers, so that the changes in them go into the next snapshot, drops
// the capture and returns err.
func (c *memCapture) fail(err error) error {
	b := c.b
	for _, t := range c.tables {
		for g, v := range t.views {
			t.t.restoreDirty(b.start+g, v.dirty)
		}
	}
	for g, v := range c.timers {
		b.timers.restoreDirty(b.start+g, v.dirty)
	}
	c.Release()
	return err
}

// endPart ends the part being written after the key groups walked so
// far.
func (c *memCapture) endPart() {
	b := c.b
	c.parts = append(c.parts, Part{Batches: c.w.finish(), KeyGroupStart: b.start + c.partStart, KeyGroupEnd: b.start + c.next})
	c.partStart = c.next
}

// SplitParts makes the capture end a part at a key group boundary once it
// holds bytes (PartedCapture). A capture that was done in BeginSnapshot
// (a table whose values may change in place) becomes one part.
func (c *memCapture) SplitParts(bytes int) {
	c.partBytes = max(bytes, 0)
	if c.done && c.partBytes > 0 && c.partStart == 0 {
		c.parts = append(c.parts, Part{Batches: c.out, KeyGroupStart: c.b.start, KeyGroupEnd: c.b.end})
		c.out = nil
		c.partStart = c.b.end - c.b.start
	}
}

// TakeParts hands out the parts ended so far (PartedCapture).
func (c *memCapture) TakeParts() []Part {
	p := c.parts
	c.parts = nil
	return p
}

// Batches hands out the batches of a finished capture.
func (c *memCapture) Batches() []arrow.RecordBatch {
	out := c.out
	c.out = nil
	return out
}

// Release detaches the capture and drops what it holds.
func (c *memCapture) Release() {
	c.detach()
	for _, r := range c.out {
		r.Release()
	}
	c.out = nil
	for _, p := range c.parts {
		for _, r := range p.Batches {
			r.Release()
		}
	}
	c.parts = nil
}

func (c *memCapture) detach() {
	b := c.b
	if b.capture == c {
		b.capture = nil
		for _, t := range c.tables {
			t.t.hook(nil, 0)
		}
		b.timers.capture = nil
	}
	for _, t := range c.tables {
		for _, v := range t.views {
			if v.dirty != nil {
				v.dirty.release()
			}
		}
	}
	c.mem.Close() // the copies' slots
	c.tables, c.timers = nil, nil
	if c.seg != nil {
		c.seg.release()
		c.seg = nil
	}
	if c.snap != nil {
		c.snap.Close()
		c.snap = nil
	}
	if c.w != nil {
		c.w.release()
		c.w = nil
	}
}
