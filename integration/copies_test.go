package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connectors/datagen"
	"github.com/weirstream/weir/functions/spec"
)

const copiesSpec = "testdata/copies.yaml"

// TestChaosCopiesOnWrite kills workers while a window's captures copy
// keys on write and encode the copies as they wait for their part
// (copies.yaml): the counts are still exactly the batch recomputation's.
// The chaos job's state is too small for this: its captures end in their
// first step, before any key changes. The test fails unless the window's
// tasks report rows copied on write and encoded (weir_task_state_copied_*,
// in the job status) before the job ends.
func TestChaosCopiesOnWrite(t *testing.T) {
	t.Parallel() // checks exactness only, no timing
	c := startCluster(t, 3, 2)
	id := c.deploy(copiesSpec)
	c.waitState(id, coordinator.JobRunning, time.Minute)

	// The rows each of the window's tasks reported copied, and encoded,
	// by worker and subtask: a killed task's counts go with it, and its
	// subtask's next task counts from 0.
	seen := map[string][2]int64{}
	look := func() {
		st, err := c.status(id)
		if err != nil {
			return
		}
		for _, v := range st.Vertices {
			if v.Name != "counts" {
				continue
			}
			for _, tk := range v.Tasks {
				k := fmt.Sprintf("%s[%d]@%d", tk.Worker, tk.Subtask, st.Attempt)
				s := seen[k]
				seen[k] = [2]int64{max(s[0], tk.Stats.CopiedRows), max(s[1], tk.Stats.CopiedEncoded)}
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	kills := 0
	faultDone := make(chan struct{})
	go func() {
		defer close(faultDone)
		rng := rand.New(rand.NewPCG(3, 4))
		wait := func(d time.Duration) bool {
			for end := time.Now().Add(d); time.Now().Before(end); {
				select {
				case <-ctx.Done():
					return false
				case <-time.After(500 * time.Millisecond):
				}
				look()
			}
			return true
		}
		for kills < 3 {
			if !wait(time.Duration(4000+rng.IntN(2000)) * time.Millisecond) {
				return
			}
			if c.killRandomWorker(id, rng, 2) {
				kills++
			}
		}
		for wait(time.Second) { // until the job ends
		}
	}()
	st := c.waitState(id, coordinator.JobFinished, 5*time.Minute)
	cancel()
	<-faultDone

	var copied, encoded int64
	for _, s := range seen {
		copied, encoded = copied+s[0], encoded+s[1]
	}
	js := loadSpec(t, copiesSpec)
	compareRows(t, "counts", readOutput(t, c.bucket, "copies/counts/"), recomputeCounts(t, js))
	t.Logf("%d kills, %d recoveries; %d rows copied on write, %d of them encoded", kills, len(st.Recoveries), copied, encoded)
	if kills < 2 {
		t.Errorf("only %d kills happened while the job ran", kills)
	}
	if len(st.Recoveries) < kills {
		t.Errorf("%d recoveries for %d kills", len(st.Recoveries), kills)
	}
	if copied == 0 || encoded == 0 {
		t.Errorf("the window's captures copied %d rows on write and encoded %d of them: want both", copied, encoded)
	}
}

// recomputeCounts is copies.yaml's output computed from its source: the
// events of each key in each tumbling window, counted as datagen makes
// them (a row map per event would take gigabytes).
func recomputeCounts(t *testing.T, js *spec.Job) []row {
	t.Helper()
	src := &js.Effective().Sources[0]
	st, err := connector.SourceSchema(src)
	if err != nil {
		t.Fatal(err)
	}
	op := js.Operators[0]
	size := op.Window.Size.D().Milliseconds()
	keyCol, tsCol := st.Schema.FieldIndices("key")[0], st.Schema.FieldIndices("ts")[0]
	type window struct{ key, start int64 }
	counts := map[window]int64{}
	gen := datagen.NewRows(src, st)
	var vals []any
	for i := int64(0); i < src.Count; i++ {
		vals = gen.Row(i, vals[:0])
		ts := normalize(vals[tsCol]).(int64)
		counts[window{normalize(vals[keyCol]).(int64), ts - ts%size}]++
	}
	out := make([]row, 0, len(counts))
	for w, n := range counts {
		out = append(out, row{"key": w.key, "window_start": w.start, "window_end": w.start + size, "n": n})
	}
	return out
}
