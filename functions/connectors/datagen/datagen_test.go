package datagen_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/connectors/datagen"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

func connPtr[T any](v T) *T { return &v }

// connDatagenRows runs every subtask of src at parallelism p to the end and
// returns the rows of each subtask.
func connDatagenRows(t *testing.T, src *spec.Source, mem memory.Allocator, p, maxRows int) [][][]any {
	t.Helper()
	out := connectortest.SourceSchema(t, src)
	per := make([][][]any, p)
	for s := range p {
		g, err := datagen.NewSource(src, out)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Open(connectortest.SourceContext(mem, s, p)); err != nil {
			t.Fatal(err)
		}
		per[s] = connectortest.Drain(t, g, maxRows)
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return per
}

// TestDatagenParallelism checks that the generated set does not depend on
// parallelism: event i comes from subtask i % p, in order, and equals
// datagen.Row(i).
func TestDatagenParallelism(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	const count = 1000
	src := connectortest.DatagenSpec(count)
	out := connectortest.SourceSchema(t, src)
	want := make([][]any, count)
	for i := range want {
		want[i] = datagen.Row(src, out, int64(i))
	}
	for _, p := range []int{1, 3} {
		all := make([][]any, count)
		n := 0
		for s, rows := range connDatagenRows(t, src, mem, p, 7) {
			for k, row := range rows {
				id := row[1].(int64) // id is the event index
				if wantID := int64(s + k*p); id != wantID {
					t.Fatalf("p=%d subtask %d row %d: event %d, want %d", p, s, k, id, wantID)
				}
				all[id] = row
				n++
			}
		}
		if n != count {
			t.Fatalf("p=%d: %d rows, want %d", p, n, count)
		}
		for i := range all {
			if !connectortest.SameRow(all[i], want[i]) {
				t.Fatalf("p=%d: event %d is %v, DatagenRow says %v", p, i, all[i], want[i])
			}
		}
	}
}

func TestDatagenValues(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	const count = 20000
	src := connectortest.DatagenSpec(count)
	rows := connDatagenRows(t, src, mem, 1, 4096)[0]
	if len(rows) != count {
		t.Fatalf("%d rows, want %d", len(rows), count)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	qtys, cities, nulls := map[int64]int{}, map[string]int{}, map[string]int{}
	var fareNulls, vipNulls, vipTrue, jittered int
	var maxJitter time.Duration
	for i, r := range rows {
		ts, id, qty, fare, price, user, city, vip, seen := r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]
		if id != int64(i) {
			t.Fatalf("row %d: id %v, want the event index", i, id)
		}
		// 100 events per second: event i is at start + 10ms*i, minus jitter.
		base := start.Add(time.Duration(i) * 10 * time.Millisecond)
		if seen != nil && !seen.(time.Time).Equal(base) {
			t.Fatalf("row %d: seen %v, want the base time %v", i, seen, base)
		}
		jitter := base.Sub(ts.(time.Time))
		if jitter < 0 || jitter > 2*time.Second {
			t.Fatalf("row %d: ts %v is %v before its base time: want [0, 2s]", i, ts, jitter)
		}
		if jitter > 0 {
			jittered++
		}
		maxJitter = max(maxJitter, jitter)
		if qty != nil {
			q := qty.(int64)
			if q < -5 || q >= 5 {
				t.Fatalf("row %d: qty %d not in [-5,5)", i, q)
			}
			qtys[q]++
		}
		for name, v := range map[string]any{"qty": qty, "user": user, "seen": seen} {
			if v == nil {
				nulls[name]++
			}
		}
		if fare == nil {
			fareNulls++
		} else if f := fare.(float64); f < 0 || f >= 100 {
			t.Fatalf("row %d: fare %g not in [0,100)", i, f)
		}
		if p := price.(float64); p < 2.5 || p >= 3 {
			t.Fatalf("row %d: price %g not in [2.5,3)", i, p)
		}
		if u, _ := user.(string); user != nil && u != "ann" && u != "bob" && u != "cy" {
			t.Fatalf("row %d: user %q not one of the values", i, u)
		}
		cities[city.(string)]++
		switch vip {
		case nil:
			vipNulls++
		case true:
			vipTrue++
		}
	}
	if len(qtys) != 10 {
		t.Errorf("qty took %d distinct values, want all 10 of [-5,5)", len(qtys))
	}
	if len(cities) != 7 {
		t.Errorf("city took %d distinct values, want 7: %v", len(cities), cities)
	}
	for c := range cities {
		var k int
		if _, err := fmt.Sscanf(c, "city-%d", &k); err != nil || k < 0 || k >= 7 || c != fmt.Sprintf("city-%d", k) {
			t.Errorf("city %q: want city-<0..6>", c)
		}
	}
	// The seed is fixed, so these are deterministic; the bounds are loose
	// enough that any decent generator passes (about 6 standard deviations).
	near := func(name string, got, n int, p float64) {
		sd := math.Sqrt(float64(n) * p * (1 - p))
		if math.Abs(float64(got)-float64(n)*p) > 6*sd {
			t.Errorf("%s: %d of %d, want about %.0f", name, got, n, float64(n)*p)
		}
	}
	near("fare nulls", fareNulls, count, 0.2)
	near("qty nulls", nulls["qty"], count, 0.05)
	near("user nulls", nulls["user"], count, 0.1)
	near("seen nulls", nulls["seen"], count, 0.05)
	near("vip nulls", vipNulls, count, 0.5)
	near("vip true", vipTrue, count-vipNulls, 0.5)
	near("jittered timestamps", jittered, count, 2000.0/2001)
	if maxJitter < 1900*time.Millisecond {
		t.Errorf("largest jitter %v: want close to the 2s bound", maxJitter)
	}
}

func TestDatagenDefaults(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	src := &spec.Source{Name: "g", Type: "datagen", Count: 3,
		Schema: connectortest.Schema("t", "timestamp_ms", "n", "int64", "s", "string", "f", "float64")}
	rows := connDatagenRows(t, src, mem, 1, 10)[0]
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, r := range rows {
		// No event time: timestamps are the base time, 1000 events per second.
		if want := start.Add(time.Duration(i) * time.Millisecond); !r[0].(time.Time).Equal(want) {
			t.Errorf("row %d: t %v, want %v", i, r[0], want)
		}
		if r[1] != int64(i) {
			t.Errorf("row %d: n %v, want %d", i, r[1], i)
		}
		if !strings.HasPrefix(r[2].(string), "s-") {
			t.Errorf("row %d: s %q, want s-<k>", i, r[2])
		}
	}

	// Without eventsPerSecond, event time advances at the source's rate.
	src.Rate = 50
	src.Gen = &spec.DatagenOpt{Start: "2026-03-01T00:00:00Z"}
	rows = connDatagenRows(t, src, mem, 1, 10)[0]
	if want := time.Date(2026, 3, 1, 0, 0, 0, 40e6, time.UTC); !rows[2][0].(time.Time).Equal(want) {
		t.Errorf("event 2 at rate 50: t %v, want %v", rows[2][0], want)
	}
}

func TestDatagenUnbounded(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	src := &spec.Source{Name: "g", Type: "datagen", Splits: 4, Schema: connectortest.Schema("n", "int64")}
	out := connectortest.SourceSchema(t, src)
	g, err := datagen.NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Open(connectortest.SourceContext(mem, 1, 2)); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	next := int64(1)
	for range 5 {
		rec, err := g.Poll(context.Background(), 100, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range connectortest.RowsOf(rec) {
			if r[0] != next {
				t.Fatalf("event %v, want %d", r[0], next)
			}
			next += 2
		}
		if rec.NumRows() != 100 {
			t.Fatalf("%d rows, want 100", rec.NumRows())
		}
		rec.Release()
	}
	pos, err := g.(task.Resumable).Position()
	if err != nil {
		t.Fatal(err)
	}
	// Subtask 1 of 2 owns splits 1 and 3 of 4.
	if want := fmt.Sprintf(`{"splits":{"1":{"next":%d,"of":4},"3":{"next":%d,"of":4}}}`, next, next+2); string(pos) != want {
		t.Errorf("Position %s, want %s", pos, want)
	}
}

// TestDatagenCountSplit checks the bound at every parallelism up to more
// subtasks than events.
func TestDatagenCountSplit(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	src := &spec.Source{Name: "g", Type: "datagen", Count: 10, Schema: connectortest.Schema("n", "int64")}
	for p := 1; p <= 12; p++ {
		seen := map[int64]bool{}
		for _, rows := range connDatagenRows(t, src, mem, p, 3) {
			for _, r := range rows {
				n := r[0].(int64)
				if seen[n] {
					t.Fatalf("p=%d: event %d twice", p, n)
				}
				seen[n] = true
			}
		}
		if len(seen) != 10 {
			t.Fatalf("p=%d: %d events, want 10", p, len(seen))
		}
	}
}

func TestDatagenConfigErrors(t *testing.T) {
	src := &spec.Source{Name: "g", Type: "datagen",
		Schema: connectortest.Schema("t", "timestamp_ms", "n", "int64", "s", "string", "b", "bool"),
		Event:  &spec.EventTime{Column: "t"},
		Gen: &spec.DatagenOpt{
			Start:           "yesterday",
			EventsPerSecond: -1,
			Fields: map[string]spec.FieldGen{
				"t":    {NullRate: 0.1},
				"n":    {Min: connPtr(5.0), Max: connPtr(1.5)},
				"s":    {Values: []string{"a"}, Cardinality: 3},
				"b":    {Min: connPtr(1.0), NullRate: 1},
				"nope": {},
			},
		}}
	out := connectortest.SourceSchema(t, src)
	_, err := datagen.NewSource(src, out)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`sources[g].datagen.start: "yesterday" is not an RFC 3339 time`,
		`sources[g].datagen.eventsPerSecond: -1`,
		`sources[g].datagen.fields.t.nullRate: 0.1: the event-time column is never null`,
		`sources[g].datagen.fields.n: 1.5 is not an int64`,
		`sources[g].datagen.fields.s: give values or cardinality, not both`,
		`sources[g].datagen.fields.b: min and max apply to int64 and float64 columns; "b" is bool`,
		`sources[g].datagen.fields.b.nullRate: 1 is out of range: want [0,1)`,
		`sources[g].datagen.fields.nope: "nope" is not a column of the schema`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
	src.Gen = &spec.DatagenOpt{Fields: map[string]spec.FieldGen{"n": {Min: connPtr(200.0)}}}
	if _, err := datagen.NewSource(src, out); err == nil || !strings.Contains(err.Error(), "min 200 must be below max 100 (default)") {
		t.Errorf("min above the default max: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("DatagenRow of a bad spec did not panic")
		}
	}()
	datagen.Row(src, out, 0)
}

func TestDatagenEOF(t *testing.T) {
	mem := connectortest.Mem(t)
	src := &spec.Source{Name: "g", Type: "datagen", Count: 2, Schema: connectortest.Schema("n", "int64")}
	g, err := datagen.NewSource(src, connectortest.SourceSchema(t, src))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Open(connectortest.SourceContext(mem, 0, 1)); err != nil {
		t.Fatal(err)
	}
	rec, err := g.Poll(context.Background(), 10, 0)
	if err != nil || rec.NumRows() != 2 {
		t.Fatalf("first poll: %v rows, %v", rec, err)
	}
	rec.Release()
	for range 2 {
		if _, err := g.Poll(context.Background(), 10, 0); !errors.Is(err, io.EOF) {
			t.Fatalf("poll after the end: %v, want io.EOF", err)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// BenchmarkDatagen measures generation of a 4-column schema (event time
// with jitter, int64 index, string of 1000 values, float64) on one core.
func BenchmarkDatagen(b *testing.B) {
	src := &spec.Source{Name: "g", Type: "datagen",
		Schema: connectortest.Schema("ts", "timestamp_ms", "id", "int64", "user", "string", "fare", "float64"),
		Event:  &spec.EventTime{Column: "ts"},
		Gen: &spec.DatagenOpt{Seed: 1, OutOfOrderness: spec.Duration(time.Second),
			Fields: map[string]spec.FieldGen{"user": {Cardinality: 1000}}}}
	out := connectortest.SourceSchema(b, src)
	g, err := datagen.NewSource(src, out)
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Open(connectortest.SourceContext(memory.NewGoAllocator(), 0, 1)); err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	const batch = 8192
	polls := 0
	for b.Loop() {
		rec, err := g.Poll(context.Background(), batch, 0)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
		polls++
	}
	b.ReportMetric(float64(polls)*batch/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(polls)/batch, "ns/row")
}

// A bounded datagen subtask reports its share of count, read up to all of
// it; an unbounded one reports no total.
func TestDatagenProgress(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	src := &spec.Source{Name: "g", Type: "datagen", Count: 10, Schema: connectortest.Schema("n", "int64")}
	out := connectortest.SourceSchema(t, src)
	var sum int64
	for s := range 3 {
		g, err := datagen.NewSource(src, out)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Open(connectortest.SourceContext(mem, s, 3)); err != nil {
			t.Fatal(err)
		}
		b := g.(task.Bounded)
		read, total, unit, ok := b.Progress()
		if !ok || read != 0 || unit != "records" {
			t.Fatalf("subtask %d before polling: %d of %d %s (ok %v)", s, read, total, unit, ok)
		}
		rows := connectortest.Drain(t, g, 2)
		if read, _, _, _ = b.Progress(); read != int64(len(rows)) || read != total {
			t.Errorf("subtask %d drained: read %d of %d, generated %d", s, read, total, len(rows))
		}
		sum += total
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if sum != 10 {
		t.Errorf("subtask totals sum to %d, want 10", sum)
	}
	src.Count = 0
	g, err := datagen.NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Open(connectortest.SourceContext(mem, 0, 1)); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, _, _, ok := g.(task.Bounded).Progress(); ok {
		t.Error("an unbounded datagen source reports a total")
	}
}
