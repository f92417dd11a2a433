package coordinator_test

import (
	"errors"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/statestore/layout"
)

// A coordinator started on the same bucket lists the jobs that ended with
// their final state, and a job that had not ended as failed.
func TestLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("w1", 2, workerOpts{})

	finished := e.submit(evens)
	if st := e.wait(finished, 20*time.Second); st.State != coordinator.JobFinished {
		t.Fatalf("evens ended %s: %s", st.State, st.Error)
	}
	canceled := e.submit(forever)
	e.waitRunning(canceled)
	if err := e.c.Cancel(e.ctx, canceled); err != nil {
		t.Fatal(err)
	}
	if st := e.wait(canceled, 10*time.Second); st.State != coordinator.JobCanceled {
		t.Fatalf("forever ended %s", st.State)
	}
	failed := e.submit(`job: refuse
sources:
  - {name: nums, type: datagen, count: 1000, schema: {id: int64}}
operators:
  - {name: check, input: nums, keyBy: [id], function: coord-test-refuse}
sinks:
  - {name: out, input: check, type: stdout}
`)
	failedSt := e.wait(failed, 20*time.Second)
	if failedSt.State != coordinator.JobFailed {
		t.Fatalf("refuse ended %s", failedSt.State)
	}

	// A job whose coordinator stopped while it ran has a spec and no
	// status; junk under jobs/ is skipped.
	orphanSpec, err := e.bucket.Get(e.ctx, layout.SpecKey(finished))
	if err != nil {
		t.Fatal(err)
	}
	for key, data := range map[string][]byte{
		layout.SpecKey("orphan-1"): orphanSpec,
		layout.SpecKey("junk-1"):   []byte("{not json"),
		"jobs/notes.txt":           []byte("hello"),
		"jobs/junk-2/other.json":   []byte("{}"),
	} {
		if err := e.bucket.Put(e.ctx, key, data); err != nil {
			t.Fatal(err)
		}
	}

	plane := control.NewLocal()
	defer plane.Close()
	c2 := coordinator.New(coordinator.Config{Plane: plane, Bucket: e.bucket})
	if err := c2.Load(e.ctx); err != nil {
		t.Fatalf("Load: %v", err)
	}
	check := func() {
		t.Helper()
		got := map[string]coordinator.JobStatus{}
		for _, st := range c2.List() {
			got[st.ID] = st
		}
		if len(got) != 4 {
			t.Errorf("loaded %d jobs, want 4: %v", len(got), got)
		}
		for id, want := range map[string]string{
			finished: coordinator.JobFinished, canceled: coordinator.JobCanceled,
			failed: coordinator.JobFailed, "orphan-1": coordinator.JobFailed,
		} {
			if got[id].State != want {
				t.Errorf("%s loaded as %q, want %s", id, got[id].State, want)
			}
		}
		if got[failed].Error != failedSt.Error {
			t.Errorf("failed job's error = %q, want %q", got[failed].Error, failedSt.Error)
		}
		if got["orphan-1"].Error != "coordinator restarted while the job ran" {
			t.Errorf("orphan's error = %q", got["orphan-1"].Error)
		}
	}
	check()

	orig, _ := e.c.Status(finished)
	st, err := c2.Status(finished)
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "evens" || st.Attempt != 1 || !st.Created.Equal(orig.Created) || !st.Ended.Equal(orig.Ended) || len(st.Vertices) != 2 {
		t.Errorf("loaded status = %+v, want like %+v", st, orig)
	}
	if _, err := c2.Wait(e.ctx, finished); err != nil {
		t.Errorf("Wait for a loaded ended job: %v", err)
	}
	if err := c2.Cancel(e.ctx, finished); !errors.Is(err, coordinator.ErrEnded) {
		t.Errorf("Cancel of a loaded ended job = %v, want ErrEnded", err)
	}
	// Loading again adds nothing.
	if err := c2.Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	check()
}
