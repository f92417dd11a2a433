package builtin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/task"
)

// The window operator's checkpointed state.
//
// A state batch has one row per window of a key, and in a delta one row
// per key dropped since the previous snapshot. Its columns, in order:
//
//	key_group            int32, not null: the key group of the key
//	<keyBy columns>      the key, with the names and types of the input
//	kind                 utf8, not null: replace, window or clear
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
	windowRowReplace = "replace"
	windowRowWindow  = "window"
	windowRowClear   = "clear"
)

// windowStateBatchRows caps the rows of one state batch.
const windowStateBatchRows = 1 << 16

// windowStateLayout is the schema of a window operator's state and where
// its columns are.
type windowStateLayout struct {
	schema  *arrow.Schema
	names   []string
	keyCols []int // 1..len(keyBy)
	kind    int   // then window_start, window_end, emitted, pending
	acc     int   // the first accumulator column
}

func newWindowStateLayout(cfg *windowConfig, keyBy []string) *windowStateLayout {
	l := &windowStateLayout{}
	taken := map[string]bool{}
	fixed := []string{task.StateKeyGroupField, "kind", "window_start", "window_end", "emitted", "pending"}
	for _, name := range fixed {
		taken[name] = true
	}
	unique := func(name string) string {
		if !taken[name] {
			taken[name] = true
			return name
		}
		for i := 2; ; i++ {
			if n := name + "_" + strconv.Itoa(i); !taken[n] {
				taken[n] = true
				return n
			}
		}
	}
	fields := []arrow.Field{{Name: task.StateKeyGroupField, Type: arrow.PrimitiveTypes.Int32}}
	for i, name := range keyBy {
		l.keyCols = append(l.keyCols, len(fields))
		fields = append(fields, arrow.Field{Name: unique(name), Type: cfg.keyTypes[i].Arrow(), Nullable: true})
	}
	l.kind = len(fields)
	ts := arrowfmt.TimestampMs.Arrow()
	fields = append(fields,
		arrow.Field{Name: "kind", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "window_start", Type: ts, Nullable: true},
		arrow.Field{Name: "window_end", Type: ts, Nullable: true},
		arrow.Field{Name: "emitted", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: "pending", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	)
	l.acc = len(fields)
	for i := range cfg.aggs {
		for _, f := range cfg.aggs[i].stateFields() {
			f.Name = unique(f.Name)
			fields = append(fields, f)
		}
	}
	for _, f := range fields {
		l.names = append(l.names, f.Name)
	}
	l.schema = arrow.NewSchema(fields, nil)
	return l
}

// check reports whether s is the layout's schema, naming the first column
// that differs.
func (l *windowStateLayout) check(s *arrow.Schema) error {
	if s.NumFields() != l.schema.NumFields() {
		return fmt.Errorf("%d columns (%s), want %d (%s)", s.NumFields(), columnList(s), l.schema.NumFields(), columnList(l.schema))
	}
	for i, want := range l.schema.Fields() {
		if got := s.Field(i); got.Name != want.Name || !arrow.TypeEqual(got.Type, want.Type) {
			return fmt.Errorf("column %d is %s %v, want %s %v (state columns: %s)", i, got.Name, got.Type, want.Name, want.Type, columnList(l.schema))
		}
	}
	return nil
}

var _ task.Stateful = (*windowOperator)(nil)

// StateSchema returns the schema of the state batches.
func (w *windowOperator) StateSchema() *arrow.Schema { return w.state.schema }

// SnapshotState writes every key (full), or the keys that changed since
// the last snapshot or restore, and starts tracking changes afresh. Before
// the first snapshot or restore nothing is tracked (an operator that is
// never checkpointed keeps no list); the state was empty at Open then, so
// a delta holds every key, as a base does.
func (w *windowOperator) SnapshotState(full bool) ([]arrow.RecordBatch, error) {
	if w.groups == nil {
		return nil, fmt.Errorf("window %s: snapshot state: the operator is not open", w.cfg.name)
	}
	sb := windowStateBuilder{w: w, rb: array.NewRecordBuilder(w.mem, w.state.schema)}
	defer sb.release()
	if full || !w.track {
		for _, m := range w.groups {
			for _, ks := range m {
				for ; ks != nil; ks = ks.next {
					sb.addKey(ks)
				}
			}
		}
	} else {
		for _, ks := range w.dirty {
			if len(ks.wins) > 0 || !ks.fresh {
				sb.addKey(ks)
			}
		}
	}
	sb.flush()
	w.resetTracking()
	batches := sb.out
	sb.out = nil
	return batches, nil
}

// resetTracking forgets the changes so far and tracks from now on.
func (w *windowOperator) resetTracking() {
	for _, ks := range w.dirty {
		ks.dirty, ks.fresh = false, false
	}
	clear(w.dirty)
	w.dirty = w.dirty[:0]
	w.track = true
}

// windowStateBuilder gathers the rows of a snapshot and builds them into
// batches of at most windowStateBatchRows rows.
type windowStateBuilder struct {
	w     *windowOperator
	rb    *array.RecordBuilder
	keys  []*windowKey
	wins  []windowState // slot -1: a clear row
	kinds []string
	out   []arrow.RecordBatch
}

// addKey adds the rows of ks: a clear row if it has no windows, else a
// replace row and a window row per further window.
func (sb *windowStateBuilder) addKey(ks *windowKey) {
	if len(ks.wins) == 0 {
		sb.add(ks, windowState{slot: -1}, windowRowClear)
		return
	}
	for i, win := range ks.wins {
		kind := windowRowWindow
		if i == 0 {
			kind = windowRowReplace
		}
		sb.add(ks, win, kind)
	}
}

func (sb *windowStateBuilder) add(ks *windowKey, win windowState, kind string) {
	sb.keys = append(sb.keys, ks)
	sb.wins = append(sb.wins, win)
	sb.kinds = append(sb.kinds, kind)
	if len(sb.keys) == windowStateBatchRows {
		sb.flush()
	}
}

// flush builds the gathered rows into a batch. The batch's buffers are
// its own: nothing of it points into the operator's state.
func (sb *windowStateBuilder) flush() {
	n := len(sb.keys)
	if n == 0 {
		return
	}
	w, rb, l := sb.w, sb.rb, sb.w.state
	rb.Reserve(n)
	groups := rb.Field(0).(*array.Int32Builder)
	for _, ks := range sb.keys {
		groups.Append(int32(ks.group))
	}
	for c, col := range l.keyCols {
		appendKeyColumn(rb.Field(col), sb.keys, c)
	}
	kinds := rb.Field(l.kind).(*array.StringBuilder)
	starts := rb.Field(l.kind + 1).(*array.TimestampBuilder)
	ends := rb.Field(l.kind + 2).(*array.TimestampBuilder)
	emitted := rb.Field(l.kind + 3).(*array.BooleanBuilder)
	pending := rb.Field(l.kind + 4).(*array.BooleanBuilder)
	slots := make([]int32, n)
	for j, win := range sb.wins {
		kinds.Append(sb.kinds[j])
		slots[j] = win.slot
		if win.slot < 0 {
			starts.AppendNull()
			ends.AppendNull()
			emitted.AppendNull()
			pending.AppendNull()
			continue
		}
		starts.Append(arrow.Timestamp(win.start))
		ends.Append(arrow.Timestamp(win.end))
		emitted.Append(win.emitted)
		pending.Append(win.pending)
	}
	accs := make([]array.Builder, len(l.names)-l.acc)
	for i := range accs {
		accs[i] = rb.Field(l.acc + i)
	}
	w.acc.appendState(accs, slots)
	sb.out = append(sb.out, rb.NewRecordBatch())
	clear(sb.keys) // drop the key pointers
	sb.keys, sb.wins, sb.kinds = sb.keys[:0], sb.wins[:0], sb.kinds[:0]
}

// release releases the builder and, after a failure, the batches built.
func (sb *windowStateBuilder) release() {
	sb.rb.Release()
	for _, b := range sb.out {
		b.Release()
	}
}

// RestoreState applies the rows of b in order (see the top of this file).
// It refuses a batch of another schema and a row of a key group outside
// the subtask's, naming the operator, the row and the column.
func (w *windowOperator) RestoreState(b arrow.RecordBatch) error {
	if w.groups == nil {
		return fmt.Errorf("window %s: restore state: the operator is not open", w.cfg.name)
	}
	if w.started {
		return fmt.Errorf("window %s: restore state: input has already come: restore before any batch or watermark", w.cfg.name)
	}
	if err := w.state.check(b.Schema()); err != nil {
		return fmt.Errorf("window %s: restore state: %w", w.cfg.name, err)
	}
	// Restored state counts as unchanged.
	w.resetTracking()
	w.rearm = true
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	l := w.state
	rs := windowRestore{
		b:       b,
		groups:  b.Column(0).(*array.Int32),
		kinds:   b.Column(l.kind).(*array.String),
		starts:  b.Column(l.kind + 1).(*array.Timestamp),
		ends:    b.Column(l.kind + 2).(*array.Timestamp),
		emitted: b.Column(l.kind + 3).(*array.Boolean),
		pending: b.Column(l.kind + 4).(*array.Boolean),
		accs:    b.Columns()[l.acc:],
	}
	w.hashes = arrowfmt.HashKeys(b, l.keyCols, w.hashes)
	for r := range n {
		if err := w.restoreRow(&rs, r); err != nil {
			return fmt.Errorf("window %s: restore state: row %d (%s): %w", w.cfg.name, r, w.describeStateKey(b, r), err)
		}
	}
	return nil
}

// windowRestore holds the columns of a state batch being restored.
type windowRestore struct {
	b                arrow.RecordBatch
	groups           *array.Int32
	kinds            *array.String
	starts, ends     *array.Timestamp
	emitted, pending *array.Boolean
	accs             []arrow.Array
}

func (w *windowOperator) restoreRow(rs *windowRestore, r int) error {
	l := w.state
	if rs.groups.IsNull(r) {
		return fmt.Errorf("column %s: null, want the key group", l.names[0])
	}
	kg := int(rs.groups.Value(r))
	if kg < w.kgStart || kg >= w.kgStart+len(w.groups) {
		return fmt.Errorf("column %s: key group %d is outside this subtask's key groups [%d, %d)", l.names[0], kg, w.kgStart, w.kgStart+len(w.groups))
	}
	hash := w.hashes[r]
	if got := arrowfmt.KeyGroup(hash, w.maxPar); got != kg {
		return fmt.Errorf("column %s: key group %d, but the key is in key group %d of %d: the state was written with another maxParallelism or is corrupt", l.names[0], kg, got, w.maxPar)
	}
	if rs.kinds.IsNull(r) {
		return fmt.Errorf("column %s: null, want %s, %s or %s", l.names[l.kind], windowRowReplace, windowRowWindow, windowRowClear)
	}
	kind := rs.kinds.Value(r)
	w.keyBuf = arrowfmt.AppendRowKey(w.keyBuf[:0], rs.b, l.keyCols, r)
	ks := w.groups[kg-w.kgStart][hash]
	for ks != nil && ks.key != string(w.keyBuf) {
		ks = ks.next
	}
	switch kind {
	case windowRowClear:
		if ks != nil {
			w.dropKey(ks)
		}
		return nil
	case windowRowReplace, windowRowWindow:
	default:
		return fmt.Errorf("column %s: %q is not a row kind: want %s, %s or %s", l.names[l.kind], kind, windowRowReplace, windowRowWindow, windowRowClear)
	}

	// Check everything before changing any state.
	for j, col := range []arrow.Array{rs.starts, rs.ends, rs.emitted, rs.pending} {
		if col.IsNull(r) {
			return fmt.Errorf("column %s: null in a %s row", l.names[l.kind+1+j], kind)
		}
	}
	start, end := int64(rs.starts.Value(r)), int64(rs.ends.Value(r))
	if err := w.checkBounds(start, end); err != nil {
		return err
	}
	if err := w.acc.checkState(rs.accs, l.names[l.acc:], r); err != nil {
		return err
	}
	if kind == windowRowReplace && ks != nil {
		w.dropKey(ks)
		ks = nil
	}
	i := 0
	if ks != nil {
		var dup bool
		i, dup = ks.search(start)
		switch {
		case dup:
			return fmt.Errorf("the key already has window [%d, %d): the state repeats it, or a delta was applied without its base", start, ks.wins[i].end)
		case w.cfg.kind == kindSession && i > 0 && ks.wins[i-1].end >= start:
			return fmt.Errorf("session [%d, %d) overlaps or touches the key's session [%d, %d)", start, end, ks.wins[i-1].start, ks.wins[i-1].end)
		case w.cfg.kind == kindSession && i < len(ks.wins) && ks.wins[i].start <= end:
			return fmt.Errorf("session [%d, %d) overlaps or touches the key's session [%d, %d)", start, end, ks.wins[i].start, ks.wins[i].end)
		}
	} else {
		ks = w.newKey(rs.b, l.keyCols, r, kg, hash)
	}
	slot := w.acc.alloc()
	w.acc.setState(slot, rs.accs, r)
	ks.wins = slices.Insert(ks.wins, i, windowState{
		start: start, end: end, slot: slot,
		emitted: rs.emitted.Value(r), pending: rs.pending.Value(r),
	})
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
	for _, win := range ks.wins {
		w.acc.release(win.slot)
	}
	ks.wins = nil
	w.removeKey(ks)
}

// armRestoredTimers registers the timers of the restored windows (see the
// top of this file). It runs at the first batch or watermark after a
// restore, once all of the state is in, so that windows replaced by a
// later delta leave no timers behind.
func (w *windowOperator) armRestoredTimers() {
	w.rearm = false
	for _, m := range w.groups {
		for _, ks := range m {
			for ; ks != nil; ks = ks.next {
				for _, win := range ks.wins {
					w.addTimers(ks, win.start, win.end)
				}
			}
		}
	}
}

// describeStateKey describes the key of row r of a state batch for an
// error: name=value of every key column.
func (w *windowOperator) describeStateKey(b arrow.RecordBatch, r int) string {
	var sb strings.Builder
	for i, c := range w.state.keyCols {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(w.state.names[c])
		sb.WriteByte('=')
		switch v := arrowfmt.Value(b.Column(c), r).(type) {
		case nil:
			sb.WriteString("null")
		case string:
			sb.WriteString(strconv.Quote(v))
		default:
			fmt.Fprint(&sb, v)
		}
	}
	return sb.String()
}
