package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/functions/wasm"
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
	module   *spec.Module // a deployed Wasm function, else nil (def)
	keyBy    []string
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
	cfg := &processConfig{name: op.Name, fnName: op.Function, keyBy: op.KeyBy, in: in}
	var errs []error
	if len(op.KeyBy) == 0 {
		errs = append(errs, spec.Errorf(p+".keyBy", "missing: a function operator needs key columns (its state is per key)"))
	} else if idx, err := in.Columns(p+".keyBy", op.KeyBy); err != nil {
		errs = append(errs, err)
	} else {
		cfg.keyCols = idx
		for i, c := range idx {
			t, err := arrowfmt.TypeOf(in.Schema.Field(c).Type)
			if err != nil {
				errs = append(errs, spec.Errorf(p+".keyBy", "column %q: %w", op.KeyBy[i], err))
				continue
			}
			cfg.keyTypes = append(cfg.keyTypes, t)
		}
	}
	if op.Module != nil {
		errs = append(errs, cfg.moduleSchema(p, op.Module)...)
	} else {
		errs = append(errs, cfg.goSchema(p, op)...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// goSchema derives the output of a Go function registered in this binary,
// and checks its config by creating it.
func (cfg *processConfig) goSchema(p string, op *spec.Operator) []error {
	def, ok := functions.Lookup(op.Function)
	if !ok {
		names := functions.Names()
		known := strings.Join(names, ", ")
		if len(names) == 0 {
			known = "none"
		}
		return []error{spec.Errorf(p+".function", "%q is not a registered function (registered: %s) nor a deployed one (see weir functions list)", op.Function, known)}
	}
	cfg.def = def
	in := cfg.in
	var errs []error
	fp, who := p+".function", op.Function
	var fields []arrowfmt.Field
	if err := callUser(func() error {
		var err error
		fields, err = def.Output(in.Schema)
		return err
	}); err != nil {
		errs = append(errs, spec.Errorf(fp, "%s: output schema: %w", who, err))
	} else {
		errs = append(errs, cfg.setOutput(fp, who, fields, def.TimeColumn)...)
	}
	if err := callUser(func() error {
		_, err := def.New(op.Config)
		return err
	}); err != nil {
		errs = append(errs, spec.Errorf(p+".config", "%s: %w", op.Function, err))
	}
	return errs
}

// moduleSchema checks the input against what a deployed module declared
// it reads, and takes its declared output.
func (cfg *processConfig) moduleSchema(p string, m *spec.Module) []error {
	cfg.module = m
	fp, who := p+".function", fmt.Sprintf("%s (version %d)", m.Name, m.Version)
	var errs []error
	for _, c := range m.Input {
		idx := cfg.in.Schema.FieldIndices(c.Name)
		if len(idx) == 0 {
			errs = append(errs, spec.Errorf(fp, "%s reads column %q (%s), which the input lacks (columns: %s)", who, c.Name, c.Type, columnList(cfg.in.Schema)))
			continue
		}
		t, err := arrowfmt.TypeOf(cfg.in.Schema.Field(idx[0]).Type)
		if err != nil || string(t) != c.Type {
			errs = append(errs, spec.Errorf(fp, "%s reads column %q as %s, but the input's is %v", who, c.Name, c.Type, cfg.in.Schema.Field(idx[0]).Type))
		}
	}
	fields := make([]arrowfmt.Field, len(m.Output))
	for i, c := range m.Output {
		fields[i] = arrowfmt.Field{Name: c.Name, Type: arrowfmt.Type(c.Type)}
	}
	errs = append(errs, cfg.setOutput(fp, who, fields, m.TimeColumn)...)
	cfg.out.TimeOffset = m.TimeOffset
	return errs
}

// setOutput sets the output stream from the function's columns and time
// column; problems are of field fp and name the function who.
func (cfg *processConfig) setOutput(fp, who string, fields []arrowfmt.Field, timeColumn string) []error {
	schema, err := arrowfmt.NewSchema(fields)
	if err != nil {
		return []error{spec.Errorf(fp, "%s: output schema: %w", who, err)}
	}
	cfg.out = Stream{Schema: schema, TimeColumn: -1}
	if timeColumn == "" {
		return nil
	}
	idx := schema.FieldIndices(timeColumn)
	switch {
	case len(idx) == 0:
		return []error{spec.Errorf(fp, "%s: time column %q is not an output column (columns: %s)", who, timeColumn, columnList(schema))}
	case fields[idx[0]].Type != arrowfmt.TimestampMs:
		return []error{spec.Errorf(fp, "%s: time column %q is %s, want %s", who, timeColumn, fields[idx[0]].Type, arrowfmt.TimestampMs)}
	}
	cfg.out.TimeColumn = idx[0]
	return nil
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

// ProcessEnv is what a process operator takes from the worker that runs
// it.
type ProcessEnv struct {
	// Engine runs deployed Wasm functions (nil: the process runs none).
	Engine *wasm.Engine
	// State is the job's state section (nil: the in-memory backend).
	State *spec.State
	// StateDir is where a pebble backend makes its directory ("": the
	// system's temporary directory).
	StateDir string
}

// NewProcess returns the keyed process operator of op for input in. It
// implements task.ProcessingTimer and task.Stateful. A deployed Wasm
// function (op.Module) runs on env.Engine, which must then not be nil.
func NewProcess(op *spec.Operator, in Stream, env ProcessEnv) (task.Operator, error) {
	cfg, err := newProcessConfig(op, in)
	if err != nil {
		return nil, err
	}
	if cfg.module != nil && env.Engine == nil {
		return nil, fmt.Errorf("operators[%s].function: %s is a deployed Wasm function, and this process runs none", op.Name, op.Function)
	}
	return &processOp{cfg: cfg, config: op.Config, env: env}, nil
}

// keyedRunner is what runs a process function: a Go function
// (functions.Instance) or a Wasm module (wasm.Instance).
type keyedRunner interface {
	ProcessBatch(rec arrow.RecordBatch, keyGroups []int, keys []string) error
	AdvanceWatermark(wm int64) error
	RestoreWatermark(wm int64)
	NextProcessingTime() (time.Time, bool)
	FireProcessingTimers(now time.Time) error
	Close() error
}

var (
	_ keyedRunner = (*functions.Instance)(nil)
	_ keyedRunner = (*wasm.Instance)(nil)
)

type processOp struct {
	cfg    *processConfig
	config map[string]any
	env    ProcessEnv
	store  *operatorStore // the pebble backend's store, else nil

	inst           keyedRunner
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
	state, err := p.newState()
	if err != nil {
		return err
	}
	var inst keyedRunner
	if p.cfg.module != nil {
		inst, err = p.openModule(ctx, state)
	} else {
		inst, err = functions.NewInstance(functions.InstanceConfig{
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
	}
	if err != nil {
		return errors.Join(fmt.Errorf("open %s: %w", p.cfg.name, err), p.closeStore())
	}
	p.inst, p.state = inst, state
	return nil
}

// moduleLoadTimeout bounds fetching and compiling a module at Open.
const moduleLoadTimeout = 2 * time.Minute

// openModule loads the pinned module and makes this subtask's instance.
func (p *processOp) openModule(ctx *task.Context, state statestore.Backend) (*wasm.Instance, error) {
	lctx, cancel := context.WithTimeout(context.Background(), moduleLoadTimeout)
	defer cancel()
	m, err := p.env.Engine.Load(lctx, p.cfg.module)
	if err != nil {
		return nil, err
	}
	inst, err := m.NewInstance(lctx, wasm.InstanceConfig{
		Operator:        p.cfg.name,
		Input:           p.cfg.in.Schema,
		InputTimeColumn: p.cfg.in.TimeColumn,
		InputTimeOffset: p.cfg.in.TimeOffset,
		KeyColumns:      p.cfg.keyBy,
		Output:          p.cfg.out.Schema,
		Config:          p.config,
		State:           state,
		Subtask:         ctx.Subtask,
		Parallelism:     ctx.Parallelism,
		Mem:             ctx.Mem,
		Logger:          ctx.Logger,
		Now:             ctx.Now,
		Emit:            ctx.Out.Emit,
	})
	if err != nil {
		return nil, err
	}
	if ctx.Counters != nil {
		ctx.Counters.AddFunction(functionCounter{op: p.cfg.name, fn: fmt.Sprintf("%s@%d", p.cfg.module.Name, p.cfg.module.Version), st: inst.Stats()})
	}
	return inst, nil
}

// functionCounter reports a Wasm instance's counters with the task's.
type functionCounter struct {
	op, fn string
	st     *wasm.Stats
}

func (f functionCounter) FunctionStats() control.FunctionStats {
	return control.FunctionStats{
		Operator: f.op, Function: f.fn,
		Calls: f.st.Calls.Load(), RowsIn: f.st.RowsIn.Load(), RowsOut: f.st.RowsOut.Load(),
		GuestSeconds: time.Duration(f.st.GuestNs.Load()).Seconds(),
		HostCalls:    f.st.HostCalls.Load(), MemoryBytes: f.st.MemoryBytes.Load(),
	}
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
	p.state.Close()
	p.inst, p.state = nil, nil
	return errors.Join(err, p.closeStore())
}

// newState makes the operator's keyed state: in memory, or in a pebble
// store of its own on local disk (a job's state: {backend: pebble}).
func (p *processOp) newState() (statestore.Backend, error) {
	st := p.env.State
	if st == nil || st.Backend != spec.StatePebble {
		return statestore.NewMemory(p.kgStart, p.kgEnd), nil
	}
	s := &operatorStore{what: "process " + p.cfg.name, st: st, dir: p.env.StateDir}
	if err := s.openStore(p.kgStart, p.kgEnd); err != nil {
		return nil, err
	}
	p.store = s
	return s.state, nil
}

// closeStore closes the pebble store, deleting its files.
func (p *processOp) closeStore() error {
	if p.store == nil {
		return nil
	}
	err := p.store.closeStore()
	p.store = nil
	return err
}

// processSnapshotter is a process operator's backend as checkpoints
// capture and restore it: errors name the operator, and a restore notes
// the watermark the restored state recorded (see ProcessWatermark).
type processSnapshotter struct{ p *processOp }

var _ statestore.Snapshotter = processSnapshotter{}

// State returns the operator's backend, as checkpoints see it: with its
// tables captured as its store's files when they are in pebble.
func (p *processOp) State() statestore.Snapshotter {
	if p.store != nil {
		return storeSnapshotter{processSnapshotter{p}}
	}
	return processSnapshotter{p}
}

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

// BeginSnapshot starts the backend's snapshot, captured in steps beside
// processing if the backend can (statestore.Memory, on the heap or a
// store), else at once.
func (s processSnapshotter) BeginSnapshot(mem memory.Allocator, full bool) (statestore.Capture, error) {
	p := s.p
	if p.state == nil {
		return nil, fmt.Errorf("process %s: snapshot of an operator that is not open", p.cfg.name)
	}
	ss, ok := p.state.(statestore.SteppedSnapshotter)
	if !ok {
		return nil, fmt.Errorf("process %s: snapshot: the backend %T cannot capture in steps", p.cfg.name, p.state)
	}
	c, err := ss.BeginSnapshot(mem, full)
	if err != nil {
		return nil, fmt.Errorf("process %s: %w", p.cfg.name, err)
	}
	return c, nil
}

var _ statestore.SteppedSnapshotter = processSnapshotter{}

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

// storeSnapshotter is the backend of a process operator whose state is in
// pebble: checkpoints capture its tables as the store's files.
type storeSnapshotter struct{ processSnapshotter }

var _ statestore.StoreCapturer = storeSnapshotter{}

// CaptureStore captures the store into a directory beside it.
func (s storeSnapshotter) CaptureStore(id int64) (statestore.StoreFileCapture, error) {
	if s.p.store == nil {
		return nil, fmt.Errorf("process %s: capture the store of an operator that is not open", s.p.cfg.name)
	}
	return s.p.store.captureStore(id)
}

// StoreScratch is the directory the store is in.
func (s storeSnapshotter) StoreScratch() string { return s.p.store.scratch() }

// RestoreStores makes the operator's store the one captured over its key
// groups, or, at a rescale, the one sharing the most key groups with it,
// others excised, with what the rest hold of its key groups ingested
// (pebblestate.Restore).
func (s storeSnapshotter) RestoreStores(stores []statestore.CapturedStore) (int, error) {
	p := s.p
	if p.store == nil {
		return -1, fmt.Errorf("process %s: restore the store of an operator that is not open", p.cfg.name)
	}
	return p.store.restoreStores(stores, p.kgStart, p.kgEnd)
}
