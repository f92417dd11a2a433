package functions

import (
	"fmt"
	"log/slog"
	"math"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/statestore"
)

// Watermarks with a special meaning (the same values as the runtime's).
const (
	// MinWatermark is the watermark before any event.
	MinWatermark int64 = math.MinInt64 + 1
	// MaxWatermark is the watermark at the end of a bounded input.
	MaxWatermark int64 = math.MaxInt64
)

// TimeDomain says which clock a timer follows.
type TimeDomain uint8

// Time domains.
const (
	// EventTime timers fire when the watermark reaches them.
	EventTime TimeDomain = TimeDomain(statestore.EventTime)
	// ProcessingTime timers fire when the wall clock reaches them.
	ProcessingTime TimeDomain = TimeDomain(statestore.ProcessingTime)
)

func (d TimeDomain) String() string { return statestore.Domain(d).String() }

// Timer is a timer that fired: its time in milliseconds since the Unix
// epoch, and its domain.
type Timer struct {
	Timestamp int64
	Domain    TimeDomain
}

// current is what the runtime is processing: the key state and timers are
// scoped to, and the event time of the row or timer.
type current struct {
	set      bool
	keyGroup int
	key      string
	decoded  []any // Key's values, decoded on first use
	ts       int64
	hasTs    bool
}

// Context is what ProcessElement and OnTimer are given: the current key,
// event time and timers. It is valid only during the call.
type Context struct {
	inst   *Instance
	timers Timers
}

// Key returns the values of the current key, one per keyBy column: int64,
// float64, string, bool, time.Time (timestamp_ms) or nil (null). The slice
// is shared: read it, do not change it.
func (c *Context) Key() []any {
	cur := &c.inst.cur
	if cur.decoded == nil {
		vals, err := arrowfmt.DecodeKeyString(cur.key, c.inst.keyTypes)
		if err != nil {
			panic(fmt.Sprintf("functions: decode current key: %v", err))
		}
		cur.decoded = vals
	}
	return cur.decoded
}

// Timestamp returns the event time of the current row (its time column
// plus the stream's offset) or of the event-time timer firing. It is false
// when the input has no event time, the row's time is null, or a
// processing-time timer is firing.
func (c *Context) Timestamp() (int64, bool) { return c.inst.cur.ts, c.inst.cur.hasTs }

// Watermark returns the current event time: MinWatermark before the first
// watermark, MaxWatermark at the end of a bounded input.
func (c *Context) Watermark() int64 { return c.inst.watermark }

// Logger returns the operator's logger.
func (c *Context) Logger() *slog.Logger { return c.inst.logger }

// Timers returns the timers of the current key.
func (c *Context) Timers() *Timers { return &c.timers }

// Timers registers and deletes timers of the current key. A timer is set at
// most once per (key, domain, timestamp): registering it again does
// nothing. An event-time timer at or before the watermark fires with the
// next watermark.
type Timers struct {
	inst *Instance
}

func (t *Timers) timer(ts int64) statestore.Timer {
	cur := t.inst.currentKey("timers")
	return statestore.Timer{Timestamp: ts, KeyGroup: cur.keyGroup, Key: cur.key}
}

func (t *Timers) register(d statestore.Domain, ts int64) {
	if !t.inst.hasOnTimer {
		panic(fmt.Sprintf("functions: function %q registers a timer but has no OnTimer method", t.inst.function))
	}
	t.inst.state.Timers().Register(d, t.timer(ts))
}

// RegisterEventTime sets an event-time timer at ts (milliseconds).
func (t *Timers) RegisterEventTime(ts int64) { t.register(statestore.EventTime, ts) }

// RegisterProcessingTime sets a processing-time timer at ts (milliseconds
// since the Unix epoch, wall clock).
func (t *Timers) RegisterProcessingTime(ts int64) { t.register(statestore.ProcessingTime, ts) }

// DeleteEventTime removes the event-time timer at ts, if set.
func (t *Timers) DeleteEventTime(ts int64) {
	t.inst.state.Timers().Delete(statestore.EventTime, t.timer(ts))
}

// DeleteProcessingTime removes the processing-time timer at ts, if set.
func (t *Timers) DeleteProcessingTime(ts int64) {
	t.inst.state.Timers().Delete(statestore.ProcessingTime, t.timer(ts))
}

// CurrentProcessingTime returns the wall clock in milliseconds since the
// Unix epoch.
func (t *Timers) CurrentProcessingTime() int64 { return t.inst.now().UnixMilli() }

// OpenContext is what Open is given: where the instance runs, its schemas,
// and the place to declare state (Value, List, Map).
type OpenContext struct {
	inst *Instance
	errs []error
	done bool
}

// Operator returns the operator's name in the job spec.
func (oc *OpenContext) Operator() string { return oc.inst.operator }

// Subtask returns which parallel instance this is, in [0, Parallelism).
func (oc *OpenContext) Subtask() int { return oc.inst.subtask }

// Parallelism returns the number of parallel instances.
func (oc *OpenContext) Parallelism() int { return oc.inst.parallelism }

// Input returns the input schema.
func (oc *OpenContext) Input() *arrow.Schema { return oc.inst.view.schema }

// Output returns the output schema (what Definition.Output returned).
func (oc *OpenContext) Output() *arrow.Schema { return oc.inst.out.b.Schema() }

// Logger returns the operator's logger.
func (oc *OpenContext) Logger() *slog.Logger { return oc.inst.logger }
