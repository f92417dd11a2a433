package blackhole

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
)

func TestLatencyBuckets(t *testing.T) {
	for _, ms := range []int64{0, 1, 99, 100, 101, 250, 999, 4000, 123456} {
		b := LatencyBucket(ms)
		if b > ms || (ms >= 64 && float64(ms-b) >= float64(b)/32) || (ms < 64 && b != ms) {
			t.Errorf("LatencyBucket(%d) = %d", ms, b)
		}
		if LatencyBucket(b) != b {
			t.Errorf("bucket %d of %d is not its own bucket (%d)", b, ms, LatencyBucket(b))
		}
	}
	if LatencyBucket(-5) != 0 {
		t.Errorf("negative latency bucket %d", LatencyBucket(-5))
	}
}

func TestBlackholeLatency(t *testing.T) {
	schema, err := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "id", Type: arrowfmt.Int64}, {Name: "ts", Type: arrowfmt.TimestampMs}})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	now := time.UnixMilli(1_000_000)
	in := stream.Stream{Schema: schema, TimeColumn: 1}
	s, err := NewSink(&spec.Sink{Name: "bh", Type: spec.SinkBlackhole, Path: "lat/"}, in)
	if err != nil {
		t.Fatal(err)
	}
	ctx := &task.SinkContext{Context: task.Context{Subtask: 1, Now: func() time.Time { return now }, Counters: &task.Counters{}}, Bucket: dir}
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	bld := arrowfmt.NewBuilder(schema, memory.DefaultAllocator)
	// 90 rows 10 ms late, 10 rows 2 s late, 1 row without event time, 3
	// rows with event time ahead of the clock (early).
	for i := range 3 {
		bld.Int64(0, int64(200+i))
		bld.TimestampMs(1, now.UnixMilli()+5_000)
	}
	for i := range 100 {
		bld.Int64(0, int64(i))
		if i < 90 {
			bld.TimestampMs(1, now.UnixMilli()-10)
		} else {
			bld.TimestampMs(1, now.UnixMilli()-2000)
		}
	}
	bld.Int64(0, 100)
	bld.Null(1)
	rec := bld.NewBatch()
	bld.Release()
	defer rec.Release()
	if err := s.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	data, err := dir.Get(context.Background(), "lat/latency-1.json")
	if err != nil {
		t.Fatal(err)
	}
	var got LatencySummary
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Rows != 104 || got.Timed != 100 || got.Early != 3 || ctx.Counters.SinkRows.Load() != 104 {
		t.Errorf("rows %d timed %d early %d counted %d", got.Rows, got.Timed, got.Early, ctx.Counters.SinkRows.Load())
	}
	if p50, p99 := got.Percentile(0.5), got.Percentile(0.99); p50 != 10 || p99 != LatencyBucket(2000) {
		t.Errorf("p50 %d p99 %d, want 10 and %d", p50, p99, LatencyBucket(2000))
	}
}
