package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/integration/testenv"
)

// txnRedisSink opens a redis sink on stream "results" of r.
func txnRedisSink(t *testing.T, r *testenv.Redis, in stream.Stream, mem memory.Allocator, txn bool) (*redisSink, *task.Counters) {
	t.Helper()
	s, err := NewSink(&spec.Sink{Name: "out", Type: spec.SinkRedis, Stream: "results", Addr: r.Addr}, in)
	if err != nil {
		t.Fatal(err)
	}
	counters := &task.Counters{}
	if err := s.Open(&task.SinkContext{Context: task.Context{Mem: mem, Counters: counters}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	rs := s.(*redisSink)
	if txn {
		rs.EnableTransactions()
	}
	return rs, counters
}

func txnRedisInt(t *testing.T, r *testenv.Redis, args ...string) int {
	t.Helper()
	v, err := r.Do(args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%v: %q", args, v)
	}
	return n
}

func TestRedisSinkTxn(t *testing.T) {
	connectortest.CheckLeaks(t)
	ctx := context.Background()
	r := testenv.StartRedis(t)
	mem := connectortest.Mem(t)
	recs, in, want := connectortest.GenBatches(t, mem, 2500, 1000)
	xlen := func() int { t.Helper(); return txnRedisInt(t, r, "XLEN", "results") }

	s, counters := txnRedisSink(t, r, in, mem, true)
	for _, rec := range recs {
		if err := s.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	if n := xlen(); n != 0 {
		t.Fatalf("XLEN %d before PreCommit", n)
	}
	raw, err := s.PreCommit(ctx, "job-a0-s0-c1")
	if err != nil {
		t.Fatal(err)
	}
	if n := xlen(); n != 0 {
		t.Fatalf("XLEN %d after PreCommit", n)
	}
	staging := redisStagingKey("results", "job-a0-s0-c1")
	if n := txnRedisInt(t, r, "LLEN", staging); n != len(want) {
		t.Fatalf("LLEN %s = %d, want %d", staging, n, len(want))
	}
	if n := counters.SinkRows.Load(); n != int64(len(want)) {
		t.Errorf("SinkRows %d, want %d", n, len(want))
	}
	for i := range 2 {
		if err := s.Commit(ctx, raw); err != nil {
			t.Fatalf("Commit %d: %v", i+1, err)
		}
		if n := xlen(); n != len(want) {
			t.Fatalf("after Commit %d: XLEN %d, want %d", i+1, n, len(want))
		}
	}
	if n := txnRedisInt(t, r, "EXISTS", staging); n != 0 {
		t.Errorf("staging list left after Commit")
	}
	done := redisDoneKey("results", "job-a0-s0-c1")
	if ttl := txnRedisInt(t, r, "TTL", done); ttl <= 0 || ttl > int(TxnMarkerTTL/time.Second) {
		t.Errorf("TTL %s = %d", done, ttl)
	}
	// The entries are the rows, in order, as a redis source reads them.
	src := connectortest.DatagenSpec(0)
	src.Type, src.Gen, src.Stream = spec.SourceRedis, nil, "results"
	rs := connOpenRedisSource(t, src, in, r.Addr, mem, 0, nil)
	connectortest.SameRows(t, connPollRows(t, rs, len(want), 1000), want)

	// Abort drops the staged rows; a Commit after it fails and appends
	// nothing.
	if err := s.Write(ctx, recs[0]); err != nil {
		t.Fatal(err)
	}
	raw2, err := s.PreCommit(ctx, "job-a0-s0-c2")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Abort(ctx, raw2); err != nil {
			t.Fatal(err)
		}
	}
	if n := txnRedisInt(t, r, "EXISTS", redisStagingKey("results", "job-a0-s0-c2")); n != 0 {
		t.Errorf("staging list left after Abort")
	}
	if err := s.Commit(ctx, raw2); err == nil || !strings.Contains(err.Error(), "want 1000") {
		t.Errorf("Commit after Abort: %v", err)
	}
	if n := xlen(); n != len(want) {
		t.Fatalf("after Abort: XLEN %d, want %d", n, len(want))
	}

	// An empty transaction touches nothing.
	raw3, err := s.PreCommit(ctx, "job-a0-s0-c3")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, raw3); err != nil {
		t.Fatal(err)
	}
	if n := txnRedisInt(t, r, "EXISTS", redisDoneKey("results", "job-a0-s0-c3")); n != 0 || xlen() != len(want) {
		t.Errorf("empty transaction left a marker or entries")
	}
}

// TestRedisSinkTxnConcurrentCommit commits each transaction from two sinks
// (two processes, say) at once: its rows are appended exactly once.
func TestRedisSinkTxnConcurrentCommit(t *testing.T) {
	connectortest.CheckLeaks(t)
	ctx := context.Background()
	r := testenv.StartRedis(t)
	mem := connectortest.Mem(t)
	recs, in, _ := connectortest.GenBatches(t, mem, 500, 50)
	s, _ := txnRedisSink(t, r, in, mem, true)
	a, _ := txnRedisSink(t, r, in, mem, false)
	b, _ := txnRedisSink(t, r, in, mem, false)
	total := 0
	for i, rec := range recs {
		if err := s.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		raw, err := s.PreCommit(ctx, fmt.Sprintf("job-a0-s0-c%d", i+1))
		if err != nil {
			t.Fatal(err)
		}
		total += int(rec.NumRows())
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, snk := range []*redisSink{a, b} {
			wg.Go(func() { errs[j] = snk.Commit(ctx, raw) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n := txnRedisInt(t, r, "XLEN", "results"); n != total {
			t.Fatalf("transaction %d: XLEN %d, want %d", i+1, n, total)
		}
	}
}

// TestRedisSinkTxnModes checks that without EnableTransactions a redis
// sink writes at once and refuses PreCommit, and that handles for other
// streams are refused.
func TestRedisSinkTxnModes(t *testing.T) {
	connectortest.CheckLeaks(t)
	ctx := context.Background()
	r := testenv.StartRedis(t)
	mem := connectortest.Mem(t)
	recs, in, want := connectortest.GenBatches(t, mem, 10, 10)
	s, _ := txnRedisSink(t, r, in, mem, false)
	if err := s.Write(ctx, recs[0]); err != nil {
		t.Fatal(err)
	}
	if n := txnRedisInt(t, r, "XLEN", "results"); n != len(want) {
		t.Fatalf("XLEN %d, want %d", n, len(want))
	}
	if _, err := s.PreCommit(ctx, "c1"); err == nil || !strings.Contains(err.Error(), "EnableTransactions") {
		t.Errorf("PreCommit without transactions: %v", err)
	}
	for _, h := range []string{
		`{"v":1,"stream":"other","txn":"c1","rows":1}`,
		`{"v":1,"stream":"results","txn":"c/1","rows":1}`,
		`{"v":1,"stream":"results","txn":"c1","rows":-1}`,
		`{"v":0,"stream":"results","txn":"c1","rows":1}`,
		`{"stream":"results","txn":"c1"}`,
	} {
		if err := s.Commit(ctx, json.RawMessage(h)); err == nil {
			t.Errorf("Commit(%s) accepted", h)
		}
		if err := s.Abort(ctx, json.RawMessage(h)); err == nil {
			t.Errorf("Abort(%s) accepted", h)
		}
	}
	if n := txnRedisInt(t, r, "XLEN", "results"); n != len(want) {
		t.Fatalf("XLEN %d, want %d", n, len(want))
	}
}
