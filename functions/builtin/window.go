package builtin

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
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
)

// windowBatchRows caps the rows of one emitted batch.
const windowBatchRows = 1 << 16

// windowConfig is what WindowSchema and NewWindow derive from the spec.
type windowConfig struct {
	name       string
	kind       windowKind
	size       int64 // ms; tumbling and sliding
	slide      int64 // ms; sliding
	gap        int64 // ms; session
	lateness   int64 // ms
	lateOutput string

	in       Stream
	keyCols  []int
	keyTypes []arrowfmt.Type
	aggs     []Aggregate
	out      Stream
}

type windowKind uint8

const (
	kindTumbling windowKind = iota + 1
	kindSliding
	kindSession
)

// WindowSchema returns what a window operator emits for input in:
// window_start and window_end (timestamp_ms), the keyBy columns in order
// and with their input types, then the aggregates in order. Event time of
// the output is window_end - 1, the last millisecond of the window, as in
// Flink.
func WindowSchema(op *spec.Operator, in Stream) (Stream, error) {
	cfg, err := newWindowConfig(op, in)
	if err != nil {
		return Stream{}, err
	}
	return cfg.out, nil
}

// WindowLateSchema returns what a window operator sends to its late output:
// the input rows unchanged.
func WindowLateSchema(in Stream) Stream { return in }

func newWindowConfig(op *spec.Operator, in Stream) (*windowConfig, error) {
	cfg := &windowConfig{name: op.Name, in: in}
	var errs []error
	// Every problem names the spec field it is about.
	base := fmt.Sprintf("operators[%s]", op.Name)
	addAt := func(field, format string, args ...any) {
		errs = append(errs, spec.Errorf(base+"."+field, format, args...))
	}
	add := func(format string, args ...any) {
		errs = append(errs, spec.Errorf(base+".input", format, args...))
	}
	if !in.HasTime() {
		add("the input has no event time: a window needs the source to set eventTime (the timestamp_ms column of each record)")
	} else if in.TimeColumn >= in.Schema.NumFields() {
		add("event time column %d is out of range: the input has %d columns", in.TimeColumn, in.Schema.NumFields())
	} else if t := in.Schema.Field(in.TimeColumn).Type; t.ID() != arrow.TIMESTAMP && t.ID() != arrow.INT64 {
		add("event time column %q is %v, want timestamp_ms", in.Schema.Field(in.TimeColumn).Name, t)
	}
	w := op.Window
	if w == nil {
		addAt("window", "missing: want {type: tumbling|sliding|session, ...}")
	} else {
		cfg.lateOutput = w.LateOutput
		ms := func(field string, d spec.Duration, positive bool) int64 {
			switch {
			case d < 0 || (positive && d < spec.Duration(time.Millisecond)):
				addAt("window."+field, "%s: want at least 1ms", d)
			case d%spec.Duration(time.Millisecond) != 0:
				addAt("window."+field, "%s is not a whole number of milliseconds", d)
			}
			return int64(d.D() / time.Millisecond)
		}
		switch w.Type {
		case spec.WindowTumbling:
			cfg.kind = kindTumbling
			cfg.size = ms("size", w.Size, true)
		case spec.WindowSliding:
			cfg.kind = kindSliding
			cfg.size = ms("size", w.Size, true)
			cfg.slide = ms("slide", w.Slide, true)
			if cfg.slide > cfg.size {
				addAt("window.slide", "%s is longer than size %s", w.Slide, w.Size)
			}
		case spec.WindowSession:
			cfg.kind = kindSession
			cfg.gap = ms("gap", w.Gap, true)
		default:
			addAt("window.type", "%q is not a window type: want tumbling, sliding or session", w.Type)
		}
		cfg.lateness = ms("allowedLateness", w.AllowedLateness, false)
	}

	names := map[string]string{
		"window_start": "the window_start column",
		"window_end":   "the window_end column",
	}
	if idx, err := in.Columns(base+".keyBy", op.KeyBy); err != nil {
		errs = append(errs, err)
	} else {
		cfg.keyCols = idx
		for i, c := range idx {
			name := op.KeyBy[i]
			t, err := arrowfmt.TypeOf(in.Schema.Field(c).Type)
			if err != nil {
				addAt("keyBy", "column %q: %w", name, err)
				continue
			}
			if prev, dup := names[name]; dup {
				addAt("keyBy", "%q collides with %s", name, prev)
			}
			names[name] = fmt.Sprintf("key column %q", name)
			cfg.keyTypes = append(cfg.keyTypes, t)
		}
	}
	if op.Aggregate.Len() == 0 {
		addAt("aggregate", "missing: a window needs aggregates, e.g. {requests: count(), avg_fare: avg(fare)}")
	} else if aggs, err := ParseAggregates(base+".aggregate", op.Aggregate, in.Schema); err != nil {
		errs = append(errs, err)
	} else {
		cfg.aggs = aggs
		for _, a := range aggs {
			if prev, dup := names[a.Name]; dup {
				addAt("aggregate."+a.Name, "the name collides with %s", prev)
			}
			names[a.Name] = fmt.Sprintf("aggregate %q", a.Name)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("window %s: %w", op.Name, errors.Join(errs...))
	}

	fields := []arrowfmt.Field{{Name: "window_start", Type: arrowfmt.TimestampMs}, {Name: "window_end", Type: arrowfmt.TimestampMs}}
	for i, name := range op.KeyBy {
		fields = append(fields, arrowfmt.Field{Name: name, Type: cfg.keyTypes[i]})
	}
	for _, a := range cfg.aggs {
		fields = append(fields, arrowfmt.Field{Name: a.Name, Type: a.Out})
	}
	schema, err := arrowfmt.NewSchema(fields)
	if err != nil {
		return nil, fmt.Errorf("window %s: build output schema: %w", op.Name, err)
	}
	cfg.out = Stream{Schema: schema, TimeColumn: 1, TimeOffset: -1}
	return cfg, nil
}

// NewWindow returns the keyed event-time window operator of op for input
// in. The runtime routes rows by the key groups of op.KeyBy (see
// arrowfmt.HashKeys), so each subtask sees only its keys; a row of a key
// group outside ctx.KeyGroupStart..KeyGroupEnd is an error.
//
// The operator is Flink's WindowOperator with an EventTimeTrigger
// and an incremental aggregate, applied to batches:
//
//   - A row's windows come from its event time: tumbling [k*size, +size)
//     aligned to the epoch (floor, also for negative times), sliding every
//     [k*slide, k*slide+size) that contains it, session [ts, ts+gap).
//   - A window is late once cleanupTime = end-1+allowedLateness <= the
//     watermark; a late window takes no rows. A row that no window took,
//     and whose ts+allowedLateness <= watermark, goes to the late output
//     (Counters.LateSide) or is counted in Counters.LateDropped. A row with
//     a null event time belongs to no window and is treated the same way.
//   - A window fires (emits one row) when the watermark reaches end-1. A row
//     added to a window that has already fired, within allowedLateness,
//     fires it again with the updated result (Counters.WindowsRefire). Flink
//     fires once per such row; weir fires once per input batch, at the end
//     of ProcessBatch, with the result that includes every row of the batch.
//     Counters.WindowsFired counts every firing, re-fires included.
//   - A window's state is dropped when the watermark reaches cleanupTime.
//   - Session windows merge like Flink's MergingWindowSet: windows of a key
//     that overlap or touch (TimeWindow.intersects is inclusive, so two rows
//     exactly gap apart are one session) merge into one spanning both, with
//     their accumulators merged. Merging can extend a session that already
//     fired: if the merged window's end-1 is still at or below the watermark
//     it re-fires at the end of the batch; otherwise it fires when the
//     watermark reaches its new end, as a new row with the new window_end
//     (the earlier row is not retracted) and counts as a re-fire. A row
//     whose own window [ts, ts+gap) is late but overlaps a live session
//     joins that session, as in Flink, because lateness is judged on the
//     merged window. A session whose state was dropped is forgotten: a
//     later, not yet late row that would have touched it starts a new one.
//     Since a batch's rows all go in before anything re-fires, a session
//     that gets a late row and is then extended past the watermark by
//     another row of the same batch emits only its final state, when the
//     watermark reaches its new end (Flink would also emit the
//     intermediate one).
//
// Output order is deterministic: each ProcessWatermark and each re-firing
// batch emits its windows ordered by (window_end, key, window_start), where
// keys compare by their arrowfmt key encoding.
//
// State is grouped by key group so that it can be snapshotted and moved by
// key group range: per key, its typed key values and its windows (bounds,
// accumulator slot, whether it has fired and whether it has rows not yet
// emitted). Accumulators live column-wise in one accumulators value. The
// timers (fire and cleanup times per window) are derived from the windows
// and need not be saved: restore re-registers them.
//
// The operator is a task.Stateful; window_state.go describes its state
// batches and how a delta encodes the keys that changed.
func NewWindow(op *spec.Operator, in Stream) (task.Operator, error) {
	cfg, err := newWindowConfig(op, in)
	if err != nil {
		return nil, err
	}
	return &windowOperator{cfg: cfg, wm: task.MinWatermark, state: newWindowStateLayout(cfg, op.KeyBy)}, nil
}

// window is one window of one key.
type windowState struct {
	start, end int64
	slot       int32 // accumulator slot
	// emitted: a result of this window (or of a session merged into it)
	// went downstream. pending: rows were added since the last result.
	emitted, pending bool
}

// timer is a pending fire or cleanup of window [start, end) of key, kept
// in the bucket of its time. A window whose bounds changed (session
// merge) or that is gone leaves stale timers behind; they are recognised
// by the bounds and skipped. No timer outlives its key: a key is dropped
// at the cleanup of its last window, and every timer of its windows is
// due by then.
type windowTimer struct {
	key        *windowKey
	start, end int64
}

// timerBucket is the timers of one time: fire the window, or fire it if
// due and drop its state (cleanup).
type timerBucket struct {
	fire, cleanup timerList
}

// timerList is a list of timers. The timers of one time mostly share
// their window's bounds (at a tumbling or sliding period's end every
// key's window ends, and began, together), so those are kept as the Refs
// of their keys' records beside the bounds, 4 bytes a timer where a
// windowTimer takes 24; session windows' timers with other bounds are
// kept whole. Both lists are outside the Go heap once they are large.
type timerList struct {
	start, end int64                    // the bounds of the timers in keys
	keys       offheap.Vec[offheap.Ref] // timers of window [start, end)
	other      offheap.Vec[windowTimer] // timers of other windows
}

func (l *timerList) init(a *offheap.Arena) {
	l.keys.Init(a)
	l.other.Init(a)
}

func (l *timerList) push(t windowTimer) {
	if l.Len() == 0 {
		l.start, l.end = t.start, t.end
	}
	if t.start == l.start && t.end == l.end {
		l.keys.Append(t.key.ref)
	} else {
		l.other.Append(t)
	}
}

// Len returns the number of timers.
func (l *timerList) Len() int { return l.keys.Len() + l.other.Len() }

// eachBlock calls fn with the timers of l, those kept as refs first,
// warmBlock at a time, gathered in buf; it returns buf, to use again.
// The slice fn gets is valid until fn returns.
func (l *timerList) eachBlock(keys *offheap.Slab[windowKey], buf []windowTimer, fn func([]windowTimer)) []windowTimer {
	buf = buf[:0]
	flush := func() {
		if len(buf) > 0 {
			fn(buf)
			clear(buf) // drop the key pointers
			buf = buf[:0]
		}
	}
	for _, c := range l.keys.Chunks() {
		for _, r := range c {
			buf = append(buf, windowTimer{key: keys.At(r), start: l.start, end: l.end})
			if len(buf) == warmBlock {
				flush()
			}
		}
	}
	for _, c := range l.other.Chunks() {
		for _, t := range c {
			buf = append(buf, t)
			if len(buf) == warmBlock {
				flush()
			}
		}
	}
	flush()
	return buf
}

// sortKeys sorts each chunk of the timers kept as refs by Ref, using buf,
// and returns a buffer for the next call. The keys came in no order of
// their records, which are in their key groups' lanes: at a tumbling
// period's end, firing, emitting and cleaning up every key then read the
// records of a chunk (up to a million keys) in memory order, a lane's
// block of them in a row, where the order the keys came in read each
// from another lane. (Before lanes, the records were in that order.)
func (l *timerList) sortKeys(buf []offheap.Ref) []offheap.Ref {
	for _, c := range l.keys.Chunks() {
		buf = sortRefsInPlace(c, buf)
	}
	return buf
}

func (l *timerList) reset() {
	l.keys.Reset()
	l.other.Reset()
}

func (l *timerList) release() {
	l.keys.Release()
	l.other.Release()
}

// windowTimers holds timers in buckets by time, with a min-heap of the
// times. Many windows share a time (every key's window of a tumbling
// period ends together), so registering a timer is a map lookup and an
// append, and the heap only orders distinct times.
type windowTimers struct {
	arena   *offheap.Arena
	times   timeHeap
	buckets map[int64]*timerBucket
	spare   []*timerBucket // emptied buckets, reused
}

func (q *windowTimers) push(at int64, t windowTimer, cleanup bool) {
	b, ok := q.buckets[at]
	if !ok {
		if q.buckets == nil {
			q.buckets = map[int64]*timerBucket{}
		}
		if k := len(q.spare); k > 0 {
			b, q.spare = q.spare[k-1], q.spare[:k-1]
		} else {
			b = &timerBucket{}
			b.fire.init(q.arena)
			b.cleanup.init(q.arena)
		}
		q.buckets[at] = b
		q.times.push(at)
	}
	if cleanup {
		b.cleanup.push(t)
	} else {
		b.fire.push(t)
	}
}

// popDue removes and returns the timers of the earliest time if it is at
// or before wm. The caller gives the bucket back with recycle.
func (q *windowTimers) popDue(wm int64) (*timerBucket, bool) {
	at, ok := q.times.popDue(wm)
	if !ok {
		return nil, false
	}
	b := q.buckets[at]
	delete(q.buckets, at)
	return b, true
}

func (q *windowTimers) recycle(b *timerBucket) {
	b.fire.reset()
	b.cleanup.reset()
	q.spare = append(q.spare, b)
}

// release frees every timer.
func (q *windowTimers) release() {
	for _, b := range q.buckets {
		q.recycle(b)
	}
	for _, b := range q.spare {
		b.fire.release()
		b.cleanup.release()
	}
	*q = windowTimers{}
}

// windowFiring is one window result to emit.
// It is 16 bytes: at a tumbling period's end there is one for every key,
// so the window's start and accumulator slot are read from the key's
// record (the window list does not change until the results are out)
// rather than copied here, and its end is in the firingRun it is in.
type windowFiring struct {
	// prefix is 8 bytes of the key's encoding, zero-padded, big-endian,
	// from where the keys being emitted start to differ: emit sorts by it,
	// and reads the keys only where it ties.
	prefix uint64
	ref    offheap.Ref // the key's record
	// win is the window's index in the key's windows (winsOf), or'd with
	// firedBefore if a result of it went out before (a refire).
	win uint32
}

// firingRun is n firings in a row of a list, of windows that end at end.
// A timer list's windows share their end (its time plus one, or less the
// allowed lateness for cleanups), so a list of firings holds few runs.
type firingRun struct {
	end int64
	n   int
}

const firedBefore = 1 << 31

// index returns the window's index in its key's windows.
func (f *windowFiring) index() int { return int(f.win &^ firedBefore) }

// windowOperator is the operator NewWindow returns. One goroutine drives
// it (task.Operator); it keeps no arrow memory between calls, only Go
// values, so nothing needs releasing but its two builders.
// windowIO is what a window operator (on the heap or on pebble) takes
// from its context when it opens.
type windowIO struct {
	ctx      *task.Context
	counters *task.Counters
	late     task.Output // nil without a late output
	lateOut  *array.RecordBuilder
	out      *array.RecordBuilder
	maxPar   int
	// kgStart and kgEnd bound the key groups of the subtask.
	kgStart, kgEnd int
	hashes         []uint64 // readBatch's
}

// open takes what window cfg needs from ctx.
func (io *windowIO) open(cfg *windowConfig, ctx *task.Context) error {
	if ctx.Out == nil {
		return fmt.Errorf("window %s: open: no output", cfg.name)
	}
	io.ctx = ctx
	mem := ctx.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	io.counters = ctx.Counters
	if io.counters == nil {
		io.counters = new(task.Counters)
	}
	if cfg.lateOutput != "" {
		if ctx.Side == nil {
			return fmt.Errorf("window %s: open late output %q: the runtime gave no side outputs", cfg.name, cfg.lateOutput)
		}
		io.late = ctx.Side(cfg.lateOutput) // nil: late rows are counted as dropped
		io.lateOut = array.NewRecordBuilder(mem, cfg.in.Schema)
	}
	io.maxPar = ctx.MaxParallelism
	if io.maxPar <= 0 {
		io.maxPar = arrowfmt.DefaultMaxParallelism
	}
	io.kgStart, io.kgEnd = ctx.KeyGroupStart, ctx.KeyGroupEnd
	if io.kgEnd <= io.kgStart { // not set: every key group
		io.kgStart, io.kgEnd = 0, io.maxPar
	}
	io.out = array.NewRecordBuilder(mem, cfg.out.Schema)
	return nil
}

// close releases the builders.
func (io *windowIO) close() {
	for _, rb := range []*array.RecordBuilder{io.out, io.lateOut} {
		if rb != nil {
			rb.Release()
		}
	}
	io.out, io.lateOut = nil, nil
}

// emitLate sends the rows of b listed in rows to the late output, or
// counts them as dropped.
func (io *windowIO) emitLate(name string, b arrow.RecordBatch, rows []int32) error {
	return emitLateRows(name, io.counters, io.late, io.lateOut, b, rows)
}

type windowOperator struct {
	cfg *windowConfig
	windowIO
	acc *accumulators
	// Keys (window_keys.go): groups holds the keys of each key group
	// (index: key group - kgStart), the records are in keys, and both
	// are in arena with the timers. dropped counts the keys dropped in
	// epoch snaps+1 whose records wait for the capture of that epoch to
	// free them (removeKey). The records and the accumulator slots of
	// the key groups are in lanes (laneOf), so that a capture that walks
	// a key group's records in memory order reads blocks of them.
	arena     offheap.Arena
	keys      offheap.Slab[windowKey]
	groups    []keyTable
	lanes     int
	longKeys  map[*windowKey]string
	spill     [][]windowState // the windows of keys with more than one
	spillFree []int32         // indexes of spill free
	dropped   int
	timers    windowTimers
	wm        int64

	// Checkpoints (window_state.go). state describes the state batches.
	// Once tracking (from the first snapshot or Restore of State on),
	// changed lists, per key group (index: key group - kgStart), the keys
	// whose state changed since the last snapshot began, in the order
	// they first changed, including keys dropped since (no windows left),
	// in chunks of the arena; spare holds lists a capture is done with,
	// for reuse. snaps counts
	// the snapshots begun (and restores): the changes since belong to
	// epoch snaps+1, and capture is the snapshot in flight, which began
	// at epoch snaps, or nil. rearm: state was restored and its timers
	// are not registered yet; started: input or a watermark has come.
	state    *windowStateLayout
	tracking bool
	changed  []offheap.Vec[offheap.Ref]
	spare    []offheap.Vec[offheap.Ref]
	snaps    uint32
	capture  *windowCapture
	// captureChunk is how many keys a capture step takes between looks
	// at the clock (tests set 1).
	captureChunk int
	// copyRows is how many rows of a key group's copies on write a
	// capture that encodes them gathers into a batch before it encodes
	// it (default copyBatchRows; tests set a few).
	copyRows int
	rearm    bool
	started  bool
	// ranges holds, by state column, the range of the values of the
	// keys' int64 and timestamp_ms columns and of the windows' bounds
	// the operator has held since it opened, and of every such column
	// restored (the accumulators keep the ranges of what they compute):
	// every value a capture writes is in them, and its files narrow
	// those columns to them (stateFileSchema).
	ranges []arrowfmt.Range

	// Scratch reused across batches.
	warmRefs []offheap.Ref // warm's: the records it asks for
	// baseSized: SizeRestore sized tables for the file being restored,
	// a base, whose keys are new: Restore reads nothing ahead.
	baseSized   bool
	keyBuf      []byte
	keyInts     []int64 // appendKeyColumns'
	rows        []int32 // (rows[j], slots[j]): row rows[j] goes into slot slots[j]
	slots       []int32
	lateRows    []int32
	refire      []windowTimer // windows to re-fire at the end of the batch
	fwd         map[int32]int32
	released    []int32 // slots merged away in this batch, released at its end
	fire        []windowFiring
	fireRuns    []firingRun    // the ends of fire, in runs
	merged      []windowFiring // a batch of results being gathered (firingBatch)
	mergedEnds  []int64
	fireSlot    []int32
	fireKeys    []*windowKey
	fireStarts  []arrow.Timestamp
	timerBlock  []windowTimer // cleanupAll's
	keyBuilders []array.Builder
	popped      []*timerBucket // due, their cleanups not done yet
}

var _ task.Operator = (*windowOperator)(nil)

func (w *windowOperator) Open(ctx *task.Context) error {
	if err := w.windowIO.open(w.cfg, ctx); err != nil {
		return err
	}
	start, end := w.kgStart, w.kgEnd
	w.groups = make([]keyTable, end-start)
	w.changed = w.newChangeLists()
	w.keys.Init(&w.arena)
	w.lanes = min(len(w.groups), maxLanes)
	w.keys.SetLanes(w.lanes)
	w.timers.arena = &w.arena
	w.acc = newAccumulators(w.cfg.aggs)
	w.acc.arena = &w.arena
	w.acc.setLanes(w.lanes)
	w.ranges = make([]arrowfmt.Range, len(w.state.Names))
	w.fwd = map[int32]int32{}
	return nil
}

func (w *windowOperator) Close() error {
	w.windowIO.close()
	if w.capture != nil {
		w.capture.Release()
	}
	w.timers.release()
	for i := range w.groups {
		w.groups[i].free(&w.arena)
	}
	w.keys.Release()
	w.arena.Close()
	w.groups, w.longKeys, w.spill, w.spillFree, w.dropped, w.acc = nil, nil, nil, nil, 0, nil
	w.tracking, w.changed, w.spare = false, nil, nil
	return nil
}

// satAdd is a+b for b >= 0, saturating at math.MaxInt64 (Flink's
// cleanupTime does the same).
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// windowLate reports whether a window ending at end is past its cleanup
// time: it takes no more rows.
func (w *windowOperator) windowLate(end int64) bool {
	return satAdd(end-1, w.cfg.lateness) <= w.wm
}

func (w *windowOperator) ProcessBatch(b arrow.RecordBatch) error {
	w.started = true
	if w.rearm {
		w.armRestoredTimers()
	}
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
	for i, c := range w.cfg.keyCols {
		if t := w.cfg.keyTypes[i]; t == arrowfmt.Int64 || t == arrowfmt.TimestampMs {
			w.ranges[w.state.keyCols[i]].AddColumn(b.Column(c))
		}
	}
	w.rows, w.slots, w.lateRows, w.refire = w.rows[:0], w.slots[:0], w.lateRows[:0], w.refire[:0]
	var last *windowKey
	for r := range n {
		if r%warmRows == 0 {
			w.warm(w.hashes[r:min(r+warmRows, n)])
		}
		if timeNulls && tcol.IsNull(r) {
			w.lateRows = append(w.lateRows, int32(r))
			continue
		}
		ts := times[r] + offset

		kg := arrowfmt.KeyGroup(w.hashes[r], w.maxPar)
		g := kg - w.kgStart
		w.keyBuf = arrowfmt.AppendRowKey(w.keyBuf[:0], b, w.cfg.keyCols, r)
		ks := last
		if ks == nil || ks.tag != tagOf(w.hashes[r]) || w.keyOf(ks) != string(w.keyBuf) {
			if ks = w.lookup(g, w.hashes[r]); ks != nil {
				w.touch(ks)
			} else {
				ks = w.newKey(kg, w.hashes[r], true)
			}
			last = ks
		}

		var taken bool
		switch w.cfg.kind {
		case kindTumbling:
			start := ts - floorMod(ts, w.cfg.size)
			taken = w.addToWindow(ks, int32(r), start, start+w.cfg.size)
		case kindSliding:
			for start := ts - floorMod(ts, w.cfg.slide); start > ts-w.cfg.size; start -= w.cfg.slide {
				if w.addToWindow(ks, int32(r), start, start+w.cfg.size) {
					taken = true
				}
			}
		case kindSession:
			taken = w.addToSession(ks, int32(r), ts)
		}
		if !taken && satAdd(ts, w.cfg.lateness) <= w.wm {
			w.lateRows = append(w.lateRows, int32(r))
		}
		if ks.nwin == 0 { // a new key whose only row was late
			w.removeKey(ks)
			last = nil
		}
	}

	forwardSlots(w.slots, w.fwd)
	w.acc.update(b, w.rows, w.slots)
	for _, s := range w.released {
		w.acc.release(s)
	}
	w.released = w.released[:0]

	if len(w.refire) > 0 {
		w.fire, w.fireRuns = w.fire[:0], w.fireRuns[:0]
		for _, t := range w.refire {
			if i, ok := w.find(t.key, t.start, t.end); ok && w.winsOf(t.key)[i].pending {
				w.fire = w.takeFiring(w.fire, t.key, i)
			}
		}
		if err := w.emit(w.fire, w.fireRuns); err != nil {
			return err
		}
	}
	return w.emitLate(w.cfg.name, b, w.lateRows)
}

// readBatch checks that b is an input batch of window cfg whose keys are
// of the subtask's key groups, and returns its event time column and the
// column's values (before TimeOffset). io.hashes has the keys' hashes.
func (io *windowIO) readBatch(cfg *windowConfig, b arrow.RecordBatch) (arrow.Array, []int64, error) {
	tcol, times, err := cfg.eventTimes(b)
	if err != nil {
		return nil, nil, err
	}
	io.hashes = arrowfmt.HashKeys(b, cfg.keyCols, io.hashes)
	if err := cfg.checkRouting(io.hashes, io.maxPar, io.kgStart, io.kgEnd); err != nil {
		return nil, nil, err
	}
	return tcol, times, nil
}

// eventTimes checks that b has the input's columns and returns its event
// time column and the column's values (before TimeOffset).
func (cfg *windowConfig) eventTimes(b arrow.RecordBatch) (arrow.Array, []int64, error) {
	if int(b.NumCols()) != cfg.in.Schema.NumFields() {
		return nil, nil, fmt.Errorf("window %s: process batch: %d columns, want %d (%s)", cfg.name, b.NumCols(), cfg.in.Schema.NumFields(), columnList(cfg.in.Schema))
	}
	tcol := b.Column(cfg.in.TimeColumn)
	switch a := tcol.(type) {
	case *array.Timestamp:
		return tcol, timestampInt64s(a.TimestampValues()), nil
	case *array.Int64:
		return tcol, a.Int64Values(), nil
	}
	return nil, nil, fmt.Errorf("window %s: process batch: event time column is %v, want timestamp_ms", cfg.name, tcol.DataType())
}

// checkRouting returns an error if a row's key hash (hashes) is of a key
// group outside [kgStart, kgEnd) of maxPar: it is checked before any
// state changes.
func (cfg *windowConfig) checkRouting(hashes []uint64, maxPar, kgStart, kgEnd int) error {
	if kgStart == 0 && kgEnd >= maxPar {
		return nil
	}
	for r, h := range hashes {
		if kg := arrowfmt.KeyGroup(h, maxPar); kg < kgStart || kg >= kgEnd {
			return fmt.Errorf("window %s: process batch: row %d has key group %d, outside this subtask's key groups [%d, %d): the input is not partitioned by the keyBy columns",
				cfg.name, r, kg, kgStart, kgEnd)
		}
	}
	return nil
}

// forwardSlots points each of slots that a session merged into another in
// this batch (fwd, from merged to survivor) at the survivor, and empties
// fwd.
func forwardSlots(slots []int32, fwd map[int32]int32) {
	if len(fwd) == 0 {
		return
	}
	for j, s := range slots {
		for {
			t, ok := fwd[s]
			if !ok {
				break
			}
			s = t
		}
		slots[j] = s
	}
	clear(fwd)
}

// commonPrefix returns how many bytes a and b share at their start.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// keyPrefix returns the 8 bytes of key from from on, zero-padded, as a
// big-endian number.
func keyPrefix(key string, from int) uint64 {
	var b [8]byte
	if from < len(key) {
		copy(b[:], key[from:])
	}
	return binary.BigEndian.Uint64(b[:])
}

// warmRows is how many rows warm reads ahead of the lookups: their table
// slots and records, 128 bytes a row, stay in the core's caches.
const warmRows = 128

// warm asks for (offheap.Prefetch) the table slot where the lookup of
// each of hashes starts, and then for the record of the first slot on
// from it whose tag matches: where the lookup will find its key. At
// millions of keys each is a load from memory, and a lookup waits for its
// two in turn. Loads here, as warm made before, overlapped only as far as
// the core's reorder buffer reached past the oldest waiting one: a
// prefetch waits for nothing, so all of a block's are in flight at once,
// the slots' first and then the records' (docs/benchmarks.md: 5M keys,
// +20% events per CPU-second).
//
// While a capture is in flight, it then reads the records (they come
// together, so the block waits about once) and asks for the accumulator
// slot of each key the capture has not taken yet: the key's first change
// copies it (touch), slot and all, and that read waited alone.
func (w *windowOperator) warm(hashes []uint64) {
	prefetchHomes(w.groups, hashes, w.maxPar, w.kgStart)
	w.warmRefs = probeTags(w.groups, hashes, w.maxPar, w.kgStart, w.warmRefs[:0])
	for _, r := range w.warmRefs {
		offheap.Prefetch(unsafe.Pointer(w.keys.At(r)))
	}
	if c := w.capture; c != nil {
		for _, r := range w.warmRefs {
			if ks := w.keys.At(r); ks.captured != c.seq && ks.nwin == 1 {
				w.acc.prefetchSlot(ks.win[0].slot)
			}
		}
	}
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// newKey adds the state of the key whose encoding w.keyBuf holds. A
// tracked key is a change: a new key is in the next delta. Restored keys
// are not tracked.
func (w *windowOperator) newKey(kg int, hash uint64, tracked bool) *windowKey {
	r, ks := w.keys.NewIn(w.laneOf(kg - w.kgStart))
	ks.tag, ks.ref, ks.group, ks.captured = tagOf(hash), r, uint16(kg), w.snaps
	w.setKey(ks, w.keyBuf)
	w.groups[kg-w.kgStart].insert(&w.arena, makeSlot(ks.tag, ks.ref))
	if tracked && w.tracking {
		ks.changed, ks.fresh = w.snaps+1, true
		w.changed[kg-w.kgStart].Append(r)
	}
	return ks
}

// maxLanes bounds the lanes of a window's records and slots: a lane
// holds a block of each that it has begun (1 KiB each). With more key
// groups than that, neighbouring groups share a lane.
const maxLanes = 1024

// keyLane returns the lane of the record and slots of ks.
func (w *windowOperator) keyLane(ks *windowKey) int { return w.laneOf(int(ks.group) - w.kgStart) }

// laneOf returns the lane of the records and slots of key group
// kgStart+g.
func (w *windowOperator) laneOf(g int) int {
	if w.lanes == len(w.groups) {
		return g
	}
	return g * w.lanes / len(w.groups)
}

// markDirty records that the state of ks changed, for the next delta.
func (w *windowOperator) markDirty(ks *windowKey) {
	if w.tracking && ks.changed != w.snaps+1 {
		ks.changed, ks.fresh = w.snaps+1, false
		w.changed[int(ks.group)-w.kgStart].Append(ks.ref)
	}
}

// touch is called before the state of ks changes: a capture in flight
// that still needs the key copies it first (see windowCapture).
func (w *windowOperator) touch(ks *windowKey) {
	if c := w.capture; c != nil && ks.captured != c.seq {
		c.copyKey(ks)
	}
}

// removeKey drops the state of ks, which has no windows left. Its record
// is freed at once unless the change list of this epoch holds it (every
// key dropped while changes are listed does, but a restored key that a
// later restore batch clears): the next snapshot's delta writes a clear
// row for it, and the capture that takes the list frees it (see
// windowCapture). The record of a dropped key is told by its nwin of 0
// and its changed of the epoch it was dropped in, which no other record
// has: a live key has windows, and a freed record is zero.
func (w *windowOperator) removeKey(ks *windowKey) {
	w.groups[int(ks.group)-w.kgStart].remove(makeSlot(ks.tag, ks.ref))
	if w.tracking && ks.changed == w.snaps+1 {
		w.dropped++
	} else {
		w.freeKey(ks)
	}
}

// eachKey calls fn with every key.
func (w *windowOperator) eachKey(fn func(*windowKey)) {
	for g := range w.groups {
		for _, s := range w.groups[g].slots {
			if s != 0 {
				fn(w.keys.At(s.ref()))
			}
		}
	}
}

// find returns the index of window [start, end) of ks.
func (w *windowOperator) find(ks *windowKey, start, end int64) (int, bool) {
	wins := w.winsOf(ks)
	i, ok := searchWins(wins, start)
	return i, ok && wins[i].end == end
}

// searchWins returns the index of the first window of wins starting at
// or after start, and whether it starts at start.
func searchWins(wins []windowState, start int64) (int, bool) {
	n := len(wins)
	// Most rows go to the newest window.
	if n == 0 || wins[n-1].start < start {
		return n, false
	}
	if wins[n-1].start == start {
		return n - 1, true
	}
	lo, hi := 0, n-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if wins[m].start < start {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, wins[lo].start == start
}

// addToWindow adds row r to the (tumbling or sliding) window [start, end)
// of ks, creating it if needed. It returns false if the window is late.
func (w *windowOperator) addToWindow(ks *windowKey, r int32, start, end int64) bool {
	i, ok := searchWins(w.winsOf(ks), start)
	if !ok {
		if w.windowLate(end) {
			return false
		}
		w.setWins(ks, slices.Insert(w.winsOf(ks), i, windowState{start: start, end: end, slot: w.acc.allocIn(w.keyLane(ks))}))
		w.noteWindow(start, end)
		w.addTimers(ks, start, end)
	}
	w.addRow(ks, i, r, false)
	return true
}

// addToSession adds row r with event time ts to the sessions of ks,
// merging as Flink's MergingWindowSet does. It returns false if the row's
// session is late.
func (w *windowOperator) addToSession(ks *windowKey, r int32, ts int64) bool {
	start, end := ts, satAdd(ts, w.cfg.gap)
	wins := w.winsOf(ks)
	// Windows [s, e) that intersect [start, end), bounds included: e >=
	// start and s <= end. They are contiguous from the first with e >= start.
	lo, hi := 0, len(wins)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if wins[m].end < start {
			lo = m + 1
		} else {
			hi = m
		}
	}
	i, j := lo, lo
	for j < len(wins) && wins[j].start <= end {
		j++
	}
	merged := false
	switch {
	case i == j: // a new session
		if w.windowLate(end) {
			return false
		}
		w.setWins(ks, slices.Insert(wins, i, windowState{start: start, end: end, slot: w.acc.allocIn(w.keyLane(ks))}))
		w.noteWindow(start, end)
		w.addTimers(ks, start, end)
	case j == i+1 && wins[i].start <= start && end <= wins[i].end:
		// Inside an existing session.
	default:
		// The new window bridges or extends sessions i..j-1. The first
		// survives with the merged bounds and accumulators. It cannot be
		// late: it ends no earlier than a live session.
		t := &wins[i]
		t.start, t.end = min(t.start, start), max(wins[j-1].end, end)
		w.noteWindow(t.start, t.end)
		for k := i + 1; k < j; k++ {
			m := &wins[k]
			w.acc.merge(t.slot, m.slot)
			w.fwd[m.slot] = t.slot
			w.released = append(w.released, m.slot)
			t.emitted = t.emitted || m.emitted
			t.pending = t.pending || m.pending
		}
		wins = slices.Delete(wins, i+1, j)
		w.setWins(ks, wins)
		w.addTimers(ks, wins[i].start, wins[i].end)
		merged = true
	}
	w.addRow(ks, i, r, merged)
	return true
}

// noteWindow widens the ranges of the state's window columns to a
// window [start, end) a key now has.
func (w *windowOperator) noteWindow(start, end int64) {
	w.ranges[w.state.kind+1].Add(start, start)
	w.ranges[w.state.kind+2].Add(end, end)
}

// addRow queues row r for window i of ks. A window that is already due
// (its end-1 at or below the watermark) fires again at the end of the
// batch; force queues it even if it had pending rows (its bounds changed,
// so an earlier queue entry no longer finds it).
func (w *windowOperator) addRow(ks *windowKey, i int, r int32, force bool) {
	win := &w.winsOf(ks)[i]
	w.markDirty(ks)
	w.rows = append(w.rows, r)
	w.slots = append(w.slots, win.slot)
	if (!win.pending || force) && win.end-1 <= w.wm {
		w.refire = append(w.refire, windowTimer{key: ks, start: win.start, end: win.end})
	}
	win.pending = true
}

// addTimers registers the fire and cleanup timers of window [start, end)
// of ks. A window already due needs no fire timer: addRow queues it.
func (w *windowOperator) addTimers(ks *windowKey, start, end int64) {
	fireAt, cleanAt := end-1, satAdd(end-1, w.cfg.lateness)
	if fireAt > w.wm && fireAt != cleanAt {
		w.timers.push(fireAt, windowTimer{key: ks, start: start, end: end}, false)
	}
	w.timers.push(cleanAt, windowTimer{key: ks, start: start, end: end}, true)
}

// takeFiring appends window i of ks to fs, and its end to w.fireRuns, and
// marks it emitted.
func (w *windowOperator) takeFiring(fs []windowFiring, ks *windowKey, i int) []windowFiring {
	win := &w.winsOf(ks)[i]
	f := windowFiring{ref: ks.ref, win: uint32(i)}
	if win.emitted {
		f.win |= firedBefore
	}
	fs = append(fs, f)
	if k := len(w.fireRuns) - 1; k >= 0 && w.fireRuns[k].end == win.end {
		w.fireRuns[k].n++
	} else {
		w.fireRuns = append(w.fireRuns, firingRun{end: win.end, n: 1})
	}
	win.pending, win.emitted = false, true
	w.markDirty(ks)
	return fs
}

// ProcessWatermark fires every window whose end-1 is at or below wm, in
// order of (window_end, key), then drops the windows whose cleanup time
// has come.
func (w *windowOperator) ProcessWatermark(wm int64) error {
	w.started = true
	if w.rearm {
		w.armRestoredTimers()
	}
	if wm <= w.wm {
		return nil
	}
	w.wm = wm
	n := 0 // at most this many windows fire
	for {
		due, ok := w.timers.popDue(wm)
		if !ok {
			break
		}
		w.popped = append(w.popped, due)
		n += due.fire.Len() + due.cleanup.Len()
	}
	// A list of many firings (a tumbling period's end: every key's) is
	// made outside the heap, at its full size at once (each timer fires
	// a window at most once), and freed after.
	w.fire, w.fireRuns = w.fire[:0], w.fireRuns[:0]
	if n > cap(w.fire) && n*int(unsafe.Sizeof(windowFiring{})) >= offheap.MinMapped {
		heap := w.fire
		w.fire = offheap.Make[windowFiring](&w.arena, n)[:0]
		defer func() {
			offheap.Free(&w.arena, w.fire)
			w.fire = heap
		}()
	}
	var buf []offheap.Ref
	for _, due := range w.popped {
		buf = due.fire.sortKeys(buf)
		buf = due.cleanup.sortKeys(buf)
		w.fireAll(&due.fire)
		w.fireAll(&due.cleanup)
	}
	err := w.emit(w.fire, w.fireRuns)
	for _, due := range w.popped {
		if err == nil {
			w.cleanupAll(&due.cleanup)
		}
		w.timers.recycle(due)
	}
	clear(w.popped)
	w.popped = w.popped[:0]
	return err
}

// fireAll queues the windows of the timers of l that have rows pending
// (fireDue), a block at a time, the block's records asked for first: at
// a tumbling period's end l holds every key, in the order the keys came,
// and their records are in their key groups' lanes, so the loads of
// consecutive timers are from as many places.
func (w *windowOperator) fireAll(l *timerList) {
	w.timerBlock = l.eachBlock(&w.keys, w.timerBlock, func(ts []windowTimer) {
		for _, t := range ts {
			offheap.Prefetch(unsafe.Pointer(t.key))
		}
		for _, t := range ts {
			w.fireDue(t)
		}
	})
}

// fireDue queues the window of timer t if it has rows pending.
func (w *windowOperator) fireDue(t windowTimer) {
	i, ok := w.find(t.key, t.start, t.end)
	if !ok {
		return // stale: merged into another session, or gone
	}
	if w.winsOf(t.key)[i].pending {
		w.touch(t.key)
		w.fire = w.takeFiring(w.fire, t.key, i)
	}
}

// warmBlock is how many keys' records or table slots a loop asks for
// (offheap.Prefetch) before it uses them (see emitBatch and cleanupAll).
const warmBlock = 128

// cleanupAll drops the windows of the timers of l (cleanup). At a
// tumbling period's end that drops every key, in the order the keys
// came, which is no order of their tables: for each block of timers, the
// records are asked for first (offheap.Prefetch), then the home slots of
// the keys about to lose their last window, so that the loads overlap
// where each removal waited for its own.
func (w *windowOperator) cleanupAll(l *timerList) {
	w.timerBlock = l.eachBlock(&w.keys, w.timerBlock, func(ts []windowTimer) {
		for _, t := range ts {
			offheap.Prefetch(unsafe.Pointer(t.key))
		}
		for _, t := range ts {
			ks := t.key
			if ks.nwin == 1 {
				g := &w.groups[int(ks.group)-w.kgStart]
				offheap.Prefetch(unsafe.Pointer(&g.slots[g.home(ks.tag)]))
			}
		}
		for _, t := range ts {
			w.cleanup(t)
		}
	})
}

// cleanup drops the window of timer t, and its key if it has no windows
// left.
func (w *windowOperator) cleanup(t windowTimer) {
	ks := t.key
	i, ok := w.find(ks, t.start, t.end)
	if !ok {
		return
	}
	w.touch(ks)
	wins := w.winsOf(ks)
	w.acc.release(wins[i].slot)
	w.setWins(ks, slices.Delete(wins, i, i+1))
	w.markDirty(ks)
	if ks.nwin == 0 {
		w.removeKey(ks)
	}
}

// Finish fires what is left. The runtime has already called
// ProcessWatermark(MaxWatermark), so usually nothing is.
func (w *windowOperator) Finish() error {
	return w.ProcessWatermark(task.MaxWatermark)
}

// emit sorts fs, whose windows' ends are in runs, by end, key and start,
// and sends their results downstream in as few batches as
// windowBatchRows allows.
func (w *windowOperator) emit(fs []windowFiring, runs []firingRun) error {
	if len(fs) == 0 {
		return nil
	}
	// Keys compare by 8 bytes of theirs past the bytes every key here
	// shares (an int64 key's tag and high zero bytes, say), read once per
	// firing before the sort, so a comparison reads keys only where those
	// tie: at millions of keys, reading two keys a comparison was most of
	// the sort.
	// Both passes read the records in the order of the firings, which is
	// that of their timers: Refs sorted a chunk of timers at a time
	// (timerList.sortKeys), and not at all across chunks, lists and
	// windows. They ask for the records a block ahead.
	w.prefetchBlock(fs, 0)
	first := w.keyOf(w.keys.At(fs[0].ref))
	common := len(first)
	for i := range fs {
		if i%warmBlock == 0 {
			w.prefetchBlock(fs, i+warmBlock)
		}
		common = commonPrefix(first[:common], w.keyOf(w.keys.At(fs[i].ref)))
	}
	w.prefetchBlock(fs, 0)
	for i := range fs {
		if i%warmBlock == 0 {
			w.prefetchBlock(fs, i+warmBlock)
		}
		fs[i].prefix = keyPrefix(w.keyOf(w.keys.At(fs[i].ref)), common)
	}
	tie := func(a, b windowFiring) int {
		if a.ref != b.ref {
			// Equal in those 8 bytes, zero-padded: a key that ends in
			// them is before a longer one, and two longer keys compare
			// by the rest.
			ka, kb := w.keyOf(w.keys.At(a.ref)), w.keyOf(w.keys.At(b.ref))
			if end := common + 8; len(ka) > end && len(kb) > end {
				return strings.Compare(ka[end:], kb[end:])
			}
			if c := cmp.Compare(len(ka), len(kb)); c != 0 {
				return c
			}
		}
		// One key's windows are in order of start.
		return cmp.Compare(a.index(), b.index())
	}
	// Each run is sorted by key where it lies; the runs of one end are
	// then merged as they go out, in order of end.
	parts := make([]firingPart, 0, len(runs))
	at := 0
	for _, r := range runs {
		sortFirings(fs[at:at+r.n], tie)
		parts = append(parts, firingPart{end: r.end, fs: fs[at : at+r.n]})
		at += r.n
	}
	slices.SortStableFunc(parts, func(a, b firingPart) int { return cmp.Compare(a.end, b.end) })
	out := firingBatch{w: w, fs: w.merged[:0], ends: w.mergedEnds[:0]}
	for i := 0; i < len(parts); {
		j := i + 1
		for j < len(parts) && parts[j].end == parts[i].end {
			j++
		}
		if err := out.merge(parts[i:j], tie); err != nil {
			return err
		}
		i = j
	}
	err := out.flush()
	w.merged, w.mergedEnds = out.fs[:0], out.ends[:0]
	return err
}

// firingPart is a run of firings, sorted by key, of windows that end at
// end.
type firingPart struct {
	end int64
	fs  []windowFiring
}

// firingBatch gathers firings and their ends into batches of at most
// windowBatchRows results, which go out as they fill.
type firingBatch struct {
	w    *windowOperator
	fs   []windowFiring
	ends []int64
}

func (b *firingBatch) add(f windowFiring, end int64) error {
	b.fs, b.ends = append(b.fs, f), append(b.ends, end)
	if len(b.fs) < windowBatchRows {
		return nil
	}
	return b.flush()
}

func (b *firingBatch) flush() error {
	if len(b.fs) == 0 {
		return nil
	}
	err := b.w.emitBatch(b.fs, b.ends)
	b.fs, b.ends = b.fs[:0], b.ends[:0]
	return err
}

// merge adds the firings of parts, which share their end, merged in order
// of key and start.
func (b *firingBatch) merge(parts []firingPart, tie func(a, b windowFiring) int) error {
	end := parts[0].end
	if len(parts) == 1 {
		for _, f := range parts[0].fs {
			if err := b.add(f, end); err != nil {
				return err
			}
		}
		return nil
	}
	// A heap of the parts by their first firing: re-fires at the end of
	// a batch come in the order of its rows, which may make a part of
	// every firing.
	h := slices.Clone(parts) // taken from as they merge
	less := func(i, j int) bool { return compareFirings(h[i].fs[0], h[j].fs[0], tie) < 0 }
	down := func(i int) {
		for {
			c := 2*i + 1
			if c >= len(h) {
				return
			}
			if c+1 < len(h) && less(c+1, c) {
				c++
			}
			if !less(c, i) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	for len(h) > 0 {
		if err := b.add(h[0].fs[0], end); err != nil {
			return err
		}
		if h[0].fs = h[0].fs[1:]; len(h[0].fs) == 0 {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		down(0)
	}
	return nil
}

// compareFirings orders two firings of windows with the same end: by
// prefix, then tie.
func compareFirings(a, b windowFiring, tie func(a, b windowFiring) int) int {
	if a.prefix != b.prefix {
		return cmp.Compare(a.prefix, b.prefix)
	}
	return tie(a, b)
}

// sortFirings sorts fs by prefix, then tie: a radix sort on the 8 bytes
// of prefix, most significant first and in place (American flag sort),
// that hands the runs where they tie, and parts too short to be worth a
// pass, to a comparison sort. At a tumbling period's end, millions of
// firings differ in a few bytes of prefix: a few passes over them, where
// a comparison sort made dozens.
func sortFirings(fs []windowFiring, tie func(a, b windowFiring) int) {
	radixFirings(fs, 0, tie)
}

// radixMin is the shortest part of the firings sortFirings sorts by
// radix; shorter ones it compares.
const radixMin = 32

// firingDigit returns byte d of the firing's prefix, big-endian.
func firingDigit(f *windowFiring, d int) uint8 {
	return uint8(f.prefix >> (56 - 8*d))
}

// radixFirings sorts fs, whose sort keys share their first d bytes.
func radixFirings(fs []windowFiring, d int, tie func(a, b windowFiring) int) {
	if len(fs) < 2 {
		return
	}
	// Skip the bytes every firing shares: the bytes of prefix the keys'
	// range leaves zero.
	var prefixDiff uint64
	for i := range fs {
		prefixDiff |= fs[i].prefix ^ fs[0].prefix
	}
	if prefixDiff != 0 {
		d = max(d, bits.LeadingZeros64(prefixDiff)/8)
	} else {
		d = 8
	}
	if d == 8 || len(fs) < radixMin {
		firingsByCompare(fs, tie)
		return
	}
	var count, next [256]int
	for i := range fs {
		count[firingDigit(&fs[i], d)]++
	}
	sum := 0
	for b, c := range count {
		next[b] = sum
		sum += c
	}
	// Each swap puts a firing in its bucket, where it stays.
	start := 0
	for b, c := range count {
		end := start + c
		for i := next[b]; i < end; i = next[b] {
			x := firingDigit(&fs[i], d)
			if int(x) == b {
				next[b]++
				continue
			}
			j := next[x]
			next[x]++
			fs[i], fs[j] = fs[j], fs[i]
		}
		start = end
	}
	start = 0
	for _, c := range count {
		if c > 1 {
			radixFirings(fs[start:start+c], d+1, tie)
		}
		start += c
	}
}

// firingsByCompare sorts fs by prefix and tie: by insertion if it is
// short, which is most of the parts a radix sort leaves.
func firingsByCompare(fs []windowFiring, tie func(a, b windowFiring) int) {
	compare := func(a, b *windowFiring) int { return compareFirings(*a, *b, tie) }
	if len(fs) > radixMin {
		slices.SortFunc(fs, func(a, b windowFiring) int { return compare(&a, &b) })
		return
	}
	for i := 1; i < len(fs); i++ {
		x := fs[i]
		j := i
		for ; j > 0 && compare(&x, &fs[j-1]) < 0; j-- {
			fs[j] = fs[j-1]
		}
		fs[j] = x
	}
}

// prefetchBlock asks for the records of the block of warmBlock firings
// of fs that begins at i (fewer at the end, none past it).
func (w *windowOperator) prefetchBlock(fs []windowFiring, i int) {
	for _, f := range fs[min(i, len(fs)):min(i+warmBlock, len(fs))] {
		offheap.Prefetch(unsafe.Pointer(w.keys.At(f.ref)))
	}
}

// emitBatch sends the results of fs, windows that end at ends.
func (w *windowOperator) emitBatch(fs []windowFiring, ends []int64) error {
	rb := w.out
	rb.Reserve(len(fs))
	starts := rb.Field(0).(*array.TimestampBuilder)
	endCol := rb.Field(1).(*array.TimestampBuilder)
	w.fireSlot, w.fireStarts = w.fireSlot[:0], w.fireStarts[:0]
	w.keyBuilders = w.keyBuilders[:0]
	for c := range w.cfg.keyCols {
		w.keyBuilders = append(w.keyBuilders, rb.Field(2+c))
	}
	refires := 0
	// The firings are in key order, their records in no order of keys:
	// the next block's records are asked for (prefetch) before a
	// block is gathered, so that they come while it is, and the columns
	// are gathered and appended at once (an Append per value left room
	// for few loads at a time), the keys' while their records are still
	// in the cache. A block's accumulator slots are asked for once it is
	// gathered, and its results appended after the next block's: a
	// batch's slots, up to windowBatchRows lines, would not all stay in
	// the cache until the end.
	base := 2 + len(w.cfg.keyCols)
	results := func(slots []int32) {
		for i := range w.cfg.aggs {
			w.acc.appendResults(i, rb.Field(base+i), slots)
		}
	}
	w.prefetchBlock(fs, 0)
	done := 0 // the firings whose results are appended
	for lo := 0; lo < len(fs); lo += warmBlock {
		block := fs[lo:min(lo+warmBlock, len(fs))]
		w.prefetchBlock(fs, lo+warmBlock)
		w.fireKeys = w.fireKeys[:0]
		for _, f := range block {
			ks := w.keys.At(f.ref)
			win := &w.winsOf(ks)[f.index()]
			w.fireStarts = append(w.fireStarts, arrow.Timestamp(win.start))
			w.fireSlot = append(w.fireSlot, win.slot)
			w.fireKeys = append(w.fireKeys, ks)
			if f.win&firedBefore != 0 {
				refires++
			}
		}
		w.acc.prefetch(w.fireSlot[lo:])
		w.appendKeyColumns(w.keyBuilders, w.fireKeys)
		results(w.fireSlot[done:lo])
		done = lo
	}
	results(w.fireSlot[done:])
	clear(w.fireKeys) // drop the key pointers
	starts.AppendValues(w.fireStarts, nil)
	for _, e := range ends {
		endCol.UnsafeAppend(arrow.Timestamp(e)) // room reserved above
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

// appendKeyColumns appends the key values of every key of keys to the
// key column builders bs, decoded from the keys' encodings. A key of one
// int64 column (a keyed count's, say) is decoded for every key first and
// appended at once, unless one is null.
func (w *windowOperator) appendKeyColumns(bs []array.Builder, keys []*windowKey) {
	if b, ok := oneInt64Builder(bs); ok && w.cfg.keyTypes[0] == arrowfmt.Int64 {
		vals := w.keyInts[:0]
		for _, ks := range keys {
			v, ok := arrowfmt.Int64Key(w.keyOf(ks))
			if !ok {
				break
			}
			vals = append(vals, v)
		}
		w.keyInts = vals[:0]
		if len(vals) == len(keys) {
			b.AppendValues(vals, nil)
			return
		}
	}
	for _, ks := range keys {
		if err := arrowfmt.AppendKeyValues(bs, w.keyOf(ks), w.cfg.keyTypes); err != nil {
			panic(fmt.Sprintf("window %s: a key the operator encoded does not decode: %v", w.cfg.name, err))
		}
	}
}

// oneInt64Builder returns the builder of bs if it is one, of int64s. A
// window without keyBy has none.
func oneInt64Builder(bs []array.Builder) (*array.Int64Builder, bool) {
	if len(bs) != 1 {
		return nil, false
	}
	b, ok := bs[0].(*array.Int64Builder)
	return b, ok
}

// emitLateRows sends rows of b to late, built with rb if they are not all
// of b, or counts them as dropped if late is nil: what window name does
// with its late rows.
func emitLateRows(name string, counters *task.Counters, late task.Output, rb *array.RecordBuilder, b arrow.RecordBatch, rows []int32) error {
	n := len(rows)
	if n == 0 {
		return nil
	}
	if late == nil {
		counters.LateDropped.Add(int64(n))
		return nil
	}
	counters.LateSide.Add(int64(n))
	if n == int(b.NumRows()) {
		if err := late.Emit(b); err != nil {
			return fmt.Errorf("window %s: emit late rows: %w", name, err)
		}
		return nil
	}
	rec := takeRows(rb, b, rows)
	defer rec.Release()
	if err := late.Emit(rec); err != nil {
		return fmt.Errorf("window %s: emit late rows: %w", name, err)
	}
	return nil
}

// takeRows returns the rows of rec at rows, built with rb (whose schema is
// rec's).
func takeRows(rb *array.RecordBuilder, rec arrow.RecordBatch, rows []int32) arrow.RecordBatch {
	rb.Reserve(len(rows))
	for c, col := range rec.Columns() {
		switch b := rb.Field(c).(type) {
		case *array.Int64Builder:
			a := col.(*array.Int64)
			for _, r := range rows {
				if a.IsNull(int(r)) {
					b.AppendNull()
				} else {
					b.Append(a.Value(int(r)))
				}
			}
		case *array.TimestampBuilder:
			a := col.(*array.Timestamp)
			for _, r := range rows {
				if a.IsNull(int(r)) {
					b.AppendNull()
				} else {
					b.Append(a.Value(int(r)))
				}
			}
		case *array.Float64Builder:
			a := col.(*array.Float64)
			for _, r := range rows {
				if a.IsNull(int(r)) {
					b.AppendNull()
				} else {
					b.Append(a.Value(int(r)))
				}
			}
		case *array.BooleanBuilder:
			a := col.(*array.Boolean)
			for _, r := range rows {
				if a.IsNull(int(r)) {
					b.AppendNull()
				} else {
					b.Append(a.Value(int(r)))
				}
			}
		case *array.StringBuilder:
			a := col.(*array.String)
			for _, r := range rows {
				if a.IsNull(int(r)) {
					b.AppendNull()
				} else {
					b.Append(a.Value(int(r)))
				}
			}
		default:
			panic(fmt.Sprintf("builtin: take rows of a %v column", col.DataType()))
		}
	}
	return rb.NewRecordBatch()
}
