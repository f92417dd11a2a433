package functions

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/statestore"
)

// InstanceConfig is what the runtime knows about one instance of a
// function. Functions never see it.
type InstanceConfig struct {
	Operator string // the operator's name in the spec
	Function string // the registered name
	Def      Definition
	Config   map[string]any

	// Input is the input schema; InputTimeColumn is the index of its event
	// time column (-1 for none) and InputTimeOffset what is added to it.
	Input           *arrow.Schema
	InputTimeColumn int
	InputTimeOffset int64
	// Output is the output schema (from Def.Output).
	Output *arrow.Schema
	// KeyTypes are the types of the keyBy columns, in order, for
	// Context.Key.
	KeyTypes []arrowfmt.Type

	// State holds the instance's state and timers.
	State statestore.Backend

	Subtask, Parallelism int
	Mem                  memory.Allocator // default memory.DefaultAllocator
	Logger               *slog.Logger     // default discards
	Now                  func() time.Time // default time.Now

	// Emit receives output batches; it does not own them (Emit retains
	// what it keeps).
	Emit func(arrow.RecordBatch) error
	// BatchRows flushes output early once this many rows are pending
	// (default 8192).
	BatchRows int
}

// Instance is one running instance of a function: the runtime drives it
// (package builtin wraps it in a task operator) and it calls the function
// with the current key, state and timers in place. Not safe for
// concurrent use.
type Instance struct {
	operator, function   string
	subtask, parallelism int
	logger               *slog.Logger
	now                  func() time.Time
	emit                 func(arrow.RecordBatch) error

	fn         ProcessFunction
	onTimer    TimerFunction
	hasOnTimer bool

	state    statestore.Backend
	keyTypes []arrowfmt.Type
	view     *batchView
	timeCol  int
	timeOff  int64

	cur       current
	watermark int64
	ctx       Context
	out       Collector
}

// NewInstance creates the function with Def.New and opens it. On error
// nothing is left to close.
func NewInstance(cfg InstanceConfig) (_ *Instance, err error) {
	if cfg.Mem == nil {
		cfg.Mem = memory.DefaultAllocator
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BatchRows <= 0 {
		cfg.BatchRows = 8192
	}
	if cfg.State == nil || cfg.Emit == nil || cfg.Def.New == nil {
		return nil, errors.New("functions: NewInstance needs State, Emit and Def.New")
	}
	view, err := newBatchView(cfg.Input)
	if err != nil {
		return nil, fmt.Errorf("function %s: input schema: %w", cfg.Function, err)
	}
	outTypes, err := arrowfmt.Types(cfg.Output)
	if err != nil {
		return nil, fmt.Errorf("function %s: output schema: %w", cfg.Function, err)
	}
	in := &Instance{
		operator:    cfg.Operator,
		function:    cfg.Function,
		subtask:     cfg.Subtask,
		parallelism: cfg.Parallelism,
		logger:      cfg.Logger,
		now:         cfg.Now,
		emit:        cfg.Emit,
		state:       cfg.State,
		keyTypes:    cfg.KeyTypes,
		view:        view,
		timeCol:     cfg.InputTimeColumn,
		timeOff:     cfg.InputTimeOffset,
		watermark:   MinWatermark,
	}
	in.ctx = Context{inst: in, timers: Timers{inst: in}}
	in.out = Collector{
		b:     arrowfmt.NewBuilder(cfg.Output, cfg.Mem),
		types: outTypes,
		cells: make([]cell, len(outTypes)),
		max:   cfg.BatchRows,
		flush: in.flush,
	}
	defer func() {
		if err != nil {
			in.out.b.Release()
		}
	}()
	err = in.guard("create", func() error {
		var err error
		in.fn, err = cfg.Def.New(cfg.Config)
		if err == nil && in.fn == nil {
			err = errors.New("the definition's New returned a nil function")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	in.onTimer, in.hasOnTimer = in.fn.(TimerFunction)
	if o, ok := in.fn.(Opener); ok {
		oc := &OpenContext{inst: in}
		err = in.guard("open", func() error {
			if err := o.Open(oc); err != nil {
				return err
			}
			return errors.Join(oc.errs...)
		})
		oc.done = true
		if err != nil {
			return nil, errors.Join(err, in.closeFn())
		}
	}
	return in, nil
}

// guard calls user code, turning a panic into an error with its stack so
// one bad function fails its task, not the worker.
func (in *Instance) guard(what string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("function %s: %s: panic: %v\n%s", in.function, what, p, debug.Stack())
		}
	}()
	if err := f(); err != nil {
		return fmt.Errorf("function %s: %s: %w", in.function, what, err)
	}
	return nil
}

// currentKey returns the current key, or panics when there is none (state
// or timers used outside ProcessElement and OnTimer).
func (in *Instance) currentKey(what string) *current {
	if !in.cur.set {
		panic(fmt.Sprintf("functions: %s used with no current key: only ProcessElement and OnTimer have one", what))
	}
	return &in.cur
}

func (in *Instance) setKey(keyGroup int, key string) {
	if in.cur.key != key || !in.cur.set {
		in.cur.decoded = nil
	}
	in.cur.set, in.cur.keyGroup, in.cur.key = true, keyGroup, key
}

// ProcessBatch calls ProcessElement for each row of rec with the row's key
// group and key (keyGroups[i], keys[i]) current, then flushes the output.
func (in *Instance) ProcessBatch(rec arrow.RecordBatch, keyGroups []int, keys []string) error {
	in.view.rec = rec
	defer func() {
		in.view.rec = nil
		in.cur.set = false
	}()
	var times *array.Timestamp
	if in.timeCol >= 0 {
		times, _ = rec.Column(in.timeCol).(*array.Timestamp)
	}
	n := int(rec.NumRows())
	prefetch, _ := in.state.(prefetcher)
	err := in.guard("process element", func() error {
		for i := 0; i < n; i++ {
			if prefetch != nil && i%prefetchRows == 0 {
				end := min(i+prefetchRows, n)
				prefetch.Prefetch(keyGroups[i:end], keys[i:end])
			}
			in.setKey(keyGroups[i], keys[i])
			in.cur.hasTs = times != nil && times.IsValid(i)
			in.cur.ts = 0
			if in.cur.hasTs {
				in.cur.ts = int64(times.Value(i)) + in.timeOff
			}
			if err := in.fn.ProcessElement(&in.ctx, Row{b: in.view, i: i}, &in.out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return in.flush()
}

// prefetcher is a backend that can read into the cache where the keys of
// the rows to come are looked up (statestore.Memory.Prefetch).
type prefetcher interface {
	Prefetch(keyGroups []int, keys []string)
}

// prefetchRows is how many rows' keys are prefetched at once: few enough
// that what is read stays in the cache until their rows are processed
// (two cache lines a key and table), many enough that the reads overlap.
const prefetchRows = 256

// AdvanceWatermark moves event time to wm and fires every event-time timer
// at or before it, in timestamp order, each with its key current (also
// timers registered while firing), then flushes the output.
func (in *Instance) AdvanceWatermark(wm int64) error {
	if wm > in.watermark {
		in.watermark = wm
	}
	if err := in.fire(statestore.EventTime, in.watermark); err != nil {
		return err
	}
	return in.flush()
}

// NextProcessingTime returns when the earliest processing-time timer is
// due.
func (in *Instance) NextProcessingTime() (time.Time, bool) {
	ts, ok := in.state.Timers().NextProcessing()
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMilli(ts), true
}

// FireProcessingTimers fires every processing-time timer due at now, then
// flushes the output.
func (in *Instance) FireProcessingTimers(now time.Time) error {
	if err := in.fire(statestore.ProcessingTime, now.UnixMilli()); err != nil {
		return err
	}
	return in.flush()
}

func (in *Instance) fire(d statestore.Domain, upTo int64) error {
	if !in.hasOnTimer {
		return nil
	}
	defer func() { in.cur.set = false }()
	timers := in.state.Timers()
	return in.guard("on timer", func() error {
		for {
			var t statestore.Timer
			var ok bool
			if d == statestore.EventTime {
				t, ok = timers.PopEventTime(upTo)
			} else {
				t, ok = timers.PopProcessing(upTo)
			}
			if !ok {
				return nil
			}
			in.setKey(t.KeyGroup, t.Key)
			in.cur.ts, in.cur.hasTs = 0, false
			if d == statestore.EventTime {
				in.cur.ts, in.cur.hasTs = t.Timestamp, true
			}
			if err := in.onTimer.OnTimer(&in.ctx, Timer{Timestamp: t.Timestamp, Domain: TimeDomain(d)}, &in.out); err != nil {
				return err
			}
		}
	})
}

// flush passes the pending output rows on as one batch.
func (in *Instance) flush() error {
	if in.out.b.Len() == 0 {
		return nil
	}
	rec := in.out.b.NewBatch()
	defer rec.Release()
	return in.emit(rec)
}

// RestoreWatermark moves event time to wm, if later, without firing
// timers: wm is the watermark of a restored checkpoint's barrier, which the
// instance had processed (and fired the timers of) before the checkpoint
// was taken. Timers at or before it in the restored state fire with the
// next AdvanceWatermark.
func (in *Instance) RestoreWatermark(wm int64) {
	if wm > in.watermark {
		in.watermark = wm
	}
}

// Watermark returns the instance's current watermark.
func (in *Instance) Watermark() int64 { return in.watermark }

func (in *Instance) closeFn() error {
	if c, ok := in.fn.(Closer); ok {
		return in.guard("close", c.Close)
	}
	return nil
}

// Close closes the function and releases the output buffers. Pending
// output that was not flushed is dropped. It is safe to call twice.
func (in *Instance) Close() error {
	if in.fn == nil {
		return nil
	}
	err := in.closeFn()
	in.fn = nil
	in.out.b.Release()
	return err
}
