package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
)

// TestUpWorkersFollow runs `weir up --min-workers 1 --max-workers 4
// --slots 2` itself (a coordinator and the worker processes it starts and
// stops) on a real Redis and MinIO. A job of parallelism 6 needs 3
// workers: they start and it runs. A bounded checkpointed job deployed
// meanwhile takes a fourth. Canceling the first, the idle workers are
// stopped after the scale-down delay, one at a time, down to 1, while the
// bounded job runs on: its output is exact. The times are logged.
func TestUpWorkersFollow(t *testing.T) {
	t.Parallel() // checks counts and exactness, no latency
	c, port := newCluster(t, nil, "")
	t.Cleanup(c.stopAll)
	start := time.Now()
	logf := func(format string, args ...any) {
		t.Logf("%5.1fs "+format, append([]any{time.Since(start).Seconds()}, args...)...)
	}
	c.start("up", "up", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--min-workers", "1", "--max-workers", "4", "--slots", "2", "--scale-down-delay", "5s")
	var ids []string
	workers := func(n int, timeout time.Duration) {
		t.Helper()
		poll.UntilNil(t, timeout, fmt.Sprintf("%d workers", n), func() error {
			ws, err := c.workers()
			if err != nil {
				return err
			}
			if len(ws) != n {
				return fmt.Errorf("%d workers: %v", len(ws), ws)
			}
			ids = ws
			return nil
		})
		logf("%d workers: %v", n, ids)
	}
	workers(1, 30*time.Second)

	wide := writeSpec(t, `
job: wide
parallelism: 6
sources:
  - {name: gen, type: datagen, rate: 600, schema: {k: int64}}
sinks:
  - {name: out, input: gen, type: files, path: follow/wide/, format: jsonl}
`)
	wid := c.deploy(wide)
	logf("deployed %s (parallelism 6)", wid)
	workers(3, 60*time.Second)
	c.waitState(wid, coordinator.JobRunning, time.Minute)
	logf("%s running", wid)

	const rows = 4000
	bounded := writeSpec(t, fmt.Sprintf(`
job: bounded
checkpoint: {interval: 500ms}
sources:
  - {name: gen, type: datagen, count: %d, rate: 250, schema: {k: int64}}
sinks:
  - {name: out, input: gen, type: files, path: follow/bounded/, format: jsonl}
`, rows))
	bid := c.deploy(bounded)
	logf("deployed %s (parallelism 1, %d rows)", bid, rows)
	workers(4, 60*time.Second)
	c.waitState(bid, coordinator.JobRunning, time.Minute)
	logf("%s running", bid)

	if out, err := c.weir("jobs", "cancel", "--wait", wid); err != nil {
		t.Fatalf("cancel %s: %v\n%s", wid, err, out)
	}
	logf("%s canceled", wid)
	// 1 slot wanted: the three idle workers go, after the delay, one at a
	// time, while the bounded job still runs (4000 rows at 250/s).
	workers(1, 60*time.Second)
	if st, err := c.status(bid); err != nil || st.State != coordinator.JobRunning {
		t.Errorf("%s is %s (%v) once the workers are down to 1, want it still RUNNING (make it longer)", bid, st.State, err)
	}
	st := c.waitState(bid, coordinator.JobFinished, time.Minute)
	logf("%s finished", bid)
	if len(st.Recoveries) != 0 {
		t.Errorf("%s recovered %d times while workers were stopped, want 0: %+v", bid, len(st.Recoveries), st.Recoveries)
	}
	out := readOutput(t, c.bucket, "follow/bounded/")
	if len(out) != rows {
		t.Errorf("%s wrote %d rows, want %d", bid, len(out), rows)
	}
	// The supervisor's children have ids of their own; its log names
	// every decision.
	if len(ids) != 1 || !strings.Contains(ids[0], "-up") {
		t.Errorf("worker ids %v, want one <host>-up<pid>-<n>", ids)
	}
	log, err := os.ReadFile(c.logOf("up"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"starting workers", "stopping worker", "worker stopped"} {
		if n := strings.Count(string(log), want); n == 0 {
			t.Errorf("weir up log has no %q", want)
		}
	}
}
