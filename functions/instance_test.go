package functions

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/statestore"
)

// harness runs one Instance over batches built from Go rows, with keys
// computed like the runtime does, and collects the output as Go rows.
type harness struct {
	t      *testing.T
	mem    *memory.CheckedAllocator
	in     *arrow.Schema
	keys   []int
	maxP   int
	inst   *Instance
	out    [][]any
	now    time.Time
	cfg    InstanceConfig
	closed bool
}

func schema(t *testing.T, kv ...string) *arrow.Schema {
	t.Helper()
	var fs []arrowfmt.Field
	for i := 0; i < len(kv); i += 2 {
		fs = append(fs, arrowfmt.Field{Name: kv[i], Type: arrowfmt.Type(kv[i+1])})
	}
	s, err := arrowfmt.NewSchema(fs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newHarness(t *testing.T, def Definition, in *arrow.Schema, keyCols []int, timeCol int, timeOffset int64) (*harness, error) {
	t.Helper()
	h := &harness{t: t, mem: memory.NewCheckedAllocator(memory.NewGoAllocator()), in: in, keys: keyCols, maxP: 8, now: time.UnixMilli(1_000_000)}
	t.Cleanup(func() {
		if !h.closed && h.inst != nil {
			if err := h.inst.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}
		h.mem.AssertSize(t, 0)
	})
	fields, err := def.Output(in)
	if err != nil {
		return nil, err
	}
	out, err := arrowfmt.NewSchema(fields)
	if err != nil {
		return nil, err
	}
	var keyTypes []arrowfmt.Type
	for _, c := range keyCols {
		kt, _ := arrowfmt.TypeOf(in.Field(c).Type)
		keyTypes = append(keyTypes, kt)
	}
	h.cfg = InstanceConfig{
		Operator: "op", Function: "fn", Def: def,
		Input: in, InputTimeColumn: timeCol, InputTimeOffset: timeOffset,
		Output: out, KeyTypes: keyTypes,
		State:   statestore.NewMemory(0, h.maxP),
		Subtask: 0, Parallelism: 1,
		Mem:       h.mem,
		Now:       func() time.Time { return h.now },
		Emit:      h.collect,
		BatchRows: 4,
	}
	h.inst, err = NewInstance(h.cfg)
	return h, err
}

func (h *harness) collect(b arrow.RecordBatch) error {
	for r := 0; r < int(b.NumRows()); r++ {
		row := make([]any, b.NumCols())
		for c := range row {
			row[c] = arrowfmt.Value(b.Column(c), r)
		}
		h.out = append(h.out, row)
	}
	return nil
}

// take returns the output so far and forgets it.
func (h *harness) take() [][]any {
	out := h.out
	h.out = nil
	return out
}

func (h *harness) batch(rows ...[]any) error {
	h.t.Helper()
	b := arrowfmt.NewBuilder(h.in, h.mem)
	defer b.Release()
	for _, r := range rows {
		for c, v := range r {
			if err := b.AppendAny(c, v); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	rec := b.NewBatch()
	defer rec.Release()
	hashes := arrowfmt.HashKeys(rec, h.keys, nil)
	groups := make([]int, len(rows))
	keys := make([]string, len(rows))
	for i := range rows {
		groups[i] = arrowfmt.KeyGroup(hashes[i], h.maxP)
		keys[i] = arrowfmt.KeyString(rec, h.keys, i)
	}
	return h.inst.ProcessBatch(rec, groups, keys)
}

// counter keeps, per key, a count (ValueState), the values seen
// (ListState) and a count per value (MapState), and emits them per row.
type counter struct {
	n    *ValueState[int64]
	seen *ListState[string]
	per  *MapState[string, int64]
}

func (c *counter) Open(oc *OpenContext) error {
	c.n = Value[int64](oc, "n")
	c.seen = List[string](oc, "seen")
	c.per = Map[string, int64](oc, "per")
	return nil
}

func (c *counter) ProcessElement(ctx *Context, row Row, out *Collector) error {
	n, _ := c.n.Value()
	n++
	c.n.Update(n)
	v := row.String("v")
	c.seen.Add(v)
	k, _ := c.per.Get(v)
	c.per.Put(v, k+1)
	ts, ok := ctx.Timestamp()
	var tsv any
	if ok {
		tsv = ts
	}
	return out.Emit(ctx.Key()[0], n, strings.Join(c.seen.Get(), ","), c.per.Len(), tsv)
}

var counterDef = Definition{
	New: func(map[string]any) (ProcessFunction, error) { return &counter{}, nil },
	Output: func(*arrow.Schema) ([]arrowfmt.Field, error) {
		return []arrowfmt.Field{
			{Name: "k", Type: arrowfmt.String}, {Name: "n", Type: arrowfmt.Int64},
			{Name: "seen", Type: arrowfmt.String}, {Name: "distinct", Type: arrowfmt.Int64},
			{Name: "ts", Type: arrowfmt.Int64},
		}, nil
	},
}

func TestInstanceKeyedState(t *testing.T) {
	in := schema(t, "k", "string", "v", "string", "ts", "timestamp_ms")
	h, err := newHarness(t, counterDef, in, []int{0}, 2, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.batch(
		[]any{"a", "x", int64(100)},
		[]any{"b", "x", int64(101)},
		[]any{"a", "y", int64(102)},
		[]any{"a", "x", nil}, // null time: no timestamp
	); err != nil {
		t.Fatal(err)
	}
	if err := h.batch([]any{"b", "z", int64(200)}); err != nil {
		t.Fatal(err)
	}
	want := [][]any{
		{"a", int64(1), "x", int64(1), int64(99)},
		{"b", int64(1), "x", int64(1), int64(100)},
		{"a", int64(2), "x,y", int64(2), int64(101)},
		{"a", int64(3), "x,y,x", int64(2), nil},
		{"b", int64(2), "x,z", int64(2), int64(199)},
	}
	if got := h.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("output\n got %v\nwant %v", got, want)
	}
	// The state is in the backend, per key group and key.
	tab, err := statestore.OpenTable[int64](h.cfg.State, "n", nil)
	if err != nil {
		t.Fatal(err)
	}
	kg := arrowfmt.KeyGroup(arrowfmt.HashKeyValues("a"), h.maxP)
	if n, ok := tab.Get(kg, string(arrowfmt.AppendKey(nil, "a")), ""); !ok || n != 3 {
		t.Errorf("state n of key a = %d,%v, want 3", n, ok)
	}
	var dirty []string
	for _, d := range h.cfg.State.TakeDirty() {
		dirty = append(dirty, fmt.Sprintf("%s:%d", d.Table, len(d.Scopes)))
	}
	if want := []string{"n:2", "per:2", "seen:2"}; !slices.Equal(dirty, want) {
		t.Errorf("dirty tables = %v, want %v", dirty, want)
	}
}

// prefetching is a heap backend that records what it is asked to
// prefetch.
type prefetching struct {
	*statestore.Memory
	calls [][]string
}

func (p *prefetching) Prefetch(groups []int, keys []string) {
	p.calls = append(p.calls, slices.Clone(keys))
	p.Memory.Prefetch(groups, keys)
}

// TestInstancePrefetches: a backend that can prefetch is asked for the
// keys of each prefetchRows rows before they are processed, and the
// output is as without.
func TestInstancePrefetches(t *testing.T) {
	in := schema(t, "k", "string", "v", "string")
	h, err := newHarness(t, counterDef, in, []int{0}, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	pf := &prefetching{Memory: h.cfg.State.(*statestore.Memory)}
	h.inst.state = pf
	var rows [][]any
	for i := range 2*prefetchRows + 10 {
		rows = append(rows, []any{fmt.Sprint(i % 7), "v"})
	}
	if err := h.batch(rows...); err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, c := range pf.calls {
		got = append(got, len(c))
	}
	if want := []int{prefetchRows, prefetchRows, 10}; !slices.Equal(got, want) {
		t.Fatalf("prefetched %v keys at a time, want %v", got, want)
	}
	if k := pf.calls[1][0]; k != arrowfmt.KeyString(mustBatch(t, h, rows[prefetchRows]), []int{0}, 0) {
		t.Errorf("the second prefetch starts at key %q, want row %d's", k, prefetchRows)
	}
	if out := h.take(); len(out) != len(rows) {
		t.Errorf("%d rows out of %d", len(out), len(rows))
	}
}

// mustBatch builds a batch of one row of h's input.
func mustBatch(t *testing.T, h *harness, row []any) arrow.RecordBatch {
	t.Helper()
	b := arrowfmt.NewBuilder(h.in, memory.DefaultAllocator)
	defer b.Release()
	for c, v := range row {
		if err := b.AppendAny(c, v); err != nil {
			t.Fatal(err)
		}
	}
	rec := b.NewBatch()
	t.Cleanup(rec.Release)
	return rec
}

func TestInstanceBatchesOutput(t *testing.T) {
	in := schema(t, "k", "string", "v", "string")
	var batches []int
	h, err := newHarness(t, counterDef, in, []int{0}, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	emit := h.inst.emit
	h.inst.emit = func(b arrow.RecordBatch) error {
		batches = append(batches, int(b.NumRows()))
		return emit(b)
	}
	var rows [][]any
	for i := range 10 {
		rows = append(rows, []any{fmt.Sprint(i % 3), "v"})
	}
	if err := h.batch(rows...); err != nil {
		t.Fatal(err)
	}
	if err := h.batch(rows[:1]...); err != nil {
		t.Fatal(err)
	}
	// BatchRows is 4: full batches as they fill, the rest at the end of
	// each input batch.
	if want := []int{4, 4, 2, 1}; !slices.Equal(batches, want) {
		t.Errorf("output batch sizes %v, want %v", batches, want)
	}
}

func TestEmitChecks(t *testing.T) {
	var emitErrs []error
	def := Definition{
		New: func(map[string]any) (ProcessFunction, error) {
			return processFunc(func(ctx *Context, row Row, out *Collector) error {
				for _, vals := range [][]any{
					{"only one"},
					{"s", "not an int", 1.5, true, time.Time{}},
					{"s", int64(1), "not a float", true, time.Time{}},
					{"s", uint64(1 << 63), 1.5, true, nil},
					{[]byte("bytes"), int32(7), 2, nil, time.UnixMilli(5)}, // ok: conversions and a null
					{nil, nil, float32(0.5), false, int64(9)},              // ok
				} {
					emitErrs = append(emitErrs, out.Emit(vals...))
				}
				return nil
			}), nil
		},
		Output: func(*arrow.Schema) ([]arrowfmt.Field, error) {
			return []arrowfmt.Field{
				{Name: "s", Type: arrowfmt.String}, {Name: "i", Type: arrowfmt.Int64},
				{Name: "f", Type: arrowfmt.Float64}, {Name: "b", Type: arrowfmt.Bool},
				{Name: "t", Type: arrowfmt.TimestampMs},
			}, nil
		},
	}
	h, err := newHarness(t, def, schema(t, "k", "int64"), []int{0}, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.batch([]any{int64(1)}); err != nil {
		t.Fatal(err)
	}
	wantErrs := []string{
		"functions: emit: 1 values for 5 output columns (s string, i int64, f float64, b bool, t timestamp_ms)",
		`functions: emit: column "i" (#1) wants int64, got string not an int`,
		`functions: emit: column "f" (#2) wants float64, got string not a float`,
		`functions: emit: column "i" (#1) wants int64, got uint64 9223372036854775808`,
		"", "",
	}
	for i, want := range wantErrs {
		got := ""
		if emitErrs[i] != nil {
			got = emitErrs[i].Error()
		}
		if got != want {
			t.Errorf("emit %d: error %q, want %q", i, got, want)
		}
	}
	// Refused rows left nothing behind.
	want := [][]any{
		{"bytes", int64(7), 2.0, nil, time.UnixMilli(5).UTC()},
		{nil, nil, 0.5, false, time.UnixMilli(9).UTC()},
	}
	if got := h.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("output\n got %v\nwant %v", got, want)
	}
}

type processFunc func(ctx *Context, row Row, out *Collector) error

func (f processFunc) ProcessElement(ctx *Context, row Row, out *Collector) error {
	return f(ctx, row, out)
}

func TestRowAccessors(t *testing.T) {
	in := schema(t, "i", "int64", "f", "float64", "s", "string", "b", "bool", "t", "timestamp_ms")
	var got []any
	fn := processFunc(func(ctx *Context, row Row, out *Collector) error {
		got = append(got, row.Int64("i"), row.Float64("f"), row.String("s"), row.Bool("b"),
			row.TimestampMs("t"), row.Time("t"), row.IsNull("i"), row.IsNull("s"), row.Value("f"),
			row.Has("s"), row.Has("nope"), ctx.Key())
		return nil
	})
	def := Definition{
		New: func(map[string]any) (ProcessFunction, error) { return fn, nil },
		Output: func(*arrow.Schema) ([]arrowfmt.Field, error) {
			return []arrowfmt.Field{{Name: "x", Type: arrowfmt.Int64}}, nil
		},
	}
	h, err := newHarness(t, def, in, []int{2, 0}, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.batch([]any{int64(-3), 2.5, "zone", true, int64(1500)}); err != nil {
		t.Fatal(err)
	}
	want := []any{int64(-3), 2.5, "zone", true, int64(1500), time.UnixMilli(1500).UTC(), false, false, 2.5, true, false, []any{"zone", int64(-3)}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("accessors\n got %v\nwant %v", got, want)
	}
}

func TestRowMisuseFailsWithMessage(t *testing.T) {
	in := schema(t, "k", "string", "n", "int64")
	for _, c := range []struct {
		name string
		fn   func(Row)
		want string
	}{
		{"missing column", func(r Row) { r.Int64("nope") }, `row has no column "nope" (columns: k string, n int64)`},
		{"wrong type", func(r Row) { r.Float64("n") }, `column "n" is int64, not float64`},
	} {
		t.Run(c.name, func(t *testing.T) {
			def := Definition{
				New: func(map[string]any) (ProcessFunction, error) {
					return processFunc(func(_ *Context, row Row, _ *Collector) error { c.fn(row); return nil }), nil
				},
				Output: func(*arrow.Schema) ([]arrowfmt.Field, error) {
					return []arrowfmt.Field{{Name: "x", Type: arrowfmt.Int64}}, nil
				},
			}
			h, err := newHarness(t, def, in, []int{0}, -1, 0)
			if err != nil {
				t.Fatal(err)
			}
			err = h.batch([]any{"a", int64(1)})
			if err == nil || !strings.Contains(err.Error(), "function fn: process element: panic: functions: "+c.want) {
				t.Errorf("error = %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

// sessionizer emits, per key, the number of rows seen when an event-time
// timer 10ms after the key's first row fires, and counts processing-time
// timers.
type sessionizer struct {
	count *ValueState[int64]
	log   *[]string
}

func (s *sessionizer) Open(oc *OpenContext) error {
	s.count = Value[int64](oc, "count")
	return nil
}

func (s *sessionizer) ProcessElement(ctx *Context, row Row, out *Collector) error {
	n, ok := s.count.Value()
	ts, _ := ctx.Timestamp()
	if !ok {
		ctx.Timers().RegisterEventTime(ts + 10)
		ctx.Timers().RegisterEventTime(ts + 10) // deduplicated
		ctx.Timers().RegisterProcessingTime(ctx.Timers().CurrentProcessingTime() + 50)
	}
	if row.String("v") == "cancel" {
		ctx.Timers().DeleteEventTime(ts - n + 10) // ts of first row is ts-n for this test
		ctx.Timers().DeleteProcessingTime(ctx.Timers().CurrentProcessingTime() + 50)
	}
	s.count.Update(n + 1)
	return nil
}

func (s *sessionizer) OnTimer(ctx *Context, t Timer, out *Collector) error {
	ts, hasTs := ctx.Timestamp()
	*s.log = append(*s.log, fmt.Sprintf("%v@%d key=%v ts=%d,%v wm=%d", t.Domain, t.Timestamp, ctx.Key()[0], ts, hasTs, ctx.Watermark()))
	if t.Domain == EventTime {
		n, _ := s.count.Value()
		s.count.Clear()
		return out.Emit(ctx.Key()[0], n, t.Timestamp)
	}
	return nil
}

func TestInstanceTimers(t *testing.T) {
	var log []string
	def := Definition{
		New: func(map[string]any) (ProcessFunction, error) { return &sessionizer{log: &log}, nil },
		Output: func(*arrow.Schema) ([]arrowfmt.Field, error) {
			return []arrowfmt.Field{{Name: "k", Type: arrowfmt.String}, {Name: "n", Type: arrowfmt.Int64}, {Name: "end", Type: arrowfmt.TimestampMs}}, nil
		},
	}
	in := schema(t, "k", "string", "v", "string", "ts", "timestamp_ms")
	h, err := newHarness(t, def, in, []int{0}, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.batch(
		[]any{"a", "", int64(100)},
		[]any{"b", "", int64(95)},
		[]any{"a", "", int64(103)},
		[]any{"c", "", int64(100)},
		[]any{"c", "cancel", int64(101)}, // deletes c's timers
	); err != nil {
		t.Fatal(err)
	}
	if next, ok := h.inst.NextProcessingTime(); !ok || !next.Equal(h.now.Add(50*time.Millisecond)) {
		t.Errorf("NextProcessingTime = %v,%v", next, ok)
	}
	if err := h.inst.AdvanceWatermark(104); err != nil {
		t.Fatal(err)
	}
	if got := h.take(); len(got) != 0 {
		t.Fatalf("at watermark 104: %v", got)
	}
	if err := h.inst.AdvanceWatermark(105); err != nil { // a timer fires when the watermark reaches it
		t.Fatal(err)
	}
	if got := h.take(); len(got) != 1 || fmt.Sprint(got[0]) != fmt.Sprint([]any{"b", int64(1), time.UnixMilli(105).UTC()}) {
		t.Fatalf("at watermark 105: %v", got)
	}
	if err := h.inst.AdvanceWatermark(MaxWatermark); err != nil {
		t.Fatal(err)
	}
	if got := h.take(); len(got) != 1 || fmt.Sprint(got[0]) != fmt.Sprint([]any{"a", int64(2), time.UnixMilli(110).UTC()}) {
		t.Fatalf("at the end: %v", got)
	}
	h.now = h.now.Add(time.Second)
	if err := h.inst.FireProcessingTimers(h.now); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"event time@105 key=b ts=105,true wm=105",
		fmt.Sprintf("event time@110 key=a ts=110,true wm=%d", MaxWatermark),
		// Timers due together fire by key group, then key: b's key
		// group is below a's.
		"processing time@1000050 key=b ts=0,false wm=9223372036854775807",
		"processing time@1000050 key=a ts=0,false wm=9223372036854775807",
	}
	if !slices.Equal(log, want) {
		t.Errorf("timer log\n got %q\nwant %q", log, want)
	}
	if _, ok := h.inst.NextProcessingTime(); ok {
		t.Error("processing-time timers left")
	}
}

func TestTimerWithoutOnTimerFails(t *testing.T) {
	def := Definition{
		New: func(map[string]any) (ProcessFunction, error) {
			return processFunc(func(ctx *Context, _ Row, _ *Collector) error {
				ctx.Timers().RegisterEventTime(1)
				return nil
			}), nil
		},
		Output: func(*arrow.Schema) ([]arrowfmt.Field, error) {
			return []arrowfmt.Field{{Name: "x", Type: arrowfmt.Int64}}, nil
		},
	}
	h, err := newHarness(t, def, schema(t, "k", "int64"), []int{0}, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = h.batch([]any{int64(1)})
	if err == nil || !strings.Contains(err.Error(), `function "fn" registers a timer but has no OnTimer method`) {
		t.Errorf("error = %v", err)
	}
}

type badState struct{ closed *bool }

func (b *badState) Open(oc *OpenContext) error {
	Value[int64](oc, "x")
	List[int64](oc, "x") // the same name with another type
	return nil
}
func (b *badState) ProcessElement(*Context, Row, *Collector) error { return nil }
func (b *badState) Close() error                                   { *b.closed = true; return nil }

func TestOpenFailures(t *testing.T) {
	out := func(*arrow.Schema) ([]arrowfmt.Field, error) {
		return []arrowfmt.Field{{Name: "x", Type: arrowfmt.Int64}}, nil
	}
	in := schema(t, "k", "int64")

	closed := false
	_, err := newHarness(t, Definition{New: func(map[string]any) (ProcessFunction, error) { return &badState{&closed}, nil }, Output: out}, in, []int{0}, -1, 0)
	if err == nil || !strings.Contains(err.Error(), `function fn: open: declare list state "x": statestore: table type mismatch: "x" holds int64, not []int64`) {
		t.Errorf("conflicting state: error = %v", err)
	}
	if !closed {
		t.Error("a function whose Open failed was not closed")
	}

	boom := errors.New("bad config")
	_, err = newHarness(t, Definition{New: func(map[string]any) (ProcessFunction, error) { return nil, boom }, Output: out}, in, []int{0}, -1, 0)
	if !errors.Is(err, boom) {
		t.Errorf("New error: %v", err)
	}

	var stateOutside error
	_, err = newHarness(t, Definition{New: func(map[string]any) (ProcessFunction, error) {
		return openFunc(func(oc *OpenContext) error {
			defer func() { stateOutside = fmt.Errorf("%v", recover()) }()
			Value[int64](oc, "v").Update(1)
			return nil
		}), nil
	}, Output: out}, in, []int{0}, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := "functions: state used with no current key: only ProcessElement and OnTimer have one"; stateOutside == nil || stateOutside.Error() != want {
		t.Errorf("state in Open: %v, want %q", stateOutside, want)
	}
}

type openFunc func(*OpenContext) error

func (f openFunc) Open(oc *OpenContext) error                   { return f(oc) }
func (openFunc) ProcessElement(*Context, Row, *Collector) error { return nil }

func TestListAndMapState(t *testing.T) {
	var ls *ListState[int64]
	var ms *MapState[int64, string]
	var checks []string
	fn := &struct{ openFunc }{}
	def := Definition{
		New: func(map[string]any) (ProcessFunction, error) { return fn, nil },
		Output: func(*arrow.Schema) ([]arrowfmt.Field, error) {
			return []arrowfmt.Field{{Name: "x", Type: arrowfmt.Int64}}, nil
		},
	}
	fn.openFunc = func(oc *OpenContext) error {
		ls = List[int64](oc, "l")
		ms = Map[int64, string](oc, "m")
		return nil
	}
	h, err := newHarness(t, def, schema(t, "k", "int64"), []int{0}, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Drive state directly with a key current, as ProcessElement would.
	h.inst.setKey(3, "key")
	ls.Add(1)
	got := ls.Get()
	_ = append(got, 99) // appending to what Get returned does not reach the state
	ls.Add(2)
	vals := []int64{7, 8}
	ls.Update(vals)
	vals[0] = 0 // Update copied
	checks = append(checks, fmt.Sprint(ls.Get()))
	ls.Update(nil)
	checks = append(checks, fmt.Sprint(ls.Get() == nil))

	ms.Put(1, "a")
	ms.Put(2, "b")
	ms.Put(1, "c")
	ms.Delete(5)
	v, ok := ms.Get(1)
	checks = append(checks, fmt.Sprintf("%v %v %v", v, ok, ms.Len()))
	m := map[int64]string{}
	for k, v := range ms.All() {
		m[k] = v
	}
	keys := slices.Sorted(ms.Keys())
	checks = append(checks, fmt.Sprint(m, keys))
	n := 0
	ms.Range(func(int64, string) bool { n++; return false })
	checks = append(checks, fmt.Sprint(n))
	ms.Delete(1)
	ms.Delete(2) // the last entry: the map is gone
	tab, _ := statestore.OpenTable[map[int64]string](h.cfg.State, "m", nil)
	_, present := tab.Get(3, "key", "")
	checks = append(checks, fmt.Sprint(ms.Len(), present))
	ms.Put(4, "d")
	ms.Clear()
	checks = append(checks, fmt.Sprint(ms.Len()))

	// Another key sees its own state.
	h.inst.setKey(3, "other")
	checks = append(checks, fmt.Sprint(len(ls.Get()), ms.Len()))

	want := []string{"[7 8]", "true", "c true 2", "map[1:c 2:b] [1 2]", "1", "0 false", "0", "0 0"}
	if !slices.Equal(checks, want) {
		t.Errorf("checks\n got %q\nwant %q", checks, want)
	}
	_ = maps.Clone(m)
}

func TestRegistry(t *testing.T) {
	def := Definition{
		New:    func(map[string]any) (ProcessFunction, error) { return &counter{}, nil },
		Output: counterDef.Output,
		Doc:    "test",
	}
	Register("test-registry-b", def)
	Register("test-registry-a", def)
	if d, ok := Lookup("test-registry-a"); !ok || d.Doc != "test" {
		t.Errorf("Lookup = %+v, %v", d, ok)
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
	names := Names()
	ia, ib := slices.Index(names, "test-registry-a"), slices.Index(names, "test-registry-b")
	if ia < 0 || ib != ia+1 || !slices.IsSorted(names) {
		t.Errorf("Names = %v", names)
	}
	mustPanic(t, "functions: Register called twice for \"test-registry-a\"", func() { Register("test-registry-a", def) })
	mustPanic(t, "functions: Register with an empty name", func() { Register("", def) })
	mustPanic(t, "functions: Register \"x\": Definition needs New and Output", func() { Register("x", Definition{}) })
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if got := fmt.Sprint(recover()); got != want {
			t.Errorf("panic %q, want %q", got, want)
		}
	}()
	f()
}
