package statestore

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/statestore/offheap"
)

// Snapshot rows.
//
// A snapshot is Arrow record batches of SnapshotSchema, one row per table
// entry or timer:
//
//	key_group  int32, not null   the entry's or timer's key group (first, as task.StateKeyGroupField)
//	table      utf8, not null    the table name, or EventTimersTable / ProcessingTimersTable for a timer (WatermarkTable: see below)
//	key        binary, not null  the key: the raw bytes of the key string (an arrowfmt key encoding)
//	namespace  utf8, not null    the namespace ("" is the default)
//	value      binary, null      a table entry: its table's Codec encoding; null for a deletion and for timers
//	timestamp  int64, null       a timer: its timestamp in milliseconds (a watermark row: the watermark); null for table entries
//	deleted    bool, not null    the entry or timer is gone
//
// A full snapshot (a base) holds every entry of every table and every
// timer, none deleted. A delta holds what changed since the previous
// snapshot: every entry written or deleted since, with its current value
// or deleted=true if it is gone now, and every timer registered, deleted or
// fired since, set (deleted=false) or gone (deleted=true). An entry written
// and deleted again between two snapshots shows as deleted even if the
// previous snapshot did not hold it; deleting what is absent is harmless.
//
// One more kind of row keeps the timers' watermark (Timers.Watermark), so
// that a restored event-time timer at or before it (set after the owner
// processed that watermark, and due with the next one) is told from one the
// restored watermark itself makes due: table WatermarkTable, key and
// namespace "", the watermark in timestamp. A snapshot has one for each
// key group holding such timers, unless an earlier snapshot since the
// base already recorded that watermark for the key group; Restore keeps
// the highest (Timers.Watermark).
//
// Rows come sorted by key group; within one key group, tables by name
// (a heap table's entries in the order of their cells, a store's by key
// then namespace), then the timers (event time, then processing time; by
// timestamp, key and namespace), then the watermark. Each entry or timer
// appears at most once per snapshot, so the order within one snapshot
// does not matter for restore; the order of snapshots does: Restore
// applies a base and then its deltas in the order they were taken.

// Table names of the timers in snapshots. OpenTable refuses names starting
// with "__timers".
const (
	EventTimersTable      = "__timers_event"
	ProcessingTimersTable = "__timers_processing"
	WatermarkTable        = "__timers_watermark"

	reservedPrefix = "__timers"
)

// timerTables are the snapshot table names of the domains, by Domain.
var timerTables = [...]string{EventTime: EventTimersTable, ProcessingTime: ProcessingTimersTable}

// Column indices of SnapshotSchema.
const (
	colKeyGroup = iota
	colTable
	colKey
	colNamespace
	colValue
	colTimestamp
	colDeleted
	numCols
)

var snapshotSchema = arrow.NewSchema([]arrow.Field{
	colKeyGroup:  {Name: "key_group", Type: arrow.PrimitiveTypes.Int32},
	colTable:     {Name: "table", Type: arrow.BinaryTypes.String},
	colKey:       {Name: "key", Type: arrow.BinaryTypes.Binary},
	colNamespace: {Name: "namespace", Type: arrow.BinaryTypes.String},
	colValue:     {Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true},
	colTimestamp: {Name: "timestamp", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	colDeleted:   {Name: "deleted", Type: arrow.FixedWidthTypes.Boolean},
}, nil)

// SnapshotSchema is the schema of every batch Snapshot returns and Restore
// reads (see the package's snapshot rows).
func SnapshotSchema() *arrow.Schema { return snapshotSchema }

// snapshotBatchBytes caps the bytes of the variable-length columns of one
// snapshot batch, far below the 2 GiB their int32 offsets allow.
const snapshotBatchBytes = 256 << 20

// snapshotReserveRows caps how many rows a snapshot reserves up front.
const snapshotReserveRows = 1 << 20

// snapTable is a table as snapshots and restore see it; encodedTable, a
// table restored but not opened yet, is one too.
type snapTable interface {
	// segment returns the writing of the rows of key group kg: every
	// entry (full) or those of v's dirty set, each as v's copy has it if
	// it has one, else as the table holds it when the row is written.
	// scratch is room for its keys.
	segment(name string, kg int, full bool, v *groupView, scratch []entryKey) segment
	// rows returns how many rows the segments write over all key groups.
	rows(full bool) int
	// takeDirtyGroups hands out the dirty set of each key group (index:
	// key group - start; nil: none) and empties them.
	takeDirtyGroups() []dirtySet
	// restoreDirty marks the entries of d (nil: none), taken from key
	// group kg, dirty again.
	restoreDirty(kg int, d dirtySet)
	// copyOnWrite reports whether a capture in steps may copy the
	// table's entries before they change (memCapture).
	copyOnWrite() bool
	// hook makes the table tell c, as its i-th table, about an entry
	// before it changes (memCapture.copyEntry); nil unhooks it.
	hook(c *memCapture, i int)
	// appendEncoded appends the encoding of the entry at (kg, key, ns),
	// if there is one.
	appendEncoded(dst []byte, kg int, key, ns string) ([]byte, bool, error)
	// restoreRow applies one restored row without marking it dirty. It
	// does not keep key, ns or value.
	restoreRow(kg int, key, ns string, value []byte, deleted bool) error
}

// Snapshot returns the backend's state as batches of SnapshotSchema: every
// entry and timer if full, else what changed since the previous Snapshot
// (or since NewMemory). Either way it then clears the dirty sets, so the
// next delta starts afresh; TakeDirty consumes the same sets, so a backend
// that is snapshotted must not have them taken by anyone else. Tables
// restored and not opened yet are in full snapshots too (they have no
// changes to be in a delta). Key groups holding event-time timers at or
// before the timers' watermark get a WatermarkTable row as described
// above. It is BeginSnapshot captured to the end at once.
//
// The batches are allocated from mem and the caller owns them; they share
// no memory with the backend, so processing may go on while they are
// written out. No rows gives no batches. On error (a value its codec
// cannot encode) nothing is returned and the dirty sets are as they were.
// If the caller loses batches it got (an upload fails), the changes in
// them are gone from the dirty sets: the next snapshot must be full.
func (b *Memory) Snapshot(mem memory.Allocator, full bool) ([]arrow.RecordBatch, error) {
	return CaptureAtOnce(b, mem, full)
}

// Restore applies the rows of rec, a batch of SnapshotSchema as Snapshot
// returns (or a part of one, filtered by key group), in order: a table row
// puts its decoded value or deletes the entry, a timer row registers or
// deletes the timer, a watermark row raises Timers.Watermark. Restoring a base and then its deltas, batch by batch
// in the order they were taken, rebuilds the state. Restored rows do not
// mark anything dirty: the next delta holds only changes made after them.
// Restore does not keep rec.
//
// A row of a table not registered yet is kept encoded until OpenTable
// registers the table, which decodes it; until then full snapshots carry
// it on as it is.
//
// Restore first checks the schema and every row (a key group outside the
// backend's range, a missing value or timestamp) and refuses the batch
// without applying any of it. An error while applying (a value its codec
// cannot decode) leaves the rows before it applied: discard the backend.
func (b *Memory) Restore(rec arrow.RecordBatch) error {
	c, err := snapshotColumns(rec)
	if err != nil {
		return err
	}
	if err := c.checkNulls(); err != nil {
		return err
	}
	n := int(rec.NumRows())
	for i := range n {
		if err := c.check(i, b.start, b.end); err != nil {
			return err
		}
	}
	var (
		lastName  string
		lastTable snapTable
	)
	for i := range n {
		kg := int(c.kg.Value(i))
		name := c.table.Value(i)
		key := unsafeString(c.key.Value(i))
		ns := c.ns.Value(i)
		deleted := c.deleted.Value(i)
		switch name {
		case EventTimersTable, ProcessingTimersTable:
			d := EventTime
			if name == ProcessingTimersTable {
				d = ProcessingTime
			}
			b.timers.restore(d, Timer{Timestamp: c.ts.Value(i), KeyGroup: kg, Key: key, Namespace: ns}, !deleted)
			continue
		case WatermarkTable:
			ts := c.ts.Value(i)
			b.timers.watermark = max(b.timers.watermark, ts)
			b.timers.rowWatermark[kg-b.start] = max(b.timers.rowWatermark[kg-b.start], ts)
			continue
		}
		if lastTable == nil || name != lastName {
			if t := b.tables[name]; t != nil {
				lastTable = t
			} else if lastTable = b.pending[name]; lastTable == nil {
				if lastTable, err = b.pendingTable(name); err != nil {
					return err
				}
			}
			lastName = strings.Clone(name)
		}
		if err := lastTable.restoreRow(kg, key, ns, c.value.Value(i), deleted); err != nil {
			return fmt.Errorf("statestore: restore row %d: table %q, key group %d, key %q, namespace %q: %w", i, name, kg, key, ns, err)
		}
	}
	return nil
}

// pendingTable makes the table of a restored row whose table is not
// registered yet: the store's (rows go there at once) or one keeping the
// rows encoded until OpenTable.
func (b *Memory) pendingTable(name string) (snapTable, error) {
	var p snapTable
	if b.store != nil {
		t, err := b.store.Table(name)
		if err != nil {
			return nil, fmt.Errorf("statestore: restore table %q: %w", name, err)
		}
		p = b.newStoredTable(strings.Clone(name), t)
	} else {
		p = &encodedTable{name: strings.Clone(name), start: b.start, groups: make([]map[entryKey][]byte, b.end-b.start)}
	}
	b.pending[strings.Clone(name)] = p
	return p, nil
}

// unsafeString views b as a string without copying, like the strings of
// an *array.String: whoever keeps it clones it.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// snapColumns are the columns of a snapshot batch.
type snapColumns struct {
	kg      *array.Int32
	table   *array.String
	key     *array.Binary
	ns      *array.String
	value   *array.Binary
	ts      *array.Int64
	deleted *array.Boolean
}

func snapshotColumns(rec arrow.RecordBatch) (*snapColumns, error) {
	s := rec.Schema()
	bad := s.NumFields() != numCols
	for i := 0; !bad && i < numCols; i++ {
		f, want := s.Field(i), snapshotSchema.Field(i)
		bad = f.Name != want.Name || !arrow.TypeEqual(f.Type, want.Type)
	}
	if bad {
		return nil, fmt.Errorf("statestore: restore: schema %s is not the snapshot schema %s", s, snapshotSchema)
	}
	return &snapColumns{
		kg:      rec.Column(colKeyGroup).(*array.Int32),
		table:   rec.Column(colTable).(*array.String),
		key:     rec.Column(colKey).(*array.Binary),
		ns:      rec.Column(colNamespace).(*array.String),
		value:   rec.Column(colValue).(*array.Binary),
		ts:      rec.Column(colTimestamp).(*array.Int64),
		deleted: rec.Column(colDeleted).(*array.Boolean),
	}, nil
}

// checkNulls refuses a batch with a null where the schema has none.
func (c *snapColumns) checkNulls() error {
	for _, col := range []struct {
		a   arrow.Array
		idx int
	}{{c.kg, colKeyGroup}, {c.table, colTable}, {c.key, colKey}, {c.ns, colNamespace}, {c.deleted, colDeleted}} {
		if col.a.NullN() == 0 {
			continue
		}
		for i := range col.a.Len() {
			if col.a.IsNull(i) {
				return fmt.Errorf("statestore: restore row %d: %s is null", i, snapshotSchema.Field(col.idx).Name)
			}
		}
	}
	return nil
}

// check refuses row i if it cannot be applied to a backend over [start,
// end).
func (c *snapColumns) check(i, start, end int) error {
	name := c.table.Value(i)
	kg := int(c.kg.Value(i))
	if kg < start || kg >= end {
		return fmt.Errorf("statestore: restore row %d: table %q: key group %d is outside the backend's key groups [%d,%d)", i, name, kg, start, end)
	}
	switch {
	case name == "":
		return fmt.Errorf("statestore: restore row %d: empty table name", i)
	case name == EventTimersTable || name == ProcessingTimersTable || name == WatermarkTable:
		if c.ts.IsNull(i) {
			return fmt.Errorf("statestore: restore row %d: table %q: a timer without a timestamp", i, name)
		}
	case strings.HasPrefix(name, reservedPrefix):
		return fmt.Errorf("statestore: restore row %d: table %q: unknown reserved table name", i, name)
	case !c.deleted.Value(i) && c.value.IsNull(i):
		return fmt.Errorf("statestore: restore row %d: table %q, key group %d: an entry without a value", i, name, kg)
	}
	return nil
}

// snapWriter builds the batches of one snapshot.
type snapWriter struct {
	mem   memory.Allocator
	limit int

	rb      *array.RecordBuilder
	kg      *array.Int32Builder
	table   *array.StringBuilder
	key     *array.BinaryBuilder
	ns      *array.StringBuilder
	value   *array.BinaryBuilder
	ts      *array.Int64Builder
	deleted *array.BooleanBuilder

	rows, bytes int
	// held is the variable-length bytes of every row since the last
	// finish (bytes: of the batch being built).
	held int
	out  []arrow.RecordBatch
}

func newSnapWriter(mem memory.Allocator, limit int) *snapWriter {
	rb := array.NewRecordBuilder(mem, snapshotSchema)
	return &snapWriter{
		mem:     mem,
		limit:   limit,
		rb:      rb,
		kg:      rb.Field(colKeyGroup).(*array.Int32Builder),
		table:   rb.Field(colTable).(*array.StringBuilder),
		key:     rb.Field(colKey).(*array.BinaryBuilder),
		ns:      rb.Field(colNamespace).(*array.StringBuilder),
		value:   rb.Field(colValue).(*array.BinaryBuilder),
		ts:      rb.Field(colTimestamp).(*array.Int64Builder),
		deleted: rb.Field(colDeleted).(*array.BooleanBuilder),
	}
}

// begin starts a row of size variable-length bytes, first cutting the
// batch if the row would take it over the limit.
func (w *snapWriter) begin(kg int, table, key, ns string, size int) error {
	if size > math.MaxInt32 {
		return fmt.Errorf("key %q, namespace %q: %d bytes, more than a snapshot row holds", key, ns, size)
	}
	if w.rows > 0 && w.bytes+size > w.limit {
		w.cut()
	}
	w.rows++
	w.bytes += size
	w.held += size
	w.kg.Append(int32(kg))
	w.table.Append(table)
	w.key.AppendString(key)
	w.ns.Append(ns)
	return nil
}

// entry adds a table row: value if present, else a deletion.
func (w *snapWriter) entry(kg int, table, key, ns string, value []byte, present bool) error {
	if err := w.begin(kg, table, key, ns, len(table)+len(key)+len(ns)+len(value)); err != nil {
		return err
	}
	if present {
		w.value.Append(value)
	} else {
		w.value.AppendNull()
	}
	w.ts.AppendNull()
	w.deleted.Append(!present)
	return nil
}

// timer adds a timer row.
func (w *snapWriter) timer(kg int, table string, k timerKey, set bool) error {
	if err := w.begin(kg, table, k.key, k.ns, len(table)+len(k.key)+len(k.ns)); err != nil {
		return err
	}
	w.value.AppendNull()
	w.ts.Append(k.ts)
	w.deleted.Append(!set)
	return nil
}

func (w *snapWriter) cut() {
	w.out = append(w.out, w.rb.NewRecordBatch())
	w.rows, w.bytes = 0, 0
}

// finish returns the batches; the writer no longer holds them.
func (w *snapWriter) finish() []arrow.RecordBatch {
	if w.rows > 0 {
		w.cut()
	}
	out := w.out
	w.out, w.held = nil, 0
	return out
}

// release releases the builder and any batch not handed out.
func (w *snapWriter) release() {
	for _, r := range w.out {
		r.Release()
	}
	w.out = nil
	w.rb.Release()
}

// compareEntryKeys orders by key, then namespace. (cmp.Or would compare
// the namespaces of every pair: its arguments are all evaluated.)
func compareEntryKeys(a, b entryKey) int {
	if c := strings.Compare(a.key, b.key); c != 0 {
		return c
	}
	return strings.Compare(a.ns, b.ns)
}

func compareTimerKeys(a, b timerKey) int {
	if c := cmp.Compare(a.ts, b.ts); c != 0 {
		return c
	}
	if c := strings.Compare(a.key, b.key); c != 0 {
		return c
	}
	return strings.Compare(a.ns, b.ns)
}

// Tables.

func (t *heapTable[V]) segment(name string, kg int, full bool, v *groupView, _ []entryKey) segment {
	s := &cellSegment[V]{t: t, name: name, kg: kg, g: t.group(kg), v: v, full: full}
	s.end = len(s.g.cells)
	switch {
	case full:
	case v.dirty == nil:
		s.end = 0 // nothing changed
	default:
		// The dirty set's cells in the order of their positions: a bit
		// each (a counting sort, in one pass over the set).
		s.dirty = make([]uint64, (s.end+63)/64)
		for _, i := range v.dirty.(*heapDirty[V]).cells {
			s.dirty[i/64] |= 1 << (i % 64)
		}
	}
	return s
}

// cellSegment writes a heap table's rows of one key group in the order of
// their cells' positions: every cell (a base) or the dirty set's (a
// delta). An entry changed since the barrier is written as its copy has
// it; a cell made since is absent from the snapshot (a copy says so, or
// it lies past the cells the walk began with). The cells are read in the
// order they lie in memory; sorted by key, each row took a lookup and
// the key group's keys a sort: 17% of a checkpointed job's CPU at 10M
// keys.
type cellSegment[V any] struct {
	t     *heapTable[V]
	name  string
	kg    int
	g     *group[V]
	v     *groupView
	full  bool
	dirty []uint64 // a delta's cells: bit i%64 of word i/64
	end   int      // the cells when the walk began
	pos   int      // the next cell position to walk
	enc   []byte
}

func (s *cellSegment[V]) write(w *snapWriter, n int) (bool, error) {
	for visits := 8 * n; n > 0 && visits > 0 && s.pos < s.end; visits-- {
		i := s.pos
		if !s.full {
			if i = s.nextDirty(); i == s.end {
				s.pos = s.end
				break
			}
		}
		s.pos = i + 1
		wrote, err := s.row(w, i)
		if err != nil {
			return false, err
		}
		if wrote {
			n--
		}
	}
	return s.pos == s.end, nil
}

// nextDirty returns the position of the first cell of a delta's dirty set
// from s.pos on, or s.end.
func (s *cellSegment[V]) nextDirty() int {
	for i := s.pos; i < s.end; {
		word := s.dirty[i/64] >> (i % 64)
		if word != 0 {
			return min(i+bits.TrailingZeros64(word), s.end)
		}
		i = (i/64 + 1) * 64
	}
	return s.end
}

// row writes the row of cell i, if the snapshot has one.
func (s *cellSegment[V]) row(w *snapWriter, i int) (bool, error) {
	g := s.g
	c := &g.cells[i]
	if c.state != cellLive && c.state != cellAbsent {
		return false, nil
	}
	k := g.key(i)
	if cp, copied := s.v.copies.get(i); copied {
		// Changed since the barrier: as it was then.
		if !cp.present() && s.full {
			return false, nil
		}
		return true, w.entry(s.kg, s.name, k.key, k.ns, s.v.value(cp), cp.present())
	}
	switch {
	case c.state == cellLive:
		enc, err := s.t.codec.Append(s.enc[:0], c.v)
		if err != nil {
			return false, fmt.Errorf("key %q, namespace %q: %w", k.key, k.ns, err)
		}
		s.enc = enc
		return true, w.entry(s.kg, s.name, k.key, k.ns, enc, true)
	case !s.full:
		return true, w.entry(s.kg, s.name, k.key, k.ns, nil, false)
	case c.epoch+1 < s.t.epoch:
		// A tombstone no capture reads any more goes. (Absent at the
		// barrier, or deleted before it: a base has no row for it.)
		g.drop(i)
		g.dead--
	}
	return false, nil
}

// written: the walk is past cell position cell, or never walks it (made
// since the walk began: absent from the snapshot).
func (s *cellSegment[V]) written(_ entryKey, cell int) bool {
	return cell < s.pos || cell >= s.end
}

func (s *cellSegment[V]) release() []entryKey { return nil }

func (t *heapTable[V]) rows(full bool) int {
	n := 0
	for i := range t.groups {
		g := &t.groups[i]
		if full {
			n += g.live
		} else {
			n += len(g.dirty)
		}
	}
	return n
}

// takeDirtyGroups hands out each key group's dirty list as it is and
// starts a new epoch, leaving the entries' marks as they are: an entry
// marked in the epoch that ended is in the set handed out (heapDirty.has).
func (t *heapTable[V]) takeDirtyGroups() []dirtySet {
	out := make([]dirtySet, len(t.groups))
	for i := range t.groups {
		g := &t.groups[i]
		if len(g.dirty) > 0 {
			out[i] = &heapDirty[V]{g: g, epoch: t.epoch, cells: g.dirty}
			g.dirty = nil
		}
	}
	t.epoch++
	return out
}

func (t *heapTable[V]) restoreDirty(kg int, d dirtySet) {
	if d == nil {
		return
	}
	g := t.group(kg)
	for _, i := range d.(*heapDirty[V]).cells {
		i := int(i)
		if g.cells[i].state == cellRetired {
			// Settled: absent at the barrier and since. Unless it was
			// put again (a new cell, marked), it is a tombstone again.
			k := g.key(i)
			j, h := g.find(k.key, k.ns)
			if j >= 0 {
				t.mark(g, j)
				continue
			}
			g.room()
			g.place(h, i)
			g.cells[i].state = cellAbsent
			g.dead++
		}
		t.mark(g, i)
	}
}

// heapDirty is a heap table's dirty set of one key group, taken at a
// barrier: the cells marked in the epoch that the barrier ended. An
// entry marked since is marked anew, in the next epoch, and has copied
// it before (memCapture.copyEntry). Until the capture ends, none of its
// cells is freed (group.retire).
type heapDirty[V any] struct {
	g     *group[V]
	epoch uint32
	cells []uint32
}

func (d *heapDirty[V]) has(k entryKey) bool {
	i, _ := d.g.find(k.key, k.ns)
	return i >= 0 && d.g.cells[i].epoch == d.epoch
}

func (d *heapDirty[V]) appendTo(dst []entryKey) []entryKey {
	for _, i := range d.cells {
		dst = append(dst, d.g.key(int(i)))
	}
	return dst
}

// release gives back the list of cells, which grew outside the heap
// (heapTable.mark).
func (d *heapDirty[V]) release() {
	offheap.Free(d.g.mem, d.cells)
	d.cells = nil
}

// settle retires the tombstones the capture has written that nothing
// marked since.
func (d *heapDirty[V]) settle() {
	g := d.g
	for _, i := range d.cells {
		if c := &g.cells[i]; c.state == cellAbsent && c.epoch == d.epoch {
			g.retire(int(i))
			g.dead--
		}
	}
}

// copyOnWrite: only values that cannot be changed in place before they
// are put back.
func (t *heapTable[V]) copyOnWrite() bool { return immutable(reflect.TypeFor[V]()) }

// hook: unhooking ends the capture, which frees the cells it retired.
func (t *heapTable[V]) hook(c *memCapture, i int) {
	t.capture, t.index = c, i
	if c == nil {
		for g := range t.groups {
			t.groups[g].release()
		}
	}
}

func (t *heapTable[V]) restoreRow(kg int, key, ns string, value []byte, deleted bool) error {
	if deleted {
		g := &t.groups[kg-t.start]
		switch i, _ := g.find(key, ns); {
		case i < 0 || g.cells[i].state != cellLive:
		case g.cells[i].epoch == t.epoch: // in a dirty list: keep it as a tombstone
			t.tombstone(g, i)
		default:
			g.drop(i)
			g.live--
		}
		return nil
	}
	v, err := t.codec.Decode(value)
	if err != nil {
		return err
	}
	t.restore(kg, key, ns, v)
	return nil
}

// encodedTable holds the restored entries of a table not registered yet,
// as their encodings.
type encodedTable struct {
	name   string
	start  int
	groups []map[entryKey][]byte
}

func (e *encodedTable) segment(name string, kg int, full bool, _ *groupView, keys []entryKey) segment {
	if full { // restored rows are not changes
		for k := range e.groups[kg-e.start] {
			keys = append(keys, k)
		}
	}
	return newKeySegment(name, kg, keys, e.appendEncoded)
}

// An encodedTable never changes: OpenTable decodes it into a new table.

func (e *encodedTable) takeDirtyGroups() []dirtySet { return nil }

func (e *encodedTable) restoreDirty(int, dirtySet) {}

func (e *encodedTable) copyOnWrite() bool { return true }

func (e *encodedTable) hook(*memCapture, int) {}

func (e *encodedTable) appendEncoded(dst []byte, kg int, key, ns string) ([]byte, bool, error) {
	v, ok := e.groups[kg-e.start][entryKey{key, ns}]
	return append(dst, v...), ok, nil
}

func (e *encodedTable) rows(full bool) int {
	if !full {
		return 0
	}
	n := 0
	for _, g := range e.groups {
		n += len(g)
	}
	return n
}

func (e *encodedTable) restoreRow(kg int, key, ns string, value []byte, deleted bool) error {
	g := &e.groups[kg-e.start]
	if deleted {
		delete(*g, entryKey{key, ns})
		return nil
	}
	if *g == nil {
		*g = map[entryKey][]byte{}
	}
	(*g)[entryKey{strings.Clone(key), strings.Clone(ns)}] = bytes.Clone(value)
	return nil
}

// decodeInto decodes every entry into t, a new table of the same name.
func (e *encodedTable) decodeInto(t interface {
	putEncoded(kg int, key, ns string, b []byte) error
}) error {
	for i, g := range e.groups {
		for k, v := range g {
			if err := t.putEncoded(e.start+i, k.key, k.ns, v); err != nil {
				return fmt.Errorf("statestore: table %q: restored entry in key group %d, key %q, namespace %q: %w", e.name, e.start+i, k.key, k.ns, err)
			}
		}
	}
	return nil
}

// Timers.

// segment returns the writing of the timer rows of key group kg: every
// timer (full) or those of v's dirty sets, each set or not as v's copy
// has it if it has one, else as it is when the row is written.
func (s *Timers) segment(kg int, full bool, v *timerView) *timerSegment {
	ts := &timerSegment{kg: kg, v: v}
	for d := range s.domains {
		g := &s.domains[d].groups[kg-s.start]
		var keys []timerKey
		if full {
			for k := range g.set {
				if _, copied := v.copies[d][k]; !copied {
					keys = append(keys, k)
				}
			}
			for k, set := range v.copies[d] {
				if set {
					keys = append(keys, k)
				}
			}
		} else {
			for k := range v.dirty[d] {
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, compareTimerKeys)
		ts.keys[d] = keys
		ts.set[d] = func(k timerKey) bool { _, ok := g.set[k]; return ok }
	}
	return ts
}

func (s *Timers) rows(full bool) int {
	n := 0
	for d := range s.domains {
		for i := range s.domains[d].groups {
			if full {
				n += len(s.domains[d].groups[i].set)
			} else {
				n += len(s.domains[d].groups[i].dirty)
			}
		}
	}
	return n
}

// lateGroups returns, by key group, whether the group holds an event-time
// timer at or before wm. It visits only those timers (the top of the
// heap), not all.
func (s *Timers) lateGroups(wm int64) map[int]bool {
	h := s.domains[EventTime].heap
	var late map[int]bool
	var visit func(i int)
	visit = func(i int) {
		if i >= len(h) || h[i].Timestamp > wm {
			return
		}
		if late == nil {
			late = map[int]bool{}
		}
		late[h[i].KeyGroup] = true
		visit(2*i + 1)
		visit(2*i + 2)
	}
	visit(0)
	return late
}

// takeDirtyGroups hands out the dirty sets of each key group (index: key
// group - start), per domain, and empties them.
func (s *Timers) takeDirtyGroups() [][2]map[timerKey]struct{} {
	out := make([][2]map[timerKey]struct{}, s.end-s.start)
	for d := range s.domains {
		for i := range s.domains[d].groups {
			g := &s.domains[d].groups[i]
			out[i][d], g.dirty = g.dirty, nil
		}
	}
	return out
}

// restoreDirty marks the timers of d, taken from key group kg, dirty
// again.
func (s *Timers) restoreDirty(kg int, d [2]map[timerKey]struct{}) {
	for dom := range s.domains {
		g := &s.domains[dom].groups[kg-s.start]
		for k := range d[dom] {
			g.markDirty(k)
		}
	}
}

// restore sets (set) or deletes timer t of domain d without marking it
// dirty. It does not keep t's strings.
func (s *Timers) restore(d Domain, t Timer, set bool) {
	q := s.queue(d)
	g := s.group(q, t.KeyGroup)
	k := timerKey{t.Timestamp, t.Key, t.Namespace}
	it, ok := g.set[k]
	switch {
	case set && !ok:
		if g.set == nil {
			g.set = map[timerKey]*timerItem{}
		}
		t.Key, t.Namespace = strings.Clone(t.Key), strings.Clone(t.Namespace)
		k.key, k.ns = t.Key, t.Namespace
		it = &timerItem{Timer: t}
		g.set[k] = it
		q.push(it)
	case !set && ok:
		delete(g.set, k)
		q.remove(it.index)
	}
}
