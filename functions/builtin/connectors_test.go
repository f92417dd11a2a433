package builtin

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

// connCheckLeaks fails the test if it leaves goroutines behind. Call it first:
// cleanups run last-registered first, so this one runs after the others
// (servers stopped, clients closed).
func connCheckLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// connMem returns an allocator that fails the test if a buffer is not
// released by the end of it.
func connMem(t *testing.T) *memory.CheckedAllocator {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

func connSchema(pairs ...string) spec.Schema {
	m := spec.OrderedMap{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m.Set(pairs[i], pairs[i+1])
	}
	return m
}

func connSourceSchema(t testing.TB, src *spec.Source) Stream {
	t.Helper()
	s, err := SourceSchema(src)
	if err != nil {
		t.Fatalf("SourceSchema: %v", err)
	}
	return s
}

type connDeadLetter struct{ raw, origin, reason string }

func connSourceContext(mem memory.Allocator, subtask, parallelism int) *task.SourceContext {
	return &task.SourceContext{Context: task.Context{
		Job: "job", Node: "src", Subtask: subtask, Parallelism: parallelism,
		Mem: mem, Now: time.Now, Counters: &task.Counters{},
	}}
}

// connRowsOf returns rec's rows as Go values (arrowfmt.Value).
func connRowsOf(rec arrow.RecordBatch) [][]any {
	rows := make([][]any, rec.NumRows())
	for r := range rows {
		rows[r] = make([]any, rec.NumCols())
		for c := range rows[r] {
			rows[r][c] = arrowfmt.Value(rec.Column(c), r)
		}
	}
	return rows
}

// connDrain polls an opened bounded source until io.EOF and returns its rows.
func connDrain(t testing.TB, src task.Source, maxRows int) [][]any {
	t.Helper()
	var rows [][]any
	for range 1_000_000 {
		rec, err := src.Poll(context.Background(), maxRows, 0)
		if errors.Is(err, io.EOF) {
			return rows
		}
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if rec == nil {
			continue
		}
		if n := rec.NumRows(); n < 1 || n > int64(maxRows) {
			t.Errorf("poll returned %d rows, want 1..%d", n, maxRows)
		}
		rows = append(rows, connRowsOf(rec)...)
		rec.Release()
	}
	t.Fatal("source did not end")
	return nil
}

// connSameValue compares Go values as arrowfmt.Value returns them.
func connSameValue(a, b any) bool {
	ta, ok1 := a.(time.Time)
	tb, ok2 := b.(time.Time)
	if ok1 || ok2 {
		return ok1 && ok2 && ta.Equal(tb)
	}
	return a == b
}

func connSameRow(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !connSameValue(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestDatagenSourceSchema(t *testing.T) {
	src := &spec.Source{Name: "trips", Type: "datagen",
		Schema: connSchema("id", "int64", "fare", "float64", "at", "timestamp_ms", "who", "string", "ok", "bool"),
		Event:  &spec.EventTime{Column: "at"}}
	s := connSourceSchema(t, src)
	if s.TimeColumn != 2 || s.TimeOffset != 0 || s.Schema.NumFields() != 5 {
		t.Fatalf("stream %+v", s)
	}
	want := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Timestamp_ms, arrow.BinaryTypes.String, arrow.FixedWidthTypes.Boolean}
	for i, f := range s.Schema.Fields() {
		if !arrow.TypeEqual(f.Type, want[i]) {
			t.Errorf("column %d %s: type %v, want %v", i, f.Name, f.Type, want[i])
		}
	}

	src.Event = nil
	if s := connSourceSchema(t, src); s.TimeColumn != -1 {
		t.Errorf("no eventTime: TimeColumn %d, want -1", s.TimeColumn)
	}

	for _, tc := range []struct {
		name string
		src  spec.Source
		want []string
	}{
		{"bad types", spec.Source{Name: "s", Schema: connSchema("a", "int", "b", "float64", "c", "text")},
			[]string{`sources[s].schema.a`, `"int"`, `sources[s].schema.c`, `"text"`, "timestamp_ms"}},
		{"event column type", spec.Source{Name: "s", Schema: connSchema("a", "int64"), Event: &spec.EventTime{Column: "a"}},
			[]string{"sources[s].eventTime.column", `"a" is int64`, "timestamp_ms"}},
		{"event column missing", spec.Source{Name: "s", Schema: connSchema("a", "int64"), Event: &spec.EventTime{Column: "t"}},
			[]string{"sources[s].eventTime.column", `"t" is not a column`, "a int64"}},
		{"no schema", spec.Source{Name: "s"}, []string{"sources[s].schema"}},
	} {
		_, err := SourceSchema(&tc.src)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %s", tc.name, err, w)
			}
		}
	}
}

func TestDatagenDispatchErrors(t *testing.T) {
	out := Stream{Schema: arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil), TimeColumn: -1}
	for _, tc := range []struct {
		src  spec.Source
		want string
	}{
		{spec.Source{Name: "s", Type: "kafka"}, `sources[s].type: "kafka" is not a source type: want datagen, files, redis or nexmark`},
		{spec.Source{Name: "s", Type: "files", Format: "jsonl"}, `sources[s].path: missing`},
		{spec.Source{Name: "s", Type: "files", Path: "in", Format: "csv"}, `sources[s].format: "csv" is not supported: want jsonl`},
		{spec.Source{Name: "s", Type: "redis"}, `sources[s].stream: missing`},
	} {
		if _, err := NewSource(&tc.src, out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewSource(%+v): error %v, want %q", tc.src, err, tc.want)
		}
	}
}
