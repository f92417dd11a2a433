package builtin

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore"
)

// The process operator runs a Go function registered with
// functions.Register over a keyed stream, like Flink's KeyedProcessOperator:
//
//   - per input batch it computes each row's key (arrowfmt.KeyString over
//     the keyBy columns) and key group (arrowfmt.HashKeys, KeyGroup), makes
//     the key current and calls ProcessElement; a row whose key group this
//     subtask does not own is an error (the input was not routed by keyBy);
//   - ProcessWatermark fires the event-time timers the watermark reached,
//     in timestamp order, each with its key current, via OnTimer;
//   - processing-time timers fire through task.ProcessingTimer with the
//     task's clock (task.Context.Now);
//   - what the function emits is flushed as one batch per input batch,
//     watermark or round of processing-time timers (more when it exceeds
//     the output batch size), before the runtime forwards the watermark;
//   - Finish fires nothing: the runtime sends MaxWatermark before it at the
//     end of a bounded input, which fires every event-time timer.
//     Processing-time timers still pending then never fire.
//
// State and timers live in a statestore.Backend over the subtask's key
// groups, which checkpoints capture (task.Stateful): the state batches are
// the backend's snapshot rows (statestore.SnapshotSchema), a base or a
// delta of what changed since the previous checkpoint.
//
// After a restore the runtime calls ProcessWatermark with the watermark of
// the checkpoint's barrier (if there was one), before any input. The
// operator had processed that watermark before the checkpoint, so the call
// must not fire the event-time timers at or before it that the restored
// state holds: those were set after it (late) and fire with the next
// watermark, as they would have without the failure. The state records the
// watermark for the key groups holding such timers
// (statestore.WatermarkTable rows); until event time passes the restored
// watermark, ProcessWatermark only sets it. What a function keeps in its
// own fields rather than in declared state is not checkpointed.

// processConfig is what ProcessSchema and NewProcess derive from the spec.
type processConfig struct {
	name     string
	fnName   string
	def      functions.Definition
	in, out  Stream
	keyCols  []int
	keyTypes []arrowfmt.Type
}

// ProcessSchema returns what the function operator op emits for input in:
// the schema its Definition.Output gives, with event time in the column
// Definition.TimeColumn names (offset 0), or no event time when it names
// none. It also checks op.Config by creating (not opening) the function.
func ProcessSchema(op *spec.Operator, in Stream) (Stream, error) {
	cfg, err := newProcessConfig(op, in)
	if err != nil {
		return Stream{}, err
	}
	return cfg.out, nil
}

func newProcessConfig(op *spec.Operator, in Stream) (*processConfig, error) {
	p := fmt.Sprintf("operators[%s]", op.Name)
	def, ok := functions.Lookup(op.Function)
	if !ok {
		names := functions.Names()
		known := strings.Join(names, ", ")
		if len(names) == 0 {
			known = "none"
		}
		return nil, fmt.Errorf("%s.function: %q is not a registered function (registered: %s)", p, op.Function, known)
	}
	cfg := &processConfig{name: op.Name, fnName: op.Function, def: def, in: in}
	var errs []error
	if len(op.KeyBy) == 0 {
		errs = append(errs, fmt.Errorf("%s.keyBy: missing: a function operator needs key columns (its state is per key)", p))
	} else if idx, err := in.Columns(p+".keyBy", op.KeyBy); err != nil {
		errs = append(errs, err)
	} else {
		cfg.keyCols = idx
		for i, c := range idx {
			t, err := arrowfmt.TypeOf(in.Schema.Field(c).Type)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.keyBy: column %q: %w", p, op.KeyBy[i], err))
				continue
			}
			cfg.keyTypes = append(cfg.keyTypes, t)
		}
	}
	fp := fmt.Sprintf("%s.function: %s", p, op.Function)
	var fields []arrowfmt.Field
	if err := callUser(func() error {
		var err error
		fields, err = def.Output(in.Schema)
		return err
	}); err != nil {
		errs = append(errs, fmt.Errorf("%s: output schema: %w", fp, err))
	} else if schema, err := arrowfmt.NewSchema(fields); err != nil {
		errs = append(errs, fmt.Errorf("%s: output schema: %w", fp, err))
	} else {
		cfg.out = Stream{Schema: schema, TimeColumn: -1}
		if tc := def.TimeColumn; tc != "" {
			idx := schema.FieldIndices(tc)
			switch {
			case len(idx) == 0:
				errs = append(errs, fmt.Errorf("%s: time column %q is not an output column (columns: %s)", fp, tc, columnList(schema)))
			case fields[idx[0]].Type != arrowfmt.TimestampMs:
				errs = append(errs, fmt.Errorf("%s: time column %q is %s, want %s", fp, tc, fields[idx[0]].Type, arrowfmt.TimestampMs))
			default:
				cfg.out.TimeColumn = idx[0]
			}
		}
	}
	if err := callUser(func() error {
		_, err := def.New(op.Config)
		return err
	}); err != nil {
		errs = append(errs, fmt.Errorf("%s.config: %s: %w", p, op.Function, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// callUser calls user code at deploy time, turning a panic into an error.
func callUser(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return f()
}

// NewProcess returns the keyed process operator of op for input in. It
// implements task.ProcessingTimer and task.Stateful.
func NewProcess(op *spec.Operator, in Stream) (task.Operator, error) {
	cfg, err := newProcessConfig(op, in)
	if err != nil {
		return nil, err
	}
	return &processOp{cfg: cfg, config: op.Config}, nil
}

type processOp struct {
	cfg    *processConfig
	config map[string]any

	inst           *functions.Instance
	state          statestore.Backend
	maxP           int
	kgStart, kgEnd int
	// restoredWM is the watermark the restored state recorded; watermarks
	// up to it fire nothing (see the operator's doc). math.MinInt64 when
	// there is none or event time has passed it.
	restoredWM int64

	hashes []uint64
	groups []int
	keys   []string
	keyBuf []byte
}

var (
	_ task.Operator        = (*processOp)(nil)
	_ task.ProcessingTimer = (*processOp)(nil)
	_ task.Stateful        = (*processOp)(nil)
)

func (p *processOp) Open(ctx *task.Context) error {
	p.maxP = ctx.MaxParallelism
	if p.maxP <= 0 {
		p.maxP = arrowfmt.DefaultMaxParallelism
	}
	p.kgStart, p.kgEnd = ctx.KeyGroupStart, ctx.KeyGroupEnd
	if p.kgEnd <= p.kgStart {
		p.kgStart, p.kgEnd = 0, p.maxP
	}
	p.restoredWM = math.MinInt64
	state := statestore.NewMemory(p.kgStart, p.kgEnd)
	inst, err := functions.NewInstance(functions.InstanceConfig{
		Operator:        p.cfg.name,
		Function:        p.cfg.fnName,
		Def:             p.cfg.def,
		Config:          p.config,
		Input:           p.cfg.in.Schema,
		InputTimeColumn: p.cfg.in.TimeColumn,
		InputTimeOffset: p.cfg.in.TimeOffset,
		Output:          p.cfg.out.Schema,
		KeyTypes:        p.cfg.keyTypes,
		State:           state,
		Subtask:         ctx.Subtask,
		Parallelism:     ctx.Parallelism,
		Mem:             ctx.Mem,
		Logger:          ctx.Logger,
		Now:             ctx.Now,
		Emit:            ctx.Out.Emit,
	})
	if err != nil {
		return fmt.Errorf("open %s: %w", p.cfg.name, err)
	}
	p.inst, p.state = inst, state
	return nil
}

func (p *processOp) ProcessBatch(b arrow.RecordBatch) error {
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	p.hashes = arrowfmt.HashKeys(b, p.cfg.keyCols, p.hashes)
	p.groups = p.groups[:0]
	p.keys = p.keys[:0]
	var prev []byte
	for i := range n {
		kg := arrowfmt.KeyGroup(p.hashes[i], p.maxP)
		if kg < p.kgStart || kg >= p.kgEnd {
			return fmt.Errorf("process %s: row %d has key group %d, outside this subtask's key groups [%d,%d): the input is not partitioned by keyBy", p.cfg.name, i, kg, p.kgStart, p.kgEnd)
		}
		p.groups = append(p.groups, kg)
		// Consecutive rows of one key (common after a window) share the
		// key string.
		prev, p.keyBuf = p.keyBuf, arrowfmt.AppendRowKey(prev[:0], b, p.cfg.keyCols, i)
		if i > 0 && bytes.Equal(p.keyBuf, prev) {
			p.keys = append(p.keys, p.keys[i-1])
		} else {
			p.keys = append(p.keys, string(p.keyBuf))
		}
	}
	clear(p.keys[n:cap(p.keys)]) // drop references to old keys
	if err := p.inst.ProcessBatch(b, p.groups, p.keys); err != nil {
		return fmt.Errorf("process %s: %w", p.cfg.name, err)
	}
	return nil
}

func (p *processOp) ProcessWatermark(wm int64) error {
	if wm <= p.restoredWM {
		p.inst.RestoreWatermark(wm)
		return nil
	}
	p.restoredWM = math.MinInt64
	if err := p.inst.AdvanceWatermark(wm); err != nil {
		return fmt.Errorf("process %s: watermark: %w", p.cfg.name, err)
	}
	return nil
}

func (p *processOp) NextProcessingTime() (time.Time, bool) { return p.inst.NextProcessingTime() }

func (p *processOp) OnProcessingTime(now time.Time) error {
	if err := p.inst.FireProcessingTimers(now); err != nil {
		return fmt.Errorf("process %s: processing-time timers: %w", p.cfg.name, err)
	}
	return nil
}

// Finish does nothing: MaxWatermark, sent before it, fired the event-time
// timers and every batch is flushed as it is made.
func (p *processOp) Finish() error { return nil }

func (p *processOp) Close() error {
	if p.inst == nil {
		return nil
	}
	err := p.inst.Close()
	p.inst, p.state = nil, nil
	return err
}

// processSnapshotter is a process operator's backend as checkpoints
// capture and restore it: errors name the operator, and a restore notes
// the watermark the restored state recorded (see ProcessWatermark).
type processSnapshotter struct{ p *processOp }

var _ statestore.Snapshotter = processSnapshotter{}

// State returns the operator's backend, as checkpoints see it.
func (p *processOp) State() statestore.Snapshotter { return processSnapshotter{p} }

// Schema is the backend's snapshot schema: key_group first, then the
// state name (table), key, namespace, encoded value, timer timestamp and
// deletion flag.
func (s processSnapshotter) Schema() *arrow.Schema { return statestore.SnapshotSchema() }

// Snapshot returns the backend's snapshot: every entry and timer if full,
// else what changed since the previous call (or the restore).
func (s processSnapshotter) Snapshot(mem memory.Allocator, full bool) ([]arrow.RecordBatch, error) {
	p := s.p
	if p.state == nil {
		return nil, fmt.Errorf("process %s: snapshot of an operator that is not open", p.cfg.name)
	}
	recs, err := p.state.Snapshot(mem, full)
	if err != nil {
		return nil, fmt.Errorf("process %s: %w", p.cfg.name, err)
	}
	return recs, nil
}

// Restore applies state rows to the backend, and notes the watermark
// they recorded, if any.
func (s processSnapshotter) Restore(b arrow.RecordBatch) error {
	p := s.p
	if p.state == nil {
		return fmt.Errorf("process %s: restore into an operator that is not open", p.cfg.name)
	}
	if err := p.state.Restore(b); err != nil {
		return fmt.Errorf("process %s: %w", p.cfg.name, err)
	}
	p.restoredWM = p.state.Timers().Watermark()
	return nil
}
