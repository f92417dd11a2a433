package task

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/offheap"
	"github.com/weirstream/weir/statestore/statefile"
)

var steppedSchema = arrow.NewSchema([]arrow.Field{
	{Name: StateKeyGroupField, Type: arrow.PrimitiveTypes.Int32},
	{Name: "k", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// steppedOp keeps every k it was given; a snapshot holds them all, one
// row each. Its captures take one row per step (a zero deadline: all),
// and it records how many rows it had seen at each step.
type steppedOp struct {
	seen    []int64
	capture *steppedCapture
	steps   [][]int // per capture begun: len(seen) at each step
	forced  []bool  // per capture: its last step had no deadline
}

type steppedCapture struct {
	op   *steppedOp
	idx  int     // of the capture in op.steps
	rows []int64 // the rows at the barrier
	next int
	mem  memory.Allocator
	out  []arrow.RecordBatch
}

func (o *steppedOp) Open(*Context) error { return nil }
func (o *steppedOp) ProcessBatch(b arrow.RecordBatch) error {
	o.seen = append(o.seen, b.Column(0).(*array.Int64).Int64Values()...)
	return nil
}
func (o *steppedOp) ProcessWatermark(int64) error    { return nil }
func (o *steppedOp) Finish() error                   { return nil }
func (o *steppedOp) Close() error                    { return nil }
func (o *steppedOp) State() statestore.Snapshotter   { return o }
func (o *steppedOp) Schema() *arrow.Schema           { return steppedSchema }
func (o *steppedOp) Restore(arrow.RecordBatch) error { return nil }
func (o *steppedOp) Snapshot(memory.Allocator, bool) ([]arrow.RecordBatch, error) {
	panic("the runtime captures a SteppedSnapshotter in steps")
}

func (o *steppedOp) BeginSnapshot(mem memory.Allocator, _ bool) (statestore.Capture, error) {
	if o.capture != nil {
		panic("a capture began before the previous one was done")
	}
	o.capture = &steppedCapture{op: o, idx: len(o.steps), rows: slices.Clone(o.seen), mem: mem}
	o.steps = append(o.steps, nil)
	o.forced = append(o.forced, false)
	return o.capture, nil
}

func (c *steppedCapture) Step(deadline time.Time) (bool, error) {
	o := c.op
	o.steps[c.idx] = append(o.steps[c.idx], len(o.seen))
	o.forced[c.idx] = deadline.IsZero()
	if deadline.IsZero() {
		c.next = len(c.rows)
	} else if c.next < len(c.rows) {
		c.next++
	}
	if c.next < len(c.rows) {
		return false, nil
	}
	b := array.NewRecordBuilder(c.mem, steppedSchema)
	defer b.Release()
	for _, k := range c.rows {
		b.Field(0).(*array.Int32Builder).Append(0)
		b.Field(1).(*array.Int64Builder).Append(k)
	}
	c.out = []arrow.RecordBatch{b.NewRecordBatch()}
	o.capture = nil
	return true, nil
}

// Copies: the op copies nothing; it reports a row copied per step and
// one of them encoded, for the task to count.
func (c *steppedCapture) Copies() statestore.CopyCounts {
	return statestore.CopyCounts{Rows: int64(len(c.op.steps[c.idx])), EncodedRows: 1}
}

func (c *steppedCapture) Batches() []arrow.RecordBatch {
	out := c.out
	c.out = nil
	return out
}

func (c *steppedCapture) Release() {
	if c.op.capture == c {
		c.op.capture = nil
	}
	for _, b := range c.out {
		b.Release()
	}
	c.out = nil
}

// TestSteppedCapture checks how the runtime drives a state captured in
// steps: the barrier goes on at once and the capture beside the input,
// a step between polls; the next barrier completes what is left first;
// each checkpoint's file holds the rows of its barrier, its int64 column
// narrowed; the acks come in order, with the capture's time and its
// longest step.
func TestSteppedCapture(t *testing.T) {
	mem := checkedMem(t)
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var got acks
	var tk *Task
	// Checkpoint 1 is taken after k=5 (6 rows: 6 steps), checkpoint 2
	// after k=7, before capture 1 is done; capture 2 (8 rows) has the
	// polls up to k=29 to finish in.
	src := &badSource{n: 30, at: map[int]func(){
		5: func() { tk.TriggerCheckpoint(1) },
		7: func() { tk.TriggerCheckpoint(2) },
	}}
	op := &steppedOp{}
	tk = New(Config{
		Job: "j1", Attempt: 1, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem, Bucket: b,
		Source:      &SourceHead{Name: "src", Source: src, TimeColumn: -1, Out: []Target{ChainTo(0)}},
		Nodes:       []*Node{{Name: "op", Op: op, Out: []Target{ChainTo(1)}}, {Name: "sink", Sink: &collector{}}},
		Checkpoints: &Checkpointing{Ack: got.add},
	})
	if err := tk.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, a := range got.list {
		ids = append(ids, a.Checkpoint)
	}
	if len(ids) != 3 || ids[0] != 1 || ids[1] != 2 || !got.list[2].Final {
		t.Fatalf("acks of checkpoints %v, want 1, 2 and the final one", ids)
	}
	if len(op.steps) != 2 {
		t.Fatalf("%d captures began, want 2", len(op.steps))
	}
	// Capture 1: steps between polls, then completed at barrier 2.
	if s := op.steps[0]; len(s) < 2 || s[len(s)-1] == s[0] || !op.forced[0] {
		t.Errorf("capture 1 stepped at %v seen rows (completed at the next barrier: %v), want steps beside the input and the rest at barrier 2", s, op.forced[0])
	}
	// Capture 2: every step beside the input, none forced.
	if s := op.steps[1]; len(s) != 8 || op.forced[1] || s[len(s)-1] <= s[0] {
		t.Errorf("capture 2 stepped at %v seen rows (forced %v), want 8 steps as the input went on", s, op.forced[1])
	}
	// The task counts what each complete capture copied (statestore.CopyingCapture).
	st := tk.Stats().Snapshot()
	if want := int64(len(op.steps[0]) + len(op.steps[1])); st.CopiedRows != want || st.CopiedEncoded != 2 {
		t.Errorf("stats: %d rows copied, %d encoded; want %d and 2, the captures' counts", st.CopiedRows, st.CopiedEncoded, want)
	}
	for i, want := range [][]int64{{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5, 6, 7}} {
		ack := got.list[i]
		if ack.Decline != "" {
			t.Fatalf("checkpoint %d declined: %s", ack.Checkpoint, ack.Decline)
		}
		// The chain's newest file: checkpoint 2 adds a delta (of every
		// row: the operator writes them all) to the base of 1.
		fs := ack.Subtask.State
		if len(fs) != i+1 {
			t.Fatalf("checkpoint %d: state files %+v, want %d", ack.Checkpoint, fs, i+1)
		}
		// The task had the whole file's batches: it narrowed k to a byte.
		if !fs[i].Narrowed {
			t.Errorf("checkpoint %d: its file %s is not narrowed", ack.Checkpoint, fs[i].Key)
		}
		data, err := statefile.Read(t.Context(), b, fs[i])
		if err != nil {
			t.Fatal(err)
		}
		_, batches, err := statefile.Decode(data, steppedSchema, mem)
		if err != nil {
			t.Fatal(err)
		}
		var rows []int64
		for _, rec := range batches {
			rows = append(rows, rec.Column(1).(*array.Int64).Int64Values()...)
			rec.Release()
		}
		if !slices.Equal(rows, want) {
			t.Errorf("checkpoint %d holds rows %v, want the %d rows before its barrier", ack.Checkpoint, rows, len(want))
		}
		if m := ack.Subtask.Metrics; m.CaptureMs < m.StepMs || m.CaptureMs < m.SyncMs {
			t.Errorf("checkpoint %d: capture %d ms, longest step %d ms, sync %d ms: the capture includes both", ack.Checkpoint, m.CaptureMs, m.StepMs, m.SyncMs)
		}
	}
}

// TestStepBudget: a capture's steps take 5 ms until it has gone on for
// half a second, then 1% of its age, up to 15 ms.
func TestStepBudget(t *testing.T) {
	taken := time.Unix(1000, 0)
	for _, c := range []struct{ age, want time.Duration }{
		{0, 5 * time.Millisecond},
		{500 * time.Millisecond, 5 * time.Millisecond},
		{time.Second, 10 * time.Millisecond},
		{1500 * time.Millisecond, 15 * time.Millisecond},
		{2 * time.Second, 15 * time.Millisecond},
		{time.Minute, 15 * time.Millisecond},
	} {
		if got := stepBudget(taken, taken.Add(c.age)); got != c.want {
			t.Errorf("after %v: a step of %v, want %v", c.age, got, c.want)
		}
	}
}

// wideOp's snapshot holds rowsPerKey rows for each k it was given (k ×
// rowsPerKey + j), captured at once; it records the allocator it was
// given and what that had mapped once the batch was built.
type wideOp struct {
	seen     []int64
	mem      interface{ Mapped() int }
	mapped   int
	captures int
}

const rowsPerKey = 1000

func (o *wideOp) Open(*Context) error { return nil }
func (o *wideOp) ProcessBatch(b arrow.RecordBatch) error {
	o.seen = append(o.seen, b.Column(0).(*array.Int64).Int64Values()...)
	return nil
}
func (o *wideOp) ProcessWatermark(int64) error    { return nil }
func (o *wideOp) Finish() error                   { return nil }
func (o *wideOp) Close() error                    { return nil }
func (o *wideOp) State() statestore.Snapshotter   { return o }
func (o *wideOp) Schema() *arrow.Schema           { return steppedSchema }
func (o *wideOp) Restore(arrow.RecordBatch) error { return nil }
func (o *wideOp) Snapshot(mem memory.Allocator, _ bool) ([]arrow.RecordBatch, error) {
	o.captures++
	o.mem, _ = mem.(interface{ Mapped() int })
	b := array.NewRecordBuilder(mem, steppedSchema)
	defer b.Release()
	for _, k := range o.seen {
		for j := range int64(rowsPerKey) {
			b.Field(0).(*array.Int32Builder).Append(0)
			b.Field(1).(*array.Int64Builder).Append(k*rowsPerKey + j)
		}
	}
	rec := b.NewRecordBatch()
	if o.mem != nil {
		o.mapped = o.mem.Mapped()
	}
	return []arrow.RecordBatch{rec}, nil
}

// runWide runs a task whose wideOp is checkpointed after 30 of 40 keys,
// writing to b, until it ends or ctx is cancelled, and checks that the
// capture was mapped outside the heap and that nothing stays mapped once
// the task is done.
func runWide(ctx context.Context, t *testing.T, mem memory.Allocator, b blob.Bucket) (*acks, error) {
	t.Helper()
	got := &acks{}
	var tk *Task
	src := &badSource{n: 40, at: map[int]func(){29: func() { tk.TriggerCheckpoint(1) }}}
	op := &wideOp{}
	tk = New(Config{
		Job: "j1", Attempt: 1, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem, Bucket: b,
		Source:      &SourceHead{Name: "src", Source: src, TimeColumn: -1, Out: []Target{ChainTo(0)}},
		Nodes:       []*Node{{Name: "op", Op: op, Out: []Target{ChainTo(1)}}, {Name: "sink", Sink: &collector{}}},
		Checkpoints: &Checkpointing{Ack: got.add},
	})
	err := tk.Run(ctx)
	if op.mem == nil {
		t.Fatalf("the capture's allocator %T does not map outside the heap", op.mem)
	}
	// 30 keys × 1000 rows: 240 KB of int64 and 120 KB of int32 values.
	if op.mapped < 360_000 {
		t.Errorf("%d bytes mapped with the batch built, want its two columns (about 360 KB)", op.mapped)
	}
	if m := op.mem.Mapped(); m != 0 {
		t.Errorf("%d bytes still mapped once the task is done", m)
	}
	return got, err
}

// TestCapturesOffTheHeap: a capture's large buffers are mapped outside
// the Go heap, what they hold reaches the state file, and once the file
// is uploaded nothing stays mapped; small buffers come from the task's
// allocator, which sees them all freed (checkedMem).
//
// The state file is encoded into chunks outside the heap too
// (offheap.Buffer), uploaded from them (blob.PutReader), and the chunks
// are given back.
func TestCapturesOffTheHeap(t *testing.T) {
	mem := checkedMem(t)
	dir, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	b := &puts{Bucket: dir}
	got, err := runWide(t.Context(), t, mem, b)
	if err != nil {
		t.Fatal(err)
	}
	ack, ok := got.get(1)
	if !ok || ack.Decline != "" || len(ack.Subtask.State) != 1 {
		t.Fatalf("checkpoint 1: %+v (found %v)", ack, ok)
	}
	if f := ack.Subtask.State[0]; !slices.Contains(b.streamed, f.Key) || slices.Contains(b.whole, f.Key) {
		t.Errorf("the state file %s was not uploaded from a reader: from readers %v, whole %v", f.Key, b.streamed, b.whole)
	}
	if n := offheap.BufferChunks(); n != 0 {
		t.Errorf("%d chunks of encoded state files not given back", n)
	}
	data, err := statefile.Read(t.Context(), b, ack.Subtask.State[0])
	if err != nil {
		t.Fatal(err)
	}
	_, batches, err := statefile.Decode(data, steppedSchema, mem)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, rec := range batches {
		for _, v := range rec.Column(1).(*array.Int64).Int64Values() {
			if v != n {
				t.Fatalf("row %d of the state file holds %d", n, v)
			}
			n++
		}
		rec.Release()
	}
	if n != 30*rowsPerKey {
		t.Errorf("the state file holds %d rows, want %d (30 keys before the barrier)", n, 30*rowsPerKey)
	}
}

// puts records the keys put whole and from a reader (blob.ReaderPutter).
type puts struct {
	blob.Bucket
	mu              sync.Mutex
	whole, streamed []string
}

func (p *puts) Put(ctx context.Context, key string, data []byte) error {
	p.mu.Lock()
	p.whole = append(p.whole, key)
	p.mu.Unlock()
	return p.Bucket.Put(ctx, key, data)
}

func (p *puts) PutReader(ctx context.Context, key string, r io.ReadSeeker, size int64) error {
	p.mu.Lock()
	p.streamed = append(p.streamed, key)
	p.mu.Unlock()
	return blob.PutReader(ctx, p.Bucket, key, r, size)
}

// stallingBucket's Put waits until its context is cancelled; started is
// closed at the first.
type stallingBucket struct {
	blob.Bucket
	once    sync.Once
	started chan struct{}
}

func (s *stallingBucket) Put(ctx context.Context, _ string, _ []byte) error {
	s.once.Do(func() { close(s.started) })
	<-ctx.Done()
	return ctx.Err()
}

// TestCapturesOffTheHeapCancelled: a task cancelled while its capture
// waits for the bucket gives back every mapped buffer (a worker whose
// tasks are stopped in the middle of checkpoints, on a rescale or a
// failover, would otherwise keep them mapped for good).
func TestCapturesOffTheHeapCancelled(t *testing.T) {
	mem := checkedMem(t)
	dir, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	b := &stallingBucket{Bucket: dir, started: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		select {
		case <-b.started:
		case <-ctx.Done():
		}
		cancel()
	}()
	defer cancel()
	got, err := runWide(ctx, t, mem, b)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the task ended with %v, want it cancelled during the upload", err)
	}
	if ack, ok := got.get(1); ok && ack.Decline == "" {
		t.Errorf("checkpoint 1 was acknowledged (%+v) though its upload never finished", ack)
	}
}
