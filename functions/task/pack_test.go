package task

import (
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
	"github.com/weirstream/weir/statestore/statepack"
)

// plainOp is a countOp whose state captures only at the barrier, in one
// piece (no BeginSnapshot): its files take the path of window and join
// state, where countOp's take that of a process function's backend.
type plainOp struct{ countOp }

func (o *plainOp) State() statestore.Snapshotter { return plainState{countState{&o.countOp}} }

type plainState struct{ s countState }

func (p plainState) Schema() *arrow.Schema               { return p.s.Schema() }
func (p plainState) Restore(rec arrow.RecordBatch) error { return p.s.Restore(rec) }
func (p plainState) Snapshot(mem memory.Allocator, full bool) ([]arrow.RecordBatch, error) {
	return statestore.CaptureAtOnce(p.s, mem, full) // notes the counts
}

// TestStatePackedPerWorker: two tasks of a job attempt on one worker, two
// stateful operators each, share a state group (Checkpointing.Pack):
// every checkpoint's state files of both tasks go into one object, and
// each task's files restore its operators' state at each barrier.
func TestStatePackedPerWorker(t *testing.T) {
	mem := checkedMem(t)
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	group := statepack.New(statepack.Config{Bucket: b, Job: "j1", Attempt: 1, Worker: "w-1", Linger: time.Minute})
	const tasks, checkpoints = 2, 5
	type run struct {
		got   acks
		procs *countOp
		plain *plainOp
	}
	runs := make([]*run, tasks)
	// A batch waits for the members there were when it opened: neither
	// task takes its first checkpoint before both have joined the group
	// (as they have by their first rows), or on a busy machine one could
	// open checkpoint 1's batch before the other joined.
	var joined sync.WaitGroup
	joined.Add(tasks)
	bothJoined := make(chan struct{})
	go func() { joined.Wait(); close(bothJoined) }()
	var wg sync.WaitGroup
	for i := range tasks {
		r := &run{procs: &countOp{}, plain: &plainOp{}}
		runs[i] = r
		var tk *Task
		at := map[int]func(){}
		for c := range checkpoints {
			id := int64(c + 1)
			at[100+100*c] = func() { tk.TriggerCheckpoint(id) }
		}
		var arrived sync.Once // at row 50, or when the task ends before it
		at[50] = func() {
			arrived.Do(joined.Done)
			select {
			case <-bothJoined:
			case <-time.After(30 * time.Second):
				t.Error("the other task did not start in 30 s")
			}
		}
		tk = New(Config{
			Job: "j1", Attempt: 1, Vertex: fmt.Sprint("v", i), Parallelism: 1, MaxParallelism: 128, Mem: mem, Bucket: b,
			Source: &SourceHead{Name: "src", Source: &badSource{n: 700, at: at}, TimeColumn: -1, Out: []Target{ChainTo(0), ChainTo(1)}},
			Nodes: []*Node{
				{Name: "procs", Op: r.procs, Out: []Target{ChainTo(2)}},
				{Name: "plain", Op: r.plain, Out: []Target{ChainTo(2)}},
				{Name: "sink", Sink: &collector{}},
			},
			Checkpoints: &Checkpointing{Ack: r.got.add, Pack: group},
		})
		wg.Go(func() {
			if err := tk.Run(t.Context()); err != nil {
				t.Error(err)
			}
			arrived.Do(joined.Done) // so the goroutine closing bothJoined ends
		})
	}
	wg.Wait()
	for c := int64(1); c <= checkpoints; c++ {
		objects := map[string]bool{}
		for i, r := range runs {
			ack, ok := r.got.get(c)
			if !ok || ack.Decline != "" {
				t.Fatalf("task %d, checkpoint %d: ack %+v", i, c, ack)
			}
			for _, f := range ack.Subtask.State {
				if !f.Packed {
					t.Errorf("task %d, checkpoint %d: %s not packed", i, c, f.Key)
				}
				if n, _ := layout.StateFileCheckpoint(f.Key); n == c {
					objects[f.Key] = true
				}
			}
			for _, op := range []*countOp{r.procs, &r.plain.countOp} {
				name := "procs"
				if op != r.procs {
					name = "plain"
				}
				var files []manifest.File
				for _, f := range ack.Subtask.State {
					if f.Operator == name {
						files = append(files, f)
					}
				}
				have := restoreCounts(t, b, files, mem)
				if want := op.at[c-1]; !maps.Equal(have, want) || len(want) == 0 {
					t.Errorf("task %d, %s, checkpoint %d: restored %d keys, want the %d at its barrier", i, name, c, len(have), len(want))
				}
			}
		}
		if len(objects) != 1 {
			t.Errorf("checkpoint %d: files in %d objects, want 1: %v", c, len(objects), objects)
		}
	}
	st := group.Stats()
	infos, err := b.List(t.Context(), layout.StatePrefix("j1"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Objects != checkpoints || len(infos) != checkpoints {
		t.Errorf("%d objects written, %d in the bucket, want %d (one per checkpoint): %+v", st.Objects, len(infos), checkpoints, st)
	}
	t.Logf("%d state files in %d objects", st.Files, st.Objects)
}
