package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/integration/testenv"
)

// TestRedisSinkRoundTrip writes every type through a redis sink and reads
// it back with a redis source.
func TestRedisSinkRoundTrip(t *testing.T) {
	connectortest.CheckLeaks(t)
	r := testenv.StartRedis(t)
	mem := connectortest.Mem(t)
	recs, in, want := connectortest.GenBatches(t, mem, 2500, 1000)

	snk, err := NewSink(&spec.Sink{Name: "out", Type: spec.SinkRedis, Stream: "results", Addr: r.Addr}, in)
	if err != nil {
		t.Fatal(err)
	}
	counters := &task.Counters{}
	if err := snk.Open(&task.SinkContext{Context: task.Context{Mem: mem, Counters: counters}}); err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := snk.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := snk.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Do("XLEN", "results"); err != nil || n != strconv.Itoa(len(want)) {
		t.Fatalf("XLEN results: %s, %v; want %d", n, err, len(want))
	}
	if n := counters.SinkRows.Load(); n != int64(len(want)) {
		t.Errorf("SinkRows %d, want %d", n, len(want))
	}

	src := connectortest.DatagenSpec(0)
	src.Type, src.Gen, src.Stream = spec.SourceRedis, nil, "results"
	dl := &connectortest.DeadLetters{}
	s := connOpenRedisSource(t, src, in, r.Addr, mem, 0, dl)
	connectortest.SameRows(t, connPollRows(t, s, len(want), 1000), want)
	if len(dl.Got) != 0 {
		t.Errorf("dead letters %v", dl.Got)
	}

	// A Write to a Redis that is gone fails with where it was going.
	r.Stop()
	err = snk.Write(context.Background(), recs[0])
	if err == nil || !strings.Contains(err.Error(), `"results"`) || !strings.Contains(err.Error(), r.Addr) {
		t.Errorf("write to a stopped Redis: %v", err)
	}
	if err := snk.Close(); err != nil {
		t.Error(err)
	}
	if err := snk.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestRedisSinkJobAddress(t *testing.T) {
	connectortest.CheckLeaks(t)
	r := testenv.StartRedis(t)
	mem := connectortest.Mem(t)
	recs, in, want := connectortest.GenBatches(t, mem, 10, 10)
	snk, err := NewSink(&spec.Sink{Name: "out", Type: spec.SinkRedis, Stream: "s"}, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := snk.Open(&task.SinkContext{Context: task.Context{Mem: mem}, RedisAddr: r.Addr}); err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	if err := snk.Write(context.Background(), recs[0]); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Do("XLEN", "s"); err != nil || n != strconv.Itoa(len(want)) {
		t.Fatalf("XLEN s: %s, %v; want %d", n, err, len(want))
	}
}
