package guest

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
)

// fakeHost is the host side of the ABI in memory, for driving a runtime
// as a worker would: state and timers per encoded key, output decoded
// with arrowfmt (which verifies the IPC strictly).
type fakeHost struct {
	t    testing.TB
	mem  *memory.CheckedAllocator
	keys [][]byte // key of each handle in the current call
	wm   int64
	now  int64

	states []stateDecl
	values map[slot][]byte
	lists  map[slot][][]byte
	maps   map[slot]map[string][]byte
	timers map[timerID]bool

	dec      *arrowfmt.Decoder
	out      [][]any  // every row emitted, as arrowfmt.Value gives them
	payloads [][]byte // every payload emitted
	refuse   bool

	fails []failure
	logs  []string
}

type stateDecl struct {
	kind int32
	name string
}

type slot struct {
	id      int32
	key, ns string
}

type timerID struct {
	key    string
	domain TimeDomain
	ts     int64
}

type failure struct {
	h   int32
	msg string
}

func newFakeHost(t testing.TB) *fakeHost {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	h := &fakeHost{
		t: t, mem: mem, wm: MinWatermark, now: time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli(),
		values: map[slot][]byte{}, lists: map[slot][][]byte{}, maps: map[slot]map[string][]byte{},
		timers: map[timerID]bool{}, dec: arrowfmt.NewDecoder(mem),
	}
	t.Cleanup(func() {
		h.dec.Close()
		mem.AssertSize(t, 0)
	})
	return h
}

var _ host = (*fakeHost)(nil)

func (f *fakeHost) keyOf(h int32) string {
	if h < 0 || int(h) >= len(f.keys) {
		f.t.Fatalf("bad key handle %d (%d in this call)", h, len(f.keys))
	}
	return string(f.keys[h])
}

func (f *fakeHost) checkState(st int32, kind int32) {
	if st < 0 || int(st) >= len(f.states) || f.states[st].kind != kind {
		f.t.Fatalf("state id %d is not of kind %d (%v)", st, kind, f.states)
	}
}

// copyOut copies v into out as the ABI says: the length, and nothing
// copied when it does not fit.
func copyOut(v []byte, out []byte) int32 {
	if len(v) <= len(out) {
		copy(out, v)
	}
	return int32(len(v))
}

func (f *fakeHost) fail(h int32, msg string) { f.fails = append(f.fails, failure{h, msg}) }
func (f *fakeHost) log(level Level, msg string) {
	f.logs = append(f.logs, fmt.Sprintf("%d %s", level, msg))
}

func (f *fakeHost) emit(payload []byte) int32 {
	if f.refuse {
		return 1
	}
	payload = slices.Clone(payload) // decoded strings point into it; the guest reuses its buffer
	rec, err := f.dec.Decode(payload)
	if err != nil {
		f.t.Errorf("emit: %v", err)
		return 1
	}
	defer rec.Release()
	f.payloads = append(f.payloads, payload)
	f.out = append(f.out, rowsOf(rec)...)
	return 0
}

func (f *fakeHost) state(kind int32, name string) int32 {
	for i, s := range f.states {
		if s.name == name {
			if s.kind != kind {
				f.t.Fatalf("state %q declared as kind %d and %d", name, s.kind, kind)
			}
			return int32(i)
		}
	}
	f.states = append(f.states, stateDecl{kind, name})
	return int32(len(f.states) - 1)
}

func (f *fakeHost) key(h int32, out []byte) int32 { return copyOut(f.keys[h], out) }
func (f *fakeHost) watermark() int64              { return f.wm }
func (f *fakeHost) processingTime() int64         { return f.now }

func (f *fakeHost) valueGet(st, h int32, ns string, out []byte) int32 {
	f.checkState(st, kindValue)
	v, ok := f.values[slot{st, f.keyOf(h), ns}]
	if !ok {
		return -1
	}
	return copyOut(v, out)
}

func (f *fakeHost) valuePut(st, h int32, ns string, v []byte) {
	f.checkState(st, kindValue)
	f.values[slot{st, f.keyOf(h), ns}] = slices.Clone(v)
}

func (f *fakeHost) valueDelete(st, h int32, ns string) {
	f.checkState(st, kindValue)
	delete(f.values, slot{st, f.keyOf(h), ns})
}

func (f *fakeHost) listGet(st, h int32, ns string, out []byte) int32 {
	f.checkState(st, kindList)
	l := f.lists[slot{st, f.keyOf(h), ns}]
	if len(l) == 0 {
		return -1
	}
	var b []byte
	for _, e := range l {
		b = le.AppendUint32(b, uint32(len(e)))
		b = append(b, e...)
	}
	return copyOut(b, out)
}

func (f *fakeHost) listAdd(st, h int32, ns string, v []byte) {
	f.checkState(st, kindList)
	s := slot{st, f.keyOf(h), ns}
	f.lists[s] = append(f.lists[s], slices.Clone(v))
}

func (f *fakeHost) listClear(st, h int32, ns string) {
	f.checkState(st, kindList)
	delete(f.lists, slot{st, f.keyOf(h), ns})
}

func (f *fakeHost) mapGet(st, h int32, ns string, k, out []byte) int32 {
	f.checkState(st, kindMap)
	v, ok := f.maps[slot{st, f.keyOf(h), ns}][string(k)]
	if !ok {
		return -1
	}
	return copyOut(v, out)
}

func (f *fakeHost) mapPut(st, h int32, ns string, k, v []byte) {
	f.checkState(st, kindMap)
	s := slot{st, f.keyOf(h), ns}
	if f.maps[s] == nil {
		f.maps[s] = map[string][]byte{}
	}
	f.maps[s][string(k)] = slices.Clone(v)
}

func (f *fakeHost) mapDelete(st, h int32, ns string, k []byte) {
	f.checkState(st, kindMap)
	s := slot{st, f.keyOf(h), ns}
	delete(f.maps[s], string(k))
	if len(f.maps[s]) == 0 {
		delete(f.maps, s)
	}
}

func (f *fakeHost) mapEntries(st, h int32, ns string, out []byte) int32 {
	f.checkState(st, kindMap)
	m := f.maps[slot{st, f.keyOf(h), ns}]
	if len(m) == 0 {
		return -1
	}
	var b []byte
	for k, v := range m {
		b = le.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = le.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return copyOut(b, out)
}

func (f *fakeHost) mapClear(st, h int32, ns string) {
	f.checkState(st, kindMap)
	delete(f.maps, slot{st, f.keyOf(h), ns})
}

func (f *fakeHost) timerRegister(h int32, d TimeDomain, ts int64) {
	f.timers[timerID{f.keyOf(h), d, ts}] = true
}

func (f *fakeHost) timerDelete(h int32, d TimeDomain, ts int64) {
	delete(f.timers, timerID{f.keyOf(h), d, ts})
}

// driver runs a runtime over a fakeHost as a worker would.
type driver struct {
	t       testing.TB
	h       *fakeHost
	r       *runtime
	schema  *arrow.Schema
	enc     *arrowfmt.Encoder
	keyCols []int
}

// newDriver opens fn with the open document doc for input of schema in,
// keyed by keyCols (indexes in in).
func newDriver(t testing.TB, fn Function, in *arrow.Schema, keyCols []int, doc string) *driver {
	t.Helper()
	h := newFakeHost(t)
	d := &driver{t: t, h: h, r: newRuntime(h, fn), schema: in, keyCols: keyCols}
	if in != nil {
		d.enc = arrowfmt.NewEncoder(in, h.mem)
	}
	if code := d.r.open(d.input([]byte(doc))); code != 0 {
		t.Fatalf("open: code %d, failures %v", code, h.fails)
	}
	return d
}

// input copies b into the runtime's weir_alloc buffer, as the host does.
func (d *driver) input(b []byte) []byte {
	buf := d.r.alloc(len(b))
	copy(buf, b)
	return buf
}

// process sends rec; it returns the export's result.
func (d *driver) process(rec arrow.RecordBatch) int32 {
	d.t.Helper()
	payload, err := d.enc.Encode(rec)
	if err != nil {
		d.t.Fatal(err)
	}
	d.h.keys = d.h.keys[:0]
	for i := range int(rec.NumRows()) {
		d.h.keys = append(d.h.keys, arrowfmt.AppendRowKey(nil, rec, d.keyCols, i))
	}
	return d.r.process(d.input(payload))
}

// advance moves the watermark to wm and fires the event-time timers it
// reaches, in timestamp order (then key order), until none is due.
func (d *driver) advance(wm int64) int32 {
	d.t.Helper()
	d.h.wm = wm
	for {
		var due []timerID
		for id := range d.h.timers {
			if id.domain == EventTime && id.ts <= wm {
				due = append(due, id)
			}
		}
		if len(due) == 0 {
			return 0
		}
		slices.SortFunc(due, func(a, b timerID) int {
			return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.key, b.key))
		})
		if code := d.fire(due); code != 0 {
			return code
		}
	}
}

// fire calls weir_timers with timers, removing them first.
func (d *driver) fire(timers []timerID) int32 {
	var recs []byte
	d.h.keys = d.h.keys[:0]
	for _, id := range timers {
		delete(d.h.timers, id)
		recs = le.AppendUint64(recs, uint64(id.ts))
		recs = le.AppendUint32(recs, uint32(id.domain))
		recs = le.AppendUint32(recs, 0)
		d.h.keys = append(d.h.keys, []byte(id.key))
	}
	return d.r.timers(d.input(recs))
}

// rowsOf returns every row of rec as Go values.
func rowsOf(rec arrow.RecordBatch) [][]any {
	rows := make([][]any, rec.NumRows())
	for r := range rows {
		rows[r] = make([]any, rec.NumCols())
		for c := range rows[r] {
			rows[r][c] = arrowfmt.Value(rec.Column(c), r)
		}
	}
	return rows
}

// batchOf builds a batch of schema s from rows of Go values.
func batchOf(t testing.TB, mem memory.Allocator, s *arrow.Schema, rows ...[]any) arrow.RecordBatch {
	t.Helper()
	b := arrowfmt.NewBuilder(s, mem)
	defer b.Release()
	for _, r := range rows {
		for c, v := range r {
			if err := b.AppendAny(c, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.NewBatch()
}

func schemaOf(t testing.TB, cols ...Column) *arrow.Schema {
	t.Helper()
	fs := make([]arrowfmt.Field, len(cols))
	for i, c := range cols {
		fs[i] = arrowfmt.Field{Name: c.Name, Type: arrowfmt.Type(c.Type)}
	}
	s, err := arrowfmt.NewSchema(fs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
