package stdout

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/task"
)

// connChoppyWriter writes a few bytes at a time and yields in between, so
// unserialised writers would interleave their lines.
type connChoppyWriter struct {
	mu  sync.Mutex // guards buf only; the sink must serialise whole batches
	buf bytes.Buffer
}

func (w *connChoppyWriter) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += 7 {
		w.mu.Lock()
		w.buf.Write(p[i:min(i+7, len(p))])
		w.mu.Unlock()
		runtime.Gosched()
	}
	return len(p), nil
}

func TestStdoutSinkConcurrent(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	recs, in, want := connectortest.GenBatches(t, mem, 400, 50)
	w := &connChoppyWriter{}
	const sinks = 4
	counters := make([]task.Counters, sinks)
	var wg sync.WaitGroup
	for k := range sinks {
		s := New(in, To(w))
		if err := s.Open(&task.SinkContext{Context: task.Context{Subtask: k, Parallelism: sinks, Mem: mem, Counters: &counters[k]}}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer s.Close()
			for i := k; i < len(recs); i += sinks {
				if err := s.Write(context.Background(), recs[i]); err != nil {
					t.Error(err)
					return
				}
			}
			if err := s.Finish(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	// Every line is a whole row; together they are the input.
	got := connectortest.ReadJSONL(t, w.buf.Bytes(), in.Schema, mem)
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	byID := map[int64][]any{}
	for _, row := range got {
		byID[row[1].(int64)] = row
	}
	for _, row := range want {
		if !connectortest.SameRow(byID[row[1].(int64)], row) {
			t.Fatalf("row %v: printed as %v", row, byID[row[1].(int64)])
		}
	}
	var total int64
	for k := range counters {
		total += counters[k].SinkRows.Load()
	}
	if total != int64(len(want)) {
		t.Errorf("SinkRows add up to %d, want %d", total, len(want))
	}
}
