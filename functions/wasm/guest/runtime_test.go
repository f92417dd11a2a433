package guest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// fnFuncs is a Function made of closures, for tests.
type fnFuncs struct {
	desc    Description
	open    func(oc *OpenContext) error
	process func(ctx *Context, row Row, out *Collector) error
}

func (f *fnFuncs) Describe() Description { return f.desc }
func (f *fnFuncs) Open(oc *OpenContext) error {
	if f.open == nil {
		return nil
	}
	return f.open(oc)
}
func (f *fnFuncs) ProcessElement(ctx *Context, row Row, out *Collector) error {
	return f.process(ctx, row, out)
}

type timerFuncs struct {
	fnFuncs
	onTimer func(ctx *Context, t Timer, out *Collector) error
}

func (f *timerFuncs) OnTimer(ctx *Context, t Timer, out *Collector) error {
	return f.onTimer(ctx, t, out)
}

var kvts = []Column{{Name: "k", Type: String}, {Name: "v", Type: Int64}, {Name: "ts", Type: TimestampMs}}

const kvtsOpen = `{"function":"probe","version":3,"operator":"op","subtask":1,"parallelism":4,
	"keyColumns":["k"],"timeColumn":2,"timeOffset":0,"config":{"size":10,"name":"x"}}`

func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }

// windowed counts rows per key and 10 ms event-time window in a
// ValueState with the window start as namespace, lists each window's v
// values and counts them per value in a map, and emits every window when
// the watermark passes its end, clearing its state; all three state kinds
// with namespaces, timers and the key from a timer.
func windowed() *timerFuncs {
	var (
		count *ValueState[int64]
		vs    *ListState[int64]
		per   *MapState[int64, int64]
	)
	ns := func(start int64) string { return fmt.Sprint(start) }
	return &timerFuncs{
		fnFuncs: fnFuncs{
			desc: Description{
				Input: kvts,
				Output: []Column{
					{Name: "k", Type: String}, {Name: "start", Type: TimestampMs}, {Name: "n", Type: Int64},
					{Name: "vs", Type: String}, {Name: "distinct", Type: Int64},
				},
				TimeColumn: "start",
			},
			open: func(oc *OpenContext) error {
				count = Value[int64](oc, "count")
				vs = List[int64](oc, "vs")
				per = Map[int64, int64](oc, "per")
				return nil
			},
			process: func(ctx *Context, row Row, out *Collector) error {
				ts, ok := ctx.Timestamp()
				if !ok {
					return nil
				}
				start := ts - ts%10
				n, _ := count.ValueNS(ns(start))
				count.UpdateNS(ns(start), n+1)
				v := row.Int64("v")
				vs.AddNS(ns(start), v)
				c, _ := per.GetNS(ns(start), v)
				per.PutNS(ns(start), v, c+1)
				ctx.Timers().RegisterEventTime(start + 9)
				return nil
			},
		},
		onTimer: func(ctx *Context, t Timer, out *Collector) error {
			start := t.Timestamp - 9
			n, ok := count.ValueNS(ns(start))
			if !ok {
				return errors.New("timer without a count")
			}
			var list []string
			for _, v := range vs.GetNS(ns(start)) {
				list = append(list, fmt.Sprint(v))
			}
			if err := out.Emit(ctx.Key()[0], start, n, strings.Join(list, ","), per.LenNS(ns(start))); err != nil {
				return err
			}
			count.ClearNS(ns(start))
			vs.ClearNS(ns(start))
			per.ClearNS(ns(start))
			return nil
		},
	}
}

func TestProcessStateAndTimers(t *testing.T) {
	d := newDriver(t, windowed(), schemaOf(t, kvts...), []int{0}, kvtsOpen)
	in := func(rows ...[]any) {
		t.Helper()
		rec := batchOf(t, d.h.mem, d.schema, rows...)
		defer rec.Release()
		if code := d.process(rec); code != 0 {
			t.Fatalf("process: %d %v", code, d.h.fails)
		}
	}
	in([]any{"a", 1, ms(1)}, []any{"b", 2, ms(3)}, []any{"a", 1, ms(5)}, []any{"a", 3, ms(12)}, []any{"b", 4, nil})
	if code := d.advance(9); code != 0 {
		t.Fatal(d.h.fails)
	}
	in([]any{"a", 7, ms(15)}, []any{nil, 8, ms(19)})
	if code := d.advance(MaxWatermark); code != 0 {
		t.Fatal(d.h.fails)
	}
	requireRows(t, d.h.out, [][]any{
		{"a", ms(0), int64(2), "1,1", int64(1)},
		{"b", ms(0), int64(1), "2", int64(1)},
		{nil, ms(10), int64(1), "8", int64(1)}, // the null key sorts first
		{"a", ms(10), int64(2), "3,7", int64(2)},
	})
	if len(d.h.values)+len(d.h.lists)+len(d.h.maps)+len(d.h.timers) != 0 {
		t.Errorf("state left: %v %v %v %v", d.h.values, d.h.lists, d.h.maps, d.h.timers)
	}
	// One payload per call that emitted (each advance fires its timers in
	// one call).
	if len(d.h.payloads) != 2 {
		t.Errorf("%d payloads, want 2", len(d.h.payloads))
	}
	if got := fmt.Sprint(d.h.states); got != "[{0 count} {1 vs} {2 per}]" {
		t.Errorf("declared %s", got)
	}
}

func TestOpenContextAndTime(t *testing.T) {
	var got []string
	fn := &fnFuncs{
		desc: Description{Input: kvts, Output: kvts[:1]},
		open: func(oc *OpenContext) error {
			got = append(got, fmt.Sprintf("%q %d %q %d %d %v %v", oc.Function(), oc.Version(), oc.Operator(), oc.Subtask(), oc.Parallelism(), oc.KeyColumns(), oc.Config()))
			oc.Log(LevelInfo, "opened")
			return nil
		},
		process: func(ctx *Context, row Row, out *Collector) error {
			ts, ok := ctx.Timestamp()
			got = append(got, fmt.Sprint(ctx.Key(), ts, ok, ctx.Watermark(), ctx.Timers().CurrentProcessingTime()))
			ctx.Log(LevelWarn, "row")
			return nil
		},
	}
	doc := `{"function":"f","version":2,"operator":"op","subtask":1,"parallelism":4,"keyColumns":["v","k"],
		"timeColumn":2,"timeOffset":-1,"config":{"size":"10s","n":3},"future":"ignored"}`
	d := newDriver(t, fn, schemaOf(t, kvts...), []int{1, 0}, doc)
	d.h.wm, d.h.now = 5, 99
	rec := batchOf(t, d.h.mem, d.schema, []any{"a", 1, ms(10)}, []any{nil, nil, nil})
	defer rec.Release()
	if code := d.process(rec); code != 0 {
		t.Fatal(d.h.fails)
	}
	want := []string{
		`"f" 2 "op" 1 4 [v k] map[n:3 size:10s]`,
		"[1 a] 9 true 5 99",
		"[<nil> <nil>] 0 false 5 99",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	if want := []string{"1 opened", "2 row", "2 row"}; !slices.Equal(d.h.logs, want) {
		t.Errorf("logs %q", d.h.logs)
	}

	// Without a time column no row has event time, and no config is an
	// empty map.
	got = nil
	d = newDriver(t, fn, schemaOf(t, kvts...), nil, `{"timeColumn":-1}`)
	rec2 := batchOf(t, d.h.mem, d.schema, []any{"a", 1, ms(10)})
	defer rec2.Release()
	if code := d.process(rec2); code != 0 {
		t.Fatal(d.h.fails)
	}
	if want := []string{`"" 0 "" 0 0 [] map[]`, "[] 0 false -9223372036854775807 1709251200000"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestKeyBeforeAnyBatch: after a restore timers may fire before any
// batch brought the input schema; the key's types then come from
// keyTypes in the open document or, from a host without them, from the
// declared input.
func TestKeyBeforeAnyBatch(t *testing.T) {
	for _, doc := range []string{
		kvtsOpen,
		strings.Replace(kvtsOpen, `"keyColumns":["k"]`, `"keyColumns":["k"],"keyTypes":["string"]`, 1),
	} {
		d := newDriver(t, windowed(), nil, nil, doc)
		d.h.values[slot{0, "\x01\x03abc", "0"}] = le.AppendUint64(nil, 4)
		d.h.timers[timerID{"\x01\x03abc", EventTime, 9}] = true
		if code := d.advance(100); code != 0 {
			t.Fatal(d.h.fails)
		}
		requireRows(t, d.h.out, [][]any{{"abc", ms(0), int64(4), "", int64(0)}})
	}

	// A key column the function does not declare, typed by the document.
	var got []any
	fn := windowed()
	fn.onTimer = func(ctx *Context, _ Timer, _ *Collector) error {
		got = append(got, ctx.Key()...)
		return nil
	}
	d := newDriver(t, fn, nil, nil, `{"keyColumns":["region","k"],"keyTypes":["int64","string"]}`)
	key := "\x01\x80\x00\x00\x00\x00\x00\x00\x07\x01\x01z"
	if code := d.fire([]timerID{{key, EventTime, 9}}); code != 0 {
		t.Fatal(d.h.fails)
	}
	if fmt.Sprint(got) != "[7 z]" {
		t.Errorf("key %v, want [7 z]", got)
	}
}

func TestFailures(t *testing.T) {
	boom := errors.New("boom")
	schema := schemaOf(t, kvts...)
	rows := [][]any{{"a", 1, ms(1)}, {"b", 2, ms(2)}, {"c", 3, ms(3)}}
	for _, c := range []struct {
		name    string
		process func(ctx *Context, row Row, out *Collector) error
		refuse  bool
		want    failure
	}{
		{"error", func(ctx *Context, row Row, out *Collector) error {
			if row.String("k") == "b" {
				return boom
			}
			return nil
		}, false, failure{1, "process element: boom"}},
		{"panic", func(ctx *Context, row Row, out *Collector) error {
			if row.String("k") == "c" {
				panic("bang")
			}
			return nil
		}, false, failure{2, "process element: panic: bang\ngoroutine"}},
		{"bad column", func(ctx *Context, row Row, out *Collector) error {
			row.Float64("v")
			return nil
		}, false, failure{0, `process element: panic: guest: column "v" is int64, not float64`}},
		{"missing column", func(ctx *Context, row Row, out *Collector) error {
			row.Int64("nope")
			return nil
		}, false, failure{0, `process element: panic: guest: row has no column "nope" (columns: k string, v int64, ts timestamp_ms)`}},
		{"timer without OnTimer", func(ctx *Context, row Row, out *Collector) error {
			ctx.Timers().RegisterEventTime(1)
			return nil
		}, false, failure{0, "process element: panic: guest: the function registers a timer but has no OnTimer method"}},
		{"row not ended", func(ctx *Context, row Row, out *Collector) error {
			out.SetInt64(1, 1)
			return nil
		}, false, failure{-1, "an output row was started (Set...) but not ended with EndRow"}},
		{"declare late", func(ctx *Context, row Row, out *Collector) error {
			Value[int64](&ctx.r.oc, "late")
			return nil
		}, false, failure{0, `process element: panic: guest: value state "late" declared after Open returned: declare state in Open`}},
		{"refused", func(ctx *Context, row Row, out *Collector) error {
			return out.Emit(row.String("k"), nil, nil)
		}, true, failure{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDriver(t, &fnFuncs{desc: Description{Input: kvts, Output: kvts}, process: c.process}, schema, []int{0}, kvtsOpen)
			d.h.refuse = c.refuse
			rec := batchOf(t, d.h.mem, schema, rows...)
			defer rec.Release()
			if code := d.process(rec); code == 0 {
				t.Fatal("process succeeded")
			}
			if c.refuse {
				if len(d.h.fails) != 0 {
					t.Errorf("refused emit reported %v; the host's own error says more", d.h.fails)
				}
				return
			}
			if len(d.h.fails) != 1 || d.h.fails[0].h != c.want.h || !strings.HasPrefix(d.h.fails[0].msg, c.want.msg) {
				t.Errorf("failures %q, want %q", d.h.fails, c.want)
			}
		})
	}
}

func TestTimerAndCallFailures(t *testing.T) {
	fn := windowed()
	fn.onTimer = func(ctx *Context, tm Timer, out *Collector) error {
		if tm.Timestamp == 19 {
			return errors.New("late")
		}
		return nil
	}
	d := newDriver(t, fn, schemaOf(t, kvts...), []int{0}, kvtsOpen)
	if code := d.fire([]timerID{{"\x00", EventTime, 9}, {"\x00", EventTime, 19}}); code == 0 {
		t.Fatal("timers succeeded")
	}
	if want := []failure{{1, "on timer: late"}}; !slices.Equal(d.h.fails, want) {
		t.Errorf("failures %q, want %q", d.h.fails, want)
	}

	d.h.fails = nil
	if code := d.r.timers(make([]byte, 15)); code == 0 || !strings.Contains(d.h.fails[0].msg, "not a whole number") {
		t.Errorf("bad timers: %d %v", code, d.h.fails)
	}
	d.h.fails = nil
	if code := d.r.open([]byte(kvtsOpen)); code == 0 || d.h.fails[0].msg != "weir_open called twice" {
		t.Errorf("open twice: %d %v", code, d.h.fails)
	}

	// Timers of a function without OnTimer, a batch before weir_open.
	h := newFakeHost(t)
	r := newRuntime(h, &fnFuncs{desc: Description{Input: kvts, Output: kvts}})
	if code := r.process([]byte("x")); code == 0 || h.fails[0].msg != "weir_process before weir_open" {
		t.Errorf("process before open: %d %v", code, h.fails)
	}
	if code := r.open([]byte(`{}`)); code != 0 {
		t.Fatal(h.fails)
	}
	if code := r.timers(make([]byte, 16)); code == 0 || h.fails[1].msg != "timers fired but the function has no OnTimer method" {
		t.Errorf("timers without OnTimer: %d %v", code, h.fails)
	}
	if code := r.process([]byte("garbage!")); code == 0 || !strings.HasPrefix(h.fails[2].msg, "decode input batch: ") {
		t.Errorf("garbage: %d %v", code, h.fails)
	}
}

func TestOpenFailures(t *testing.T) {
	for _, c := range []struct {
		name string
		fn   Function
		doc  string
		want string
	}{
		{"no function", nil, `{}`, errNoFunction.Error()},
		{"bad document", &fnFuncs{desc: Description{Output: kvts}}, `{"subtask":"one"}`, "decode the weir_open document: json: cannot unmarshal"},
		{"open error", &fnFuncs{desc: Description{Output: kvts}, open: func(*OpenContext) error {
			return errors.New(`size: "ten": want milliseconds or a duration`)
		}}, `{}`, `open: size: "ten": want milliseconds or a duration`},
		{"state in open", &fnFuncs{desc: Description{Output: kvts}, open: func(oc *OpenContext) error {
			Value[int64](oc, "n").Update(1)
			return nil
		}}, `{}`, "open: panic: guest: state used with no current key: only ProcessElement and OnTimer have one"},
		{"no output", &fnFuncs{}, `{}`, "the description declares no output columns"},
		{"key types", &fnFuncs{desc: Description{Output: kvts}}, `{"keyColumns":["k"],"keyTypes":["int"]}`,
			`the weir_open document's keyTypes[0] (column "k") is "int": want one of int64, float64, string, bool, timestamp_ms`},
		{"key types count", &fnFuncs{desc: Description{Output: kvts}}, `{"keyColumns":["k"],"keyTypes":[]}`,
			"the weir_open document has 0 keyTypes for 1 keyColumns"},
		{"bad type", &fnFuncs{desc: Description{Output: []Column{{Name: "x", Type: "int"}}}}, `{}`, `output column "x": unknown type "int"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newFakeHost(t)
			r := newRuntime(h, c.fn)
			if code := r.open([]byte(c.doc)); code == 0 {
				t.Fatal("open succeeded")
			}
			if len(h.fails) != 1 || h.fails[0].h != -1 || !strings.HasPrefix(h.fails[0].msg, c.want) {
				t.Errorf("failures %q, want %q", h.fails, c.want)
			}
		})
	}
}

type panicky struct{ fnFuncs }

func (panicky) Describe() Description { panic("no description") }

func TestDescribe(t *testing.T) {
	h := newFakeHost(t)
	r := newRuntime(h, &fnFuncs{desc: Description{Output: kvts[:2], TimeColumn: "", Doc: "a doc"}})
	want := `{"input":[],"output":[{"name":"k","type":"string"},{"name":"v","type":"int64"}],"doc":"a doc"}`
	if got := string(r.describe()); got != want {
		t.Errorf("describe = %s\nwant %s", got, want)
	}

	r = newRuntime(h, &panicky{})
	if r.describe() != nil || len(h.fails) != 1 || !strings.HasPrefix(h.fails[0].msg, "describe: panic: no description") {
		t.Errorf("panicking Describe: %q", h.fails)
	}
	r = newRuntime(h, nil)
	if r.describe() != nil || h.fails[1].msg != errNoFunction.Error() {
		t.Errorf("no function: %q", h.fails)
	}
}

func TestRegister(t *testing.T) {
	defer func() { registered = nil }()
	fn := &fnFuncs{}
	Register(fn)
	if registered != fn {
		t.Fatal("not registered")
	}
	for name, f := range map[string]func(){"twice": func() { Register(fn) }, "nil": func() { Register(nil) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestLargeState: values larger than the reused buffers, and a map
// changed while it is iterated.
func TestLargeStateAndIteration(t *testing.T) {
	var (
		big *ValueState[string]
		m   *MapState[string, int64]
		seq []string
	)
	fn := &fnFuncs{
		desc: Description{Input: kvts, Output: kvts[:1]},
		open: func(oc *OpenContext) error {
			big = Value[string](oc, "big")
			m = Map[string, int64](oc, "m")
			return nil
		},
		process: func(ctx *Context, row Row, out *Collector) error {
			s, _ := big.Value()
			big.Update(s + strings.Repeat(row.String("k"), 100_000))
			m.Put(row.String("k"), row.Int64("v"))
			var keys []string
			for k, v := range m.All() {
				keys = append(keys, fmt.Sprint(k, "=", v))
				if v%2 == 0 {
					m.Delete(k)
				}
				big.Value() // state calls inside the loop do not disturb it
			}
			slices.Sort(keys)
			seq = append(seq, fmt.Sprint(len(s), keys, m.Len()))
			return nil
		},
	}
	d := newDriver(t, fn, schemaOf(t, kvts...), nil, `{}`)
	rec := batchOf(t, d.h.mem, d.schema, []any{"a", 1, nil}, []any{"b", 2, nil}, []any{"c", 3, nil}, []any{"d", 4, nil})
	defer rec.Release()
	if code := d.process(rec); code != 0 {
		t.Fatal(d.h.fails)
	}
	want := []string{"0 [a=1] 1", "100000 [a=1 b=2] 1", "200000 [a=1 c=3] 2", "300000 [a=1 c=3 d=4] 2"}
	if !slices.Equal(seq, want) {
		t.Errorf("got %q\nwant %q", seq, want)
	}
}

// hotPath is a function doing what a typical one does per row, through
// the SDK paths that must not allocate: columns by name, int64 and
// float64 state with a namespace, a timer, output by setters and by Emit.
func hotPath() *timerFuncs {
	var n *ValueState[int64]
	var sum *ValueState[float64]
	return &timerFuncs{
		fnFuncs: fnFuncs{
			desc: Description{Input: kvts, Output: []Column{{Name: "k", Type: String}, {Name: "n", Type: Int64}, {Name: "s", Type: Float64}}},
			open: func(oc *OpenContext) error {
				n = Value[int64](oc, "n")
				sum = Value[float64](oc, "sum")
				return nil
			},
			process: func(ctx *Context, row Row, out *Collector) error {
				ts, _ := ctx.Timestamp()
				if ctx.Watermark() > ts {
					return nil
				}
				c, _ := n.ValueNS("w")
				n.UpdateNS("w", c+1)
				s, _ := sum.Value()
				s += float64(row.Int64("v"))
				sum.Update(s)
				ctx.Timers().RegisterEventTime(ts)
				out.SetString(0, row.String("k"))
				out.SetInt64(1, c+1)
				out.SetFloat64(2, s)
				if err := out.EndRow(); err != nil {
					return err
				}
				return out.Emit(row.String("k"), c, s)
			},
		},
		onTimer: func(*Context, Timer, *Collector) error { return nil },
	}
}

// TestNoAllocationPerRow: a batch of 1000 rows allocates in the SDK no
// more than a batch of one.
func TestNoAllocationPerRow(t *testing.T) {
	allocs := func(rows int) float64 {
		d := newDriver(t, hotPath(), schemaOf(t, kvts...), []int{0}, kvtsOpen)
		var data [][]any
		for i := range rows {
			data = append(data, []any{fmt.Sprint("key", i%10), i, ms(int64(i))})
		}
		rec := batchOf(t, d.h.mem, d.schema, data...)
		defer rec.Release()
		payload, err := d.enc.Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		payload2, err := d.enc.Encode(rec) // without the schema
		if err != nil {
			t.Fatal(err)
		}
		keys := make([][]byte, rows)
		for i := range keys {
			keys[i] = []byte(fmt.Sprint("key", i%10))
		}
		d.h.keys = keys
		var nop nopHost
		d.r.h = &nop
		if code := d.r.process(d.input(payload)); code != 0 {
			t.Fatal("process failed")
		}
		return testing.AllocsPerRun(20, func() {
			if code := d.r.process(d.input(payload2)); code != 0 {
				t.Fatal("process failed")
			}
		})
	}
	one, many := allocs(1), allocs(1000)
	if many > one {
		t.Errorf("a batch of 1000 rows allocates %v times, a batch of one %v", many, one)
	}
}

// nopHost answers every host call without doing anything, so that only
// the SDK's allocations count.
type nopHost struct{ v [8]byte }

func (*nopHost) fail(int32, string) {}
func (*nopHost) log(Level, string)  {}
func (*nopHost) emit([]byte) int32  { return 0 }
func (*nopHost) state(int32, string) int32 {
	return 0
}
func (*nopHost) key(int32, []byte) int32 { return 0 }
func (*nopHost) watermark() int64        { return MinWatermark }
func (*nopHost) processingTime() int64   { return 0 }
func (h *nopHost) valueGet(_, _ int32, _ string, out []byte) int32 {
	return copyOut(h.v[:], out)
}
func (h *nopHost) valuePut(_, _ int32, _ string, v []byte)  { copy(h.v[:], v) }
func (*nopHost) valueDelete(int32, int32, string)           {}
func (*nopHost) listGet(int32, int32, string, []byte) int32 { return -1 }
func (*nopHost) listAdd(int32, int32, string, []byte)       {}
func (*nopHost) listClear(int32, int32, string)             {}
func (*nopHost) mapGet(int32, int32, string, []byte, []byte) int32 {
	return -1
}
func (*nopHost) mapPut(int32, int32, string, []byte, []byte)   {}
func (*nopHost) mapDelete(int32, int32, string, []byte)        {}
func (*nopHost) mapEntries(int32, int32, string, []byte) int32 { return -1 }
func (*nopHost) mapClear(int32, int32, string)                 {}
func (*nopHost) timerRegister(int32, TimeDomain, int64)        {}
func (*nopHost) timerDelete(int32, TimeDomain, int64)          {}

// BenchmarkProcess is the SDK's cost per row of hotPath, host calls
// excluded.
func BenchmarkProcess(b *testing.B) {
	d := newDriver(b, hotPath(), schemaOf(b, kvts...), []int{0}, kvtsOpen)
	var data [][]any
	for i := range 4096 {
		data = append(data, []any{fmt.Sprint("key", i%10), i, ms(int64(i))})
	}
	rec := batchOf(b, d.h.mem, d.schema, data...)
	defer rec.Release()
	payload, _ := d.enc.Encode(rec)
	d.r.h = &nopHost{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if code := d.r.process(d.input(payload)); code != 0 {
			b.Fatal("process failed")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(data)), "ns/row")
}
