package coordinator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
)

// TestScaleToZeroAndBack: a job reading a redis stream, idle for its
// scaleToZero, is suspended (no task runs, no slot wanted); entries added
// to the stream wake it from its latest checkpoint, and the output holds
// every entry exactly once. The time from the entries' arrival to their
// committed output is logged.
func TestScaleToZeroAndBack(t *testing.T) {
	r := testenv.StartRedis(t)
	e := newEnvWithin(t, 2*time.Minute)
	e.startWorker("w1", 4, workerOpts{})
	add := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := r.Do("XADD", "in", "*", "data", fmt.Sprintf(`{"id":%d}`, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	rows := func() map[int64]int {
		seen := map[int64]int{}
		for _, row := range e.readJSONL("zero/") {
			seen[int64Of(t, row["id"])]++
		}
		return seen
	}
	waitRows := func(n int, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		poll.UntilNil(t, within, fmt.Sprintf("%d rows committed", n), func() error {
			if got := len(rows()); got < n {
				return fmt.Errorf("%d rows", got)
			}
			return nil
		})
		return time.Since(start)
	}
	add(0, 100)
	id := e.submit(fmt.Sprintf(`
job: zero
checkpoint: {interval: 300ms, timeout: 10s}
autoscale: {enabled: true, window: 2s, stabilization: 5s, scaleToZero: 3s}
sources:
  - {name: in, type: redis, addr: "%s", stream: in, schema: {id: int64}}
sinks:
  - {name: out, input: in, type: files, path: zero/, format: jsonl}
`, r.Addr))
	waitRows(100, 30*time.Second)
	st := e.waitForWithin(id, "SUSPENDED after 3s without input", 30*time.Second, func(st coordinator.JobStatus) bool {
		return st.State == coordinator.JobSuspended
	})
	t.Logf("%s", st.Message)
	if !strings.HasPrefix(st.Message, "suspended: every source received nothing for ") {
		t.Errorf("a suspended job's message %q", st.Message)
	}
	e.waitFor(id, "every task of the suspended job stopped", func(st coordinator.JobStatus) bool {
		for _, v := range st.Vertices {
			for _, tk := range v.Tasks {
				if tk.State == coordinator.JobRunning {
					return false
				}
			}
		}
		return st.State == coordinator.JobSuspended
	})
	// It stays suspended while nothing arrives.
	time.Sleep(2 * time.Second)
	if st, _ := e.c.Status(id); st.State != coordinator.JobSuspended {
		t.Fatalf("woke without input: %s", st.State)
	}
	add(100, 150)
	latency := waitRows(150, 30*time.Second)
	t.Logf("entries added -> their output committed: %v", latency.Round(time.Millisecond))
	st, _ = e.c.Status(id)
	if st.State != coordinator.JobRunning || st.Restarts != 0 {
		t.Errorf("after waking: %s, %d restarts", st.State, st.Restarts)
	}
	woken := false
	for _, rc := range st.Recoveries {
		t.Logf("attempt %d from checkpoint %d in %.2fs: %s", rc.Attempt, rc.RestoredFrom, rc.Seconds, rc.Reason)
		woken = woken || strings.HasPrefix(rc.Reason, "woken: input arrived at source in")
	}
	if !woken {
		t.Errorf("no recovery says the job was woken: %+v", st.Recoveries)
	}
	if err := e.c.Cancel(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	e.wait(id, 20*time.Second)
	seen := rows()
	for i := int64(0); i < 150; i++ {
		if seen[i] != 1 {
			t.Errorf("entry %d in the output %d times", i, seen[i])
		}
	}
	if len(seen) != 150 {
		t.Errorf("%d distinct rows, want 150", len(seen))
	}
}
