package files

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
)

// connClock is a settable processing-time clock.
type connClock struct{ t time.Time }

func (c *connClock) now() time.Time { return c.t }

func connOpenFileSink(t *testing.T, snk *spec.Sink, in stream.Stream, b blob.Bucket, mem memory.Allocator, clock *connClock) (*fileSink, *task.Counters) {
	t.Helper()
	s, err := NewSink(snk, in)
	if err != nil {
		t.Fatal(err)
	}
	counters := &task.Counters{}
	ctx := &task.SinkContext{Context: task.Context{Node: snk.Name, Subtask: 1, Parallelism: 2, Mem: mem, Counters: counters, Now: clock.now},
		Bucket: b, Attempt: 2}
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s.(*fileSink), counters
}

// connReadParquet reads a Parquet object with pqarrow, checking its schema.
func connReadParquet(t *testing.T, data []byte, schema *arrow.Schema, mem memory.Allocator) [][]any {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1000}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if got := tbl.Schema(); got.NumFields() != schema.NumFields() {
		t.Fatalf("parquet schema %v, want %v", got, schema)
	}
	for i, f := range tbl.Schema().Fields() {
		if w := schema.Field(i); f.Name != w.Name || !arrow.TypeEqual(f.Type, w.Type) {
			t.Fatalf("parquet column %d: %s %v, want %s %v", i, f.Name, f.Type, w.Name, w.Type)
		}
	}
	tr := array.NewTableReader(tbl, 1000)
	defer tr.Release()
	var rows [][]any
	for tr.Next() {
		rows = append(rows, connectortest.RowsOf(tr.RecordBatch())...)
	}
	return rows
}

func TestFileSinkRoundTrip(t *testing.T) {
	for _, format := range []string{spec.FormatJSONL, spec.FormatParq} {
		t.Run(format, func(t *testing.T) {
			connectortest.CheckLeaks(t)
			mem := connectortest.Mem(t)
			b := connBucket(t)
			recs, in, want := connectortest.GenBatches(t, mem, 2500, 1000)
			s, counters := connOpenFileSink(t, &spec.Sink{Name: "out", Type: "files", Path: "out/trips/", Format: format}, in, b, mem, &connClock{})
			for _, rec := range recs {
				if err := s.Write(context.Background(), rec); err != nil {
					t.Fatal(err)
				}
			}
			if infos, _ := b.List(context.Background(), "out/"); len(infos) != 0 {
				t.Fatalf("objects before Finish: %v", infos)
			}
			if err := s.Finish(context.Background()); err != nil {
				t.Fatal(err)
			}
			infos, err := b.List(context.Background(), "out/")
			if err != nil {
				t.Fatal(err)
			}
			wantKey := "out/trips/part-1-a2-000000." + format
			if len(infos) != 1 || infos[0].Key != wantKey {
				t.Fatalf("objects %v, want one %s", infos, wantKey)
			}
			data, err := b.Get(context.Background(), wantKey)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]any
			if format == spec.FormatParq {
				got = connReadParquet(t, data, in.Schema, mem)
			} else {
				got = connectortest.ReadJSONL(t, data, in.Schema, mem)
			}
			connectortest.SameRows(t, got, want)
			if n := counters.SinkRows.Load(); n != int64(len(want)) {
				t.Errorf("SinkRows %d, want %d", n, len(want))
			}
		})
	}
}

// TestFileSinkRoll checks when objects are written: at the size limit, 30s
// after the oldest buffered row (on a Write), and at Finish.
func TestFileSinkRoll(t *testing.T) {
	for _, format := range []string{spec.FormatJSONL, spec.FormatParq} {
		t.Run(format, func(t *testing.T) {
			connectortest.CheckLeaks(t)
			mem := connectortest.Mem(t)
			b := connBucket(t)
			recs, in, want := connectortest.GenBatches(t, mem, 1000, 100)
			clock := &connClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			s, counters := connOpenFileSink(t, &spec.Sink{Name: "out", Type: "files", Path: "out", Format: format}, in, b, mem, clock)
			s.maxBytes, s.maxRows = 1<<30, 1<<30

			write := func(i int, after time.Duration) {
				t.Helper()
				clock.t = clock.t.Add(after)
				if err := s.Write(context.Background(), recs[i]); err != nil {
					t.Fatal(err)
				}
			}
			objects := func() []string {
				t.Helper()
				infos, err := b.List(context.Background(), "out/")
				if err != nil {
					t.Fatal(err)
				}
				var keys []string
				for _, info := range infos {
					keys = append(keys, info.Key)
				}
				return keys
			}
			key := func(seq int) string { return fmt.Sprintf("out/part-1-a2-%06d.%s", seq, format) }

			write(0, 0)
			write(1, 20*time.Second)
			if got := objects(); len(got) != 0 {
				t.Fatalf("after 20s: objects %v", got)
			}
			write(2, 10*time.Second) // 30s after the oldest row: roll
			if got := objects(); len(got) != 1 || got[0] != key(0) || counters.SinkRows.Load() != 300 {
				t.Fatalf("after 30s: objects %v, %d rows counted", got, counters.SinkRows.Load())
			}
			// A batch that fills the buffer rolls at once.
			if format == spec.FormatParq {
				s.maxRows = 100
			} else {
				s.maxBytes = 1
			}
			write(3, time.Second)
			if got := objects(); len(got) != 2 || got[1] != key(1) {
				t.Fatalf("at the size limit: objects %v", got)
			}
			s.maxBytes, s.maxRows = 1<<30, 1<<30
			for i := 4; i < len(recs); i++ {
				write(i, time.Second)
			}
			if err := s.Finish(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := objects()
			if len(got) != 3 || got[2] != key(2) {
				t.Fatalf("after Finish: objects %v", got)
			}
			var rows [][]any
			for _, k := range got {
				data, err := b.Get(context.Background(), k)
				if err != nil {
					t.Fatal(err)
				}
				if format == spec.FormatParq {
					rows = append(rows, connReadParquet(t, data, in.Schema, mem)...)
				} else {
					rows = append(rows, connectortest.ReadJSONL(t, data, in.Schema, mem)...)
				}
			}
			connectortest.SameRows(t, rows, want)
			if n := counters.SinkRows.Load(); n != int64(len(want)) {
				t.Errorf("SinkRows %d, want %d", n, len(want))
			}
			if err := s.Finish(context.Background()); err != nil || len(objects()) != 3 {
				t.Errorf("a second Finish with nothing buffered: %v, objects %v", err, objects())
			}
		})
	}
}

// TestFileSinkCloseDrops checks that Close without Finish writes nothing
// and releases what it held.
func TestFileSinkCloseDrops(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	b := connBucket(t)
	recs, in, _ := connectortest.GenBatches(t, mem, 100, 100)
	s, _ := connOpenFileSink(t, &spec.Sink{Name: "out", Type: "files", Path: "out", Format: spec.FormatParq}, in, b, mem, &connClock{})
	if err := s.Write(context.Background(), recs[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if infos, _ := b.List(context.Background(), "out/"); len(infos) != 0 {
		t.Fatalf("objects after Close: %v", infos)
	}
}
