package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// badSource emits k = 0..n-1, one per Poll; a k in bad goes to the dead
// letters (raw "bad <k>") instead. After k it runs at[k] (to trigger a
// checkpoint or kill the task). Its position is the next k.
type badSource struct {
	n    int
	bad  map[int]bool
	at   map[int]func()
	next int
	ctx  *SourceContext
}

func (s *badSource) Open(ctx *SourceContext) error { s.ctx = ctx; return nil }

func (s *badSource) Poll(context.Context, int, time.Duration) (arrow.RecordBatch, error) {
	if s.next >= s.n {
		return nil, io.EOF
	}
	k := s.next
	s.next++
	defer func() {
		if f := s.at[k]; f != nil {
			f()
		}
	}()
	if s.bad[k] {
		s.ctx.DeadLetter(fmt.Appendf(nil, "bad %d", k), fmt.Sprintf("test:%d", k), "bad record")
		return nil, nil
	}
	b := array.NewRecordBuilder(s.ctx.Mem, testSchema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(int64(k))
	b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(1000 * k))
	return b.NewRecordBatch(), nil
}

func (s *badSource) Close() error { return nil }

func (s *badSource) Position() (json.RawMessage, error) { return json.Marshal(s.next) }

func (s *badSource) Restore(pos json.RawMessage) error { return json.Unmarshal(pos, &s.next) }

// letterSink is a StagedSink of dead letters that keeps its transactions in
// memory: sealed rows are staged by id, Commit moves them to committed
// (once), Abort drops them.
type letterSink struct {
	mu        sync.Mutex
	enabled   bool
	ctx       *SinkContext
	buf       []string            // raw of the rows written since the last Seal
	staged    map[string][]string // by txn id
	committed []string
}

func (s *letterSink) Open(ctx *SinkContext) error {
	s.ctx = ctx
	if s.staged == nil {
		s.staged = map[string][]string{}
	}
	return nil
}
func (s *letterSink) EnableTransactions() { s.enabled = true }
func (s *letterSink) Write(_ context.Context, b arrow.RecordBatch) error {
	if !b.Schema().Equal(DeadLetterSchema) {
		return fmt.Errorf("schema %s, want %s", b.Schema(), DeadLetterSchema)
	}
	raw := b.Column(3).(*array.String)
	for i := 0; i < raw.Len(); i++ {
		s.buf = append(s.buf, raw.Value(i))
	}
	return nil
}
func (s *letterSink) Finish(context.Context) error { return nil }
func (s *letterSink) Close() error                 { return nil }
func (s *letterSink) PreCommit(context.Context, string) (json.RawMessage, error) {
	return nil, errors.New("the runtime seals a StagedSink")
}
func (s *letterSink) Seal(id string) (func(context.Context) (json.RawMessage, error), error) {
	rows := s.buf
	s.buf = nil
	return func(context.Context) (json.RawMessage, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.staged[id] = rows
		return json.Marshal(id)
	}, nil
}
func (s *letterSink) Commit(_ context.Context, h json.RawMessage) error {
	var id string
	if err := json.Unmarshal(h, &id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rows, ok := s.staged[id]; ok {
		s.committed = append(s.committed, rows...)
		delete(s.staged, id)
	}
	return nil
}
func (s *letterSink) Abort(_ context.Context, h json.RawMessage) error {
	var id string
	if err := json.Unmarshal(h, &id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.staged, id)
	return nil
}

var _ StagedSink = (*letterSink)(nil)

// acks collects a task's checkpoint acks.
type acks struct {
	mu   sync.Mutex
	list []Ack
}

func (a *acks) add(ack Ack) { a.mu.Lock(); a.list = append(a.list, ack); a.mu.Unlock() }

func (a *acks) get(cp int64) (Ack, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ack := range a.list {
		if ack.Checkpoint == cp && !ack.Final {
			return ack, true
		}
	}
	return Ack{}, false
}

func (a *acks) final() (Ack, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ack := range a.list {
		if ack.Final {
			return ack, true
		}
	}
	return Ack{}, false
}

// letterTxns returns the dead-letter transactions of source src in ack.
func letterTxns(ack Ack, src string) []manifest.Txn {
	var out []manifest.Txn
	for _, t := range ack.Subtask.SinkTransactions {
		if t.Sink == src {
			out = append(out, t)
		}
	}
	return out
}

func bads(ks ...int) []string {
	var out []string
	for _, k := range ks {
		out = append(out, fmt.Sprintf("bad %d", k))
	}
	return out
}

// TestDeadLettersCommitWithCheckpoints runs a checkpointing source whose
// dead letters go to a two-phase sink: the letters before each barrier
// are staged as one transaction of that checkpoint (none when there are
// none), the rest with the final ack; nothing is written directly; the
// count is in the source's position.
func TestDeadLettersCommitWithCheckpoints(t *testing.T) {
	mem := checkedMem(t)
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var got acks
	snk := &letterSink{}
	var tk *Task
	src := &badSource{n: 12, bad: map[int]bool{1: true, 3: true, 9: true}, at: map[int]func(){
		4: func() { tk.TriggerCheckpoint(1) },
		6: func() { tk.TriggerCheckpoint(2) }, // no letters since 1
	}}
	out := &collector{}
	tk = New(Config{
		Job: "j1", Attempt: 1, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem, Bucket: b,
		Source:      &SourceHead{Name: "src", Source: src, TimeColumn: -1, Out: []Target{ChainTo(0)}, DeadLetters: snk},
		Nodes:       []*Node{{Name: "sink", Sink: out}},
		Checkpoints: &Checkpointing{Ack: got.add},
	})
	if err := tk.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !snk.enabled || snk.ctx == nil || snk.ctx.Node != "src" || snk.ctx.Counters == &tk.Stats().Counters {
		t.Errorf("dead-letter sink opened with %+v (transactions %t), want node src, counters of its own", snk.ctx, snk.enabled)
	}
	ack1, ok1 := got.get(1)
	ack2, ok2 := got.get(2)
	fin, okF := got.final()
	if !ok1 || !ok2 || !okF {
		t.Fatalf("acks %+v: want checkpoints 1, 2 and the final one", got.list)
	}
	for _, ack := range []Ack{ack1, ack2, fin} {
		if ack.Decline != "" {
			t.Fatalf("checkpoint %d declined: %s", ack.Checkpoint, ack.Decline)
		}
	}
	want := map[string][]string{"j1-a1-src-s0-c1": bads(1, 3), "j1-a1-src-s0-final": bads(9)}
	for _, ack := range []Ack{ack1, ack2, fin} {
		for _, txn := range letterTxns(ack, "src") {
			if _, ok := want[txn.ID]; !ok {
				t.Errorf("checkpoint %d has dead-letter transaction %s, want only %v", ack.Checkpoint, txn.ID, want)
			}
		}
	}
	if !slices.Equal(snk.staged["j1-a1-src-s0-c1"], want["j1-a1-src-s0-c1"]) || !slices.Equal(snk.staged["j1-a1-src-s0-final"], want["j1-a1-src-s0-final"]) {
		t.Errorf("staged %v, want %v", snk.staged, want)
	}
	var sc sourceCheckpoint
	if err := json.Unmarshal(ack1.Subtask.SourcePositions["src"], &sc); err != nil || sc.DeadLetters != 2 {
		t.Errorf("position at checkpoint 1 = %s (%v), want 2 dead letters", ack1.Subtask.SourcePositions["src"], err)
	}
	if n := tk.Stats().Snapshot().DeadLetters; n != 3 {
		t.Errorf("counted %d dead letters, want 3", n)
	}
	if objs, err := b.List(t.Context(), layout.DeadLetterPrefix("j1", "src")); err != nil || len(objs) != 0 {
		t.Errorf("dead letters written directly: %v (%v)", objs, err)
	}
	if len(out.keys) != 9 {
		t.Errorf("sink got %d rows, want the 9 good ones", len(out.keys))
	}
}

// TestDeadLettersExactlyOnceOverRestore kills a task after its first
// checkpoint, with letters staged in a later one and others not yet
// sealed, and restores it from the first: committing the completed
// checkpoints' transactions (checkpoint 1 twice, as recovery does) gives
// every letter exactly once, and the count goes on from the checkpoint.
func TestDeadLettersExactlyOnceOverRestore(t *testing.T) {
	mem := checkedMem(t)
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bad := map[int]bool{0: true, 2: true, 5: true, 8: true, 11: true, 13: true, 19: true}
	snk := &letterSink{}
	commit := func(ack Ack) {
		t.Helper()
		for _, txn := range letterTxns(ack, "src") {
			if err := snk.Commit(t.Context(), txn.Handle); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := func(attempt int, rs *Restore, at func(tk *Task, got *acks, cancel func()) map[int]func()) (*Task, *acks, error) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var got acks
		var tk *Task
		src := &badSource{n: 20, bad: bad}
		tk = New(Config{
			Job: "j1", Attempt: attempt, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem, Bucket: b,
			Source:      &SourceHead{Name: "src", Source: src, TimeColumn: -1, Out: []Target{ChainTo(0)}, DeadLetters: snk},
			Nodes:       []*Node{{Name: "sink", Sink: &collector{}}},
			Checkpoints: &Checkpointing{Ack: got.add, Restore: rs},
		})
		src.at = at(tk, &got, cancel)
		return tk, &got, tk.Run(ctx)
	}
	// Attempt 1: checkpoint 1 after k=6, checkpoint 2 after k=9 (never
	// completes), killed after k=12 (letter 11 not yet sealed).
	_, got1, err := run(1, nil, func(tk *Task, got *acks, cancel func()) map[int]func() {
		return map[int]func(){
			6: func() { tk.TriggerCheckpoint(1) },
			9: func() { tk.TriggerCheckpoint(2) },
			12: func() {
				poll.Until(t, 10*time.Second, "ack of checkpoint 2", func() bool { _, ok := got.get(2); return ok })
				cancel()
			},
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("attempt 1 ended with %v, want it killed", err)
	}
	ack1, _ := got1.get(1)
	commit(ack1)
	if !slices.Equal(snk.committed, bads(0, 2, 5)) {
		t.Fatalf("committed after checkpoint 1: %v, want %v", snk.committed, bads(0, 2, 5))
	}
	if _, ok := snk.staged["j1-a1-src-s0-c2"]; !ok {
		t.Errorf("checkpoint 2's letters are not staged: %v", snk.staged)
	}

	// Attempt 2 restores checkpoint 1: recovery commits it again, the
	// janitor aborts checkpoint 2's transaction.
	rs := &Restore{Checkpoint: 1, SourcePosition: ack1.Subtask.SourcePositions["src"]}
	commit(ack1)
	for _, txn := range letterTxns(mustAck(t, got1, 2), "src") {
		if err := snk.Abort(t.Context(), txn.Handle); err != nil {
			t.Fatal(err)
		}
	}
	tk2, got2, err := run(2, rs, func(tk *Task, _ *acks, _ func()) map[int]func() {
		return map[int]func(){15: func() { tk.TriggerCheckpoint(3) }}
	})
	if err != nil {
		t.Fatal(err)
	}
	commit(mustAck(t, got2, 3))
	fin, ok := got2.final()
	if !ok {
		t.Fatal("no final ack")
	}
	commit(fin)
	var want []string
	for k := range 20 {
		if bad[k] {
			want = append(want, fmt.Sprintf("bad %d", k))
		}
	}
	if !slices.Equal(snk.committed, want) {
		t.Errorf("committed letters %v, want each of %v once", snk.committed, want)
	}
	if n := tk2.Stats().Snapshot().DeadLetters; n != int64(len(want)) {
		t.Errorf("count after the restored attempt = %d, want %d over both attempts", n, len(want))
	}
}

func mustAck(t *testing.T, a *acks, cp int64) Ack {
	t.Helper()
	ack, ok := a.get(cp)
	if !ok || ack.Decline != "" {
		t.Fatalf("checkpoint %d: ack %+v (found %t)", cp, ack, ok)
	}
	return ack
}

// TestDeadLettersWithoutCheckpoints: a dead-letter sink is not used by a
// job that does not checkpoint; letters are written directly as before.
func TestDeadLettersWithoutCheckpoints(t *testing.T) {
	mem := checkedMem(t)
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	snk := &letterSink{}
	tk := New(Config{
		Job: "j1", Attempt: 1, Vertex: "src", Parallelism: 1, MaxParallelism: 128, Mem: mem, Bucket: b,
		Source: &SourceHead{Name: "src", Source: &badSource{n: 4, bad: map[int]bool{2: true}}, TimeColumn: -1, Out: []Target{ChainTo(0)}, DeadLetters: snk},
		Nodes:  []*Node{{Name: "sink", Sink: &collector{}}},
	})
	if err := tk.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if snk.ctx != nil {
		t.Error("dead-letter sink opened without checkpoints")
	}
	if _, err := b.Get(t.Context(), layout.DeadLetterKey("j1", "src", 0, 1, 0)); err != nil {
		t.Errorf("dead letters not written directly: %v", err)
	}
}
