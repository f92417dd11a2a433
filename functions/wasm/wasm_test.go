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
		CacheDir: t.TempDir(),
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
	d, err := Check(context.Background(), mod, Limits{})
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
	} {
		_, err := ParseDescription([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.doc, err, c.want)
		}
	}
	d, err := ParseDescription([]byte(`{"input":[{"name":"ts","type":"timestamp_ms"}],"output":[{"name":"end","type":"timestamp_ms"}],"timeColumn":"end","doc":"x"}`))
	if err != nil || d.TimeColumn != "end" || d.Doc != "x" || d.Input[0].Type != arrowfmt.TimestampMs {
		t.Fatalf("%+v %v", d, err)
	}
}

func TestCachedLoadIsFast(t *testing.T) {
	mod := guest(t, "passthrough")
	dir := t.TempDir()
	pin := &spec.Module{Name: "p", Version: 1, SHA256: shaHex(mod)}
	load := func() time.Duration {
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
