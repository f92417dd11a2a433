package nexmark

import (
	"context"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/worker"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/blob"
)

// Joins keep exactly-once: q3 (a regular join, state on both sides), q7
// (an interval join after a global window) and q8 (a window join after
// two windows) run with checkpoints every 100 ms; once a checkpoint has
// completed, the worker running the job dies (its tasks stop where they
// are, without finishing), a new worker takes over when the old one's
// heartbeat expires, and the job restores its state, sources and
// uncommitted output from the checkpoint. The committed output equals the
// independent computation, row for row: nothing lost, nothing twice.
func TestJoinsRecoverExactly(t *testing.T) {
	for _, q := range []struct {
		name   string
		expect func(*testing.T, *spec.Job) []row
	}{{"q3", expectQ3}, {"q7", expectQ7}, {"q8", expectQ8}} {
		t.Run(q.name, func(t *testing.T) {
			t.Parallel()
			js := testSpec(t, q.name)
			// 60,000 events at 12,000/s: the job is mid-way when the
			// worker dies.
			js.Sources[0].Rate = 12_000
			js.Checkpoint = &spec.Checkpoint{Interval: spec.Duration(100 * time.Millisecond)}
			js.Restart = &spec.Restart{Attempts: 3, Backoff: spec.Duration(100 * time.Millisecond)}
			b := runKilled(t, js)
			check(t, q.name, b, q.expect(t, js))
		})
	}
}

// runKilled runs js on an in-process coordinator and worker, kills the
// worker once a checkpoint has completed, starts another, and waits for
// the job to finish after its recovery.
func runKilled(t *testing.T, js *spec.Job) blob.Bucket {
	t.Helper()
	bucket, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	tr, pl := exchange.NewLocal(), control.NewLocal()
	defer tr.Close()
	defer pl.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	coord := coordinator.New(coordinator.Config{Plane: pl, Bucket: bucket, Transport: tr})
	done := make(chan struct{}, 3)
	defer func() { cancel(); <-done; <-done; <-done }()
	go func() { _ = coord.Run(ctx); done <- struct{}{} }()
	startWorker := func(id string) context.CancelFunc {
		wctx, wcancel := context.WithCancel(ctx)
		w := worker.New(worker.Config{ID: id, Slots: 16, Plane: pl, Transport: tr, Bucket: bucket, HeartbeatTTL: time.Second})
		go func() { _ = w.Run(wctx); done <- struct{}{} }()
		return wcancel
	}
	kill := startWorker("first")
	poll.Until(t, time.Minute, "the first worker registered", func() bool {
		ws, err := pl.Workers(ctx)
		return err == nil && len(ws) == 1
	})
	id, err := coord.Submit(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, time.Minute, "a completed checkpoint", func() bool {
		st, err := coord.Status(id)
		return err == nil && st.Checkpoints != nil && st.Checkpoints.Completed >= 1
	})
	st, _ := coord.Status(id)
	if st.State == coordinator.JobFinished {
		t.Fatal("the job finished before the worker could be killed: make the input longer")
	}
	kill()
	startWorker("second")
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer wcancel()
	st, err = coord.Wait(wctx, id)
	if err != nil || st.State != coordinator.JobFinished {
		t.Fatalf("job %s: %s %v %s", id, st.State, err, st.Error)
	}
	if len(st.Recoveries) == 0 || st.Attempt < 2 {
		t.Fatalf("attempt %d, %d recoveries: the kill did not make the job recover", st.Attempt, len(st.Recoveries))
	}
	t.Logf("recovered %d time(s); %d checkpoints completed", len(st.Recoveries), st.Checkpoints.Completed)
	return bucket
}
