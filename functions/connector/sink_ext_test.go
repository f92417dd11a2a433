package connector_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/connectors/stdout"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

func TestSinkDispatchErrors(t *testing.T) {
	out := stream.Stream{Schema: arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil), TimeColumn: -1}
	for _, tc := range []struct {
		snk  spec.Sink
		want string
	}{
		{spec.Sink{Name: "k", Type: "kafka"}, `sinks[k].type: "kafka" is not a sink type: want files, redis, stdout or blackhole`},
		{spec.Sink{Name: "k", Type: "files", Format: "jsonl"}, `sinks[k].path: missing`},
		{spec.Sink{Name: "k", Type: "files", Path: "out", Format: "avro"}, `sinks[k].format: "avro" is not supported: want jsonl or parquet`},
		{spec.Sink{Name: "k", Type: "redis"}, `sinks[k].stream: missing`},
		{spec.Sink{Name: "k", Type: "stdout", Rate: -1}, `sinks[k].rate: -1 is negative`},
	} {
		if _, err := connector.NewSink(&tc.snk, out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewSink(%+v): error %v, want %q", tc.snk, err, tc.want)
		}
	}
}

// TestFileSinkRateCancel checks that a throttled Write gives up when its
// context ends, and that an unthrottled sink is not wrapped.
func TestFileSinkRateCancel(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	src := &spec.Source{Name: "g", Type: "datagen", Count: 100, Schema: connectortest.Schema("id", "int64")}
	out := connectortest.SourceSchema(t, src)
	var buf strings.Builder
	snk, err := connector.NewSink(&spec.Sink{Name: "k", Type: "stdout", Rate: 1}, out)
	if err != nil {
		t.Fatal(err)
	}
	inner, _ := connector.Throttled(snk)
	*inner = stdout.New(out, stdout.To(&buf))
	counters := &task.Counters{}
	if err := snk.Open(&task.SinkContext{Context: task.Context{Mem: mem, Counters: counters}}); err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	rec := connectortest.GenBatch(t, src, out, mem, 100)
	defer rec.Release()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- snk.Write(ctx, rec) }() // 100 rows at 1 row/s: 100s
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Write after cancel: %v, want context.Canceled", err)
	}
	if buf.Len() != 0 || counters.SinkRows.Load() != 0 {
		t.Errorf("a cancelled throttled write wrote %d bytes, %d rows", buf.Len(), counters.SinkRows.Load())
	}

	plain, err := connector.NewSink(&spec.Sink{Name: "k", Type: "stdout"}, out)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := connector.Throttled(plain); ok {
		t.Error("a sink without rate is throttled")
	}
}

// TestFileSinkTxnRateLimited checks that the rate limiter NewSink may add
// does not hide a sink's transactions, and that a sink without them has
// none.
func TestFileSinkTxnRateLimited(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	_, in, _ := connectortest.GenBatches(t, mem, 10, 10)
	snk, err := connector.NewSink(&spec.Sink{Name: "out", Type: spec.SinkFiles, Path: "out", Format: spec.FormatJSONL, Rate: 10}, in)
	if err != nil {
		t.Fatal(err)
	}
	inner, _ := connector.Throttled(snk)
	if tp, ok := task.AsTwoPhase(snk); !ok || tp != *inner {
		t.Errorf("AsTwoPhase(rate-limited files sink) = %v, %v", tp, ok)
	}
	if _, ok := task.AsTwoPhase(stdout.New(in)); ok {
		t.Error("stdout sink is two-phase")
	}
}
