package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
)

func connRedisSpec(stream string) *spec.Source {
	return &spec.Source{Name: "events", Type: spec.SourceRedis, Stream: stream,
		Schema: connectortest.Schema("id", "int64", "fare", "float64", "at", "timestamp_ms"),
		Event:  &spec.EventTime{Column: "at"}}
}

func connXAdd(t *testing.T, r *testenv.Redis, stream string, fields ...string) string {
	t.Helper()
	id, err := r.Do(append([]string{"XADD", stream, "*"}, fields...)...)
	if err != nil {
		t.Fatalf("XADD %v: %v", fields, err)
	}
	return id
}

func connOpenRedisSource(t *testing.T, src *spec.Source, out stream.Stream, addr string, mem memory.Allocator, subtask int, dl *connectortest.DeadLetters) *redisSource {
	t.Helper()
	s, err := NewSource(src, out)
	if err != nil {
		t.Fatal(err)
	}
	ctx := connectortest.SourceContext(mem, subtask, 2)
	ctx.RedisAddr = addr
	if dl != nil {
		ctx.DeadLetter = dl.Add
	}
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
	return s.(*redisSource)
}

// connPollRows polls an unbounded source until it has n rows (or fails after
// a deadline).
func connPollRows(t *testing.T, s task.Source, n, maxRows int) [][]any {
	t.Helper()
	var rows [][]any
	poll.UntilNil(t, 20*time.Second, fmt.Sprintf("%d rows from the source", n), func() error {
		rec, err := s.Poll(context.Background(), maxRows, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if rec != nil {
			if rec.NumRows() > int64(maxRows) {
				t.Errorf("poll returned %d rows, want at most %d", rec.NumRows(), maxRows)
			}
			rows = append(rows, connectortest.RowsOf(rec)...)
			rec.Release()
		}
		if len(rows) < n {
			return fmt.Errorf("%d rows so far", len(rows))
		}
		return nil
	})
	return rows
}

func TestRedisSourceReadsAndDeadLetters(t *testing.T) {
	connectortest.CheckLeaks(t)
	r := testenv.StartRedis(t)
	mem := connectortest.Mem(t)
	connXAdd(t, r, "in", "data", `{"id":1,"fare":1.5,"at":1000}`)
	noData := connXAdd(t, r, "in", "payload", `{"id":2}`)
	connXAdd(t, r, "in", "data", `{"id":3,"at":"2026-01-01T00:00:00Z"}`)
	badJSON := connXAdd(t, r, "in", "data", `{"id":4,`)
	last := connXAdd(t, r, "in", "data", `{"id":5,"fare":2,"at":5000}`, "extra", "ignored")

	src := connRedisSpec("in")
	out := connectortest.SourceSchema(t, src)
	dl := &connectortest.DeadLetters{}
	s := connOpenRedisSource(t, src, out, r.Addr, mem, 0, dl)
	if got := connectortest.Position(t, s); got != inPos("0-0") {
		t.Errorf("position before reading: %s", got)
	}
	rows := connPollRows(t, s, 3, 2)
	want := [][]any{
		{int64(1), 1.5, time.UnixMilli(1000).UTC()},
		{int64(3), nil, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{int64(5), 2.0, time.UnixMilli(5000).UTC()},
	}
	connectortest.SameRows(t, rows, want)
	if got, want := connectortest.Position(t, s), inPos(last); got != want {
		t.Errorf("position %s, want the last id: %s", got, want)
	}
	wantDead := []connectortest.DeadLetter{
		{Raw: `{"payload":"{\"id\":2}"}`, Origin: "in:" + noData, Reason: `no "data" field`},
		{Raw: `{"id":4,`, Origin: "in:" + badJSON, Reason: "invalid JSON"},
	}
	if len(dl.Got) != len(wantDead) {
		t.Fatalf("dead letters %q, want %q", dl.Got, wantDead)
	}
	for i, w := range wantDead {
		if d := dl.Got[i]; d.Raw != w.Raw || d.Origin != w.Origin || !strings.Contains(d.Reason, w.Reason) {
			t.Errorf("dead letter %q, want %q", d, w)
		}
	}

	// Nothing new: an empty poll, not the end.
	rec, err := s.Poll(context.Background(), 10, 20*time.Millisecond)
	if rec != nil || err != nil {
		t.Fatalf("poll of a drained stream: %v, %v; want nil, nil", rec, err)
	}
	// New entries are read after the position.
	for i := 6; i < 9; i++ {
		connXAdd(t, r, "in", "data", fmt.Sprintf(`{"id":%d}`, i))
	}
	rows = connPollRows(t, s, 3, 100)
	for i, row := range rows {
		if row[0] != int64(6+i) {
			t.Errorf("new row %d: %v", i, row)
		}
	}

	// Only subtask 0 reads a stream; subtask 1 idles (it does not end:
	// a finished subtask would take no part in later checkpoints).
	other := connOpenRedisSource(t, src, out, r.Addr, mem, 1, nil)
	t0 := time.Now()
	if rec, err := other.Poll(context.Background(), 10, 50*time.Millisecond); rec != nil || err != nil {
		t.Errorf("subtask 1: %v, %v; want nil, nil", rec, err)
	}
	if d := time.Since(t0); d < 40*time.Millisecond {
		t.Errorf("an idle subtask's poll returned after %v: want it to wait out its wait, not spin", d)
	}
	if got := connectortest.Position(t, other); got != `{"splits":{}}` {
		t.Errorf("idle subtask's position %s", got)
	}
}

// inPos is the position of a source of the stream "in" at id.
func inPos(id string) string { return `{"splits":{"in":{"id":"` + id + `"}}}` }

// TestRedisSourceCancel checks that a blocked read ends with its context.
func TestRedisSourceCancel(t *testing.T) {
	connectortest.CheckLeaks(t)
	r := testenv.StartRedis(t)
	mem := connectortest.Mem(t)
	src := connRedisSpec("empty")
	s := connOpenRedisSource(t, src, connectortest.SourceSchema(t, src), r.Addr, mem, 0, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Poll(ctx, 10, time.Hour)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled poll: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a cancelled poll still blocks after 30s")
	}
}

func TestRedisSourceNoAddress(t *testing.T) {
	src := connRedisSpec("in")
	s, err := NewSource(src, connectortest.SourceSchema(t, src))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(connectortest.SourceContext(memory.NewGoAllocator(), 0, 1)); err == nil || !strings.Contains(err.Error(), "no address") {
		t.Errorf("open without an address: %v", err)
	}
	s.Close()
}
