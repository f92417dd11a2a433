package coordinator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
)

// refusing fails a task at row 77 on every attempt.
const refusing = `job: refuse-again
parallelism: 1
sources:
  - {name: nums, type: datagen, count: 100000, rate: 2000, schema: {id: int64}}
operators:
  - {name: check, input: nums, keyBy: [id], function: coord-test-refuse}
sinks:
  - {name: out, input: check, type: files, path: out/refuse-again/, format: jsonl}
checkpoint: {interval: 200ms}
`

// A job with checkpoints restarts for ever unless told otherwise: it
// keeps failing, its restart count grows past the old limit of 10, each
// failure is in the exception history naming the subtask, and it shows no
// error while it has not FAILED. (Short backoffs keep the test fast;
// attempts is left to the default. The default sequence itself is traced
// in internal/lifecycle.)
func TestCheckpointedJobRestartsForEver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("w1", 2, workerOpts{})
	id := e.submit(refusing + "restart: {backoff: 10ms, maxBackoff: 20ms}\n")
	st := e.waitFor(id, "12 restarts (more than the old default of 10)", func(st coordinator.JobStatus) bool {
		return st.Restarts >= 12 || st.State == coordinator.JobFailed
	})
	if st.State == coordinator.JobFailed {
		t.Fatalf("job FAILED after %d restarts: %s", st.Restarts, st.Error)
	}
	if st.Error != "" {
		t.Errorf("a %s job shows error %q", st.State, st.Error)
	}
	if n := len(st.Exceptions); n < 12 || n > 16 {
		t.Errorf("%d exceptions after %d restarts, want 12..16", n, st.Restarts)
	}
	if lf := st.LastFailure; lf == nil || lf.Task == nil || lf.Task.Vertex == "" || !strings.Contains(lf.Error, "refusing row 77") {
		t.Errorf("last failure %+v does not name the task and cause", lf)
	}
	if err := e.c.Cancel(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	e.wait(id, 20*time.Second)
}

// An explicit restart: {attempts: 2} FAILS the job at its third failure;
// the status has the 2 restarts, the 3 failures and the error.
func TestExplicitAttemptsFail(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("w1", 2, workerOpts{})
	id := e.submit(refusing + "restart: {attempts: 2, backoff: 10ms}\n")
	st := e.wait(id, 30*time.Second)
	if st.State != coordinator.JobFailed || !strings.Contains(st.Error, "gave up after 2 restarts") {
		t.Fatalf("job ended %s (%q), want FAILED giving up after 2 restarts", st.State, st.Error)
	}
	if st.Restarts != 2 || len(st.Exceptions) != 3 || st.LastFailure == nil || st.LastFailure.Error != st.Error {
		t.Errorf("restarts %d, exceptions %+v, last %+v", st.Restarts, st.Exceptions, st.LastFailure)
	}
	for i, ex := range st.Exceptions {
		if ex.Attempt != i+1 || ex.Time.IsZero() {
			t.Errorf("exception %d: %+v", i, ex)
		}
	}
	if s := e.storedStatus(id); s.Restarts != 2 || len(s.Exceptions) != 3 {
		t.Errorf("stored status: restarts %d, %d exceptions", s.Restarts, len(s.Exceptions))
	}
}
