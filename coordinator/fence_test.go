package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// TestDeposedLeaderCommitsNothing runs a job under the leader of epoch 1,
// then has epoch 2 claim it (its status written, as a standby that took
// over does first): the old leader finds the newer status at its next
// commit, stops, and writes no manifest and no status after; the leader
// of epoch 2 loads the job, restores it and finishes it with exact output.
func TestDeposedLeaderCommitsNothing(t *testing.T) {
	e := newEnv(t)
	e.startWorker("w1", 4, workerOpts{})
	wantW, wantS := e.reference()

	cfg := coordinator.Config{Plane: e.plane, Bucket: e.bucket, Transport: e.xch, CancelTimeout: 5 * time.Second, Epoch: 1}
	c1 := coordinator.New(cfg)
	ctx1, stop1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- c1.Run(ctx1) }()
	defer stop1()
	e.stopCoordinator()
	e.c = c1
	id := e.submitSpec(eoSpec("out", 3000), coordinator.SubmitOptions{})
	e.waitFor(id, "a checkpoint", func(st coordinator.JobStatus) bool {
		return st.Checkpoints != nil && st.Checkpoints.Completed >= 1
	})
	claim, err := c1.Status(id)
	if err != nil {
		t.Fatal(err)
	}
	claim.Epoch = 2
	raw, err := json.Marshal(claim)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.bucket.Put(e.ctx, layout.StatusKeyAt(id, 2), raw); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done1:
		if !errors.Is(err, control.ErrNotLeader) || !strings.Contains(err.Error(), "epoch 2 took over") {
			t.Fatalf("the deposed coordinator's Run = %v, want ErrNotLeader naming epoch 2", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the deposed coordinator did not stop")
	}
	deposedAt := time.Now()
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	written := func() map[string]time.Time {
		out := map[string]time.Time{}
		objs, err := e.bucket.List(e.ctx, layout.JobPrefix(id))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if _, _, ok := layout.ParseManifestKey(o.Key); ok || o.Key == layout.StatusKeyAt(id, 1) {
				out[o.Key] = o.Modified
			}
		}
		return out
	}
	before := written()

	c2cfg := cfg
	c2cfg.Epoch = 2
	e.startCoordinator(c2cfg)
	st := e.wait(id, 40*time.Second)
	if st.State != coordinator.JobFinished {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	if st.Epoch != 2 || len(st.Fences) != 1 || st.Fences[0].Epoch != 2 {
		t.Errorf("status epoch %d, fences %+v; want epoch 2 with its fence", st.Epoch, st.Fences)
	}
	e.checkExact("after the takeover by epoch 2", e.lines("out/windows/"), e.lines("out/seq/"), wantW, wantS)
	// Epoch 1 wrote nothing after it stopped; every later manifest is
	// epoch 2's.
	for key, mod := range written() {
		if was, ok := before[key]; ok && was.Equal(mod) {
			continue
		}
		if key == layout.StatusKeyAt(id, 1) {
			t.Errorf("the deposed leader's status %s was written after it stopped", key)
			continue
		}
		raw, err := e.bucket.Get(e.ctx, key)
		if err != nil {
			continue // collected
		}
		m, err := manifest.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if m.Epoch != 2 || mod.Before(deposedAt) {
			t.Errorf("manifest %s of epoch %d written at %v (epoch 1 stopped at %v)", key, m.Epoch, mod, deposedAt)
		}
	}
}
