package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
)

// TestRescaleUnderLoad rescales the chaos job in place with weir jobs
// scale while it runs on a real cluster (Redis, MinIO, worker processes):
// its datagen source (made of splits) 2 -> 5, tumbling 3 -> 6 and sessions
// 3 -> 4, a worker killed, then all three to 1. (The sequence checker needs
// each of its keys, ride_id % 50, made by one source subtask, so the
// source's parallelism divides 50 and its 120 splits: 1, 2, 5 or 10.)
// The committed output equals the batch recomputation; each rescale's
// pause (detected -> every task running again) is logged with the state
// the scaled vertices held.
func TestRescaleUnderLoad(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	c := startCluster(t, 3, 10)
	scale := func(ctx context.Context, id string, to ...string) {
		st, _ := c.status(id)
		var state int64
		for _, v := range st.Vertices {
			for _, arg := range to {
				if strings.HasPrefix(arg, v.Name+"=") {
					state += v.Totals.StateBytes
				}
			}
		}
		start := time.Now()
		out, err := c.weir(append([]string{"jobs", "scale", id, "--wait"}, to...)...)
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("jobs scale %v: %v\n%s", to, err, out)
			}
			return
		}
		t.Logf("jobs scale %v (state %d bytes): running again after %v:\n%s", to, state, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	}
	st := chaosRun(t, c, func(ctx context.Context, id string) {
		wait := func(d time.Duration) bool {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(d):
				return true
			}
		}
		if !wait(5 * time.Second) {
			return
		}
		scale(ctx, id, "rides=5", "tumbling=6", "sessions=4")
		if !wait(4 * time.Second) {
			return
		}
		victim := ""
		c.mu.Lock()
		for _, w := range c.workersWithTasks(id) {
			if c.procs[w] != nil {
				victim = w
			}
		}
		c.mu.Unlock()
		if victim != "" {
			t.Logf("kill -9 %s", victim)
			c.kill(victim)
			c.addWorker(10)
		}
		c.waitState(id, coordinator.JobRunning, time.Minute)
		if !wait(3 * time.Second) {
			return
		}
		scale(ctx, id, "rides=1", "tumbling=1", "sessions=1")
	})
	rescales := 0
	for _, r := range st.Recoveries {
		if strings.HasPrefix(r.Reason, "rescale: ") {
			rescales++
			t.Logf("rescale pause %.2fs, restored from checkpoint %d: %s", r.Seconds, r.RestoredFrom, r.Reason)
		}
	}
	if rescales != 2 {
		t.Errorf("%d rescales recorded, want 2", rescales)
	}
	for _, v := range st.Vertices {
		if (v.Name == "rides" || v.Name == "tumbling" || v.Name == "sessions") && v.Parallelism != 1 {
			t.Errorf("%s ends at parallelism %d, want 1", v.Name, v.Parallelism)
		}
	}
}
