package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
)

// runtime is one module instance: the function, what the host told it in
// weir_open, and the buffers reused across calls. The exports of
// exports_wasip1.go are thin wrappers of its methods; tests drive it with a
// fake host.
type runtime struct {
	h       host
	fn      Function
	onTimer TimerFunction // nil when fn has no OnTimer

	desc     Description
	descJSON []byte

	in []byte // what weir_alloc hands out

	opened     bool
	oc         OpenContext
	timeCol    int // in the input, -1 for none
	timeOffset int64
	keyTypes   []Type // of the keyBy columns; nil when unknown
	keyErr     error  // why keyTypes is nil

	dec decoder
	ctx Context
	out Collector

	inCall  bool // in weir_process or weir_timers: state and timers work
	wm      int64
	wmOK    bool
	refused bool // the host refused an emit during this call

	kbuf, vbuf []byte // state keys and values being written
	obuf       []byte // what host calls copy out
	spare      []*[]byte
}

func newRuntime(h host, fn Function) *runtime {
	r := &runtime{h: h, fn: fn, timeCol: -1}
	r.onTimer, _ = fn.(TimerFunction)
	r.ctx = Context{r: r, h: -1}
	r.ctx.timers.r = r
	r.oc.r = r
	r.out.r = r
	return r
}

// errNoFunction is the failure of a module whose main registered nothing.
var errNoFunction = errors.New("no function registered: call guest.Register in an init function of package main")

// alloc returns a buffer of at least size bytes (weir_alloc). One buffer
// serves every call: the host never has two inputs outstanding.
func (r *runtime) alloc(size int) []byte {
	if size < 0 {
		return nil
	}
	if cap(r.in) < max(size, 1) {
		r.in = make([]byte, max(size, 2*cap(r.in), 64<<10))
	}
	return r.in[:size]
}

// describe returns the description as JSON (weir_describe), nil after
// reporting a failure.
func (r *runtime) describe() []byte {
	if err := r.loadDescription(); err != nil {
		r.h.fail(-1, err.Error())
		return nil
	}
	return r.descJSON
}

func (r *runtime) loadDescription() (err error) {
	if r.descJSON != nil {
		return nil
	}
	if r.fn == nil {
		return errNoFunction
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("describe: panic: %v\n%s", p, debug.Stack())
		}
	}()
	d := r.fn.Describe()
	if d.Input == nil {
		d.Input = []Column{}
	}
	if d.Output == nil {
		d.Output = []Column{}
	}
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("describe: encode description: %w", err)
	}
	r.desc, r.descJSON = d, b
	return nil
}

// openDoc is the JSON document weir_open passes.
type openDoc struct {
	Function    string         `json:"function"`
	Version     int64          `json:"version"`
	Operator    string         `json:"operator"`
	Subtask     int            `json:"subtask"`
	Parallelism int            `json:"parallelism"`
	KeyColumns  []string       `json:"keyColumns"`
	KeyTypes    []Type         `json:"keyTypes"`
	TimeColumn  int            `json:"timeColumn"`
	TimeOffset  int64          `json:"timeOffset"`
	Config      map[string]any `json:"config"`
}

// open runs weir_open: it reads the document, prepares the output and
// calls the function's Open.
func (r *runtime) open(doc []byte) (code int32) {
	defer r.recoverCall("open", &code)
	if r.opened {
		return r.failed(-1, errors.New("weir_open called twice"))
	}
	if err := r.loadDescription(); err != nil {
		return r.failed(-1, err)
	}
	d := openDoc{TimeColumn: -1}
	if err := json.Unmarshal(doc, &d); err != nil {
		return r.failed(-1, fmt.Errorf("decode the weir_open document: %w", err))
	}
	if d.Config == nil {
		d.Config = map[string]any{}
	}
	r.timeCol, r.timeOffset = d.TimeColumn, d.TimeOffset
	if err := r.out.init(r.desc.Output); err != nil {
		return r.failed(-1, err)
	}
	// Timers of a restored instance may fire before a batch brings the
	// input schema: the key's types come with the document (from a host
	// that predates keyTypes, from the declared input until then).
	if d.KeyTypes != nil {
		if err := checkKeyTypes(d.KeyColumns, d.KeyTypes); err != nil {
			return r.failed(-1, err)
		}
		r.keyTypes = d.KeyTypes
	} else {
		r.keyTypes, r.keyErr = keyTypes(d.KeyColumns, r.desc.Input, "the declared input")
	}
	r.oc.doc = d
	err := r.fn.Open(&r.oc)
	r.oc.done = true
	if err != nil {
		return r.failed(-1, fmt.Errorf("open: %w", err))
	}
	r.opened = true
	return 0
}

func checkKeyTypes(cols []string, types []Type) error {
	if len(types) != len(cols) {
		return fmt.Errorf("the weir_open document has %d keyTypes for %d keyColumns", len(types), len(cols))
	}
	for i, t := range types {
		if kindOf(t) == kindNone {
			return fmt.Errorf("the weir_open document's keyTypes[%d] (column %q) is %q: want one of %s", i, cols[i], t, typeNames)
		}
	}
	return nil
}

// keyTypes returns the types of the key columns keys in cols.
func keyTypes(keys []string, cols []Column, where string) ([]Type, error) {
	ts := make([]Type, len(keys))
next:
	for i, k := range keys {
		for _, c := range cols {
			if c.Name == k {
				ts[i] = c.Type
				continue next
			}
		}
		return nil, fmt.Errorf("key column %q is not in %s (%s)", k, where, describeColumns(cols))
	}
	return ts, nil
}

// process runs weir_process: ProcessElement for each row of the batch in
// payload, then one emit of the output.
func (r *runtime) process(payload []byte) (code int32) {
	defer r.recoverCall("process element", &code)
	if !r.opened {
		return r.failed(-1, errors.New("weir_process before weir_open"))
	}
	changed, err := r.dec.decode(payload)
	if err != nil {
		return r.failed(-1, fmt.Errorf("decode input batch: %w", err))
	}
	if changed {
		if err := r.bindInput(); err != nil {
			return r.failed(-1, err)
		}
	}
	r.begin()
	b := &r.dec.batch
	for i := 0; i < b.rows; i++ {
		r.ctx.atRow(b, i)
		if err := r.fn.ProcessElement(&r.ctx, Row{b: b, i: i}, &r.out); err != nil {
			return r.failed(int32(i), fmt.Errorf("process element: %w", err))
		}
	}
	return r.finish()
}

// bindInput checks a new input schema against the open document.
func (r *runtime) bindInput() error {
	cols := r.dec.batch.cols
	if r.timeCol >= 0 {
		if r.timeCol >= len(cols) {
			return fmt.Errorf("the weir_open document's timeColumn %d is not a column of the input (%s)", r.timeCol, describeColumns(cols))
		}
		if t := cols[r.timeCol].Type; t != TimestampMs && t != Int64 {
			return fmt.Errorf("the weir_open document's timeColumn %d (%q) is %s, not timestamp_ms", r.timeCol, cols[r.timeCol].Name, t)
		}
	}
	if r.oc.doc.KeyTypes == nil {
		r.keyTypes, r.keyErr = keyTypes(r.oc.doc.KeyColumns, cols, "the input")
	}
	return nil
}

// timersRecord is the size of one timer in weir_timers' argument.
const timersRecord = 16

// timers runs weir_timers: OnTimer for each timer in recs, then one emit
// of the output.
func (r *runtime) timers(recs []byte) (code int32) {
	defer r.recoverCall("on timer", &code)
	if !r.opened {
		return r.failed(-1, errors.New("weir_timers before weir_open"))
	}
	if len(recs)%timersRecord != 0 {
		return r.failed(-1, fmt.Errorf("weir_timers: %d bytes is not a whole number of %d-byte timers", len(recs), timersRecord))
	}
	if r.onTimer == nil {
		return r.failed(-1, errors.New("timers fired but the function has no OnTimer method"))
	}
	r.begin()
	for i := 0; i < len(recs)/timersRecord; i++ {
		rec := recs[timersRecord*i:]
		t := Timer{Timestamp: int64(le.Uint64(rec)), Domain: TimeDomain(int32(le.Uint32(rec[8:])))}
		r.ctx.atTimer(i, t)
		if err := r.onTimer.OnTimer(&r.ctx, t, &r.out); err != nil {
			return r.failed(int32(i), fmt.Errorf("on timer: %w", err))
		}
	}
	return r.finish()
}

func (r *runtime) begin() {
	r.inCall, r.wmOK, r.refused = true, false, false
}

// finish ends a call that went well: the output goes to the host.
func (r *runtime) finish() int32 {
	if r.out.started {
		return r.failed(-1, errors.New("an output row was started (Set...) but not ended with EndRow"))
	}
	if err := r.out.flush(); err != nil {
		return r.failed(-1, err)
	}
	r.end()
	return 0
}

func (r *runtime) end() {
	r.inCall = false
	r.ctx.h = -1
}

// failed reports err for handle h (-1 for none) and ends the call. When
// the host refused an emit, its own error says more than err.
func (r *runtime) failed(h int32, err error) int32 {
	if !r.refused {
		r.h.fail(h, err.Error())
	}
	r.out.reset()
	r.end()
	return 1
}

// recoverCall turns a panic in the call what into a failure of the row or
// timer being processed.
func (r *runtime) recoverCall(what string, code *int32) {
	if p := recover(); p != nil {
		*code = r.failed(r.ctx.h, fmt.Errorf("%s: panic: %v\n%s", what, p, debug.Stack()))
	}
}

// handle returns the key handle of the row or timer being processed.
func (r *runtime) handle(what string) int32 {
	if !r.inCall || r.ctx.h < 0 {
		panic("guest: " + what + " used with no current key: only ProcessElement and OnTimer have one")
	}
	return r.ctx.h
}

func (r *runtime) watermark() int64 {
	if !r.wmOK {
		r.wm, r.wmOK = r.h.watermark(), true
	}
	return r.wm
}

// takeBuf returns a buffer nothing else uses until giveBuf, for
// iterations whose bodies may make host calls of their own.
func (r *runtime) takeBuf() *[]byte {
	if n := len(r.spare); n > 0 {
		b := r.spare[n-1]
		r.spare = r.spare[:n-1]
		return b
	}
	return new([]byte)
}

func (r *runtime) giveBuf(b *[]byte) { r.spare = append(r.spare, b) }
