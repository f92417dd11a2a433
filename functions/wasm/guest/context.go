package guest

import "fmt"

// Context is what ProcessElement and OnTimer are given: the current key,
// event time, watermark and timers. It is valid only during the call.
type Context struct {
	r      *runtime
	h      int32 // key handle, -1 outside rows and timers
	ts     int64
	hasTs  bool
	keyOK  bool
	key    []any
	timers Timers
}

func (c *Context) atRow(b *batch, i int) {
	c.h, c.keyOK, c.ts, c.hasTs = int32(i), false, 0, false
	if tc := c.r.timeCol; tc >= 0 {
		if col := &b.data[tc]; !col.isNull(i) {
			c.ts, c.hasTs = int64(le.Uint64(col.vals[8*i:]))+c.r.timeOffset, true
		}
	}
}

func (c *Context) atTimer(i int, t Timer) {
	c.h, c.keyOK = int32(i), false
	c.ts, c.hasTs = t.Timestamp, t.Domain == EventTime
}

// Key returns the values of the current key, one per keyBy column: int64,
// float64, string, bool, time.Time (timestamp_ms) or nil (null). The slice
// is shared and valid during the call: read it, do not change it.
func (c *Context) Key() []any {
	h := c.r.handle("Key")
	if c.keyOK {
		return c.key
	}
	if c.r.keyErr != nil {
		panic(fmt.Sprintf("guest: decode current key: %v", c.r.keyErr))
	}
	r := c.r
	b, _ := readInto(&r.obuf, func(out []byte) int32 { return r.h.key(h, out) })
	key, err := decodeKey(c.key[:0], b, r.keyTypes)
	if err != nil {
		panic(fmt.Sprintf("guest: decode current key: %v", err))
	}
	c.key, c.keyOK = key, true
	return key
}

// Timestamp returns the event time of the current row (its time column
// plus the stream's offset) or of the event-time timer firing. It is false
// when the input has no event time, the row's time is null, or a
// processing-time timer is firing.
func (c *Context) Timestamp() (int64, bool) { return c.ts, c.hasTs }

// Watermark returns the current event time: MinWatermark before the first
// watermark, MaxWatermark at the end of a bounded input.
func (c *Context) Watermark() int64 { return c.r.watermark() }

// Timers returns the timers of the current key.
func (c *Context) Timers() *Timers { return &c.timers }

// Log writes msg to the worker's log.
func (c *Context) Log(level Level, msg string) { c.r.h.log(level, msg) }

// Timers registers and deletes timers of the current key. A timer is set at
// most once per (key, domain, timestamp): registering it again does
// nothing. An event-time timer at or before the watermark fires with the
// next watermark.
type Timers struct{ r *runtime }

func (t *Timers) set(d TimeDomain, ts int64) {
	h := t.r.handle("Timers")
	if t.r.onTimer == nil {
		panic("guest: the function registers a timer but has no OnTimer method")
	}
	t.r.h.timerRegister(h, d, ts)
}

// RegisterEventTime sets an event-time timer at ts (milliseconds).
func (t *Timers) RegisterEventTime(ts int64) { t.set(EventTime, ts) }

// RegisterProcessingTime sets a processing-time timer at ts (milliseconds
// since the Unix epoch, the task's clock).
func (t *Timers) RegisterProcessingTime(ts int64) { t.set(ProcessingTime, ts) }

// DeleteEventTime removes the event-time timer at ts, if set.
func (t *Timers) DeleteEventTime(ts int64) {
	t.r.h.timerDelete(t.r.handle("Timers"), EventTime, ts)
}

// DeleteProcessingTime removes the processing-time timer at ts, if set.
func (t *Timers) DeleteProcessingTime(ts int64) {
	t.r.h.timerDelete(t.r.handle("Timers"), ProcessingTime, ts)
}

// CurrentProcessingTime returns the task's clock in milliseconds since the
// Unix epoch (WASI's clocks are fake; this is the real one).
func (t *Timers) CurrentProcessingTime() int64 { return t.r.h.processingTime() }

// OpenContext is what Open is given: where the instance runs, its config,
// and the place to declare state (Value, List, Map).
type OpenContext struct {
	r    *runtime
	doc  openDoc
	done bool
}

// Function returns the name the function is deployed under.
func (oc *OpenContext) Function() string { return oc.doc.Function }

// Version returns the deployed version of the function.
func (oc *OpenContext) Version() int64 { return oc.doc.Version }

// Operator returns the operator's name in the job spec.
func (oc *OpenContext) Operator() string { return oc.doc.Operator }

// Subtask returns which parallel instance this is, in [0, Parallelism).
func (oc *OpenContext) Subtask() int { return oc.doc.Subtask }

// Parallelism returns the number of parallel instances.
func (oc *OpenContext) Parallelism() int { return oc.doc.Parallelism }

// KeyColumns returns the operator's keyBy columns, in order.
func (oc *OpenContext) KeyColumns() []string { return oc.doc.KeyColumns }

// Config returns the operator's config from the job spec, as decoded from
// JSON: numbers are float64, lists []any, maps map[string]any. It is empty,
// not nil, when the spec has none.
func (oc *OpenContext) Config() map[string]any { return oc.doc.Config }

// Log writes msg to the worker's log.
func (oc *OpenContext) Log(level Level, msg string) { oc.r.h.log(level, msg) }
