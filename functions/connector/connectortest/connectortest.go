package connectortest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connectors/datagen"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

// CheckLeaks fails the test if it leaves goroutines behind. Call it first:
// cleanups run last-registered first, so this one runs after the others
// (servers stopped, clients closed).
func CheckLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// Mem returns an allocator that fails the test if a buffer is not
// released by the end of it.
func Mem(t *testing.T) *memory.CheckedAllocator {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// Schema returns a source schema from column, type pairs.
func Schema(pairs ...string) spec.Schema {
	m := spec.OrderedMap{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m.Set(pairs[i], pairs[i+1])
	}
	return m
}

// SourceSchema returns the stream src produces, failing the test if its
// schema is bad.
func SourceSchema(t testing.TB, src *spec.Source) stream.Stream {
	t.Helper()
	s, err := connector.SourceSchema(src)
	if err != nil {
		t.Fatalf("SourceSchema: %v", err)
	}
	return s
}

// SourceContext is the context of subtask of parallelism of a source
// named src of job "job".
func SourceContext(mem memory.Allocator, subtask, parallelism int) *task.SourceContext {
	return &task.SourceContext{Context: task.Context{
		Job: "job", Node: "src", Subtask: subtask, Parallelism: parallelism,
		Mem: mem, Now: time.Now, Counters: &task.Counters{},
	}}
}

// RowsOf returns rec's rows as Go values (arrowfmt.Value).
func RowsOf(rec arrow.RecordBatch) [][]any {
	rows := make([][]any, rec.NumRows())
	for r := range rows {
		rows[r] = make([]any, rec.NumCols())
		for c := range rows[r] {
			rows[r][c] = arrowfmt.Value(rec.Column(c), r)
		}
	}
	return rows
}

// Drain polls an opened bounded source until io.EOF and returns its rows.
func Drain(t testing.TB, src task.Source, maxRows int) [][]any {
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
		rows = append(rows, RowsOf(rec)...)
		rec.Release()
	}
	t.Fatal("source did not end")
	return nil
}

// SameValue compares Go values as arrowfmt.Value returns them.
func SameValue(a, b any) bool {
	ta, ok1 := a.(time.Time)
	tb, ok2 := b.(time.Time)
	if ok1 || ok2 {
		return ok1 && ok2 && ta.Equal(tb)
	}
	return a == b
}

// SameRow compares two rows value by value (SameValue).
func SameRow(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !SameValue(a[i], b[i]) {
			return false
		}
	}
	return true
}

// SameRows fails the test unless got and want hold the same rows in the
// same order.
func SameRows(t *testing.T, got, want [][]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if !SameRow(got[i], want[i]) {
			t.Fatalf("row %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// ReadJSONL decodes a JSON-lines object with the schema.
func ReadJSONL(t *testing.T, data []byte, schema *arrow.Schema, mem memory.Allocator) [][]any {
	t.Helper()
	dec := arrowfmt.NewJSONDecoder(schema, mem)
	defer dec.Release()
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if err := dec.Append(sc.Bytes()); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
	}
	rec := dec.NewBatch()
	defer rec.Release()
	return RowsOf(rec)
}

func ptr[T any](v T) *T { return &v }

// DatagenSpec is a datagen source named gen with one column of every kind
// of generator, nulls included, bounded at count events.
func DatagenSpec(count int64) *spec.Source {
	return &spec.Source{
		Name: "gen", Type: spec.SourceDatagen, Count: count,
		Schema: Schema(
			"ts", "timestamp_ms", "id", "int64", "qty", "int64", "fare", "float64", "price", "float64",
			"user", "string", "city", "string", "vip", "bool", "seen", "timestamp_ms"),
		Event: &spec.EventTime{Column: "ts"},
		Gen: &spec.DatagenOpt{
			Seed: 7, EventsPerSecond: 100, OutOfOrderness: spec.Duration(2 * time.Second),
			Fields: map[string]spec.FieldGen{
				"qty":   {Min: ptr(-5.0), Max: ptr(5.0), NullRate: 0.05},
				"fare":  {NullRate: 0.2},
				"price": {Min: ptr(2.5), Max: ptr(3.0)},
				"user":  {Values: []string{"ann", "bob", "cy"}, NullRate: 0.1},
				"seen":  {NullRate: 0.05},
				"city":  {Cardinality: 7},
				"vip":   {NullRate: 0.5},
			},
		},
	}
}

// GenBatches returns count events of DatagenSpec (every type, with nulls)
// in batches of batchRows, released when the test ends, and the rows they
// hold.
func GenBatches(t *testing.T, mem memory.Allocator, count int64, batchRows int) ([]arrow.RecordBatch, stream.Stream, [][]any) {
	t.Helper()
	src := DatagenSpec(count)
	out := SourceSchema(t, src)
	g, err := datagen.NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Open(SourceContext(mem, 0, 1)); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var recs []arrow.RecordBatch
	t.Cleanup(func() {
		for _, r := range recs {
			r.Release()
		}
	})
	var want [][]any
	for range (count + int64(batchRows) - 1) / int64(batchRows) {
		rec, err := g.Poll(context.Background(), batchRows, 0)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
		want = append(want, RowsOf(rec)...)
	}
	return recs, out, want
}

// GenBatch returns the first n events of the datagen source src as one
// batch; the caller releases it.
func GenBatch(t testing.TB, src *spec.Source, out stream.Stream, mem memory.Allocator, n int) arrow.RecordBatch {
	t.Helper()
	s, err := datagen.NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(SourceContext(mem, 0, 1)); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec, err := s.Poll(context.Background(), n, 0)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// Position returns a source's position as a string, failing the test
// if it has none or it is not JSON.
func Position(t testing.TB, s task.Source) string {
	t.Helper()
	r, ok := s.(task.Resumable)
	if !ok {
		t.Fatalf("%T is not resumable", s)
	}
	pos, err := r.Position()
	if err != nil {
		t.Fatalf("Position: %v", err)
	}
	if !json.Valid(pos) {
		t.Fatalf("Position %q is not JSON", pos)
	}
	return string(pos)
}

// PollN polls a bounded source n times (fewer if it ends first) and
// returns its rows and whether it ended.
func PollN(t testing.TB, s task.Source, n, maxRows int) (rows [][]any, ended bool) {
	t.Helper()
	for range n {
		rec, err := s.Poll(context.Background(), maxRows, 0)
		if errors.Is(err, io.EOF) {
			return rows, true
		}
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		rows = append(rows, RowsOf(rec)...)
		rec.Release()
	}
	return rows, false
}

// SameRowList fails the test unless got and want hold the same rows in
// the same order.
func SameRowList(t testing.TB, what string, got, want [][]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d:\n got %v\nwant %v", what, len(got), len(want), got, want)
	}
	for i := range want {
		if !SameRow(got[i], want[i]) {
			t.Fatalf("%s: row %d: %v, want %v", what, i, got[i], want[i])
		}
	}
}

// RestoreRefused checks that Restore refuses pos with an error that
// contains every string of want.
func RestoreRefused(t *testing.T, s task.Source, pos string, want ...string) {
	t.Helper()
	err := s.(task.Resumable).Restore(json.RawMessage(pos))
	if err == nil {
		t.Errorf("Restore(%s): no error", pos)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Restore(%s): error %q does not mention %q", pos, err, w)
		}
	}
}

// DeadLetter is one record a source sent to its dead-letter output.
type DeadLetter struct{ Raw, Origin, Reason string }

// DeadLetters collects what a source sends to its dead-letter output: give
// Add to task.SourceContext.DeadLetter.
type DeadLetters struct {
	mu  sync.Mutex
	Got []DeadLetter
}

// Add records one dead letter.
func (d *DeadLetters) Add(raw []byte, origin, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Got = append(d.Got, DeadLetter{string(raw), origin, reason})
}
