package wasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/statestore"
)

// Watermarks with a special meaning, the runtime's.
const (
	minWatermark int64 = math.MinInt64 + 1
)

// InstanceConfig is what an instance of a module runs with: the operator's
// schemas and config, the subtask's state backend and where output goes.
type InstanceConfig struct {
	Operator string
	// Input is the input schema; InputTimeColumn the index of its event
	// time column (-1 for none), InputTimeOffset what is added to it.
	Input           *arrow.Schema
	InputTimeColumn int
	InputTimeOffset int64
	// KeyColumns are the keyBy columns, in order.
	KeyColumns []string
	// Output is the declared output schema.
	Output *arrow.Schema
	// Config is the operator's config map, passed to the guest as JSON.
	Config map[string]any
	// State holds the instance's state and timers.
	State                statestore.Backend
	Subtask, Parallelism int
	Mem                  memory.Allocator // default memory.DefaultAllocator
	Logger               *slog.Logger     // default discards
	Now                  func() time.Time // default time.Now
	// Emit receives output batches; it does not own them.
	Emit func(arrow.RecordBatch) error
}

// Stats are an instance's counters, safe to read while it runs.
type Stats struct {
	Calls     atomic.Int64 // export calls for batches and timers
	RowsIn    atomic.Int64
	RowsOut   atomic.Int64
	GuestNs   atomic.Int64 // time inside the guest, host calls included
	HostCalls atomic.Int64
	// MemoryBytes is the size of the instance's linear memory.
	MemoryBytes atomic.Int64
}

// phase says which export is running, and so which host calls are allowed.
type phase uint8

const (
	phaseIdle phase = iota
	phaseDescribe
	phaseOpen
	phaseProcess
	phaseTimers
)

// Instance is one module instance of one subtask: the runtime calls it
// from the task's goroutine, like functions.Instance.
type Instance struct {
	what string // "function NAME version V (operator OP, subtask S)"
	cfg  InstanceConfig

	mod     api.Module
	mem     api.Memory
	alloc   api.Function
	process api.Function
	timers  api.Function
	timeout time.Duration
	stack   []uint64
	base    context.Context

	phase     phase
	keyGroups []int
	keys      []string
	failRow   int
	failMsg   string
	hostErr   error

	tables    []stateTable
	tableByID map[string]int

	enc     *arrowfmt.Encoder
	dec     *arrowfmt.Decoder
	outChk  bool
	payload []byte
	timerIn []statestore.Timer
	timerB  []byte

	watermark int64
	stats     Stats
	closed    bool

	output   *lineLogger // what the guest wrote to stdout and stderr
	memLimit int64
	trusted  bool // no deadline: the runtime cannot stop a call
}

type instKey struct{}

// NewInstance instantiates the module for one subtask and opens it
// (weir_open). On error nothing is left to close.
func (m *Module) NewInstance(ctx context.Context, cfg InstanceConfig) (*Instance, error) {
	if cfg.Mem == nil {
		cfg.Mem = memory.DefaultAllocator
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.State == nil || cfg.Emit == nil || cfg.Input == nil || cfg.Output == nil {
		return nil, errors.New("wasm: NewInstance needs Input, Output, State and Emit")
	}
	timeout := m.pin.Timeout.D()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	in := &Instance{
		what:      fmt.Sprintf("function %s version %d (operator %s, subtask %d)", m.pin.Name, m.pin.Version, cfg.Operator, cfg.Subtask),
		cfg:       cfg,
		timeout:   timeout,
		stack:     make([]uint64, 2),
		failRow:   -1,
		tableByID: map[string]int{},
		enc:       arrowfmt.NewEncoder(cfg.Input, cfg.Mem),
		dec:       arrowfmt.NewDecoder(cfg.Mem),
		watermark: minWatermark,
	}
	in.base = context.WithValue(context.WithoutCancel(ctx), instKey{}, in)
	if err := in.instantiate(m); err != nil {
		return nil, fmt.Errorf("%s: %w", in.what, err)
	}
	if err := in.open(m); err != nil {
		_ = in.Close()
		return nil, fmt.Errorf("%s: %w", in.what, err)
	}
	return in, nil
}

func (in *Instance) instantiate(m *Module) error {
	logw := &lineLogger{log: in.cfg.Logger.With("function", m.pin.Name)}
	in.output = logw
	in.memLimit = int64(pagesOf(m.pin.MemoryBytes)) << 16
	in.trusted = m.rt.trusted
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithStdout(logw).
		WithStderr(logw)
	mod, err := m.rt.r.InstantiateModule(in.base, m.compiled, mc)
	if err != nil {
		return fmt.Errorf("instantiate: %w", err)
	}
	in.mod = mod
	in.mem = mod.Memory()
	if f := mod.ExportedFunction(exportInit); f != nil {
		if err := in.call(phaseIdle, f, "initialize"); err != nil {
			_ = mod.Close(in.base)
			return err
		}
	}
	if err := in.call(phaseIdle, mod.ExportedFunction(exportVersion), "abi version"); err != nil {
		_ = mod.Close(in.base)
		return err
	}
	if v := int32(in.stack[0]); v != ABIVersion {
		_ = mod.Close(in.base)
		return fmt.Errorf("the module is built for ABI version %d; this weir supports version %d", v, ABIVersion)
	}
	in.alloc = mod.ExportedFunction(exportAlloc)
	in.process = mod.ExportedFunction(exportProcess)
	in.timers = mod.ExportedFunction(exportTimers)
	return nil
}

// openDoc is weir_open's argument.
type openDoc struct {
	Function    string         `json:"function"`
	Version     int            `json:"version"`
	Operator    string         `json:"operator"`
	Subtask     int            `json:"subtask"`
	Parallelism int            `json:"parallelism"`
	KeyColumns  []string       `json:"keyColumns"`
	KeyTypes    []string       `json:"keyTypes"`
	TimeColumn  int            `json:"timeColumn"`
	TimeOffset  int64          `json:"timeOffset"`
	Config      map[string]any `json:"config"`
}

func (in *Instance) open(m *Module) error {
	cfg := in.cfg.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	keyCols := in.cfg.KeyColumns
	if keyCols == nil {
		keyCols = []string{}
	}
	keyTypes := make([]string, len(keyCols))
	for i, c := range keyCols {
		idx := in.cfg.Input.FieldIndices(c)
		if len(idx) == 0 {
			return fmt.Errorf("key column %q is not an input column", c)
		}
		t, err := arrowfmt.TypeOf(in.cfg.Input.Field(idx[0]).Type)
		if err != nil {
			return fmt.Errorf("key column %q: %w", c, err)
		}
		keyTypes[i] = string(t)
	}
	doc, err := json.Marshal(openDoc{
		Function: m.pin.Name, Version: m.pin.Version, Operator: in.cfg.Operator,
		Subtask: in.cfg.Subtask, Parallelism: in.cfg.Parallelism,
		KeyColumns: keyCols, KeyTypes: keyTypes, TimeColumn: in.cfg.InputTimeColumn, TimeOffset: in.cfg.InputTimeOffset,
		Config: cfg,
	})
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	ptr, err := in.write(doc)
	if err != nil {
		return err
	}
	in.stack[0], in.stack[1] = api.EncodeU32(ptr), api.EncodeU32(uint32(len(doc)))
	return in.callStatus(phaseOpen, in.mod.ExportedFunction(exportOpen), "open")
}

// write copies b into a buffer the guest allocates and returns its
// address.
func (in *Instance) write(b []byte) (uint32, error) {
	in.stack[0] = api.EncodeU32(uint32(len(b)))
	if err := in.call(phaseIdle, in.alloc, "alloc"); err != nil {
		return 0, err
	}
	ptr := api.DecodeU32(in.stack[0])
	if ptr == 0 && len(b) > 0 {
		return 0, fmt.Errorf("weir_alloc(%d) returned 0: the guest is out of memory", len(b))
	}
	if !in.mem.Write(ptr, b) {
		return 0, fmt.Errorf("weir_alloc(%d) returned %d, outside the guest's %d bytes of memory", len(b), ptr, in.mem.Size())
	}
	return ptr, nil
}

// call calls an export with in.stack as its parameters and results, under
// the deadline, in phase p. A non-zero i32 result of a weir export is an
// error with the guest's message.
func (in *Instance) call(p phase, f api.Function, what string) error {
	if in.closed || in.mod == nil {
		return errors.New("the instance is closed (an earlier call failed)")
	}
	in.phase, in.failMsg, in.failRow, in.hostErr = p, "", -1, nil
	if in.output != nil {
		in.output.reset()
	}
	start := time.Now()
	var err error
	if in.trusted {
		err = f.CallWithStack(in.base, in.stack)
	} else {
		ctx, cancel := context.WithTimeout(in.base, in.timeout)
		err = f.CallWithStack(ctx, in.stack)
		cancel()
	}
	in.stats.GuestNs.Add(int64(time.Since(start)))
	in.phase = phaseIdle
	in.stats.MemoryBytes.Store(int64(in.mem.Size()))
	if err != nil {
		in.closed = true // wazero closed it, or it trapped: never call it again
		var exit *sys.ExitError
		switch {
		case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
			return fmt.Errorf("%s: the guest ran longer than its timeout %v and was stopped", what, in.timeout)
		case in.hostErr != nil:
			return fmt.Errorf("%s: %w", what, in.hostErr)
		case errors.As(err, &exit):
			return fmt.Errorf("%s: the guest exited with code %d%s", what, exit.ExitCode(), in.guestMessage())
		}
		// wazero's error carries the guest's stack on further lines; the
		// first says what happened.
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return fmt.Errorf("%s: the guest trapped%s%s: %s", what, in.trapContext(), in.guestMessage(), msg)
	}
	return nil
}

// callStatus is call for the exports that return a status: non-zero is
// an error with the guest's message (and row), or the host's.
func (in *Instance) callStatus(p phase, f api.Function, what string) error {
	if err := in.call(p, f, what); err != nil {
		return err
	}
	code := int32(in.stack[0])
	if code == 0 && in.hostErr == nil {
		return nil
	}
	msg := in.failMsg
	switch {
	case in.hostErr != nil:
		msg = in.hostErr.Error()
	case msg == "":
		msg = fmt.Sprintf("the guest returned %d without a message", code)
	}
	if in.failRow >= 0 {
		return fmt.Errorf("%s: row %d: %s", what, in.failRow, msg)
	}
	return fmt.Errorf("%s: %s", what, msg)
}

// trapContext says what likely made the guest trap: memory at its limit,
// and the last lines it wrote (a language runtime's "out of memory" or
// panic message).
func (in *Instance) trapContext() string {
	var b strings.Builder
	if in.mem != nil && in.memLimit > 0 && int64(in.mem.Size())+1<<20 > in.memLimit {
		fmt.Fprintf(&b, " with its memory at the limit of %d MiB (--memory)", in.memLimit>>20)
	}
	if in.output != nil {
		if tail := in.output.tail(); tail != "" {
			fmt.Fprintf(&b, ", after writing %q", tail)
		}
	}
	return b.String()
}

func (in *Instance) guestMessage() string {
	if in.failMsg == "" {
		return ""
	}
	return " (" + in.failMsg + ")"
}

// ProcessBatch hands rec to the guest (weir_process) with key handle i
// being row i, whose key group and key are keyGroups[i] and keys[i].
func (in *Instance) ProcessBatch(rec arrow.RecordBatch, keyGroups []int, keys []string) error {
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	var err error
	in.payload, err = in.enc.AppendEncode(in.payload[:0], rec)
	if err != nil {
		return fmt.Errorf("%s: encode input: %w", in.what, err)
	}
	ptr, err := in.write(in.payload)
	if err != nil {
		return fmt.Errorf("%s: process batch: %w", in.what, err)
	}
	in.keyGroups, in.keys = keyGroups, keys
	defer func() { in.keyGroups, in.keys = nil, nil }()
	in.stats.Calls.Add(1)
	in.stats.RowsIn.Add(int64(n))
	in.stack[0], in.stack[1] = api.EncodeU32(ptr), api.EncodeU32(uint32(len(in.payload)))
	if err := in.callStatus(phaseProcess, in.process, "process batch"); err != nil {
		return fmt.Errorf("%s: %w", in.what, err)
	}
	return nil
}

// AdvanceWatermark moves event time to wm and fires the event-time timers
// at or before it (also those set while firing).
func (in *Instance) AdvanceWatermark(wm int64) error {
	if wm > in.watermark {
		in.watermark = wm
	}
	return in.fire(statestore.EventTime, in.watermark)
}

// RestoreWatermark moves event time to wm without firing timers (see
// functions.Instance.RestoreWatermark).
func (in *Instance) RestoreWatermark(wm int64) {
	if wm > in.watermark {
		in.watermark = wm
	}
}

// NextProcessingTime returns when the earliest processing-time timer is due.
func (in *Instance) NextProcessingTime() (time.Time, bool) {
	ts, ok := in.cfg.State.Timers().NextProcessing()
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMilli(ts), true
}

// FireProcessingTimers fires every processing-time timer due at now.
func (in *Instance) FireProcessingTimers(now time.Time) error {
	return in.fire(statestore.ProcessingTime, now.UnixMilli())
}

// maxTimersPerCall bounds one weir_timers call.
const maxTimersPerCall = 4096

func (in *Instance) fire(d statestore.Domain, upTo int64) error {
	if in.timers == nil {
		return nil
	}
	ts := in.cfg.State.Timers()
	for {
		in.timerIn = in.timerIn[:0]
		for len(in.timerIn) < maxTimersPerCall {
			var t statestore.Timer
			var ok bool
			if d == statestore.EventTime {
				t, ok = ts.PopEventTime(upTo)
			} else {
				t, ok = ts.PopProcessing(upTo)
			}
			if !ok {
				break
			}
			in.timerIn = append(in.timerIn, t)
		}
		if len(in.timerIn) == 0 {
			return nil
		}
		if err := in.callTimers(d); err != nil {
			return err
		}
	}
}

func (in *Instance) callTimers(d statestore.Domain) error {
	n := len(in.timerIn)
	in.timerB = in.timerB[:0]
	groups := make([]int, n)
	keys := make([]string, n)
	for i, t := range in.timerIn {
		in.timerB = binary.LittleEndian.AppendUint64(in.timerB, uint64(t.Timestamp))
		in.timerB = binary.LittleEndian.AppendUint32(in.timerB, uint32(d))
		in.timerB = binary.LittleEndian.AppendUint32(in.timerB, 0)
		groups[i], keys[i] = t.KeyGroup, t.Key
	}
	ptr, err := in.write(in.timerB)
	if err != nil {
		return fmt.Errorf("%s: timers: %w", in.what, err)
	}
	in.keyGroups, in.keys = groups, keys
	defer func() { in.keyGroups, in.keys = nil, nil }()
	in.stats.Calls.Add(1)
	in.stack[0], in.stack[1] = api.EncodeU32(ptr), api.EncodeU32(uint32(len(in.timerB)))
	if err := in.callStatus(phaseTimers, in.timers, "timers"); err != nil {
		return fmt.Errorf("%s: %w", in.what, err)
	}
	return nil
}

// emitPayload decodes an output payload of the guest and passes it on.
func (in *Instance) emitPayload(b []byte) error {
	rec, err := in.dec.Decode(bytes.Clone(b))
	if err != nil {
		return fmt.Errorf("emit: %w", err)
	}
	defer rec.Release()
	if !in.outChk {
		if err := sameColumns(rec.Schema(), in.cfg.Output); err != nil {
			return fmt.Errorf("emit: %w", err)
		}
		in.outChk = true
	}
	out := rec
	if !rec.Schema().Equal(in.cfg.Output) {
		out = array.NewRecordBatch(in.cfg.Output, rec.Columns(), rec.NumRows())
		defer out.Release()
	}
	in.stats.RowsOut.Add(out.NumRows())
	return in.cfg.Emit(out)
}

// sameColumns checks that got has want's column names and types, in order.
func sameColumns(got, want *arrow.Schema) error {
	describe := func(s *arrow.Schema) string {
		var b bytes.Buffer
		for i, f := range s.Fields() {
			if i > 0 {
				b.WriteString(", ")
			}
			t, err := arrowfmt.TypeOf(f.Type)
			if err != nil {
				fmt.Fprintf(&b, "%s %v", f.Name, f.Type)
			} else {
				fmt.Fprintf(&b, "%s %s", f.Name, t)
			}
		}
		return b.String()
	}
	if got.NumFields() == want.NumFields() {
		same := true
		for i := range got.NumFields() {
			gt, err := arrowfmt.TypeOf(got.Field(i).Type)
			wt, _ := arrowfmt.TypeOf(want.Field(i).Type)
			if err != nil || gt != wt || got.Field(i).Name != want.Field(i).Name {
				same = false
				break
			}
		}
		if same {
			return nil
		}
	}
	return fmt.Errorf("the guest emitted columns (%s), but declared (%s)", describe(got), describe(want))
}

// Stats returns the instance's counters.
func (in *Instance) Stats() *Stats { return &in.stats }

// Close closes the module instance. It is safe to call twice.
func (in *Instance) Close() error {
	if in.mod == nil {
		return nil
	}
	err := in.mod.Close(in.base)
	in.mod, in.closed = nil, true
	return err
}

// lineLogger logs what a guest writes to stdout and stderr, a line at a
// time, each cut at 4 KiB.
type lineLogger struct {
	log   *slog.Logger
	buf   []byte
	first []string // the first lines since reset, for errors: a runtime's message
	n     int      // lines since reset
}

// reset forgets the lines kept for errors (a call begins).
func (l *lineLogger) reset() { l.first, l.n = l.first[:0], 0 }

// tail returns the first lines written since reset, joined.
func (l *lineLogger) tail() string {
	lines := l.first
	if len(l.buf) > 0 && len(lines) < 2 {
		lines = append(lines[:len(lines):len(lines)], string(l.buf))
	}
	s := strings.Join(lines, " | ")
	if l.n > len(l.first) {
		s += " | …"
	}
	return s
}

func (l *lineLogger) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.buf = append(l.buf, p...)
			if len(l.buf) > 4096 {
				l.flush()
			}
			break
		}
		l.buf = append(l.buf, p[:i]...)
		l.flush()
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineLogger) flush() {
	line := l.buf
	if len(line) > 4096 {
		line = line[:4096]
	}
	l.log.Debug("guest output", "line", string(line))
	if len(bytes.TrimSpace(line)) > 0 {
		l.n++
		if len(l.first) < 2 {
			if len(line) > 200 {
				line = line[:200]
			}
			l.first = append(l.first, string(line))
		}
	}
	l.buf = l.buf[:0]
}
