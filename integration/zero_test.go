package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
)

// TestScaleToZeroWorkersAndBack runs `weir up --min-workers 0
// --max-workers 2` and a job on a redis stream with scaleToZero: after
// its input stops the job is SUSPENDED and the last worker stopped; new
// entries wake it, a worker is started for it, and the output holds every
// entry once. It logs the time from the entries' arrival to their first
// output (BenchmarkWakeFromZero measures it without the race detector).
func TestScaleToZeroWorkersAndBack(t *testing.T) {
	t.Parallel() // checks exactness; the latency is logged, not bounded tightly
	w := wakeFromZero(t, 2)
	for i, d := range w {
		t.Logf("wake %d: %s", i+1, d)
	}
}

// BenchmarkWakeFromZero is the scale-to-zero wake-up of
// TestScaleToZeroWorkersAndBack on a normal build: entries arrive with no
// worker running; reported is the time until their first output row.
func BenchmarkWakeFromZero(b *testing.B) {
	for range b.N {
		for i, w := range wakeFromZero(b, 3) {
			b.Logf("wake %d: %s", i+1, w)
			b.ReportMetric(w.firstOutput.Seconds(), fmt.Sprintf("s-to-output-%d", i+1))
		}
	}
}

// wake is one wake-up's timeline, from the entries' arrival.
type wake struct {
	running, worker, firstOutput time.Duration
}

func (w wake) String() string {
	return fmt.Sprintf("entries added -> a worker registered %v, job RUNNING %v, first output %v",
		w.worker.Round(10*time.Millisecond), w.running.Round(10*time.Millisecond), w.firstOutput.Round(10*time.Millisecond))
}

// wakeFromZero suspends and wakes a job cycles times with no worker in
// between, checks the output exactly, and returns each wake's timeline.
func wakeFromZero(tb testing.TB, cycles int) []wake {
	c, port := newCluster(tb, nil, "")
	tb.Cleanup(c.stopAll)
	c.start("up", "up", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--min-workers", "0", "--max-workers", "2", "--slots", "2", "--scale-down-delay", "1s")
	rdb := goredis.NewClient(&goredis.Options{Addr: c.redis.Addr})
	defer rdb.Close()
	ctx := context.Background()
	sent := 0
	add := func(n int) {
		tb.Helper()
		pipe := rdb.Pipeline()
		for range n {
			pipe.XAdd(ctx, &goredis.XAddArgs{Stream: "zero-in", Values: map[string]any{"data": fmt.Sprintf(`{"id":%d}`, sent)}})
			sent++
		}
		if _, err := pipe.Exec(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	rows := func() map[int64]int {
		seen := map[int64]int{}
		for _, r := range readOutput(tb, c.bucket, "zero/") {
			id, _ := r["id"].(int64)
			seen[id]++
		}
		return seen
	}
	noWorkers := func(what string) {
		tb.Helper()
		poll.UntilNil(tb, time.Minute, "no worker "+what, func() error {
			ws, err := c.workers()
			if err != nil || len(ws) > 0 {
				return fmt.Errorf("workers %v %v", ws, err)
			}
			return nil
		})
	}
	noWorkers("before a job is deployed")
	add(100)
	id := c.deploy(writeSpec(tb, `
job: zero
checkpoint: {interval: 300ms, timeout: 10s}
autoscale: {enabled: true, window: 2s, stabilization: 5s, scaleToZero: 3s}
sources:
  - {name: in, type: redis, streams: [zero-in], schema: {id: int64}}
sinks:
  - {name: out, input: in, type: files, path: zero/, format: jsonl}
`))
	var wakes []wake
	for cycle := range cycles + 1 {
		if cycle > 0 {
			// The entries arrive with no worker running: time what follows.
			add(50)
			start := time.Now()
			var w wake
			for deadline := start.Add(2 * time.Minute); w.firstOutput == 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					tb.Fatalf("wake %d: no output 2 minutes after the entries arrived (%+v)", cycle, w)
				}
				if w.worker == 0 {
					if ws, err := c.workers(); err == nil && len(ws) > 0 {
						w.worker = time.Since(start)
					}
				}
				if w.running == 0 {
					if st, err := c.status(id); err == nil && st.State == coordinator.JobRunning {
						w.running = time.Since(start)
					}
				}
				if len(rows()) > sent-50 {
					w.firstOutput = time.Since(start)
				}
			}
			wakes = append(wakes, w)
		}
		poll.UntilNil(tb, time.Minute, fmt.Sprintf("all %d entries in the output", sent), func() error {
			if n := len(rows()); n < sent {
				return fmt.Errorf("%d rows", n)
			}
			return nil
		})
		if cycle == cycles {
			break
		}
		var st coordinator.JobStatus
		for deadline := time.Now().Add(time.Minute); st.State != coordinator.JobSuspended; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				out, _ := c.weir("jobs", "scaling", id)
				tb.Fatalf("cycle %d: not SUSPENDED a minute after its input stopped: %s\n%s", cycle, st.State, out)
			}
			st, _ = c.status(id)
		}
		tb.Logf("cycle %d: %s", cycle, st.Message)
		noWorkers("while the job is suspended")
	}
	if out, err := c.weir("jobs", "cancel", "--wait", id); err != nil {
		tb.Fatalf("cancel: %v\n%s", err, out)
	}
	seen := rows()
	for i := range int64(sent) {
		if seen[i] != 1 {
			tb.Errorf("entry %d in the output %d times", i, seen[i])
		}
	}
	if len(seen) != sent {
		tb.Errorf("%d distinct rows, want %d", len(seen), sent)
	}
	return wakes
}
