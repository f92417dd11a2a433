package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// TestPebbleStateUnderKills runs the sequence checker over 16,000 keys
// with its state in pebble stores of 4 MiB (state: {backend: pebble}),
// each capture uploaded in files of 64 KiB (checkpoint.partSize), on
// a real cluster (worker processes, Redis, MinIO): a worker running tasks
// is killed -9, the checker is rescaled 2 -> 3, and every key's counter
// still takes each value once (0 lost, 0 duplicated). The killed worker's
// store directory is deleted by the next worker that starts, and none is
// left once the job ended.
func TestPebbleStateUnderKills(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	c, port := newCluster(t, nil, "")
	t.Cleanup(c.stopAll)
	stateDir := t.TempDir()
	c.env = append(c.env, "WEIR_STATE_DIR="+stateDir)
	c.start("coordinator", "coordinator", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--id", "coordinator")
	for range 3 {
		c.addWorker(4)
	}
	c.waitWorkers(t, 3)
	// 2,000 events a second: about what the checker on pebble takes
	// under -race beside the other tests. At 6,000 its input backed up,
	// so checkpoints waited ~17 s for their barriers, and the job could
	// end while the rescale's savepoint waited.
	const keys, events = 16_000, 64_000
	specPath := writeSpec(t, fmt.Sprintf(`
job: pebblekill
parallelism: 2
checkpoint: {interval: 1s, timeout: 20s, partSize: 64KiB}
restart: {attempts: 50, backoff: 200ms, maxBackoff: 2s}
state: {backend: pebble, memory: 4MiB}
sources:
  - {name: rides, type: datagen, parallelism: 1, count: %d, rate: 2000, schema: {ride_id: int64}}
operators:
  - {name: keyed, input: rides, parallelism: 1, select: {k: "ride_id %% %d", seq: ride_id}}
  - {name: check, input: keyed, keyBy: [k], function: sequence-check, config: {stride: %d}}
sinks:
  - {name: out, input: check, type: files, path: pebblekill/, format: jsonl}
`, events, keys, keys))
	id := c.deploy(specPath)
	c.waitState(id, coordinator.JobRunning, time.Minute)
	stores := func() []string {
		m, _ := filepath.Glob(filepath.Join(stateDir, "weir-state-*", "pebble-*"))
		return m
	}
	waitStatus(t, c, id, "a checkpoint with state in pebble", func(st coordinator.JobStatus) error {
		if st.Checkpoints == nil || st.Checkpoints.Latest < 2 || len(stores()) == 0 {
			return fmt.Errorf("checkpoints %+v, %d stores", st.Checkpoints, len(stores()))
		}
		return nil
	})
	before, _ := filepath.Glob(filepath.Join(stateDir, "weir-state-*"))
	t.Logf("%d stores open in %d worker directories", len(stores()), len(before))
	victim, pid := c.killOneOf(id, 4)
	if victim == "" {
		t.Fatal("no worker runs the job's tasks")
	}
	left := filepath.Join(stateDir, fmt.Sprintf("weir-state-%d", pid))
	if !slices.Contains(before, left) {
		t.Errorf("the killed worker had no store directory %s (of %v)", left, before)
	}
	poll.UntilNil(t, 30*time.Second, "the killed worker's stores deleted by the new worker", func() error {
		if _, err := os.Stat(left); err == nil {
			return fmt.Errorf("%s is still there", left)
		}
		return nil
	})
	waitStatus(t, c, id, "a checkpoint after the recovery", func(st coordinator.JobStatus) error {
		n := len(st.Recoveries)
		if st.State != coordinator.JobRunning || n == 0 || st.Checkpoints == nil || st.Checkpoints.Latest <= st.Recoveries[n-1].RestoredFrom {
			return fmt.Errorf("%d recoveries, checkpoints %+v", n, st.Checkpoints)
		}
		return nil
	})
	// The latest checkpoint lists captures of several files each (one
	// per key group range, checkpoint.partSize).
	var m *manifest.Manifest
	poll.UntilNil(t, 30*time.Second, "the latest manifest read", func() error {
		// Retention deletes a manifest once a newer one completes.
		st, err := c.status(id)
		if err != nil || st.Checkpoints == nil {
			return fmt.Errorf("status: %+v, %v", st, err)
		}
		raw, err := c.bucket.Get(context.Background(), layout.ManifestKey(id, st.Checkpoints.Latest))
		if err != nil {
			return err
		}
		m, err = manifest.Decode(raw)
		return err
	})
	files, captures := 0, map[string]bool{} // per subtask and checkpoint
	for _, v := range m.Vertices {
		for _, s := range v.Subtasks {
			for _, f := range s.State {
				n, _ := layout.StateFileCheckpoint(f.Key)
				files++
				captures[fmt.Sprint(s.Index, "/", n)] = true
			}
		}
	}
	t.Logf("checkpoint %d: %d state files from %d captures", m.Checkpoint, files, len(captures))
	if files <= len(captures) {
		t.Errorf("checkpoint %d: %d state files from %d captures: want captures in parts", m.Checkpoint, files, len(captures))
	}
	scaleLogged(t, context.Background(), c, id, "check=3")
	st := c.waitState(id, coordinator.JobFinished, 3*time.Minute)
	for _, r := range st.Recoveries {
		t.Logf("attempt %d from checkpoint %d: %.2fs (%s)", r.Attempt, r.RestoredFrom, r.Seconds, r.Reason)
	}
	seen := map[[2]int64]int{}
	bad, dups := 0, 0
	rows := readOutput(t, c.bucket, "pebblekill/")
	for _, r := range rows {
		k, _ := r["k"].(int64)
		n, _ := r["n"].(int64)
		if ok, _ := r["ok"].(bool); !ok {
			bad++
		}
		seen[[2]int64{k, n}]++
		if seen[[2]int64{k, n}] == 2 {
			dups++
		}
	}
	missing := 0
	for k := range int64(keys) {
		for n := int64(1); n <= events/keys; n++ {
			if seen[[2]int64{k, n}] == 0 {
				missing++
			}
		}
	}
	t.Logf("%d rows over %d keys: %d out of sequence, %d duplicated, %d missing", len(rows), keys, bad, dups, missing)
	if len(rows) != events || bad+dups+missing > 0 {
		t.Errorf("%d rows for %d events: %d out of sequence, %d duplicated, %d missing", len(rows), events, bad, dups, missing)
	}
	poll.UntilNil(t, 10*time.Second, "no store left", func() error {
		if s := stores(); len(s) > 0 {
			return fmt.Errorf("stores left: %v", s)
		}
		return nil
	})
}
