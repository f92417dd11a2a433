package integration

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
)

// sample is one line of a Prometheus text exposition.
type sample struct {
	name   string
	labels string // as written, {a="b",...}
	value  float64
}

// scrape reads url's metrics.
func scrape(t testing.TB, url string) []sample {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape %s: line %q: %v", url, line, err)
		}
		name, labels := line[:i], ""
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name, labels = name[:j], name[j:]
		}
		out = append(out, sample{name, labels, v})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// of returns the samples of family name whose labels contain every part.
func of(samples []sample, name string, parts ...string) []sample {
	var out []sample
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(s.labels, p) {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

func sum(ss []sample) float64 {
	var v float64
	for _, s := range ss {
		v += s.value
	}
	return v
}

// TestMetricsWhileAJobRuns scrapes a worker (--metrics-addr) and the
// coordinator while the chaos job runs: every task family is there with
// job, vertex and subtask labels and moves between two scrapes, the
// job-level families (checkpoints, restarts) too; once the job is
// canceled, none of its series is left.
func TestMetricsWhileAJobRuns(t *testing.T) {
	c := startCluster(t, 0, 0)
	port := testenv.FreePort(t)
	workerMetrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	c.start("worker-m", "worker", "--slots", "16", "--id", "worker-m", "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port))
	c.waitWorkers(t, 1)
	id := c.deploy(chaosSpec)
	c.waitState(id, coordinator.JobRunning, time.Minute)
	job := `job="` + id + `"`

	var first []sample
	poll.UntilNil(t, 30*time.Second, "task series with a watermark and records", func() error {
		first = scrape(t, workerMetrics)
		if len(of(first, "weir_task_input_watermark_timestamp_seconds", job, `vertex="tumbling"`)) == 0 || sum(of(first, "weir_task_records_in_total", job)) == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	// Each family must move past its first value. On a loaded machine
	// (CI runs two race-built packages beside the job's 16 tasks) the
	// whole job can pause for seconds, so the test waits for the move
	// rather than asking for it within one fixed gap.
	moving := []string{"weir_task_records_in_total", "weir_task_records_out_total", "weir_task_busy_seconds_total",
		"weir_task_idle_seconds_total", "weir_task_input_watermark_timestamp_seconds", "weir_task_channel_entries_total",
		"weir_task_channel_bytes_total"}
	var second []sample
	poll.UntilNil(t, 30*time.Second, "every task family to move past its first scrape", func() error {
		time.Sleep(500 * time.Millisecond)
		second = scrape(t, workerMetrics)
		for _, fam := range moving {
			if a, b := sum(of(first, fam, job)), sum(of(second, fam, job)); b <= a {
				return fmt.Errorf("%s did not move: %v then %v", fam, a, b)
			}
		}
		return nil
	})
	for _, fam := range moving {
		b := of(second, fam, job)
		if len(b) == 0 {
			t.Errorf("worker: no %s series of the job", fam)
			continue
		}
		for _, s := range b {
			if !strings.Contains(s.labels, `vertex="`) || !strings.Contains(s.labels, `subtask="`) {
				t.Errorf("worker: %s%s lacks vertex or subtask labels", s.name, s.labels)
			}
		}
	}
	for _, fam := range []string{"weir_task_backpressured_seconds_total", "weir_task_late_records_total", "weir_task_dead_letters_total", "weir_task_checkpoints_total"} {
		if len(of(second, fam, job)) == 0 {
			t.Errorf("worker: no %s series of the job", fam)
		}
	}
	// Per channel: the consumer vertex and subtask, from every rides
	// subtask to each of the 3 tumbling subtasks.
	for _, fam := range []string{"weir_task_channel_credit_waits_total", "weir_task_channel_credit_wait_seconds_total", "weir_task_channel_entries_total"} {
		if n := len(of(second, fam, job, `vertex="rides`, `to_vertex="tumbling"`)); n != 2*3 {
			t.Errorf("worker: %d %s series from rides to tumbling, want 6 (2 producers x 3 consumers)", n, fam)
		}
	}
	// State bytes once a checkpoint holds the windows' state; the
	// throttled source's backlog (events behind its rate) is there.
	poll.UntilNil(t, 30*time.Second, "state bytes of the tumbling windows", func() error {
		if v := sum(of(scrape(t, workerMetrics), "weir_task_state_bytes", job, `vertex="tumbling"`)); v <= 0 {
			return fmt.Errorf("weir_task_state_bytes of tumbling: %v", v)
		}
		return nil
	})
	if n := len(of(second, "weir_task_source_backlog_records", job, `vertex="rides`)); n != 2 {
		t.Errorf("worker: %d weir_task_source_backlog_records series of rides, want 2", n)
	}
	if len(of(second, "weir_worker_slots", `worker="worker-m"`)) != 1 {
		t.Errorf("worker: no weir_worker_slots")
	}
	// The state files of a checkpoint go into one object: the job's
	// windows, checker and joins are more stateful subtasks than objects.
	poll.UntilNil(t, 30*time.Second, "state objects with several files each", func() error {
		s := scrape(t, workerMetrics)
		objects := sum(of(s, "weir_worker_state_objects_total", `worker="worker-m"`))
		files := sum(of(s, "weir_worker_state_files_packed_total", `worker="worker-m"`))
		if objects == 0 || files < 2*objects {
			return fmt.Errorf("%v state files in %v objects", files, objects)
		}
		return nil
	})
	// The worker's store requests: the state files it uploaded, and the
	// files sink's staged objects.
	if v := sum(of(scrape(t, workerMetrics), "weir_store_requests_total", `op="put"`)); v == 0 {
		t.Errorf("worker: weir_store_requests_total{op=\"put\"} is %v after a checkpoint", v)
	}

	coord := c.api + "/metrics"
	poll.UntilNil(t, 30*time.Second, "a completed checkpoint in the coordinator's metrics", func() error {
		s := scrape(t, coord)
		if sum(of(s, "weir_job_checkpoints_total", job, `outcome="completed"`)) == 0 || len(of(s, "weir_job_last_checkpoint_duration_seconds", job)) == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	cs := scrape(t, coord)
	for _, fam := range []string{"weir_job_restarts_total", "weir_job_last_checkpoint_state_bytes", "weir_job_last_checkpoint_completed_timestamp_seconds",
		"weir_job_dead_letters_total", "weir_job_late_records_total", "weir_vertex_records_in_total"} {
		if len(of(cs, fam, job)) == 0 {
			t.Errorf("coordinator: no %s series of the job", fam)
		}
	}
	// The coordinator's: the spec and the manifests it wrote, the
	// checkpoints it listed.
	for _, op := range []string{"put", "list"} {
		if v := sum(of(cs, "weir_store_requests_total", `op="`+op+`"`)); v == 0 {
			t.Errorf("coordinator: weir_store_requests_total{op=%q} is %v after a checkpoint", op, v)
		}
	}

	// The newest completed checkpoint, explained: the subtask that
	// acknowledged last and where its time went.
	st, err := c.status(id)
	if err != nil || st.Checkpoints == nil || st.Checkpoints.Latest == 0 {
		t.Fatalf("status: %+v %v", st.Checkpoints, err)
	}
	out, err := c.weir("checkpoints", "explain", id, fmt.Sprint(st.Checkpoints.Latest))
	if err != nil || !strings.Contains(out, fmt.Sprintf("checkpoint %d COMPLETED", st.Checkpoints.Latest)) ||
		!strings.Contains(out, "Last to acknowledge: ") || !strings.Contains(out, "The longest part: ") || !strings.Contains(out, "ACKED AFTER") {
		t.Errorf("checkpoints explain: %v\n%s", err, out)
	}
	var named bool
	for _, v := range st.Vertices {
		named = named || strings.Contains(out, "Last to acknowledge: "+v.Name+"[")
	}
	if !named {
		t.Errorf("checkpoints explain names no subtask of the job:\n%s", out)
	}
	if out, err := c.weir("jobs", "cancel", "--wait", id); err != nil {
		t.Fatalf("cancel: %v\n%s", err, out)
	}
	poll.UntilNil(t, 20*time.Second, "the canceled job's series gone", func() error {
		for _, s := range append(scrape(t, workerMetrics), scrape(t, coord)...) {
			if strings.Contains(s.labels, job) {
				return fmt.Errorf("still there: %s%s", s.name, s.labels)
			}
		}
		return nil
	})
}
