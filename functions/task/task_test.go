package task

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
}, nil)

// seqSource emits rows k = 0..n-1 with ts = 1000*k, in batches of at most
// maxRows (and per), then io.EOF; or forever when n < 0.
type seqSource struct {
	n, per, next int
	mem          memory.Allocator
	dead         []string // raw records to send to dead letters at open
	ctx          *SourceContext
}

func (s *seqSource) Open(ctx *SourceContext) error {
	s.ctx = ctx
	s.mem = ctx.Mem
	for _, d := range s.dead {
		ctx.DeadLetter([]byte(d), "test:1", "bad record")
	}
	return nil
}

func (s *seqSource) Poll(_ context.Context, maxRows int, _ time.Duration) (arrow.RecordBatch, error) {
	if s.n >= 0 && s.next >= s.n {
		return nil, io.EOF
	}
	rows := min(maxRows, s.per)
	if s.n >= 0 {
		rows = min(rows, s.n-s.next)
	}
	b := array.NewRecordBuilder(s.mem, testSchema)
	defer b.Release()
	for i := 0; i < rows; i++ {
		k := int64(s.next + i)
		b.Field(0).(*array.Int64Builder).Append(k)
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(1000 * k))
	}
	s.next += rows
	return b.NewRecordBatch(), nil
}

func (s *seqSource) Close() error { return nil }

// recorder is an operator that passes batches through and records what the
// runtime called.
type recorder struct {
	mu       sync.Mutex
	ctx      *Context
	batches  int
	rows     int
	wms      []int64
	finished int
}

func (r *recorder) Open(ctx *Context) error { r.ctx = ctx; return nil }
func (r *recorder) ProcessBatch(b arrow.RecordBatch) error {
	r.mu.Lock()
	r.batches++
	r.rows += int(b.NumRows())
	r.mu.Unlock()
	return r.ctx.Out.Emit(b)
}
func (r *recorder) ProcessWatermark(wm int64) error {
	r.mu.Lock()
	r.wms = append(r.wms, wm)
	r.mu.Unlock()
	return nil
}
func (r *recorder) Finish() error { r.finished++; return nil }
func (r *recorder) Close() error  { return nil }

// collector is a sink that keeps the k values it receives.
type collector struct {
	mu       sync.Mutex
	keys     []int64
	finished bool
}

func (c *collector) Open(*SinkContext) error { return nil }
func (c *collector) Write(_ context.Context, b arrow.RecordBatch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	col := b.Column(0).(*array.Int64)
	for i := 0; i < col.Len(); i++ {
		c.keys = append(c.keys, col.Value(i))
	}
	return nil
}
func (c *collector) Finish(context.Context) error { c.finished = true; return nil }
func (c *collector) Close() error                 { return nil }

func checkedMem(t *testing.T) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

func wantKeys(t *testing.T, got []int64, n int) {
	t.Helper()
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	if len(got) != n {
		t.Fatalf("got %d rows, want %d", len(got), n)
	}
	for i, k := range got {
		if k != int64(i) {
			t.Fatalf("row %d has k=%d: lost or duplicated rows", i, k)
		}
	}
}

// A chained task: source -> operator -> sink in one goroutine, no exchange.
func TestChainedTaskRunsToEnd(t *testing.T) {
	mem := checkedMem(t)
	op, sink := &recorder{}, &collector{}
	task := New(Config{
		Job: "j", Attempt: 1, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem,
		Source: &SourceHead{Name: "src", Source: &seqSource{n: 1000, per: 100}, TimeColumn: 1,
			MaxOutOfOrderness: time.Second, WatermarkInterval: time.Nanosecond, Out: []Target{ChainTo(0)}},
		Nodes: []*Node{
			{Name: "op", Op: op, Out: []Target{ChainTo(1)}},
			{Name: "sink", Sink: sink},
		},
	})
	if err := task.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, sink.keys, 1000)
	if !sink.finished || op.finished != 1 {
		t.Errorf("finish: sink %v, operator %d times", sink.finished, op.finished)
	}
	// Watermarks rise (max seen - 1s - 1ms) and end at MaxWatermark.
	if len(op.wms) < 2 || op.wms[len(op.wms)-1] != MaxWatermark {
		t.Fatalf("watermarks %v: want several, ending with MaxWatermark", op.wms)
	}
	for i := 1; i < len(op.wms); i++ {
		if op.wms[i] <= op.wms[i-1] {
			t.Fatalf("watermarks not increasing: %v", op.wms)
		}
	}
	if first := op.wms[0]; first != 99*1000-1000-1 {
		t.Errorf("first watermark %d, want max ts of the first batch - 1s - 1ms = %d", first, 99*1000-1000-1)
	}
	st := task.Stats().Snapshot()
	if st.RecordsIn != 1000 || st.SinkIn != 1000 || st.Watermark != MaxWatermark {
		t.Errorf("stats %+v", st)
	}
}

// Two stages over the in-process exchange: one source subtask hash
// partitions to two consumer subtasks; every row reaches the subtask that
// owns its key group, exactly once, and output buffers flush at the row
// limit and before control entries.
func TestHashEdgeOverExchange(t *testing.T) {
	mem := checkedMem(t)
	tr := exchange.NewLocal()
	defer tr.Close()
	const n, maxP, p = 5000, 128, 2
	chans := func(consumer int) exchange.Channel {
		return exchange.Channel{Job: "j", Attempt: 1, Edge: "src", Producer: 0, ConsumerVertex: "op", Consumer: consumer}
	}
	producer := New(Config{
		Job: "j", Attempt: 1, Vertex: "src", Parallelism: 1, MaxParallelism: maxP, Mem: mem, Transport: tr,
		Batching: Batching{Rows: 1000, Timeout: time.Hour},
		Source:   &SourceHead{Name: "src", Source: &seqSource{n: n, per: 250}, TimeColumn: 1, Out: []Target{EdgeTo(0)}},
		Edges:    []EdgeOut{{Channels: []exchange.Channel{chans(0), chans(1)}, Partitioning: Hash, KeyColumns: []int{0}}},
	})
	ops := []*recorder{{}, {}}
	sinks := []*collector{{}, {}}
	var consumers []*Task
	for i := 0; i < p; i++ {
		consumers = append(consumers, New(Config{
			Job: "j", Attempt: 1, Vertex: "op", Subtask: i, Parallelism: p, MaxParallelism: maxP, Mem: mem, Transport: tr,
			Inputs: []exchange.Channel{chans(i)}, Credits: 2,
			Nodes: []*Node{{Name: "op", Op: ops[i], Out: []Target{ChainTo(1)}}, {Name: "sink", Sink: sinks[i]}},
		}))
	}
	errs := make(chan error, 3)
	for _, tk := range append([]*Task{producer}, consumers...) {
		go func() { errs <- tk.Run(context.Background()) }()
	}
	for i := 0; i < 3; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var all []int64
	for i, s := range sinks {
		lo, hi := arrowfmt.KeyGroupRange(i, maxP, p)
		for j, k := range s.keys {
			kg := arrowfmt.KeyGroup(arrowfmt.HashKeyValues(k), maxP)
			if kg < lo || kg >= hi {
				t.Fatalf("key %d (group %d) reached subtask %d, which owns [%d,%d)", k, kg, i, lo, hi)
			}
			// A channel keeps the order of its rows; the source's keys rise.
			if j > 0 && k <= s.keys[j-1] {
				t.Fatalf("subtask %d: key %d after %d", i, k, s.keys[j-1])
			}
		}
		all = append(all, s.keys...)
		if ops[i].wms[len(ops[i].wms)-1] != MaxWatermark {
			t.Errorf("subtask %d: last watermark %d, want MaxWatermark", i, ops[i].wms[len(ops[i].wms)-1])
		}
	}
	wantKeys(t, all, n)
	// 5000 rows split about evenly into buffers of 1000 rows: each entry
	// holds at most 1000 rows, and watermark flushes make at most a few
	// more entries than the row limit alone.
	for i, op := range ops {
		if op.batches == 0 || op.rows/op.batches > 1000 {
			t.Errorf("subtask %d: %d rows in %d entries", i, op.rows, op.batches)
		}
	}
}

// quietSource is seqSource that, once its rows are out, has nothing more
// for ever: an unbounded source whose input went quiet.
type quietSource struct{ seqSource }

func (s *quietSource) Poll(ctx context.Context, maxRows int, wait time.Duration) (arrow.RecordBatch, error) {
	if s.next < s.n {
		return s.seqSource.Poll(ctx, maxRows, wait)
	}
	select {
	case <-time.After(min(wait, 10*time.Millisecond)):
	case <-ctx.Done():
	}
	return nil, nil
}

// TestIdleOutputNoticesLostChannel: a task with nothing more to write
// still learns that a channel it wrote to is lost (here its attempt is
// deleted; in TestRedisClusterCrashLosesIdleTail a Redis failover drops
// the writer's last entries) and fails, so that the job restarts instead
// of the consumer waiting for ever for what it will not get.
func TestIdleOutputNoticesLostChannel(t *testing.T) {
	mem := checkedMem(t)
	tr := exchange.NewLocal()
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch := exchange.Channel{Job: "j", Attempt: 1, Edge: "src", ConsumerVertex: "op"}
	r, err := tr.NewReader(ctx, []exchange.Channel{ch}, exchange.ReaderOptions{Credits: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	task := New(Config{
		Job: "j", Attempt: 1, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem, Transport: tr,
		Batching: Batching{Rows: 1000, Timeout: 10 * time.Millisecond},
		Source:   &SourceHead{Name: "src", Source: &quietSource{seqSource{n: 100, per: 100}}, TimeColumn: -1, Out: []Target{EdgeTo(0)}},
		Edges:    []EdgeOut{{Channels: []exchange.Channel{ch}, Partitioning: Forward}},
	})
	done := make(chan error, 1)
	go func() { done <- task.Run(ctx) }()
	poll.Until(t, 10*time.Second, "the rows written", func() bool { return task.Stats().Snapshot().BytesOut > 0 })
	select {
	case err := <-done:
		t.Fatalf("the task ended with its channel intact: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tr.DeleteAttempt(ctx, "j", 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, exchange.ErrChannelLost) {
			t.Fatalf("Run = %v, want %v", err, exchange.ErrChannelLost)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the idle task did not notice in 10s that its output channel is lost")
	}
}

// Stop ends a source early and the task drains: everything read reaches
// the sink, Finish runs, Run returns nil.
func TestStopDrains(t *testing.T) {
	mem := checkedMem(t)
	src, sink := &seqSource{n: -1, per: 10}, &collector{}
	task := New(Config{
		Job: "j", Attempt: 1, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem,
		Source: &SourceHead{Name: "src", Source: src, TimeColumn: -1, Rate: 2000, Out: []Target{ChainTo(0)}},
		Nodes:  []*Node{{Name: "sink", Sink: sink}},
	})
	done := make(chan error, 1)
	go func() { done <- task.Run(context.Background()) }()
	poll.Until(t, 10*time.Second, "50 rows at the sink", func() bool { return task.Stats().Snapshot().SinkIn >= 50 })
	task.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !sink.finished {
		t.Error("sink not finished")
	}
	wantKeys(t, sink.keys, src.next)
}

// Cancelling returns the context's error without finishing sinks.
func TestCancel(t *testing.T) {
	mem := checkedMem(t)
	sink := &collector{}
	task := New(Config{
		Job: "j", Attempt: 1, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem,
		Source: &SourceHead{Name: "src", Source: &seqSource{n: -1, per: 10}, TimeColumn: -1, Rate: 1000, Out: []Target{ChainTo(0)}},
		Nodes:  []*Node{{Name: "sink", Sink: sink}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := task.Run(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want deadline exceeded", err)
	}
	if sink.finished {
		t.Error("a cancelled task finished its sink")
	}
}

// Malformed records a source reports go to the bucket with their raw text
// and reason, and are counted.
func TestDeadLettersWritten(t *testing.T) {
	mem := checkedMem(t)
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	task := New(Config{
		Job: "j1", Attempt: 3, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem, Bucket: b,
		Source: &SourceHead{Name: "src", Source: &seqSource{n: 10, per: 10, dead: []string{`{"k":`, `[]`}}, TimeColumn: -1, Out: []Target{ChainTo(0)}},
		Nodes:  []*Node{{Name: "sink", Sink: &collector{}}},
	})
	if err := task.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := task.Stats().Snapshot().DeadLetters; n != 2 {
		t.Errorf("counted %d dead letters, want 2", n)
	}
	data, err := b.Get(context.Background(), layout.DeadLetterPrefix("j1", "src")+"part-0-a3-000000.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"raw":"{\"k\":"`) || !strings.Contains(lines[1], `"reason":"bad record"`) {
		t.Errorf("dead-letter file:\n%s", data)
	}
}

// waitingSource is seqSource whose every Poll first waits 20ms for its
// input, as a redis source blocked in XREAD does, and says so (Waiter).
type waitingSource struct {
	seqSource
	waited time.Duration
}

func (s *waitingSource) Poll(ctx context.Context, maxRows int, wait time.Duration) (arrow.RecordBatch, error) {
	t0 := time.Now()
	time.Sleep(20 * time.Millisecond)
	s.waited += time.Since(t0)
	return s.seqSource.Poll(ctx, maxRows, wait)
}

func (s *waitingSource) Waited() time.Duration { return s.waited }

// TestSourceWaitIsIdle: a source that waits for each batch (Waiter)
// counts the wait as idle time though its Polls return rows: it is not
// busy, and an autoscaler does not scale it up.
func TestSourceWaitIsIdle(t *testing.T) {
	mem := checkedMem(t)
	src, sink := &waitingSource{seqSource: seqSource{n: 1000, per: 10}}, &collector{}
	task := New(Config{
		Job: "j", Attempt: 1, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem,
		Source: &SourceHead{Name: "src", Source: src, TimeColumn: -1, Out: []Target{ChainTo(0)}},
		Nodes:  []*Node{{Name: "sink", Sink: sink}},
	})
	if err := task.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := task.Stats().Snapshot()
	if share := st.BusySeconds / (st.BusySeconds + st.IdleSeconds); share > 0.3 || st.IdleSeconds < 0.7*src.waited.Seconds() {
		t.Errorf("busy %.2fs, idle %.2fs (waited %v): want the waits idle", st.BusySeconds, st.IdleSeconds, src.waited)
	}
	wantKeys(t, sink.keys, 1000)
}

// backloggedSource is seqSource that reports the rows it has not returned
// as its backlog.
type backloggedSource struct{ seqSource }

func (s *backloggedSource) Backlog(context.Context) (int64, string, bool) {
	return int64(s.n - s.next), "records", true
}

// A source task that reaches the end of its input reports no backlog,
// though its last measurement (once a second) was taken before its last
// rows were read.
func TestEndedSourceHasNoBacklog(t *testing.T) {
	mem := checkedMem(t)
	src, sink := &backloggedSource{seqSource{n: 1000, per: 100}}, &collector{}
	task := New(Config{
		Job: "j", Attempt: 1, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem,
		Source: &SourceHead{Name: "src", Source: src, TimeColumn: -1, Out: []Target{ChainTo(0)}},
		Nodes:  []*Node{{Name: "sink", Sink: sink}},
	})
	if err := task.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, sink.keys, 1000)
	if st := task.Stats().Snapshot(); st.Backlog != 0 || st.BacklogUnit != "records" {
		t.Errorf("backlog at the end: %d %q, want 0 records", st.Backlog, st.BacklogUnit)
	}
}

// TestMaxTimestamp: the largest non-null value, whatever the length,
// nulls and slice offset; MinWatermark for none.
func TestMaxTimestamp(t *testing.T) {
	mem := checkedMem(t)
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 300 {
		n := r.IntN(40)
		b := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"})
		nulls := r.IntN(3) == 0
		var vals []int64
		var valid []bool
		for range n {
			v := r.Int64N(2000) - 1000
			ok := !nulls || r.IntN(2) == 0
			vals, valid = append(vals, v), append(valid, ok)
			if ok {
				b.Append(arrow.Timestamp(v))
			} else {
				b.AppendNull()
			}
		}
		col := b.NewArray()
		b.Release()
		off := 0
		if n > 0 {
			off = r.IntN(n + 1)
		}
		sl := array.NewSlice(col, int64(off), int64(n))
		want := MinWatermark
		for i := off; i < n; i++ {
			if valid[i] {
				want = max(want, vals[i])
			}
		}
		if got := maxTimestamp(sl); got != want {
			t.Fatalf("round %d: %v from %d: max %d, want %d", round, vals, off, got, want)
		}
		sl.Release()
		col.Release()
	}
	ints := array.NewInt64Builder(mem)
	ints.Append(5)
	col := ints.NewArray()
	ints.Release()
	defer col.Release()
	if got := maxTimestamp(col); got != MinWatermark {
		t.Errorf("an int64 column: %d, want MinWatermark", got)
	}
}
