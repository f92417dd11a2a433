package coordinator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/statestore/layout"
)

// TestRescaleInPlace rescales a running exactly-once job three times
// (windows 2 -> 4, the sequence checker 2 -> 3, then both to 1), with a
// worker stopped between two of them: each rescale is a new attempt
// restored from the latest checkpoint, no restart is counted for it, the
// stored spec follows, and the committed output equals a run without any.
func TestRescaleInPlace(t *testing.T) {
	e := newEnv(t)
	stop1 := e.startWorker("w1", 4, workerOpts{})
	e.startWorker("w2", 4, workerOpts{})
	e.startWorker("w3", 4, workerOpts{})
	wantW, wantS := e.reference()

	id := e.submitSpec(eoSpec("out", 1500), coordinator.SubmitOptions{})
	// checkpointed waits for a checkpoint newer than any so far, taken
	// while the job runs: each rescale then restores a newer one.
	var latest int64
	checkpointed := func() {
		t.Helper()
		st := e.waitFor(id, "a new checkpoint of the running attempt", func(st coordinator.JobStatus) bool {
			return st.State == coordinator.JobRunning && st.Checkpoints != nil && st.Checkpoints.Latest > latest
		})
		latest = st.Checkpoints.Latest
	}
	parallelism := func(st coordinator.JobStatus, vertex string) int {
		for _, v := range st.Vertices {
			if v.Name == vertex {
				return v.Parallelism
			}
		}
		return 0
	}
	checkpointed()
	resp, err := e.c.Scale(e.ctx, id, map[string]int{"tumbling": 4})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Before["tumbling"] != 2 || resp.After["tumbling"] != 4 || resp.Attempt != 2 {
		t.Fatalf("scale tumbling=4: %+v", resp)
	}
	checkpointed()
	st, _ := e.c.Status(id)
	if parallelism(st, "tumbling") != 4 || st.Restarts != 0 {
		t.Fatalf("after the rescale: tumbling at %d, %d restarts; want 4 and none", parallelism(st, "tumbling"), st.Restarts)
	}
	stop1() // a failure between rescales: the job restarts at its new size
	e.waitFor(id, "a restart after the worker stopped", func(st coordinator.JobStatus) bool {
		return st.Restarts == 1 && st.State == coordinator.JobRunning && st.Checkpoints != nil
	})
	e.startWorker("w4", 4, workerOpts{})
	checkpointed()
	if _, err := e.c.Scale(e.ctx, id, map[string]int{"seqcheck": 3}); err != nil {
		t.Fatal(err)
	}
	checkpointed()
	if _, err := e.c.Scale(e.ctx, id, map[string]int{"tumbling": 1, "seqcheck": 1}); err != nil {
		t.Fatal(err)
	}
	st = e.wait(id, time.Minute)
	if st.State != coordinator.JobFinished {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	if parallelism(st, "tumbling") != 1 || parallelism(st, "seqcheck") != 1 || st.Restarts != 1 {
		t.Errorf("at the end: tumbling %d, seqcheck %d, %d restarts; want 1, 1 and the one failure", parallelism(st, "tumbling"), parallelism(st, "seqcheck"), st.Restarts)
	}
	rescales := 0
	var restored int64
	for _, r := range st.Recoveries {
		t.Logf("attempt %d from checkpoint %d in %.2fs: %s", r.Attempt, r.RestoredFrom, r.Seconds, r.Reason)
		if strings.HasPrefix(r.Reason, "rescale: ") {
			rescales++
			if r.RestoredFrom <= restored {
				t.Errorf("a rescale restored from checkpoint %d, not one newer than the last restore's %d: %+v", r.RestoredFrom, restored, r)
			}
		}
		restored = max(restored, r.RestoredFrom)
	}
	if rescales != 3 {
		t.Errorf("%d rescales among the recoveries, want 3", rescales)
	}
	e.checkExact("rescaled three times", e.lines("out/windows/"), e.lines("out/seq/"), wantW, wantS)
	if s := e.staged("out/"); len(s) > 0 {
		t.Errorf("staged objects left: %v", s)
	}
	// The stored spec has the last parallelism, for a coordinator that
	// takes over.
	raw, err := e.bucket.Get(e.ctx, layout.SpecKey(id))
	if err != nil || !strings.Contains(string(raw), `"parallelism": 1`) {
		t.Errorf("stored spec after the rescales: %v\n%s", err, raw)
	}
}

// TestRescaleRefused: names that are not in the job, sources, a
// parallelism out of range and a job that has ended are refused, and
// nothing changes.
func TestRescaleRefused(t *testing.T) {
	e := newEnv(t)
	e.startWorker("w1", 8, workerOpts{})
	id := e.submitSpec(eoSpec("out", 1500), coordinator.SubmitOptions{})
	e.waitRunning(id)
	for _, tc := range []struct {
		to   map[string]int
		want string
	}{
		{map[string]int{}, "name at least one"},
		{map[string]int{"nope": 2}, "nope: no vertex, operator or sink of that name (vertices: "},
		// A datagen source is made of splits (120 by default) and rescales,
		// up to one subtask a split.
		{map[string]int{"rides": 121}, "sources[rides].splits: 120 (the default) is below the parallelism 121"},
		{map[string]int{"tumbling": 0}, "tumbling=0: a parallelism is at least 1"},
		{map[string]int{"tumbling": 1000}, "tumbling=1000: the job has 128 key groups (maxParallelism), so at most 128 subtasks"},
	} {
		_, err := e.c.Scale(e.ctx, id, tc.to)
		if !errors.Is(err, coordinator.ErrScaleRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Scale(%v) = %v, want ErrScaleRefused saying %q", tc.to, err, tc.want)
		}
	}
	st, _ := e.c.Status(id)
	if st.Attempt != 1 || st.State != coordinator.JobRunning {
		t.Errorf("after refused rescales: attempt %d, %s", st.Attempt, st.State)
	}
	if err := e.c.Cancel(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	e.wait(id, 20*time.Second)
	if _, err := e.c.Scale(e.ctx, id, map[string]int{"tumbling": 2}); !errors.Is(err, coordinator.ErrEnded) {
		t.Errorf("rescale of an ended job: %v, want ErrEnded", err)
	}
}
