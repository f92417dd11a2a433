package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
)

// requestOps are the op labels of weir_store_requests_total.
var requestOps = []string{"put", "get", "head", "list", "delete", "copy", "other"}

// requestsBenchCheckpoints is how many completed checkpoints a measured
// window spans.
const requestsBenchCheckpoints = 20

// requestsSpec is a keyed job on an unbounded throttled source: datagen
// (5,000 events/s, event time at wall-clock pace) -> keyBy zone (1,000
// keys) -> 10 s tumbling count/sum -> files sink, at parallelism p, with
// checkpoints every second if checkpoints.
func requestsSpec(p int, checkpoints bool) string {
	ckpt := ""
	if checkpoints {
		ckpt = "checkpoint: {interval: 1s}\n"
	}
	return fmt.Sprintf(`job: requests
parallelism: %d
%ssources:
  - name: rides
    type: datagen
    rate: 5000
    schema: {ride_id: int64, zone: string, fare: float64, ts: timestamp_ms}
    eventTime: {column: ts, maxOutOfOrderness: 2s}
    datagen:
      seed: 1
      outOfOrderness: 2s
      fields:
        zone: {cardinality: 1000}
        fare: {min: 5, max: 80}
operators:
  - name: stats
    input: rides
    keyBy: [zone]
    window: {type: tumbling, size: 10s}
    aggregate: {n: count(), total: sum(fare)}
sinks:
  - {name: out, input: stats, type: files, path: requests/out/, format: jsonl}
`, p, ckpt)
}

// requestWindow is what one measured run saw.
type requestWindow struct {
	coord       map[string]float64 // the coordinator's requests by op
	workers     map[string]float64 // every worker's, summed, by op
	checkpoints int                // completed within the window
	subtasks    int
	workerProcs int // worker processes scraped
	elapsed     time.Duration
}

// BenchmarkCheckpointRequests counts the object-store requests a
// checkpoint costs, on a real cluster (coordinator and two workers of 4
// slots, each a weir process; Redis; MinIO): the keyed job of
// requestsSpec at parallelism 2 and 4 (4 and 8 subtasks on the same two
// workers). It scrapes weir_store_requests_total from every process
// before and after a window of 20 completed checkpoints (1 s interval),
// then runs the same job without checkpoints for as long and subtracts
// that (scaled to the same time), so the sink's and the coordinator's
// own requests are not charged to checkpoints. The coordinator's requests
// are the per-job figure, the workers' divided by the subtasks the
// per-subtask one; both per completed checkpoint.
//
//	go test -run '^$' -bench CheckpointRequests -benchtime 1x ./integration/
func BenchmarkCheckpointRequests(b *testing.B) {
	c := startCluster(b, 0, 0)
	urls := map[string]string{"coordinator": c.api + "/metrics"}
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("worker-m%d", i)
		addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b))
		c.start(name, "worker", "--slots", "4", "--id", name, "--metrics-addr", addr)
		urls[name] = "http://" + addr + "/metrics"
	}
	poll.UntilNil(b, 30*time.Second, "2 workers", func() error {
		var ws []struct{}
		if err := getJSON(c.api+"/api/v1/workers", &ws); err != nil {
			return err
		}
		if len(ws) < 2 {
			return fmt.Errorf("%d workers", len(ws))
		}
		return nil
	})
	for _, p := range []int{2, 4} {
		b.Run(fmt.Sprintf("p%d", p), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				on := c.requestWindow(b, urls, requestsSpec(p, true), 0)
				off := c.requestWindow(b, urls, requestsSpec(p, false), on.elapsed)
				reportRequests(b, p, on, off)
			}
		})
	}
}

// requestWindow deploys src, waits until it runs (with checkpoints: until
// two completed), scrapes every process, waits for 20 more completed
// checkpoints (or, for d > 0, for d), scrapes again and cancels the job.
func (c *cluster) requestWindow(b *testing.B, urls map[string]string, src string, d time.Duration) requestWindow {
	b.Helper()
	path := filepath.Join(b.TempDir(), "requests.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	// Not c.deploy: it fails c.t, the parent benchmark, from this one's
	// goroutine.
	out, err := c.weir("deploy", path)
	if err != nil {
		b.Fatal(err)
	}
	id := strings.TrimSpace(out)
	status := func() coordinator.JobStatus {
		var st coordinator.JobStatus
		if err := getJSON(c.api+"/api/v1/jobs/"+id, &st); err != nil {
			b.Fatal(err)
		}
		return st
	}
	completed := func(st coordinator.JobStatus) int {
		if st.Checkpoints == nil {
			return 0
		}
		return st.Checkpoints.Completed
	}
	poll.UntilNil(b, time.Minute, "job "+id+" running", func() error {
		st := status()
		if st.State != coordinator.JobRunning {
			return fmt.Errorf("state %s", st.State)
		}
		if d == 0 && completed(st) < 2 {
			return fmt.Errorf("%d checkpoints", completed(st))
		}
		if d > 0 && st.Vertices != nil {
			for _, v := range st.Vertices {
				for _, tk := range v.Tasks {
					if tk.State != "RUNNING" {
						return fmt.Errorf("%s[%d] %s", v.Name, tk.Subtask, tk.State)
					}
				}
			}
		}
		return nil
	})
	before := scrapeRequests(b, urls)
	st0 := status()
	start := time.Now()
	var st1 coordinator.JobStatus
	if d == 0 {
		poll.UntilNil(b, 3*time.Minute, fmt.Sprintf("%d more checkpoints", requestsBenchCheckpoints), func() error {
			st1 = status()
			if n := completed(st1) - completed(st0); n < requestsBenchCheckpoints {
				return fmt.Errorf("%d checkpoints", n)
			}
			return nil
		})
	} else {
		// Poll the status as often as the checkpointed run did, so
		// whatever the API costs is the same in both.
		poll.UntilNil(b, d+time.Minute, "the checkpointed run's duration", func() error {
			st1 = status()
			if time.Since(start) < d {
				return fmt.Errorf("%s of %s", time.Since(start).Round(time.Millisecond), d)
			}
			return nil
		})
	}
	elapsed := time.Since(start)
	after := scrapeRequests(b, urls)
	if st1.State != coordinator.JobRunning {
		b.Fatalf("job %s %s during the window: %s", id, st1.State, st1.Error)
	}
	if st1.Attempt != st0.Attempt {
		b.Fatalf("job %s restarted during the window (attempt %d -> %d)", id, st0.Attempt, st1.Attempt)
	}
	w := requestWindow{coord: map[string]float64{}, workers: map[string]float64{}, checkpoints: completed(st1) - completed(st0), elapsed: elapsed}
	for _, v := range st1.Vertices {
		w.subtasks += v.Parallelism
	}
	w.workerProcs = len(after) - 1
	for proc, ops := range after {
		for op, n := range ops {
			delta := n - before[proc][op]
			if proc == "coordinator" {
				w.coord[op] += delta
			} else {
				w.workers[op] += delta
			}
		}
	}
	if out, err := c.weir("jobs", "cancel", "--wait", id); err != nil {
		b.Fatalf("cancel: %v\n%s", err, out)
	}
	return w
}

// scrapeRequests reads weir_store_requests_total by op from each process.
func scrapeRequests(b *testing.B, urls map[string]string) map[string]map[string]float64 {
	b.Helper()
	out := map[string]map[string]float64{}
	for proc, url := range urls {
		ops := map[string]float64{}
		for _, op := range requestOps {
			ss := of(scrape(b, url), "weir_store_requests_total", `op="`+op+`"`)
			if len(ss) != 1 {
				b.Fatalf("%s: %d weir_store_requests_total{op=%q} series, want 1", proc, len(ss), op)
			}
			ops[op] = ss[0].value
		}
		out[proc] = ops
	}
	return out
}

// reportRequests reports requests per completed checkpoint by op, per job
// (the coordinator's) and per subtask (the workers', divided by the
// subtasks), with the checkpoint-off run's requests over the same time
// subtracted, and logs the raw counts the figures come from.
func reportRequests(b *testing.B, p int, on, off requestWindow) {
	b.Helper()
	if on.checkpoints == 0 {
		b.Fatal("no checkpoint completed in the window")
	}
	scale := on.elapsed.Seconds() / off.elapsed.Seconds()
	n := float64(on.checkpoints)
	var lines []string
	lines = append(lines, fmt.Sprintf("p=%d: %d subtasks, %d checkpoints in %.1f s (off: %.1f s, scaled by %.3f)", p, on.subtasks, on.checkpoints, on.elapsed.Seconds(), off.elapsed.Seconds(), scale))
	lines = append(lines, "op       coord-on coord-off  workers-on workers-off   job/ckpt  subtask/ckpt")
	var jobTotal, subTotal float64
	for _, op := range requestOps {
		job := (on.coord[op] - off.coord[op]*scale) / n
		sub := (on.workers[op] - off.workers[op]*scale) / n / float64(on.subtasks)
		jobTotal += job
		subTotal += sub
		lines = append(lines, fmt.Sprintf("%-8s %8.0f %9.0f  %10.0f %11.0f  %9.2f  %12.2f", op, on.coord[op], off.coord[op], on.workers[op], off.workers[op], job, sub))
		if on.coord[op]+off.coord[op]+on.workers[op]+off.workers[op] > 0 {
			b.ReportMetric(job, "job-"+op+"/ckpt")
			b.ReportMetric(sub, "subtask-"+op+"/ckpt")
		}
	}
	lines = append(lines, fmt.Sprintf("all      %43s  %9.2f  %12.2f", "", jobTotal, subTotal))
	b.ReportMetric(jobTotal, "job-all/ckpt")
	b.ReportMetric(subTotal, "subtask-all/ckpt")
	// The state objects: per worker, what grows with workers.
	perWorker := (on.workers["put"] - off.workers["put"]*scale) / n / float64(on.workerProcs)
	b.ReportMetric(perWorker, "worker-put/ckpt")
	b.ReportMetric(n, "checkpoints")
	b.Log("\n" + strings.Join(slices.Clip(lines), "\n"))
}
