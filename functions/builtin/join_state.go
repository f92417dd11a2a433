package builtin

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/rows"
)

// The join operator's checkpointed state.
//
// The state of a join is the rows it keeps; everything else follows from
// them and the watermark (when a row is forgotten, which windows it is
// in). A state batch has one row per kept row and per expire entry. Its
// columns, in order:
//
//	key_group      int32, not null: the key group of the row's key
//	entry          utf8, not null: row or expire
//	side           utf8: left or right (row); null (expire)
//	watermark      timestamp_ms: the key group's watermark (expire); null (row)
//	left.<column>  every column of the left input, its type (row of the left)
//	right.<column> every column of the right input (row of the right)
//
// A row entry has the columns of its side and nulls in the other side's.
// The entries of a batch apply in order:
//
//	row     keep the row, after the key's rows of its side so far
//	expire  the key group's watermark is now at least watermark: forget
//	        every row of the group whose time has come by it (see
//	        NewJoin), and, in a window join, count the windows that end
//	        by it as fired
//
// A base holds every kept row, key by key and in arrival order within a
// key and side, then an expire entry per key group with rows. A delta
// holds the rows kept since the previous snapshot that are still kept, in
// arrival order, then an expire entry for every key group that has new
// rows or whose watermark moved while the saved state may have rows of
// it. Rows kept and forgotten between two snapshots appear in neither. A
// regular join without ttl forgets nothing and writes no expire entries.
// Since whether a row is kept is a function of its time and the
// watermark, which only grows, applying a base and its deltas in order
// rebuilds the kept rows exactly; Restore applies the expire entries
// when the restore is done (settle), which comes to the same.
//
// The runtime calls ProcessWatermark with the snapshot's watermark after a
// restore. At another parallelism it restores the least of the old
// subtasks' watermarks instead; each key group then goes on from the
// watermark of its expire entries until the watermark passes it, so rows
// are judged late, forgotten and windows fired as the old subtask would
// have, and no window fires twice.
const (
	joinEntryRow    = "row"
	joinEntryExpire = "expire"
)

// joinDirty is a row kept since the last snapshot: entry e, if its seq is
// still seq (else the row was forgotten and the entry reused).
type joinDirty struct {
	e    int32
	seq  uint32
	side int8
}

// joinStateLayout is the schema of a join's state and where its columns
// are.
type joinStateLayout struct {
	*rows.Layout
	// cols is the first column of each side's columns; keyCols the state
	// columns of each side's key; sides the schema of each side's
	// columns, with which a state batch is seen as a batch of the input.
	cols    [2]int
	keyCols [2][]int
	sides   [2]*arrow.Schema
}

// State columns before the input columns.
const (
	joinStateGroup = iota
	joinStateEntry
	joinStateSide
	joinStateWatermark
	joinStateInputs
)

func newJoinStateLayout(cfg *joinConfig) *joinStateLayout {
	l := &joinStateLayout{}
	fields := []arrow.Field{
		{Name: task.StateKeyGroupField, Type: arrow.PrimitiveTypes.Int32},
		{Name: "entry", Type: arrow.BinaryTypes.String},
		{Name: "side", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "watermark", Type: arrowfmt.TimestampMs.Arrow(), Nullable: true},
	}
	for s, in := range cfg.in {
		l.cols[s] = len(fields)
		var sf []arrow.Field
		for _, f := range in.Schema.Fields() {
			f.Nullable = true
			sf = append(sf, f)
			f.Name = joinSideNames[s] + "." + f.Name
			fields = append(fields, f)
		}
		l.sides[s] = arrow.NewSchema(sf, nil)
		for _, c := range cfg.keys[s] {
			l.keyCols[s] = append(l.keyCols[s], l.cols[s]+c)
		}
	}
	l.Layout = rows.NewLayout(fields)
	return l
}

// joinSnapshotter is a join operator's state as checkpoints capture and
// restore it.
type joinSnapshotter struct{ j *joinOperator }

var _ statestore.Snapshotter = joinSnapshotter{}

// State returns the operator's checkpointed state (see the top of this
// file).
func (j *joinOperator) State() statestore.Snapshotter { return joinSnapshotter{j} }

// Schema returns the schema of the state batches.
func (s joinSnapshotter) Schema() *arrow.Schema { return s.j.state.Schema }

var _ statestore.OlderSchemas = joinSnapshotter{}

// CheckSchema accepts the join's state batches, and the rows of a pebble
// join's store's backend (statestore.SnapshotSchema: a savepoint of a job
// whose state was in pebble, resumed on the heap), which Restore turns
// into the join's.
func (s joinSnapshotter) CheckSchema(schema *arrow.Schema) error {
	if schema.Equal(statestore.SnapshotSchema()) {
		return nil
	}
	return s.j.state.Check(schema)
}

// Snapshot writes every kept row (full), or the rows kept since the last
// snapshot or restore, with the expire entries described at the top of
// this file, and starts tracking changes afresh: it is BeginSnapshot
// captured to the end at once.
func (s joinSnapshotter) Snapshot(mem memory.Allocator, full bool) ([]arrow.RecordBatch, error) {
	return statestore.CaptureAtOnce(s, mem, full)
}

// BeginSnapshot starts a capture of every kept row (full), or of the rows
// kept since the last snapshot or restore, and starts tracking changes
// afresh. It notes each key group's watermark and copies nothing else:
// see joinCapture. Before the first snapshot or restore nothing is
// tracked; the state was empty at Open then, so a delta holds every row,
// as a base does.
func (s joinSnapshotter) BeginSnapshot(mem memory.Allocator, full bool) (statestore.Capture, error) {
	j := s.j
	if j.groups == nil {
		return nil, fmt.Errorf("join %s: snapshot state: the operator is not open", j.cfg.name)
	}
	if j.capture != nil {
		return nil, fmt.Errorf("join %s: snapshot state: the previous snapshot is still being captured", j.cfg.name)
	}
	if j.restored {
		j.settle()
	}
	full = full || !j.changes.On()
	c := &joinCapture{
		j:       j,
		full:    full,
		w:       rows.NewWriter(mem, j.state.Schema, j.buildStateRows),
		wms:     make([]int64, j.nGroups),
		written: make([]bool, j.nGroups),
	}
	for g := range c.wms {
		c.wms[g] = j.effWm(g)
	}
	changed := j.changes.Take(j.spareChanges)
	j.spareChanges = nil
	if full {
		j.spareChanges = changed
		c.keys = int32(len(j.keys))
		c.pending = make([]uint64, (len(j.keys)+63)/64)
		for i := range c.pending {
			c.pending[i] = ^uint64(0)
		}
	} else {
		c.items = changed
		c.hasRows = make([]bool, j.nGroups)
		for g, n := range j.rows {
			c.hasRows[g] = n > 0
		}
	}
	j.capture = c
	return c, nil
}

var _ statestore.SteppedSnapshotter = joinSnapshotter{}

// joinCapture is a snapshot of a join captured in steps beside processing
// (statestore.Capture), so that the task does not stop at the barrier for
// every kept row.
//
// The kept rows themselves never change: a row is stored, and later
// forgotten (unlinked, its entry freed and reused). So the capture needs
// each key's list of entries as it was at the barrier, and the watermark
// each key group had then (wms), which decides which of them were still
// kept.
//
//   - A base walks the keys that existed at the barrier, by index; pending
//     has a bit per such key not captured yet. Before the operator stores
//     a row for a key or forgets one of its rows, touch captures the key
//     if its bit is set. A key slot reused after the barrier has its bit
//     cleared first.
//   - A delta goes down the change list of the barrier, the rows stored
//     since the previous snapshot in the order they were stored (their
//     seq grows). Storing a row does not change the entries listed; before
//     the operator forgets one of them that the walk has not reached yet,
//     forgetting advances the walk past it, so the row keeps its place in
//     the delta's order.
//
// Rows are built into Arrow (Writer.Build) before the operator goes on:
// after a step, a touch or a catch-up. The rows refer to their batches by
// slot, and a slot is reused once its rows are forgotten.
type joinCapture struct {
	j       *joinOperator
	full    bool
	w       *rows.Writer[joinStateRow]
	wms     []int64 // per key group: its watermark at the barrier
	written []bool  // per key group: the capture has rows of it
	// Base: the keys below keys existed at the barrier; next is the next
	// to walk.
	keys, next int32
	pending    []uint64
	// Delta: the change list and the next of it to walk; hasRows, per key
	// group, whether it kept rows at the barrier.
	items   []joinDirty
	pos     int
	hasRows []bool
	done    bool
	batches []arrow.RecordBatch
	// early counts the keys (base) or changes (delta) taken before a
	// change to them, rather than by the walk (tests look).
	early int
}

// Step walks keys or changes until deadline (see statestore.Capture).
func (c *joinCapture) Step(deadline time.Time) (bool, error) {
	if c.done {
		return true, nil
	}
	chunk := c.j.captureChunk
	if chunk <= 0 {
		chunk = 256
	}
	for n := 1; ; n++ {
		if c.full {
			if c.next == c.keys {
				break
			}
			c.takeKey(c.next)
			c.next++
		} else {
			if c.pos == len(c.items) {
				break
			}
			c.takeChange(c.items[c.pos])
			c.pos++
		}
		if n%chunk != 0 || deadline.IsZero() {
			continue
		}
		// Building the rows costs more than walking to them: build them
		// before the look at the clock, so that it counts.
		c.w.Build()
		if !time.Now().Before(deadline) {
			return false, nil
		}
	}
	c.finish()
	return true, nil
}

// takeKey captures the kept rows of key k if the capture still needs it
// (a base).
func (c *joinCapture) takeKey(k int32) {
	bit := uint64(1) << (k & 63)
	if c.pending[k>>6]&bit == 0 {
		return
	}
	c.pending[k>>6] &^= bit
	j := c.j
	key := &j.keys[k]
	if key.group < 0 {
		return
	}
	g := int(key.group) - j.kgStart
	wm := c.wms[g]
	for s := range 2 {
		for e := key.head[s]; e >= 0; e = j.ents[s][e].next {
			if ent := &j.ents[s][e]; ent.exp > wm {
				c.w.Add(joinStateRow{kg: key.group, side: int8(s), ref: joinRef{ent.b, ent.r}})
				c.written[g] = true
			}
		}
	}
}

// takeChange captures the row of change d if it was still kept at the
// barrier (a delta): its entry still holds it, and its time had not come.
func (c *joinCapture) takeChange(d joinDirty) {
	j := c.j
	ent := &j.ents[d.side][d.e]
	if ent.seq != d.seq {
		return
	}
	key := &j.keys[ent.key]
	g := int(key.group) - j.kgStart
	if ent.exp <= c.wms[g] {
		return
	}
	c.w.Add(joinStateRow{kg: key.group, side: d.side, ref: joinRef{ent.b, ent.r}})
	c.written[g] = true
}

// seqAfter reports whether seq a came after b, across the wrap of the
// counter (fewer than 2^31 rows are stored between two snapshots).
func seqAfter(a, b uint32) bool { return int32(a-b) > 0 }

// touch lets a capture in flight take key k before the operator stores a
// row for it or forgets one of its rows, or reuses its slot.
func (j *joinOperator) touch(k int32) {
	if c := j.capture; c != nil && c.full && k < c.keys && c.pending[k>>6]&(1<<(k&63)) != 0 {
		c.early++
		c.takeKey(k)
		c.w.Build()
	}
}

// forgetting lets a capture in flight take the row of entry e of input
// side before the operator forgets it: a delta walks on past it if the row
// is in its change list and not reached yet.
func (j *joinOperator) forgetting(side int, e int32) {
	c := j.capture
	if c == nil {
		return
	}
	if c.full {
		j.touch(j.ents[side][e].key)
		return
	}
	seq := j.ents[side][e].seq
	if c.pos == len(c.items) || seqAfter(c.items[c.pos].seq, seq) || seqAfter(seq, c.items[len(c.items)-1].seq) {
		return // stored before the previous snapshot, or after the barrier, or walked
	}
	for c.pos < len(c.items) && !seqAfter(c.items[c.pos].seq, seq) {
		c.takeChange(c.items[c.pos])
		c.pos++
		c.early++
	}
	c.w.Build()
}

// finish writes the expire entries, records what the saved state now
// holds, builds the batches and detaches the capture.
func (c *joinCapture) finish() {
	j := c.j
	// A regular join without ttl forgets nothing: it needs no expire
	// entries.
	forgets := j.cfg.kind != joinRegular || j.cfg.ttl > 0
	for g, wm := range c.wms {
		switch {
		case c.full:
			if c.written[g] && forgets {
				c.w.Add(joinExpireRow(j.kgStart+g, wm))
				j.saved[g] = wm
			}
			j.hadRows[g] = c.written[g]
		case !forgets:
			j.hadRows[g] = j.hadRows[g] || c.written[g]
		case c.written[g] || j.hadRows[g] && wm > j.saved[g]:
			c.w.Add(joinExpireRow(j.kgStart+g, wm))
			j.saved[g] = wm
			// Every row of the group that the saved state has and that
			// was not kept any more at the barrier is forgotten by wm.
			j.hadRows[g] = c.written[g] || c.hasRows[g]
		}
	}
	c.batches = c.w.Finish()
	c.done = true
	c.detach()
}

// Batches hands out the batches of a finished capture.
func (c *joinCapture) Batches() []arrow.RecordBatch {
	b := c.batches
	c.batches = nil
	return b
}

// Release detaches the capture from the operator and drops what it holds.
func (c *joinCapture) Release() {
	c.detach()
	for _, b := range c.batches {
		b.Release()
	}
	c.batches = nil
}

// detach stops the copying on write and drops the capture's writer.
func (c *joinCapture) detach() {
	j := c.j
	if j.capture == c {
		j.capture = nil
		if !c.full && j.spareChanges == nil {
			j.spareChanges = c.items
		}
	}
	c.items, c.pending = nil, nil
	if c.w != nil {
		c.w.Release()
		c.w = nil
	}
}

// resetTracking forgets the changes so far and tracks from now on.
func (j *joinOperator) resetTracking() { j.changes.Reset() }

// joinStateRow is one entry of a snapshot: a kept row of side at ref, or
// (side -1) an expire entry of key group kg at wm.
type joinStateRow struct {
	kg   int32
	side int8
	wm   int64
	ref  joinRef
}

func joinExpireRow(kg int, wm int64) joinStateRow {
	return joinStateRow{kg: int32(kg), side: -1, wm: wm}
}

// buildStateRows appends the entries of one state batch to rb's columns.
func (j *joinOperator) buildStateRows(rb *array.RecordBuilder, rs []joinStateRow) {
	l := j.state
	groups := rb.Field(joinStateGroup).(*array.Int32Builder)
	entries := rb.Field(joinStateEntry).(*array.StringBuilder)
	sides := rb.Field(joinStateSide).(*array.StringBuilder)
	wms := rb.Field(joinStateWatermark).(*array.TimestampBuilder)
	none := joinRef{b: -1}
	for s := range 2 {
		j.stateRefs[s] = slices.Grow(j.stateRefs[s][:0], len(rs))[:len(rs)]
	}
	refs := j.stateRefs
	for i, r := range rs {
		groups.Append(r.kg)
		refs[0][i], refs[1][i] = none, none
		if r.side < 0 {
			entries.Append(joinEntryExpire)
			sides.AppendNull()
			wms.Append(arrow.Timestamp(r.wm))
			continue
		}
		refs[r.side][i] = r.ref
		entries.Append(joinEntryRow)
		sides.Append(joinSideNames[r.side])
		wms.AppendNull()
	}
	for s := range 2 {
		for c := range l.sides[s].NumFields() {
			j.sides[s].appendColumn(rb.Field(l.cols[s]+c), c, refs[s])
		}
	}
}

// Restore applies the entries of b in order (see the top of this file).
// It refuses a batch of another schema and an entry that does not fit,
// naming the operator, the row and the column, before it changes
// anything. It copies the rows it keeps (into the operator's allocator):
// nothing of b is retained.
func (s joinSnapshotter) Restore(b arrow.RecordBatch) error {
	j := s.j
	if j.groups == nil {
		return fmt.Errorf("join %s: restore state: the operator is not open", j.cfg.name)
	}
	if j.started {
		return fmt.Errorf("join %s: restore state: input has already come: restore before any batch or watermark", j.cfg.name)
	}
	if b.Schema().Equal(statestore.SnapshotSchema()) {
		// The rows of a pebble join's store: a savepoint of a job whose
		// state was in pebble, resumed on the heap.
		conv, err := joinRowsOfStore(j.state, j.mem, b)
		if err != nil {
			return fmt.Errorf("join %s: restore the state of a join on pebble: %w", j.cfg.name, err)
		}
		defer conv.Release()
		b = conv
	}
	if err := j.state.Check(b.Schema()); err != nil {
		return fmt.Errorf("join %s: restore state: %w", j.cfg.name, err)
	}
	// Restored state counts as unchanged.
	j.resetTracking()
	j.restored = true
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	l := j.state
	rs := joinRestore{
		b:       b,
		groups:  b.Column(joinStateGroup).(*array.Int32),
		entries: b.Column(joinStateEntry).(*array.String),
		sides:   b.Column(joinStateSide).(*array.String),
		wms:     b.Column(joinStateWatermark).(*array.Timestamp),
	}
	for s := range 2 {
		rs.hashes[s] = arrowfmt.HashKeys(b, l.keyCols[s], nil)
		if in := j.cfg.in[s]; in.HasTime() {
			rs.times[s] = makeJoinCol(b.Column(l.cols[s] + in.TimeColumn))
		}
	}
	for r := range n {
		if err := j.checkStateRow(&rs, r); err != nil {
			return fmt.Errorf("join %s: restore state: row %d: %w", j.cfg.name, r, err)
		}
	}

	// Copy each side's rows into a batch of that input's schema.
	var bi [2]int32
	for s := range 2 {
		if len(rs.rows[s]) == 0 {
			continue
		}
		cols := b.Columns()[l.cols[s] : l.cols[s]+l.sides[s].NumFields()]
		view := array.NewRecordBatch(l.sides[s], cols, b.NumRows())
		rows := arrowfmt.Take(view, rs.rows[s], j.mem)
		view.Release()
		bi[s] = j.sides[s].add(rows)
		rows.Release()
	}
	var keyInts [2][]int64
	if j.cfg.fast {
		for s := range 2 {
			keyInts[s] = makeJoinCol(b.Column(l.keyCols[s][0])).ints
		}
	}
	// Rows are stored untracked: tracking starts after the restore.
	j.changes.Pause()
	next := [2]int32{}
	for r := range n {
		g := int(rs.groups.Value(r)) - j.kgStart
		if rs.entries.Value(r) == joinEntryExpire {
			j.saved[g] = max(j.saved[g], int64(rs.wms.Value(r)))
			continue
		}
		side := slices.Index(joinSideNames[:], rs.sides.Value(r))
		var ts int64
		hasTs := false
		if t := &rs.times[side]; t.arr != nil && !t.arr.IsNull(r) {
			ts, hasTs = t.ints[r]+j.cfg.in[side].TimeOffset, true
		}
		var ikey int64
		if j.cfg.fast {
			ikey = keyInts[side][r]
		} else {
			j.keyBuf = arrowfmt.AppendRowKey(j.keyBuf[:0], b, l.keyCols[side], r)
		}
		hash := rs.hashes[side][r]
		k := j.findKey(g, hash, ikey)
		if k < 0 {
			k = j.newKey(hash, ikey, g)
		}
		j.store(k, side, bi[side], next[side], ts, j.expiryOf(side, ts, hasTs))
		next[side]++
		j.hadRows[g] = true
	}
	j.changes.Resume()
	return nil
}

// joinRestore holds the columns of a state batch being restored.
type joinRestore struct {
	b       arrow.RecordBatch
	groups  *array.Int32
	entries *array.String
	sides   *array.String
	wms     *array.Timestamp
	hashes  [2][]uint64
	times   [2]joinCol
	rows    [2][]int32 // the row entries of each side
}

// checkStateRow checks row r of a state batch and notes a row entry in
// rs.rows.
func (j *joinOperator) checkStateRow(rs *joinRestore, r int) error {
	l := j.state
	kg, err := l.CheckKeyGroup(rs.groups, r, j.kgStart, j.kgStart+j.nGroups)
	if err != nil {
		return err
	}
	if rs.entries.IsNull(r) {
		return fmt.Errorf("column %s: null, want %s or %s", l.Names[joinStateEntry], joinEntryRow, joinEntryExpire)
	}
	switch e := rs.entries.Value(r); e {
	case joinEntryExpire:
		if rs.wms.IsNull(r) {
			return fmt.Errorf("column %s: null in an %s entry", l.Names[joinStateWatermark], joinEntryExpire)
		}
		return nil
	case joinEntryRow:
	default:
		return fmt.Errorf("column %s: %q is not an entry: want %s or %s", l.Names[joinStateEntry], e, joinEntryRow, joinEntryExpire)
	}
	side := -1
	if !rs.sides.IsNull(r) {
		side = slices.Index(joinSideNames[:], rs.sides.Value(r))
	}
	if side < 0 {
		return fmt.Errorf("column %s: %s, want left or right", l.Names[joinStateSide], describeStateString(rs.sides, r))
	}
	if joinKeyNull(rs.b, l.keyCols[side], r) {
		return fmt.Errorf("%s: a null key column, but rows with null keys are never kept", j.describeStateKey(rs.b, side, r))
	}
	if got := arrowfmt.KeyGroup(rs.hashes[side][r], j.maxPar); got != kg {
		return fmt.Errorf("column %s: key group %d, but %s is in key group %d of %d: the state was written with another maxParallelism or is corrupt",
			l.Names[joinStateGroup], kg, j.describeStateKey(rs.b, side, r), got, j.maxPar)
	}
	if in := j.cfg.in[side]; j.cfg.kind != joinRegular && (rs.times[side].arr == nil || rs.times[side].arr.IsNull(r)) {
		return fmt.Errorf("column %s: null: every kept row of %s has an event time", l.Names[l.cols[side]+in.TimeColumn], j.cfg.needsTime())
	}
	rs.rows[side] = append(rs.rows[side], int32(r))
	return nil
}

func describeStateString(a *array.String, r int) string {
	if a.IsNull(r) {
		return "null"
	}
	return strconv.Quote(a.Value(r))
}

// describeStateKey describes the key of row r of a state batch, of input
// side, for an error.
func (j *joinOperator) describeStateKey(b arrow.RecordBatch, side, r int) string {
	return j.state.DescribeKey(b, j.state.keyCols[side], r)
}

// settle finishes a restore, at the first batch, watermark or snapshot
// after it: it forgets the restored rows whose time had come by their key
// group's saved watermark, lets each key group go on from that watermark
// (floor) and, in a window join, registers the windows of the rows that
// had not fired by it.
func (j *joinOperator) settle() {
	j.restored = false
	j.floor, j.maxFloor = nil, task.MinWatermark
	for _, w := range j.saved {
		j.maxFloor = max(j.maxFloor, w)
	}
	if j.maxFloor > j.wm {
		j.floor = append([]int64(nil), j.saved...)
	}
	for k := range j.keys {
		j.cleanKey(int32(k))
	}
	if j.cfg.kind != joinWindow {
		return
	}
	for k := range j.keys {
		key := &j.keys[k]
		if key.group < 0 {
			continue
		}
		wm := j.effWm(int(key.group) - j.kgStart)
		for s := range 2 {
			for e := key.head[s]; e >= 0; e = j.ents[s][e].next {
				j.addWindows(int32(k), j.ents[s][e].ts, wm)
			}
		}
	}
}

// begin marks that input has come and settles a restore.
func (j *joinOperator) begin() {
	j.started = true
	if j.restored {
		j.settle()
	}
}
