package builtin

import (
	"cmp"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/offheap"
	"github.com/weirstream/weir/statestore/rows"
)

// The window operator's checkpointed state.
//
// A state batch has one row per window of a key, and in a delta one row
// per key dropped since the previous snapshot. Its columns, in order:
//
//	key_group            int32, not null: the key group of the key
//	<keyBy columns>      the key, with the names and types of the input
//	kind                 int8, not null: 0 replace, 1 window, 2 clear
//	window_start         timestamp_ms: the window's bounds, as emitted
//	window_end           timestamp_ms
//	emitted              bool: a result of the window went downstream
//	pending              bool: rows came since the last result
//	<agg>__count ...     the accumulator of each aggregate (see
//	                     Aggregate.stateFields): <agg>__count, and
//	                     <agg>__sum, __min or __max
//
// A column whose name another column has already taken (a key column
// named kind, say) gets the first free name of <name>_2, <name>_3, ...
//
// State written before 2026-12-05 has kind as utf8, the names replace,
// window and clear; Restore reads both. The names took a 4-byte offset
// a row that no codec compresses (an arithmetic progression has no
// repeats to match): about half the bytes of a zstd state file
// (docs/benchmarks.md).
//
// The kind of a row says how to apply it, in order:
//
//	replace  drop every window of the key, then add this one
//	window   add this window to the key
//	clear    drop every window of the key; the window columns are null
//
// Every key with windows is written as a replace row followed by a window
// row per further window, sorted by window_start. A base holds every key
// so; a delta holds every key whose state changed since the previous
// snapshot so, and a clear row for every key that has no windows left (it
// was cleaned up) unless the key came and went since the previous
// snapshot. A delta therefore has a row per window of the keys that
// changed, and restoring a base and its deltas in order rebuilds the state
// exactly. A key that the previous snapshot had, dropped and then created
// again since, appears twice: its clear row first.
//
// Timers are not written: they follow from the windows. A restored window
// gets the timers a new window gets (addTimers): a cleanup timer at
// end-1+allowedLateness and a fire timer at end-1 unless the two coincide.
// The runtime calls ProcessWatermark with the snapshot's watermark W after
// the restore, which pops the fire timers at or below W without firing
// anything: between batches no window due at W is pending, since
// ProcessWatermark and the end of ProcessBatch fire every due window, and
// no window's cleanup time is at or below W. What is left are the timers
// the operator had at the snapshot. Restored with a lower watermark (at
// another parallelism the runtime restores the least of the subtasks'),
// a window that already fired keeps its fire timer: a row that comes for
// it while the watermark is below its end fires it again when the
// watermark reaches its end.
const (
	windowRowReplace int8 = iota
	windowRowWindow
	windowRowClear
)

// windowRowKinds names the row kinds, by code: the values of the kind
// column of state written before it became int8.
var windowRowKinds = [...]string{windowRowReplace: "replace", windowRowWindow: "window", windowRowClear: "clear"}

// windowKindMeta is the metadata of the kind column: its codes' names,
// for whoever reads the state files with another tool.
var windowKindMeta = arrow.NewMetadata([]string{"weir.codes"}, []string{"0=replace,1=window,2=clear"})

// windowStateLayout is the schema of a window operator's state and where
// its columns are.
type windowStateLayout struct {
	*rows.Layout
	keyCols []int // 1..len(keyBy)
	kind    int   // then window_start, window_end, emitted, pending
	acc     int   // the first accumulator column
	// legacy is the schema of state written before kind was int8: the
	// same columns, kind utf8.
	legacy *rows.Layout
}

// check returns an error if s is neither the state's schema nor its
// schema before kind became int8, naming the columns.
func (l *windowStateLayout) check(s *arrow.Schema) error {
	err := l.Check(s)
	if err != nil && l.legacy.Check(s) == nil {
		return nil
	}
	if err != nil && s.Equal(statestore.SnapshotSchema()) {
		return nil // a pebble window's (Restore converts them)
	}
	return err
}

// windowKinds reads the kind column of a state batch, int8 or (state
// written before 2026-12-05) utf8.
type windowKinds struct {
	codes *array.Int8
	names *array.String
}

func newWindowKinds(col arrow.Array) windowKinds {
	if names, ok := col.(*array.String); ok {
		return windowKinds{names: names}
	}
	return windowKinds{codes: col.(*array.Int8)}
}

// at returns the kind of row r, or an error naming the value if it is
// none.
func (k windowKinds) at(r int) (int8, error) {
	want := func() string {
		return fmt.Sprintf("%d (%s), %d (%s) or %d (%s)", windowRowReplace, windowRowKinds[windowRowReplace],
			windowRowWindow, windowRowKinds[windowRowWindow], windowRowClear, windowRowKinds[windowRowClear])
	}
	if k.names != nil {
		if k.names.IsNull(r) {
			return 0, fmt.Errorf("null, want %s", want())
		}
		name := k.names.Value(r)
		if i := slices.Index(windowRowKinds[:], name); i >= 0 {
			return int8(i), nil
		}
		return 0, fmt.Errorf("%q is not a row kind: want %s", name, want())
	}
	if k.codes.IsNull(r) {
		return 0, fmt.Errorf("null, want %s", want())
	}
	c := k.codes.Value(r)
	if c < 0 || int(c) >= len(windowRowKinds) {
		return 0, fmt.Errorf("%d is not a row kind: want %s", c, want())
	}
	return c, nil
}

func newWindowStateLayout(cfg *windowConfig, keyBy []string) *windowStateLayout {
	l := &windowStateLayout{}
	names := rows.NewNamer(task.StateKeyGroupField, "kind", "window_start", "window_end", "emitted", "pending")
	fields := []arrow.Field{{Name: task.StateKeyGroupField, Type: arrow.PrimitiveTypes.Int32}}
	for i, name := range keyBy {
		l.keyCols = append(l.keyCols, len(fields))
		fields = append(fields, arrow.Field{Name: names.Unique(name), Type: cfg.keyTypes[i].Arrow(), Nullable: true})
	}
	l.kind = len(fields)
	ts := arrowfmt.TimestampMs.Arrow()
	fields = append(fields,
		arrow.Field{Name: "kind", Type: arrow.PrimitiveTypes.Int8, Metadata: windowKindMeta},
		arrow.Field{Name: "window_start", Type: ts, Nullable: true},
		arrow.Field{Name: "window_end", Type: ts, Nullable: true},
		arrow.Field{Name: "emitted", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: "pending", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	)
	l.acc = len(fields)
	for i := range cfg.aggs {
		for _, f := range cfg.aggs[i].stateFields() {
			f.Name = names.Unique(f.Name)
			fields = append(fields, f)
		}
	}
	l.Layout = rows.NewLayout(fields)
	legacy := slices.Clone(fields)
	legacy[l.kind] = arrow.Field{Name: "kind", Type: arrow.BinaryTypes.String}
	l.legacy = rows.NewLayout(legacy)
	return l
}

var _ task.Stateful = (*windowOperator)(nil)

// windowSnapshotter is a window operator's state as checkpoints capture
// and restore it.
type windowSnapshotter struct{ w *windowOperator }

var _ statestore.Snapshotter = windowSnapshotter{}

// State returns the operator's checkpointed state (see the top of this
// file).
func (w *windowOperator) State() statestore.Snapshotter { return windowSnapshotter{w} }

// Schema returns the schema of the state batches.
func (s windowSnapshotter) Schema() *arrow.Schema { return s.w.state.Schema }

// Snapshot writes every key (full), or the keys that changed since the
// last snapshot or restore, and starts tracking changes afresh: it is
// BeginSnapshot captured to the end at once.
func (s windowSnapshotter) Snapshot(mem memory.Allocator, full bool) ([]arrow.RecordBatch, error) {
	return statestore.CaptureAtOnce(s, mem, full)
}

// BeginSnapshot starts a capture of every key (full), or of the keys that
// changed since the last snapshot or restore, and starts tracking changes
// afresh. It copies nothing: see windowCapture. Before the first snapshot
// or restore nothing is tracked (an operator that is never checkpointed
// keeps no list); the state was empty at Open then, so a delta holds
// every key, as a base does.
func (s windowSnapshotter) BeginSnapshot(mem memory.Allocator, full bool) (statestore.Capture, error) {
	w := s.w
	if w.groups == nil {
		return nil, fmt.Errorf("window %s: snapshot state: the operator is not open", w.cfg.name)
	}
	if w.capture != nil {
		return nil, fmt.Errorf("window %s: snapshot state: the previous snapshot is still being captured", w.cfg.name)
	}
	full = full || !w.tracking
	w.snaps++
	c := &windowCapture{w: w, seq: w.snaps, full: full, mem: mem, file: w.stateFileSchema(), walk: newCaptureRows(w, mem, false), cows: make([]*captureRows, len(w.groups))}
	c.dropped, w.dropped = w.dropped, 0 // records of keys dropped, in the change lists
	changed := w.takeChanges()
	if full && c.dropped == 0 {
		w.giveBackChanges(changed)
	} else {
		c.changed = changed // a base sweeps them for the dropped keys
	}
	w.capture = c
	return c, nil
}

// stateFileSchema is the schema of the state files of a capture that
// begins now: the state's, its int64 and timestamp_ms columns narrowed to
// the ranges of the values the operator has held (arrowfmt.NarrowSchema),
// which hold every value the capture writes, since each row it writes
// holds a value the operator has now. statefile.Decode reads the files
// as the state's schema. A schema arrowfmt does not write is the state's.
func (w *windowOperator) stateFileSchema() *arrow.Schema {
	if arrowfmt.FileWritable(w.state.Schema, nil) != nil {
		return w.state.Schema
	}
	return arrowfmt.NarrowSchema(w.state.Schema, w.stateRanges())
}

// stateRanges returns, by state column, the ranges of the int64 and
// timestamp_ms values the operator has held (the others' are not set).
func (w *windowOperator) stateRanges() []arrowfmt.Range {
	ranges := slices.Clone(w.ranges)
	w.acc.stateRanges(ranges[w.state.acc:])
	return ranges
}

// newChangeLists returns an empty change list per key group.
func (w *windowOperator) newChangeLists() []offheap.Vec[offheap.Ref] {
	lists := make([]offheap.Vec[offheap.Ref], len(w.groups))
	for g := range lists {
		lists[g].Init(&w.arena)
	}
	return lists
}

// takeChanges hands out every key group's change list and starts listing
// changes afresh, into spare lists.
func (w *windowOperator) takeChanges() []offheap.Vec[offheap.Ref] {
	taken := w.changed
	w.changed, w.spare = w.spare, nil
	if w.changed == nil {
		w.changed = w.newChangeLists()
	}
	w.tracking = true
	return taken
}

// giveBackChanges keeps lists taken by takeChanges, done with, for the
// next take to reuse (their mapped chunks are freed).
func (w *windowOperator) giveBackChanges(lists []offheap.Vec[offheap.Ref]) {
	if lists == nil {
		return
	}
	for g := range lists {
		lists[g].Reset()
	}
	if w.spare == nil {
		w.spare = lists
	}
}

var _ statestore.SteppedSnapshotter = windowSnapshotter{}

var _ statestore.OlderSchemas = windowSnapshotter{}

// CheckSchema accepts the state's schema and the one it had before kind
// was int8 (see the top of this file).
func (s windowSnapshotter) CheckSchema(schema *arrow.Schema) error {
	return s.w.state.check(schema)
}

var _ statestore.RestoreSizer = windowSnapshotter{}

// SizeRestore grows each empty key group's table to hold the keys the
// replace rows of recs bring, so that a base's keys, which come sorted
// by their place in the table they were captured from, do not crowd a
// table still growing (see reserve). A group that has keys already is
// being given a delta: its rows come in the order of the changes, and
// many of its replace rows are of keys the table holds, so it is left
// to grow as they come.
func (s windowSnapshotter) SizeRestore(recs []arrow.RecordBatch) {
	w := s.w
	if w.groups == nil {
		return
	}
	added := make([]int, len(w.groups))
	for _, b := range recs {
		if w.state.check(b.Schema()) != nil {
			return // Restore says what is wrong
		}
		groups, kinds := b.Column(0).(*array.Int32), newWindowKinds(b.Column(w.state.kind))
		for r := range int(b.NumRows()) {
			g := int(groups.Value(r)) - w.kgStart
			if k, err := kinds.at(r); g >= 0 && g < len(added) && err == nil && k == windowRowReplace {
				added[g]++
			}
		}
	}
	w.baseSized = false
	for g, n := range added {
		if t := &w.groups[g]; n > 0 && t.n == 0 {
			t.reserve(&w.arena, n)
			w.baseSized = true
		}
	}
}

// windowCapture is a snapshot of a window operator captured in steps
// beside processing (statestore.Capture), so that the task does not stop
// at the barrier for the whole state; capture number seq began at epoch
// seq (windowOperator.snaps).
//
// Copy on write, per key. The capture needs every key that existed at its
// barrier (a base) or the keys in the change lists of epoch seq (a delta),
// each as it was at the barrier. Steps walk them, one key group at a time:
// a base lists the keys of the group's table, a delta the group's change
// list, and either sorts them by Ref, so that the walk reads the group's
// records, kept in a lane of their own (windowOperator.laneOf), in memory
// order. A key the walk reaches, or copies, gets captured =
// seq and is not taken again; a key created after the barrier starts with
// it. The operator calls touch before it changes a key, which copies a key
// the capture still needs into its group's cow first. Nothing else changes
// a key: its windows' accumulator slots are updated, merged and released
// only after the key was touched, so a slot of a key the walk has not
// reached holds what it held at the barrier.
//
// A key group's rows are the clear rows of its dropped keys first, then
// the rest of the walk's, then its copies: in a delta, a key dropped and
// created again since the previous snapshot has two records in the
// change list, the dropped one (a clear row) and the live one, in either
// order of Refs, and only the live one can be copied.
//
// Records of keys dropped before the barrier (removeKey) are freed by
// the capture, which is the last to read them: a delta's walk frees each
// once its clear row is built; a base, whose walk of the tables does not
// reach them, sweeps the change lists it took once the walk is done, if
// any key was dropped. A key dropped after the barrier was touched first,
// so the walk passes it by: the next capture frees it.
//
// Parts (statestore.PartedCapture): with SplitParts, the capture ends a
// part after the key group whose walk brings the rows held for the part
// (the walk's and the copies of its groups) to the part size, so the task
// uploads a large capture while it goes on and never holds it whole. A
// key group's copies wait in its cow until its part ends: keys are copied
// ahead of the walk, so with fast changes most of a part's rows may be
// copies, made before the walk got there. At a tumbling period's end
// every key fires, so a capture then copies every key the walk has not
// reached. With EncodeWith (statestore.EncodingCapture), a group's copies
// are encoded every copyBatchRows rows, as the state file's batches,
// compressed: they wait at a tenth of their size or less. A batch of
// copies ends where a key's rows end. A part's file has the walk's rows
// first, then each group's last batch of copies, as built, then the
// encoded ones (the clear rows of a part's groups before all of them): a
// group's walk must come before its copies, and a key's
// rows stay in their order, but the keys of one capture's copies are all
// different, so their batches may come in any order.
type windowCapture struct {
	w       *windowOperator
	seq     uint32
	full    bool
	mem     memory.Allocator
	walk    *captureRows
	clears  *captureRows               // the clear rows of keys dropped before the barrier, made on the first
	cows    []*captureRows             // per key group (index: group - kgStart): the copies, made on first copy
	changed []offheap.Vec[offheap.Ref] // a delta's change lists, per key group
	keys    []offheap.Ref              // keys of the group being walked, in the order of their records
	sortBuf []offheap.Ref              // scratch: sortRefs'
	next    int                        // the next index of keys
	group   int                        // the next key group to list
	dropped int                        // keys dropped before the barrier: their records are in changed
	freed   int                        // records of dropped keys freed, or to be freed once their rows are built
	swept   int                        // a base: the change lists swept for dropped keys
	marks   []uint32                   // scratch: the captured marks of a step's keys
	done    bool
	batches []arrow.RecordBatch

	partBytes int               // see SplitParts; 0: one batch list, no parts
	partStart int               // the first key group (index) of the part being written
	parts     []statestore.Part // ended, not taken

	encode bool                 // see EncodeWith: encode copies as they come
	codec  arrowfmt.Compression // ...with this codec
	err    error                // encoding copies failed: Step returns it
	file   *arrow.Schema        // the schema of its state files (stateFileSchema)

	copies statestore.CopyCounts // see Copies: the rows copied, and the encoded rows of the cows dropped
}

// copyBatchRows is how many rows of a key group's copies a capture that
// encodes them (EncodeWith) gathers before it encodes them: 4096 rows of
// a keyed count are about 150 KiB as they are built.
const copyBatchRows = 4096

// captureBuildRows is how many rows a capture gathers before it builds
// them, column by column: that is faster than row by row, since the
// loads of many keys' state overlap.
const captureBuildRows = 512

// captureRows builds the rows of a snapshot into batches of at most
// rows.BatchRows rows. The batches share no memory with the operator.
//
// Rows are gathered and built every captureBuildRows, so a step of a
// capture costs what its own rows cost. The walk's rows refer to the
// operator's accumulator slots: the capture builds them before its step
// returns, while the keys cannot change. The rows of keys copied before a
// change refer to copies of their slots (copied, in acc).
type captureRows struct {
	w      *windowOperator
	rb     *array.RecordBuilder
	limit  int // rows a batch takes: rows.BatchRows, or the copies' batch if encode
	n      int // rows built into rb
	out    []arrow.RecordBatch
	pend   []windowStateRow
	held   int           // rows added since the last finish
	frees  []offheap.Ref // records of dropped keys to free once their rows are built
	copied bool
	acc    *accumulators // the copies of slots, if copied
	// encode: each batch is encoded once full, with codec, into encoded
	// (a capture's copies, see EncodeWith).
	encode  bool
	codec   arrowfmt.Compression
	file    *arrow.Schema // the schema of the file the batches go into
	encoded []arrowfmt.EncodedBatch
	nenc    int64 // rows encoded, in all

	// Scratch: buildRows gathers each column here and appends it at once.
	keys                     []*windowKey
	slots                    []int32
	groups                   []int32
	kinds                    []int8
	bounds                   [2][]arrow.Timestamp
	flags                    [2][]bool
	valid                    []bool
	keyBuilders, accBuilders []array.Builder
}

// windowStateRow is one row of a snapshot: window win of key ks, of kind
// kind (slot -1: a clear row). Of ks, only the key and its group are
// read, which never change.
type windowStateRow struct {
	ks   *windowKey
	win  windowState
	kind int8
}

func newCaptureRows(w *windowOperator, mem memory.Allocator, copied bool) *captureRows {
	l := w.state
	cr := &captureRows{w: w, rb: array.NewRecordBuilder(mem, l.Schema), limit: rows.BatchRows, copied: copied}
	if copied {
		cr.acc = newAccumulators(w.cfg.aggs)
	}
	for _, col := range l.keyCols {
		cr.keyBuilders = append(cr.keyBuilders, cr.rb.Field(col))
	}
	for i := l.acc; i < len(l.Names); i++ {
		cr.accBuilders = append(cr.accBuilders, cr.rb.Field(i))
	}
	return cr
}

// add adds the rows of ks: a clear row if it has no windows, else a
// replace row and a window row per further window.
func (cr *captureRows) add(ks *windowKey) {
	wins := cr.w.winsOf(ks)
	if len(wins) == 0 {
		cr.pend = append(cr.pend, windowStateRow{ks, windowState{slot: -1}, windowRowClear})
	}
	for i, win := range wins {
		kind := windowRowWindow
		if i == 0 {
			kind = windowRowReplace
		}
		if cr.copied {
			win.slot = cr.acc.copySlot(cr.w.acc, win.slot)
		} else {
			cr.w.acc.prefetchSlot(win.slot) // build reads it
		}
		cr.pend = append(cr.pend, windowStateRow{ks, win, kind})
	}
	cr.held += max(len(wins), 1)
	if len(cr.pend) >= captureBuildRows {
		cr.build()
	}
}

// build builds the gathered rows.
func (cr *captureRows) build() {
	rs := cr.pend
	for len(rs) > 0 {
		k := min(len(rs), cr.limit-cr.n)
		if cr.encode {
			// A batch to encode ends where a key's rows end (pend
			// holds whole keys), past its limit if need be: the part
			// then needs no order among a group's batches of copies,
			// whose keys are all different, and its last one can go
			// as it is built.
			k = len(rs)
		}
		cr.buildRows(rs[:k])
		rs = rs[k:]
		if cr.n += k; cr.n >= cr.limit {
			cr.cut()
			room := cr.limit
			if cr.encode {
				cr.encodeOut()
				room += captureBuildRows
			}
			// A capture that filled a batch likely fills the next:
			// its builders take their full size at once instead of
			// doubling up to it, which allocated and copied each
			// column twice.
			cr.rb.Reserve(room)
		}
	}
	clear(cr.pend) // drop the key pointers
	cr.pend = cr.pend[:0]
	if cr.copied {
		cr.acc.truncate()
	}
	cr.freeDropped()
}

// freeDropped frees the records of the dropped keys whose rows are built
// (or will not be).
func (cr *captureRows) freeDropped() {
	for _, r := range cr.frees {
		cr.w.freeKey(cr.w.keys.At(r))
	}
	cr.frees = cr.frees[:0]
}

// buildRows appends rs to the builder's columns. Each column is gathered
// first and appended at once, not row by row: a builder's Append checks
// its room and sets a validity bit for each value.
func (cr *captureRows) buildRows(rs []windowStateRow) {
	w, rb, l := cr.w, cr.rb, cr.w.state
	cr.keys, cr.groups, cr.kinds, cr.slots = cr.keys[:0], cr.groups[:0], cr.kinds[:0], cr.slots[:0]
	cr.bounds[0], cr.bounds[1], cr.flags[0], cr.flags[1] = cr.bounds[0][:0], cr.bounds[1][:0], cr.flags[0][:0], cr.flags[1][:0]
	cr.valid = cr.valid[:0]
	clears := false
	for _, r := range rs {
		win := r.win
		cr.keys = append(cr.keys, r.ks)
		cr.groups = append(cr.groups, int32(r.ks.group))
		cr.kinds = append(cr.kinds, r.kind)
		cr.slots = append(cr.slots, win.slot)
		cr.bounds[0] = append(cr.bounds[0], arrow.Timestamp(win.start))
		cr.bounds[1] = append(cr.bounds[1], arrow.Timestamp(win.end))
		cr.flags[0] = append(cr.flags[0], win.emitted)
		cr.flags[1] = append(cr.flags[1], win.pending)
		cr.valid = append(cr.valid, win.slot >= 0)
		clears = clears || win.slot < 0
	}
	valid := cr.valid // the window columns are null in a clear row
	if !clears {
		valid = nil
	}
	rb.Field(0).(*array.Int32Builder).AppendValues(cr.groups, nil)
	w.appendKeyColumns(cr.keyBuilders, cr.keys)
	clear(cr.keys) // drop the key pointers
	rb.Field(l.kind).(*array.Int8Builder).AppendValues(cr.kinds, nil)
	rb.Field(l.kind+1).(*array.TimestampBuilder).AppendValues(cr.bounds[0], valid)
	rb.Field(l.kind+2).(*array.TimestampBuilder).AppendValues(cr.bounds[1], valid)
	rb.Field(l.kind+3).(*array.BooleanBuilder).AppendValues(cr.flags[0], valid)
	rb.Field(l.kind+4).(*array.BooleanBuilder).AppendValues(cr.flags[1], valid)
	acc := w.acc
	if cr.copied {
		acc = cr.acc
	}
	acc.appendState(cr.accBuilders, cr.slots)
}

// encodeOut encodes the batches built and drops them. A failure (a codec's
// error; the schema is one arrowfmt writes, see EncodeWith) is the
// capture's: its next Step returns it.
func (cr *captureRows) encodeOut() {
	for _, b := range cr.out {
		e, err := arrowfmt.EncodeBatch(b, cr.file, cr.codec)
		b.Release()
		if err != nil {
			if c := cr.w.capture; c != nil && c.err == nil {
				c.err = fmt.Errorf("window %s: snapshot state: encode copies: %w", cr.w.cfg.name, err)
			}
			continue
		}
		cr.encoded = append(cr.encoded, e)
		cr.nenc += b.NumRows()
	}
	cr.out = cr.out[:0]
}

// cut ends the batch being built.
func (cr *captureRows) cut() {
	if cr.n > 0 {
		cr.out = append(cr.out, cr.rb.NewRecordBatch())
		cr.n = 0
	}
}

// finish builds what is gathered and hands out the batches, and those
// encoded: the caller owns them. The last batch is not encoded: the part
// that takes it is about to be, by the uploader.
func (cr *captureRows) finish() ([]arrow.RecordBatch, []arrowfmt.EncodedBatch) {
	cr.build()
	cr.cut()
	out, enc := cr.out, cr.encoded
	cr.out, cr.encoded, cr.held = nil, nil, 0
	return out, enc
}

// release drops the builder and any batch not handed out, and frees the
// records of dropped keys it was to free.
func (cr *captureRows) release() {
	cr.freeDropped()
	cr.rb.Release()
	for _, b := range cr.out {
		b.Release()
	}
	cr.out = nil
	clear(cr.pend)
	cr.pend = nil
}

// wants reports whether the capture writes rows of ks, which it has not
// taken yet: a base every key, a delta a key of its change list unless
// the key came and went since the previous snapshot.
func (c *windowCapture) wants(ks *windowKey) bool {
	return c.full || ks.changed == c.seq && (ks.nwin > 0 || !ks.fresh)
}

// copyKey takes ks, which is about to change, if the capture needs it.
func (c *windowCapture) copyKey(ks *windowKey) {
	ks.captured = c.seq
	if c.wants(ks) {
		g := int(ks.group) - c.w.kgStart
		if c.cows[g] == nil {
			cr := newCaptureRows(c.w, c.mem, true)
			if c.encode && c.partBytes > 0 {
				cr.encode, cr.codec, cr.file = true, c.codec, c.file
				cr.limit = cmp.Or(c.w.copyRows, copyBatchRows)
			}
			c.cows[g] = cr
			// Room for every key the capture may copy from the group at
			// once: grown by doubling, the buffers of many groups were
			// mapped, copied and unmapped again and again. Room not
			// written to takes no memory (see offheap.Allocator).
			n := c.w.groups[g].n
			if !c.full {
				n = c.changed[g].Len()
			}
			c.cows[g].rb.Reserve(min(n, c.cows[g].limit))
		}
		held := c.cows[g].held
		c.cows[g].add(ks)
		c.copies.Rows += int64(c.cows[g].held - held)
	}
}

var _ statestore.CopyingCapture = (*windowCapture)(nil)

// Copies reports the rows the capture copied on write so far, and of
// those, the rows of the key groups whose parts are written that it
// encoded as they waited.
func (c *windowCapture) Copies() statestore.CopyCounts { return c.copies }

// dropCow releases the copies of key group g (index), counting the rows
// it encoded.
func (c *windowCapture) dropCow(g int) {
	if cr := c.cows[g]; cr != nil {
		c.copies.EncodedRows += cr.nenc
		cr.release()
		c.cows[g] = nil
	}
}

// SplitParts makes the capture hand out its rows in parts of about
// bytes, estimated from the rows held (statestore.PartedCapture). Call it
// before the first Step.
func (c *windowCapture) SplitParts(bytes int) { c.partBytes = max(bytes, 0) }

// TakeParts hands out the parts ended so far.
func (c *windowCapture) TakeParts() []statestore.Part {
	p := c.parts
	c.parts = nil
	return p
}

var _ statestore.EncodingCapture = (*windowCapture)(nil)

// EncodeWith makes a capture in parts encode its copies on write as they
// come, with codec (see windowCapture), if arrowfmt writes the state's
// schema; a key column of a type it does not write leaves them as they
// are, for Arrow's own writer.
//
// The walk's rows are not encoded so: they wait only for the uploader,
// which encodes them on its own goroutine. Encoded on the task's (tried,
// 2026-12-05), they made a 10M-key run longer, and so one checkpoint
// more and 7% fewer events per CPU-second, for no lower peak.
func (c *windowCapture) EncodeWith(codec arrowfmt.Compression) {
	c.codec, c.encode = codec, arrowfmt.FileWritable(c.file, nil) == nil
}

var _ statestore.NarrowingCapture = (*windowCapture)(nil)

// FileSchema is the schema of the capture's state files: the state's,
// its int64 and timestamp_ms columns narrowed to the ranges of the values
// it writes (see stateFileSchema).
func (c *windowCapture) FileSchema() *arrow.Schema { return c.file }

// HoldsParts: the capture goes on while its parts wait for the uploader
// (statestore.PartHolder): with keys changing fast, a walk that waited
// would only have more of them copied on write before it got there.
func (c *windowCapture) HoldsParts() bool { return true }

var _ statestore.PartHolder = (*windowCapture)(nil)

// Step walks keys until deadline (see statestore.Capture).
func (c *windowCapture) Step(deadline time.Time) (bool, error) {
	if c.err != nil {
		return false, c.err
	}
	if c.done {
		return true, nil
	}
	w := c.w
	chunk := w.captureChunk
	if chunk <= 0 {
		chunk = 256
	}
	for {
		switch {
		case c.next < len(c.keys):
		default:
			// The walk of the groups before c.group is done. (After
			// the last group, finish ends the last part.)
			if c.partBytes > 0 && c.group > c.partStart && c.group < len(w.groups) && c.heldBytes() >= c.partBytes {
				c.endPart(c.group)
			}
			if !c.list() {
				if !c.sweep(deadline) {
					return false, nil
				}
				c.finish()
				return true, nil
			}
		}
		keys := c.keys[c.next:min(c.next+chunk, len(c.keys))]
		if c.next == 0 {
			c.prefetch(keys)
		}
		c.next += len(keys)
		// The next chunk's records come in while this one's are walked.
		c.prefetch(c.keys[c.next:min(c.next+chunk, len(c.keys))])
		// Every key's mark first, then its rows: the keys are spread over
		// memory, and these loads overlap where reading each key just
		// before its rows waited for each.
		marks := c.marks[:0]
		for _, r := range keys {
			marks = append(marks, w.keys.At(r).captured)
		}
		c.marks = marks
		for i, r := range keys {
			if marks[i] != c.seq { // a key is in keys once
				ks := w.keys.At(r)
				ks.captured = c.seq
				wanted, dropped := c.wants(ks), droppedIn(ks, c.seq)
				out := c.walk
				if wanted && dropped {
					out = c.clearRows()
				}
				if wanted {
					out.add(ks)
				}
				if dropped {
					c.freed++
					if wanted {
						out.frees = append(out.frees, r) // its clear row reads it
					} else {
						w.freeKey(ks)
					}
				}
			}
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			c.walk.build() // the walk's rows read the keys' slots
			if c.clears != nil {
				c.clears.build() // and free the records of dropped keys
			}
			return false, nil
		}
	}
}

// clearRows returns the rows the clear rows of dropped keys go to. They
// go before the walk's rows of the same key groups (rowsOf): a key dropped
// and then made again before the barrier has two records, the dropped
// one's clear row and the live one's rows, and the walk takes the records
// in the order of their Refs, which is not the order of those events.
func (c *windowCapture) clearRows() *captureRows {
	if c.clears == nil {
		c.clears = newCaptureRows(c.w, c.mem, false)
	}
	return c.clears
}

// prefetch asks for the records of keys.
func (c *windowCapture) prefetch(keys []offheap.Ref) {
	for _, r := range keys {
		offheap.Prefetch(unsafe.Pointer(c.w.keys.At(r)))
	}
}

// list takes the keys of the next key group that has any: those of its
// table (a base) or of its change list (a delta), sorted by Ref, so that
// the walk reads the group's records, which its lane keeps in blocks of
// their own, in memory order and the loads stream instead of each
// waiting on memory (and so their slots, in the lane's blocks of slots).
// It reports whether it found any.
func (c *windowCapture) list() bool {
	w := c.w
	c.keys, c.next = c.keys[:0], 0
	for c.group < len(w.groups) {
		g := c.group
		c.group++
		if !c.full {
			for _, ch := range c.changed[g].Chunks() {
				c.keys = append(c.keys, ch...)
			}
		} else {
			for _, s := range w.groups[g].slots {
				if s != 0 {
					c.keys = append(c.keys, s.ref())
				}
			}
		}
		if len(c.keys) > 0 {
			c.keys, c.sortBuf = sortRefs(c.keys, c.sortBuf)
			return true
		}
	}
	return false
}

// sortRefs sorts refs and drops repeated ones, using buf, and returns
// them and a buffer for the next call (buf, grown, or refs).
func sortRefs(refs, buf []offheap.Ref) ([]offheap.Ref, []offheap.Ref) {
	sorted, spare := radixRefs(refs, buf)
	return slices.Compact(sorted), spare
}

// sortRefsInPlace sorts refs where they are, using buf, and returns a
// buffer for the next call (buf, grown).
func sortRefsInPlace(refs, buf []offheap.Ref) []offheap.Ref {
	sorted, spare := radixRefs(refs, buf)
	if len(refs) > 0 && &sorted[0] != &refs[0] {
		copy(refs, sorted)
		return sorted
	}
	return spare
}

// radixRefs sorts refs using buf, and returns them sorted, in refs or in
// buf (grown if need be), and the other of the two. It sorts by radix,
// least significant digit first, in as many passes as the largest ref
// needs: digits of 12 bits, two passes up to 2^24 (256 chunks of a
// slab), or of 8 bits for fewer refs than the 4,096 counts of a 12-bit
// digit, which would cost more than the refs.
func radixRefs(refs, buf []offheap.Ref) (sorted, spare []offheap.Ref) {
	if len(refs) < 64 {
		slices.Sort(refs)
		return refs, buf
	}
	buf = slices.Grow(buf[:0], len(refs))[:len(refs)]
	var all offheap.Ref
	for _, r := range refs {
		all |= r
	}
	bits := 12
	if len(refs) < 1<<12 {
		bits = 8
	}
	mask := offheap.Ref(1)<<bits - 1
	var counts [1 << 12]int32
	at := counts[:1<<bits]
	src, dst := refs, buf
	for shift := 0; shift < 32 && all>>shift != 0; shift += bits {
		clear(at)
		for _, r := range src {
			at[r>>shift&mask]++
		}
		n := int32(0)
		for d, k := range at {
			at[d] = n
			n += k
		}
		for _, r := range src {
			d := r >> shift & mask
			dst[at[d]] = r
			at[d]++
		}
		src, dst = dst, src
	}
	return src, dst
}

// sweep frees, in a base, the records of the keys dropped before its
// barrier, which the change lists it took hold and its walk of the
// tables did not reach: a key group's list at a time, until deadline or
// until every one is found. It reports whether it is done.
func (c *windowCapture) sweep(deadline time.Time) bool {
	for c.full && c.freed < c.dropped && c.swept < len(c.changed) {
		c.freeDroppedIn(&c.changed[c.swept])
		c.swept++
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return false
		}
	}
	return true
}

// freeDroppedIn frees the records in list of keys dropped before the
// barrier that are not freed yet (a freed record is zero, or another
// key's).
func (c *windowCapture) freeDroppedIn(list *offheap.Vec[offheap.Ref]) {
	for _, chunk := range list.Chunks() {
		for _, r := range chunk {
			if ks := c.w.keys.At(r); droppedIn(ks, c.seq) {
				c.w.freeKey(ks)
				c.freed++
			}
		}
	}
}

// heldBytes estimates the bytes of the rows the part being written holds:
// the walk's and the copies of its key groups.
func (c *windowCapture) heldBytes() int {
	n := c.walk.held
	if c.clears != nil {
		n += c.clears.held
	}
	for _, cr := range c.cows[c.partStart:c.group] {
		if cr != nil {
			n += cr.held
		}
	}
	return n * c.w.state.RowBytes
}

// rowsOf hands out the rows of key groups [start, end) (indexes) not
// handed out yet: the walk's clear rows, the rest of the walk's, then each
// group's copies, then the copies encoded.
func (c *windowCapture) rowsOf(start, end int) ([]arrow.RecordBatch, []arrowfmt.EncodedBatch) {
	var out []arrow.RecordBatch
	if c.clears != nil {
		out, _ = c.clears.finish() // first: see clearRows
	}
	walked, encoded := c.walk.finish() // the walk's are not encoded: see EncodeWith
	out = append(out, walked...)
	for g := start; g < end; g++ {
		if cr := c.cows[g]; cr != nil {
			b, e := cr.finish()
			out, encoded = append(out, b...), append(encoded, e...)
			c.dropCow(g)
		}
	}
	return out, encoded
}

// endPart ends the part being written before key group end (index).
func (c *windowCapture) endPart(end int) {
	start := c.w.kgStart
	batches, encoded := c.rowsOf(c.partStart, end)
	c.parts = append(c.parts, statestore.Part{Batches: batches, Encoded: encoded, KeyGroupStart: start + c.partStart, KeyGroupEnd: start + end})
	c.partStart = end
	if end < len(c.w.groups) {
		// A part holds many batches: the next takes its full size at
		// once, as build does after a batch.
		c.walk.rb.Reserve(rows.BatchRows)
	}
}

// finish hands out the rest of the rows, as the last part or as the
// batches, and detaches the capture.
func (c *windowCapture) finish() {
	c.done = true
	if c.partBytes > 0 {
		c.endPart(len(c.w.groups))
	} else {
		c.batches, _ = c.rowsOf(0, len(c.w.groups)) // copies are encoded only in parts
	}
	c.detach()
}

// Batches hands out the batches of a finished capture that was not split
// into parts.
func (c *windowCapture) Batches() []arrow.RecordBatch {
	b := c.batches
	c.batches = nil
	return b
}

// Release detaches the capture from the operator and drops what it holds.
func (c *windowCapture) Release() {
	c.detach()
	for _, b := range c.batches {
		b.Release()
	}
	c.batches = nil
	for _, p := range c.parts {
		for _, b := range p.Batches {
			b.Release()
		}
	}
	c.parts = nil
}

// detach stops the copying on write and drops the capture's builders.
func (c *windowCapture) detach() {
	w := c.w
	if w.capture == c {
		w.capture = nil
	}
	if c.walk != nil {
		c.walk.release()
		c.walk = nil
	}
	if c.clears != nil {
		c.clears.release()
		c.clears = nil
	}
	if !c.done && c.freed < c.dropped { // released before its walk or sweep was done
		for g := range c.changed {
			c.freeDroppedIn(&c.changed[g])
		}
	}
	w.giveBackChanges(c.changed)
	c.changed, c.keys, c.sortBuf = nil, nil, nil
	for g := range c.cows {
		c.dropCow(g)
	}
}

// writeState writes the rows of every key, leaving the change tracking
// and any capture in flight alone (tests compare states with it).
func (w *windowOperator) writeState(mem memory.Allocator) []arrow.RecordBatch {
	cr := newCaptureRows(w, mem, false)
	defer cr.release()
	w.eachKey(cr.add)
	out, _ := cr.finish()
	return out
}

// Restore applies the rows of b in order (see the top of this file). It
// refuses a batch of another schema and a row of a key group outside the
// subtask's, naming the operator, the row and the column.
func (s windowSnapshotter) Restore(b arrow.RecordBatch) error {
	w := s.w
	if w.groups == nil {
		return fmt.Errorf("window %s: restore state: the operator is not open", w.cfg.name)
	}
	if w.started || w.capture != nil {
		return fmt.Errorf("window %s: restore state: input has already come: restore before any batch, watermark or snapshot", w.cfg.name)
	}
	if err := w.state.check(b.Schema()); err != nil {
		return fmt.Errorf("window %s: restore state: %w", w.cfg.name, err)
	}
	if b.Schema().Equal(statestore.SnapshotSchema()) {
		// The rows of a pebble window's store: a savepoint of a job
		// whose state was in pebble, resumed on the heap.
		mem := w.ctx.Mem
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		conv, err := windowRowsOfStore(w.cfg, w.state, mem, b)
		if err != nil {
			return fmt.Errorf("window %s: restore the state of a window on pebble: %w", w.cfg.name, err)
		}
		defer conv.Release()
		b = conv
	}
	// Restored state counts as unchanged: the changes so far are
	// forgotten, and a new epoch begins, which no restored key is in.
	// No key was dropped in that epoch (w.dropped is 0): input has not
	// come, and a key a restore clears is freed at once.
	w.giveBackChanges(w.takeChanges())
	w.snaps++
	w.rearm = true
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	l := w.state
	for c := range w.ranges {
		w.ranges[c].AddColumn(b.Column(c)) // int64 and timestamp_ms columns
	}
	rs := windowRestore{
		b:       b,
		groups:  b.Column(0).(*array.Int32),
		kinds:   newWindowKinds(b.Column(l.kind)),
		starts:  b.Column(l.kind + 1).(*array.Timestamp),
		ends:    b.Column(l.kind + 2).(*array.Timestamp),
		emitted: b.Column(l.kind + 3).(*array.Boolean),
		pending: b.Column(l.kind + 4).(*array.Boolean),
		accs:    b.Columns()[l.acc:],
	}
	w.hashes = arrowfmt.HashKeys(b, l.keyCols, w.hashes)
	for r := range n {
		if r%warmRows == 0 && !w.baseSized {
			// A delta's keys are mostly in the tables already, found
			// in the order of their changes: read ahead as
			// ProcessBatch does. (A base's are new: nothing to read.)
			w.warm(w.hashes[r:min(r+warmRows, n)])
		}
		if err := w.restoreRow(&rs, r); err != nil {
			return fmt.Errorf("window %s: restore state: row %d (%s): %w", w.cfg.name, r, w.state.DescribeKey(b, w.state.keyCols, r), err)
		}
	}
	return nil
}

// windowRestore holds the columns of a state batch being restored.
type windowRestore struct {
	b                arrow.RecordBatch
	groups           *array.Int32
	kinds            windowKinds
	starts, ends     *array.Timestamp
	emitted, pending *array.Boolean
	accs             []arrow.Array
}

func (w *windowOperator) restoreRow(rs *windowRestore, r int) error {
	l := w.state
	kg, err := l.CheckKeyGroup(rs.groups, r, w.kgStart, w.kgStart+len(w.groups))
	if err != nil {
		return err
	}
	hash := w.hashes[r]
	if got := arrowfmt.KeyGroup(hash, w.maxPar); got != kg {
		return fmt.Errorf("column %s: key group %d, but the key is in key group %d of %d: the state was written with another maxParallelism or is corrupt", l.Names[0], kg, got, w.maxPar)
	}
	kind, err := rs.kinds.at(r)
	if err != nil {
		return fmt.Errorf("column %s: %w", l.Names[l.kind], err)
	}
	w.keyBuf = arrowfmt.AppendRowKey(w.keyBuf[:0], rs.b, l.keyCols, r)
	ks := w.lookup(kg-w.kgStart, hash)
	switch kind {
	case windowRowClear:
		if ks != nil {
			w.dropKey(ks)
		}
		return nil
	}

	// Check everything before changing any state.
	for j, col := range []arrow.Array{rs.starts, rs.ends, rs.emitted, rs.pending} {
		if col.IsNull(r) {
			return fmt.Errorf("column %s: null in a %s row", l.Names[l.kind+1+j], windowRowKinds[kind])
		}
	}
	start, end := int64(rs.starts.Value(r)), int64(rs.ends.Value(r))
	if err := w.checkBounds(start, end); err != nil {
		return err
	}
	if err := w.acc.checkState(rs.accs, l.Names[l.acc:], r); err != nil {
		return err
	}
	if kind == windowRowReplace && ks != nil {
		w.dropKey(ks)
		ks = nil
	}
	i := 0
	if ks != nil {
		wins := w.winsOf(ks)
		var dup bool
		i, dup = searchWins(wins, start)
		switch {
		case dup:
			return fmt.Errorf("the key already has window [%d, %d): the state repeats it, or a delta was applied without its base", start, wins[i].end)
		case w.cfg.kind == kindSession && i > 0 && wins[i-1].end >= start:
			return fmt.Errorf("session [%d, %d) overlaps or touches the key's session [%d, %d)", start, end, wins[i-1].start, wins[i-1].end)
		case w.cfg.kind == kindSession && i < len(wins) && wins[i].start <= end:
			return fmt.Errorf("session [%d, %d) overlaps or touches the key's session [%d, %d)", start, end, wins[i].start, wins[i].end)
		}
	} else {
		ks = w.newKey(kg, hash, false)
	}
	slot := w.acc.allocIn(w.keyLane(ks))
	w.acc.setState(slot, rs.accs, r)
	w.setWins(ks, slices.Insert(w.winsOf(ks), i, windowState{
		start: start, end: end, slot: slot,
		emitted: rs.emitted.Value(r), pending: rs.pending.Value(r),
	}))
	return nil
}

// checkBounds reports whether [start, end) is a window this operator
// makes.
func (w *windowOperator) checkBounds(start, end int64) error {
	c := w.cfg
	switch c.kind {
	case kindTumbling:
		if end-start != c.size || floorMod(start, c.size) != 0 {
			return fmt.Errorf("columns window_start, window_end: [%d, %d) is not a tumbling window of size %dms", start, end, c.size)
		}
	case kindSliding:
		if end-start != c.size || floorMod(start, c.slide) != 0 {
			return fmt.Errorf("columns window_start, window_end: [%d, %d) is not a sliding window of size %dms and slide %dms", start, end, c.size, c.slide)
		}
	case kindSession:
		if end <= start {
			return fmt.Errorf("columns window_start, window_end: [%d, %d) is empty", start, end)
		}
	}
	return nil
}

// dropKey drops ks and every window of it.
func (w *windowOperator) dropKey(ks *windowKey) {
	for _, win := range w.winsOf(ks) {
		w.acc.release(win.slot)
	}
	w.setWins(ks, nil)
	w.removeKey(ks)
}

// armRestoredTimers registers the timers of the restored windows (see the
// top of this file). It runs at the first batch or watermark after a
// restore, once all of the state is in, so that windows replaced by a
// later delta leave no timers behind.
func (w *windowOperator) armRestoredTimers() {
	w.rearm = false
	w.eachKey(func(ks *windowKey) {
		for _, win := range w.winsOf(ks) {
			w.addTimers(ks, win.start, win.end)
		}
	})
}
