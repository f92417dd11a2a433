package task

import (
	"bytes"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
	"github.com/weirstream/weir/statestore/statefile"
)

// countOp counts rows per key in a statestore.Memory (a process
// function's backend), keys spread over every key group; at each barrier
// it notes the counts the checkpoint must hold.
type countOp struct {
	b      *statestore.Memory
	counts statestore.Table[int64]
	// lists, if set, makes the backend capture at the barrier: a table
	// of slices may change in place.
	lists  bool
	shadow map[string]int64   // "kg/key" -> count
	at     []map[string]int64 // the counts at each barrier
}

func (o *countOp) Open(ctx *Context) error {
	o.b = statestore.NewMemory(ctx.KeyGroupStart, ctx.KeyGroupEnd)
	var err error
	o.counts, err = statestore.OpenTable[int64](o.b, "n", nil)
	o.shadow = map[string]int64{}
	if err == nil && o.lists {
		_, err = statestore.OpenTable[[]int64](o.b, "l", nil)
	}
	return err
}

func (o *countOp) ProcessBatch(b arrow.RecordBatch) error {
	for _, k := range b.Column(0).(*array.Int64).Int64Values() {
		kg, key := int(k*7%128), fmt.Sprint("key-", k%97)
		n, _ := o.counts.Get(kg, key, "")
		o.counts.Put(kg, key, "", n+1)
		o.shadow[fmt.Sprint(kg, "/", key)] = n + 1
	}
	return nil
}
func (o *countOp) ProcessWatermark(int64) error { return nil }
func (o *countOp) Finish() error                { return nil }
func (o *countOp) Close() error                 { return nil }
func (o *countOp) State() statestore.Snapshotter {
	return countState{o}
}

// countState is the backend, noting the counts at each barrier.
type countState struct{ o *countOp }

func (s countState) Schema() *arrow.Schema { return s.o.b.Schema() }
func (s countState) Restore(rec arrow.RecordBatch) error {
	return s.o.b.Restore(rec)
}
func (s countState) Snapshot(mem memory.Allocator, full bool) ([]arrow.RecordBatch, error) {
	return statestore.CaptureAtOnce(s, mem, full)
}
func (s countState) BeginSnapshot(mem memory.Allocator, full bool) (statestore.Capture, error) {
	s.o.at = append(s.o.at, maps.Clone(s.o.shadow))
	return s.o.b.BeginSnapshot(mem, full)
}

// restoreCounts restores a countOp's state files as a task does and
// returns its counts by "kg/key".
func restoreCounts(t *testing.T, b blob.BucketReader, files []manifest.File, mem memory.Allocator) map[string]int64 {
	t.Helper()
	restored := statestore.NewMemory(0, 128)
	for _, f := range files {
		if err := RestoreStateFile(t.Context(), b, restored, f, 0, 128, mem); err != nil {
			t.Fatal(err)
		}
	}
	counts, err := statestore.OpenTable[int64](restored, "n", nil)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]int64{}
	for kg := range 128 {
		counts.Range(kg, func(key, _ string, n int64) bool {
			have[fmt.Sprint(kg, "/", key)] = n
			return true
		})
	}
	return have
}

// TestCaptureUploadedInParts: a backend's capture is uploaded in state
// files of about Checkpointing.PartBytes, one per key group range, while
// it goes on; together they tile the subtask's key groups, the deltas
// apply on top of the base's parts, the manifest of them is valid, and
// restoring every checkpoint's files gives the counts at its barrier.
func TestCaptureUploadedInParts(t *testing.T) {
	t.Run("in steps", func(t *testing.T) { captureInParts(t, false) })
	// A capture done at the barrier is uploaded as one part.
	t.Run("at once", func(t *testing.T) { captureInParts(t, true) })
}

func captureInParts(t *testing.T, atOnce bool) {
	mem := checkedMem(t)
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var got acks
	var tk *Task
	at := map[int]func(){}
	for i := range 6 {
		id := int64(i + 1)
		at[150+150*i] = func() { tk.TriggerCheckpoint(id) }
	}
	src := &badSource{n: 1200, at: at}
	op := &countOp{lists: atOnce}
	tk = New(Config{
		Job: "j1", Attempt: 1, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem, Bucket: b,
		Source:      &SourceHead{Name: "src", Source: src, TimeColumn: -1, Out: []Target{ChainTo(0)}},
		Nodes:       []*Node{{Name: "op", Op: op, Out: []Target{ChainTo(1)}}, {Name: "sink", Sink: &collector{}}},
		Checkpoints: &Checkpointing{Ack: got.add, PartBytes: 300},
	})
	if err := tk.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	parted := 0
	for i := range op.at {
		ack, ok := got.get(int64(i + 1))
		if !ok || ack.Decline != "" {
			t.Fatalf("checkpoint %d: ack %+v", i+1, ack)
		}
		files := ack.Subtask.State
		m := &manifest.Manifest{Version: manifest.Version, Job: "j1", Attempt: 1, Checkpoint: ack.Checkpoint, MaxParallelism: 128,
			Triggered: time.Now(), Completed: time.Now(), SpecSHA256: strings.Repeat("0", 64),
			Vertices: []manifest.Vertex{{Name: "src", Keyed: true, Parallelism: 1, Subtasks: []manifest.Subtask{ack.Subtask}}}}
		m.Vertices[0].Subtasks[0].KeyGroupStart, m.Vertices[0].Subtasks[0].KeyGroupEnd = 0, 128
		if err := m.Validate(); err != nil {
			t.Errorf("checkpoint %d: the manifest of its files: %v", ack.Checkpoint, err)
		}
		// The files of each capture tile [0, 128).
		next := 128
		for _, f := range files {
			if f.Kind == manifest.KindBase && f.KeyGroupStart == 0 || next == 128 {
				next = 0
			}
			if f.KeyGroupStart != next {
				t.Errorf("checkpoint %d: file %s covers [%d, %d), want it to start at %d", ack.Checkpoint, f.Key, f.KeyGroupStart, f.KeyGroupEnd, next)
			}
			next = f.KeyGroupEnd
		}
		if next != 128 {
			t.Errorf("checkpoint %d: its last file ends at key group %d", ack.Checkpoint, next)
		}
		own := 0 // files this checkpoint's capture wrote
		for _, f := range files {
			if c, ok := layout.StateFileCheckpoint(f.Key); ok && c == ack.Checkpoint {
				own++
			}
		}
		if own > 1 {
			parted++
		}
		t.Logf("checkpoint %d: %d keys in %d files, %d of its own", ack.Checkpoint, len(op.at[i]), len(files), own)
		have := restoreCounts(t, b, files, mem)
		if !maps.Equal(have, op.at[i]) {
			t.Errorf("checkpoint %d (%d files): restored %d keys, want the %d at its barrier", ack.Checkpoint, len(files), len(have), len(op.at[i]))
		}
	}
	switch {
	case len(op.at) != 6:
		t.Errorf("%d checkpoints, want 6", len(op.at))
	case !atOnce && parted != 6:
		t.Errorf("%d checkpoints captured in more than one file, want 6", parted)
	case atOnce && parted != 0:
		t.Errorf("%d checkpoints captured at the barrier in more than one file, want 0", parted)
	}
}

// doneCapture is a capture in parts that ends both its parts in its
// first step.
type doneCapture struct{ parts []statestore.Part }

func (c *doneCapture) Step(time.Time) (bool, error) { return true, nil }
func (c *doneCapture) Batches() []arrow.RecordBatch { return nil }
func (c *doneCapture) Release()                     {}
func (c *doneCapture) SplitParts(int)               {}
func (c *doneCapture) TakeParts() []statestore.Part { p := c.parts; c.parts = nil; return p }

// TestPartsWaitForSlotsBesideProcessing: a capture in parts that is done
// in a step beside processing while every upload slot is taken does not
// wait in that step for the uploader (the task would stall for an
// upload); its parts wait in the capture, and the first step after a
// slot frees queues them, in order, the last one last.
func TestPartsWaitForSlotsBesideProcessing(t *testing.T) {
	r := &runner{ctx: t.Context(), cfg: &Config{Parallelism: 1, MaxParallelism: 128}}
	c := &checkpointer{r: r, queue: make(chan *upload, 64), slots: make(chan struct{}, maxPartsInFlight)}
	for range maxPartsInFlight {
		c.slots <- struct{}{} // every slot taken
	}
	pc := &doneCapture{parts: []statestore.Part{{KeyGroupStart: 0, KeyGroupEnd: 64}, {KeyGroupStart: 64, KeyGroupEnd: 128}}}
	p := &captured{capture: pc, parted: true}
	step := func() bool {
		t.Helper()
		type result struct {
			done bool
			err  error
		}
		res := make(chan result, 1)
		go func() {
			done, err := c.stepParts(&upload{id: 1}, p, time.Now().Add(5*time.Millisecond))
			res <- result{done, err}
		}()
		select {
		case r := <-res:
			if r.err != nil {
				t.Fatal(r.err)
			}
			return r.done
		case <-time.After(10 * time.Second):
			t.Fatal("a step beside processing waited for an upload slot")
			return false
		}
	}
	if step() {
		t.Fatal("the capture is done with its parts not queued")
	}
	if len(p.held) != 2 || len(c.queue) != 0 {
		t.Fatalf("%d parts held and %d queued, want both held", len(p.held), len(c.queue))
	}
	for range maxPartsInFlight {
		<-c.slots // the uploader is done with two parts
	}
	if !step() {
		t.Fatal("the capture is not done with slots free for its parts")
	}
	for i, want := range []struct{ start, end int }{{0, 64}, {64, 128}} {
		u := <-c.queue
		if u.part == nil || u.part.part.KeyGroupStart != want.start || u.part.last != (i == 1) {
			t.Fatalf("queued %d: %+v, want the part of key groups from %d, last %v", i, u.part, want.start, i == 1)
		}
	}
}

// partPerStep is a capture in parts that ends a part of 32 key groups in
// each step, four in all, and holds its parts if holds.
type partPerStep struct {
	steps, ended int
	holds        bool
	parts        []statestore.Part
}

func (c *partPerStep) Step(time.Time) (bool, error) {
	if c.ended == 4 {
		return true, nil
	}
	c.steps++
	c.parts = append(c.parts, statestore.Part{KeyGroupStart: 32 * c.ended, KeyGroupEnd: 32 * (c.ended + 1)})
	c.ended++
	return c.ended == 4, nil
}
func (c *partPerStep) Batches() []arrow.RecordBatch { return nil }
func (c *partPerStep) Release()                     {}
func (c *partPerStep) SplitParts(int)               {}
func (c *partPerStep) TakeParts() []statestore.Part { p := c.parts; c.parts = nil; return p }
func (c *partPerStep) HoldsParts() bool             { return c.holds }

// TestHoldersStepWhileSlotsAreTaken: while every upload slot is taken, a
// step of a capture in parts does nothing, unless the capture holds its
// parts (statestore.PartHolder: a window's, whose walk waiting would let
// more keys be copied on write): that one goes on, and its parts wait,
// in order, for slots.
func TestHoldersStepWhileSlotsAreTaken(t *testing.T) {
	for _, holds := range []bool{false, true} {
		r := &runner{ctx: t.Context(), cfg: &Config{Parallelism: 1, MaxParallelism: 128}}
		c := &checkpointer{r: r, queue: make(chan *upload, 64), slots: make(chan struct{}, maxPartsInFlight)}
		for range maxPartsInFlight {
			c.slots <- struct{}{} // every slot taken
		}
		pc := &partPerStep{holds: holds}
		p := &captured{capture: pc, parted: true, holds: holds}
		for range 6 {
			if done, err := c.stepParts(&upload{id: 1}, p, time.Now().Add(5*time.Millisecond)); err != nil || done {
				t.Fatalf("holds %v: a step with every slot taken: done %v, %v", holds, done, err)
			}
		}
		want := 1 // its first step ends a part, which waits
		if holds {
			want = 4
		}
		if pc.steps != want || len(p.held) != want || len(c.queue) != 0 {
			t.Fatalf("holds %v: %d steps of the capture, %d parts held, %d queued; want %d, %d, 0", holds, pc.steps, len(p.held), len(c.queue), want, want)
		}
		if !holds {
			continue
		}
		for range maxPartsInFlight {
			<-c.slots
		}
		done, err := c.stepParts(&upload{id: 1}, p, time.Now().Add(5*time.Millisecond))
		if err != nil || done || len(c.queue) != maxPartsInFlight {
			t.Fatalf("slots free: done %v, %v, %d queued; want %d queued and the rest held", done, err, len(c.queue), maxPartsInFlight)
		}
		for i := range maxPartsInFlight {
			if u := <-c.queue; u.part.part.KeyGroupStart != 32*i {
				t.Fatalf("queued %d: the part from key group %d, want %d", i, u.part.part.KeyGroupStart, 32*i)
			}
		}
	}
}

// sizedState records what RestoreStateFile tells it, in order.
type sizedState struct {
	schema *arrow.Schema
	calls  []string
}

func (s *sizedState) Schema() *arrow.Schema { return s.schema }
func (s *sizedState) Snapshot(memory.Allocator, bool) ([]arrow.RecordBatch, error) {
	return nil, nil
}
func (s *sizedState) SizeRestore(recs []arrow.RecordBatch) {
	rows := 0
	for _, r := range recs {
		rows += int(r.NumRows())
	}
	s.calls = append(s.calls, fmt.Sprintf("size %d batches, %d rows", len(recs), rows))
}
func (s *sizedState) Restore(rec arrow.RecordBatch) error {
	s.calls = append(s.calls, fmt.Sprintf("restore %d rows", rec.NumRows()))
	return nil
}

// TestRestoreSizesFirst: a state that can size itself for a restore
// (statestore.RestoreSizer: the window operator's key tables) is told
// every batch of a state file, only the rows of its key groups, before
// the first is restored.
func TestRestoreSizesFirst(t *testing.T) {
	mem := checkedMem(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: StateKeyGroupField, Type: arrow.PrimitiveTypes.Int32}}, nil)
	batch := func(groups ...int32) arrow.RecordBatch {
		b := array.NewInt32Builder(mem)
		defer b.Release()
		b.AppendValues(groups, nil)
		col := b.NewArray()
		defer col.Release()
		return array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(groups)))
	}
	recs := []arrow.RecordBatch{batch(1, 2, 3), batch(7, 9), batch(4, 5)}
	f, data, err := statefile.Encode(manifest.File{Key: "state/f.arrow", Kind: manifest.KindBase, Operator: "op", KeyGroupEnd: 128}, schema, recs, mem, arrowfmt.CompressZstd)
	for _, r := range recs {
		r.Release()
	}
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	if err := bucket.Put(t.Context(), f.Key, data); err != nil {
		t.Fatal(err)
	}
	st := &sizedState{schema: schema}
	if err := RestoreStateFile(t.Context(), bucket, st, f, 2, 5, mem); err != nil {
		t.Fatal(err)
	}
	want := []string{"size 2 batches, 3 rows", "restore 2 rows", "restore 1 rows"}
	if !slices.Equal(st.calls, want) {
		t.Errorf("calls %q, want %q", st.calls, want)
	}
}

// TestYieldingWriter: the uploader's writer passes every byte through and
// yields its processor once every yieldEvery bytes, and a goroutine waiting
// for the only processor runs while it writes. Whether the scheduler runs
// the waiting goroutine at a given yield is its choice (under -race it
// picks at random, and every 61st pick takes the yielding goroutine from
// the global queue), so the yields are counted where they happen and the
// waiting goroutine need only run before the writing is done.
func TestYieldingWriter(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var out bytes.Buffer
	var yieldsAt []int
	w := &yieldingWriter{w: &out}
	w.yield = func() {
		yieldsAt = append(yieldsAt, out.Len())
		runtime.Gosched()
	}
	var want []byte
	var ran atomic.Bool
	go ran.Store(true)
	chunk := bytes.Repeat([]byte("weir"), 1000) // 4,000 bytes: the yields fall inside chunks
	n := 16 * yieldEvery / len(chunk)
	for range n {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
		want = append(want, chunk...)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("wrote %d bytes, want the %d given", out.Len(), len(want))
	}
	// A yield comes after the write that brings the count since the last
	// one to yieldEvery or more.
	var wantAt []int
	for i, since := 1, 0; i <= n; i++ {
		if since += len(chunk); since >= yieldEvery {
			wantAt, since = append(wantAt, i*len(chunk)), 0
		}
	}
	if !slices.Equal(yieldsAt, wantAt) {
		t.Errorf("yielded after %v bytes, want after %v", yieldsAt, wantAt)
	}
	if !ran.Load() {
		t.Errorf("the waiting goroutine did not run in %d yields", len(yieldsAt))
	}
}

// TestStateBytesAfterRestore: a task restored from a checkpoint reports
// the bytes of the state it goes on from before its own first
// checkpoint (the job status and the autoscaler read them), and after a
// checkpoint, the bytes of the files that checkpoint acknowledged.
func TestStateBytesAfterRestore(t *testing.T) {
	mem := checkedMem(t)
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	run := func(attempt int, rs *Restore, at map[int]func()) (*Task, *acks) {
		t.Helper()
		var got acks
		tk := New(Config{
			Job: "j1", Attempt: attempt, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem, Bucket: b,
			Source:      &SourceHead{Name: "src", Source: &badSource{n: 400, at: at}, TimeColumn: -1, Out: []Target{ChainTo(0)}},
			Nodes:       []*Node{{Name: "op", Op: &countOp{}, Out: []Target{ChainTo(1)}}, {Name: "sink", Sink: &collector{}}},
			Checkpoints: &Checkpointing{Ack: got.add, Restore: rs},
		})
		return tk, &got
	}
	size := func(files []manifest.File) (n int64) {
		for _, f := range files {
			n += f.Size
		}
		return n
	}
	var tk1 *Task
	var after1 int64 // what the task reported once checkpoint 1 was acknowledged
	tk1, got1 := run(1, nil, map[int]func(){
		200: func() { tk1.TriggerCheckpoint(1) },
		300: func() { after1 = tk1.Stats().Snapshot().StateBytes },
	})
	if err := tk1.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	ack1 := mustAck(t, got1, 1)
	if want := size(ack1.Subtask.State); want == 0 || after1 != want {
		t.Fatalf("after checkpoint 1 the task reported %d state bytes, want its files' %d", after1, want)
	}

	var tk2 *Task
	before := int64(-1)       // what the restored task reported before any checkpoint
	first := map[int]func(){} // the first row the restored source reads
	for k := range 400 {
		first[k] = func() {
			if before < 0 {
				before = tk2.Stats().Snapshot().StateBytes
			}
		}
	}
	tk2, _ = run(2, &Restore{Checkpoint: 1, SourcePosition: ack1.Subtask.SourcePositions["src"], Files: map[string][]manifest.File{"op": ack1.Subtask.State}, Continue: map[string]bool{"op": true}}, first)
	if err := tk2.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if want := size(ack1.Subtask.State); before != want {
		t.Errorf("restored from checkpoint 1, the task reported %d state bytes before its first checkpoint, want the %d it goes on from", before, want)
	}
}
