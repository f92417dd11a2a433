package wasm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore"
)

// harness runs one instance of a module over a Memory backend and
// collects what it emits.
type harness struct {
	t     testing.TB
	eng   *Engine
	inst  *Instance
	state *statestore.Memory
	in    *arrow.Schema
	out   []arrow.RecordBatch
}

func newHarness(t testing.TB, module []byte, pin spec.Module, in, out *arrow.Schema, timeCol int, config map[string]any) (*harness, error) {
	t.Helper()
	eng, err := NewEngine(EngineConfig{
		CacheDir: testCache(t),
		Fetch:    func(context.Context, *spec.Module) ([]byte, error) { return module, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Error(err)
		}
	})
	pin.SHA256 = shaHex(module)
	if pin.Name == "" {
		pin.Name, pin.Version = "test", 1
	}
	h := &harness{t: t, eng: eng, state: statestore.NewMemory(0, 128), in: in}
	t.Cleanup(func() {
		for _, r := range h.out {
			r.Release()
		}
	})
	m, err := eng.Load(context.Background(), &pin)
	if err != nil {
		return nil, err
	}
	h.inst, err = m.NewInstance(context.Background(), InstanceConfig{
		Operator: "op", Input: in, Output: out, InputTimeColumn: timeCol,
		KeyColumns: []string{in.Field(0).Name}, Config: config,
		State: h.state, Subtask: 0, Parallelism: 1,
		Emit: func(r arrow.RecordBatch) error {
			r.Retain()
			h.out = append(h.out, r)
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = h.inst.Close() })
	return h, nil
}

// batch builds a batch of schema from rows of values (nil is null).
func batch(t testing.TB, schema *arrow.Schema, rows ...[]any) arrow.RecordBatch {
	t.Helper()
	b := arrowfmt.NewBuilder(schema, memory.DefaultAllocator)
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

// keysOf returns key groups and keys for rec keyed by column 0.
func keysOf(rec arrow.RecordBatch) ([]int, []string) {
	n := int(rec.NumRows())
	groups := make([]int, n)
	keys := make([]string, n)
	hashes := arrowfmt.HashKeys(rec, []int{0}, nil)
	for i := range n {
		groups[i] = arrowfmt.KeyGroup(hashes[i], 128)
		keys[i] = arrowfmt.KeyString(rec, []int{0}, i)
	}
	return groups, keys
}

func (h *harness) process(rec arrow.RecordBatch) error {
	groups, keys := keysOf(rec)
	return h.inst.ProcessBatch(rec, groups, keys)
}

func schemaOf(t testing.TB, cols ...string) *arrow.Schema {
	t.Helper()
	var fields []arrowfmt.Field
	for i := 0; i < len(cols); i += 2 {
		fields = append(fields, arrowfmt.Field{Name: cols[i], Type: arrowfmt.Type(cols[i+1])})
	}
	s, err := arrowfmt.NewSchema(fields)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPassthrough(t *testing.T) {
	mod := guest(t, "passthrough")
	d, err := checkModule(t, mod, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Output) != 2 || d.Output[0] != (arrowfmt.Field{Name: "k", Type: arrowfmt.String}) {
		t.Fatalf("description %+v", d)
	}
	schema := schemaOf(t, "k", "string", "v", "int64")
	h, err := newHarness(t, mod, spec.Module{}, schema, schema, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the first payload carries the schema, the others do not
		rec := batch(t, schema, []any{"a", int64(i)}, []any{nil, nil}, []any{"", int64(-7)})
		if err := h.process(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if len(h.out) != 3 {
		t.Fatalf("%d output batches, want 3", len(h.out))
	}
	for i, r := range h.out {
		if !r.Schema().Equal(schema) || r.NumRows() != 3 {
			t.Fatalf("batch %d: %v", i, r)
		}
		if got := arrowfmt.Value(r.Column(1), 0); got != int64(i) {
			t.Errorf("batch %d row 0 v = %v, want %d", i, got, i)
		}
		if !r.Column(0).IsNull(1) {
			t.Errorf("batch %d row 1: k not null", i)
		}
	}
	st := h.inst.Stats()
	if st.Calls.Load() != 3 || st.RowsIn.Load() != 9 || st.RowsOut.Load() != 9 || st.HostCalls.Load() != 3 {
		t.Errorf("stats calls %d rows %d/%d host calls %d", st.Calls.Load(), st.RowsIn.Load(), st.RowsOut.Load(), st.HostCalls.Load())
	}
}

func TestCheckRefusesNonWasm(t *testing.T) {
	_, err := Check(context.Background(), []byte("#!/bin/sh\necho hello\n"), Limits{})
	if err == nil || !strings.Contains(err.Error(), "not a WebAssembly module") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseDescription(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"output":[{"name":"a","type":"int64"}],"timeColum":"a"}`, `unknown field "timeColum"`},
		{`{"output":[]}`, "output: no columns"},
		{`{"output":[{"name":"a","type":"int32"}]}`, `column "a" has type "int32": want int64, float64, string, bool or timestamp_ms`},
		{`{"output":[{"name":"a","type":"int64"},{"name":"a","type":"int64"}]}`, `column "a" twice`},
		{`{"output":[{"name":"a","type":"int64"}],"timeColumn":"a"}`, `timeColumn: "a" is int64, want timestamp_ms`},
		{`{"output":[{"name":"a","type":"int64"}],"timeColumn":"b"}`, `timeColumn: "b" is not an output column`},
		{`{"input":[{"name":"","type":"int64"}],"output":[{"name":"a","type":"int64"}]}`, `input[0]: empty name`},
		{`{"output":[{"name":"a","type":"int64"}],"timeOffset":-1}`, `timeOffset: -1 without a timeColumn`},
	} {
		_, err := ParseDescription([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.doc, err, c.want)
		}
	}
	d, err := ParseDescription([]byte(`{"input":[{"name":"ts","type":"timestamp_ms"}],"output":[{"name":"end","type":"timestamp_ms"}],"timeColumn":"end","timeOffset":-1,"doc":"x"}`))
	if err != nil || d.TimeColumn != "end" || d.TimeOffset != -1 || d.Doc != "x" || d.Input[0].Type != arrowfmt.TimestampMs {
		t.Fatalf("%+v %v", d, err)
	}
}

func TestCachedLoadIsFast(t *testing.T) {
	mod := guest(t, "passthrough")
	dir := t.TempDir()
	pin := &spec.Module{Name: "p", Version: 1, SHA256: shaHex(mod)}
	load := func() time.Duration {
		// As a new process would: the disk cache, not the process's.
		forgetProcessCache(dir)
		eng, err := NewEngine(EngineConfig{CacheDir: dir, Fetch: func(context.Context, *spec.Module) ([]byte, error) { return mod, nil }})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		start := time.Now()
		if _, err := eng.Load(context.Background(), pin); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	first, second := load(), load()
	t.Logf("first load %v, cached %v", first, second)
	if second >= first {
		t.Errorf("a load from the compilation cache (%v) is not faster than the first (%v)", second, first)
	}
}

func TestLoadVerifiesHash(t *testing.T) {
	mod := guest(t, "passthrough")
	eng, err := NewEngine(EngineConfig{Fetch: func(context.Context, *spec.Module) ([]byte, error) { return mod, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	_, err = eng.Load(context.Background(), &spec.Module{Name: "p", Version: 2, SHA256: strings.Repeat("0", 64)})
	if err == nil || !strings.Contains(err.Error(), "the stored module changed") || !strings.Contains(err.Error(), "function p version 2") {
		t.Fatalf("err = %v", err)
	}
}

// forgetProcessCache drops the process's compilation cache of dir, so the
// next engine on dir reads what the last one wrote to disk.
func forgetProcessCache(dir string) {
	caches.Lock()
	defer caches.Unlock()
	delete(caches.byDir, dir)
}

// rowsOf lists the rows of batches as value slices.
func rowsOf(recs []arrow.RecordBatch) [][]any {
	var rows [][]any
	for _, r := range recs {
		for i := range int(r.NumRows()) {
			row := make([]any, r.NumCols())
			for c := range row {
				row[c] = arrowfmt.Value(r.Column(c), i)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// TestEchoStateAndTimers runs the echo guest: a ValueState per key, an
// event-time timer per row, and both survive a snapshot and a restore
// into a new instance, as after a failure.
func TestEchoStateAndTimers(t *testing.T) {
	mod := guest(t, "echo")
	d, err := checkModule(t, mod, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	in := schemaOf(t, "k", "string", "v", "int64", "ts", "timestamp_ms")
	fields := append([]arrowfmt.Field(nil), d.Output...)
	out, err := arrowfmt.NewSchema(fields)
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHarness(t, mod, spec.Module{}, in, out, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := func(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
	rec := batch(t, in, []any{"a", int64(1), ts(100)}, []any{"b", int64(2), ts(200)}, []any{"a", int64(3), ts(300)})
	defer rec.Release()
	if err := h.process(rec); err != nil {
		t.Fatal(err)
	}
	if err := h.inst.AdvanceWatermark(250); err != nil {
		t.Fatal(err)
	}
	got := rowsOf(h.out)
	want := [][]any{
		{"a", int64(1), ts(100), int64(1)}, {"b", int64(2), ts(200), int64(1)}, {"a", int64(3), ts(300), int64(2)},
		{"a", int64(-1), ts(100), int64(2)}, {"b", int64(-1), ts(200), int64(1)},
	}
	if !sameRows(got, want) {
		t.Fatalf("rows\n got %v\nwant %v", got, want)
	}

	// A checkpoint, then a new instance restored from it.
	snap, err := h.state.Snapshot(memory.DefaultAllocator, true)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := newHarness(t, mod, spec.Module{}, in, out, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range snap {
		if err := h2.state.Restore(b); err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	h2.inst.RestoreWatermark(250)
	rec2 := batch(t, in, []any{"a", int64(4), ts(400)})
	defer rec2.Release()
	if err := h2.process(rec2); err != nil {
		t.Fatal(err)
	}
	if err := h2.inst.AdvanceWatermark(1000); err != nil {
		t.Fatal(err)
	}
	got = rowsOf(h2.out)
	want = [][]any{{"a", int64(4), ts(400), int64(3)}, {"a", int64(-1), ts(300), int64(3)}, {"a", int64(-1), ts(400), int64(3)}}
	if !sameRows(got, want) {
		t.Fatalf("after restore\n got %v\nwant %v", got, want)
	}
	if calls := h2.inst.Stats().HostCalls.Load(); calls == 0 {
		t.Error("no host calls counted")
	}
}

func sameRows(got, want [][]any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if len(got[i]) != len(want[i]) {
			return false
		}
		for c := range got[i] {
			g, w := got[i][c], want[i][c]
			if gt, ok := g.(time.Time); ok {
				if wt, ok := w.(time.Time); !ok || !gt.Equal(wt) {
					return false
				}
				continue
			}
			if g != w {
				return false
			}
		}
	}
	return true
}

// TestCheckRefusesBadModules: each way a module can misfit the ABI is
// refused at deploy with a message naming it.
func TestCheckRefusesBadModules(t *testing.T) {
	for _, c := range []struct{ guest, want string }{
		{"badversion", "built for ABI version 2; this weir supports version 1"},
		{"noexport", "missing export weir_process (i32, i32) -> i32"},
		{"badimport", "imports weir.no_such_function, which the host does not have"},
	} {
		_, err := checkModule(t, guest(t, c.guest), Limits{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.guest, err, c.want)
		}
	}
}

// TestRunawayGuests: a guest that loops, one that allocates past its
// memory limit and one that traps each fail their call with an error
// naming the function, version and subtask, and the engine goes on making
// instances.
func TestRunawayGuests(t *testing.T) {
	in := schemaOf(t, "k", "string")
	for _, c := range []struct {
		guest  string
		pin    spec.Module
		config map[string]any
		want   string
	}{
		{"loop", spec.Module{Timeout: spec.Duration(300 * time.Millisecond)}, nil, "ran longer than its timeout 300ms and was stopped"},
		{"oom", spec.Module{MemoryBytes: 32 << 20}, nil, "the guest trapped with its memory at the limit of 32 MiB (--memory), after writing \"runtime: out of memory"},
		{"trap", spec.Module{}, nil, "the guest trapped: wasm error: out of bounds memory access"},
		{"trap", spec.Module{}, map[string]any{"mode": "panic"}, "the guest trapped, after writing \"panic: trap guest: panic in weir_process"},
	} {
		mod := guest(t, c.guest)
		d, err := checkModule(t, mod, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.guest, err)
		}
		out, _ := arrowfmt.NewSchema(d.Output)
		c.pin.Name, c.pin.Version = c.guest, 7
		h, err := newHarness(t, mod, c.pin, in, out, -1, c.config)
		if err != nil {
			t.Fatalf("%s: %v", c.guest, err)
		}
		rec := batch(t, in, []any{"x"})
		start := time.Now()
		err = h.process(rec)
		rec.Release()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "function "+c.guest+" version 7 (operator op, subtask 0)") {
			t.Errorf("%s: err = %v, want %q", c.guest, err, c.want)
		}
		t.Logf("%s: failed after %v: %v", c.guest, time.Since(start).Round(time.Millisecond), err)
		rec = batch(t, in, []any{"y"})
		if err := h.process(rec); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("%s: a call after the failure: %v", c.guest, err)
		}
		rec.Release()
	}
}
