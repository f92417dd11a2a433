package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
)

// weir jobs scale sends NAME=N as a JSON object and prints what changed;
// a malformed NAME=N is a usage error; weir jobs scaling prints the
// autoscaler's history as a table, and -o json as it is.
func TestScaleCommands(t *testing.T) {
	var got map[string]int
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/jobs/j-1/scale", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &got); err != nil {
			t.Errorf("scale body %q: %v", body, err)
		}
		_ = json.NewEncoder(w).Encode(coordinator.ScaleResponse{Job: "j-1", Before: map[string]int{"win": 2, "src": 1}, After: map[string]int{"win": 4, "src": 1}, Attempt: 2})
	})
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mux.HandleFunc("GET /api/v1/jobs/j-1", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(coordinator.JobStatus{ID: "j-1", State: coordinator.JobRunning, Attempt: 2, Scaling: []coordinator.ScalingDecision{
			{Time: at, Kind: "none", Vertex: "win", From: 2, To: 2, Reason: "collecting metrics: 1s of the 20s window"},
			{Time: at.Add(25 * time.Second), Kind: "scale", Vertex: "win", From: 2, To: 4, Reason: "falls behind: must sustain 4727/s", Busy: 1,
				TrueRate: 1858, InputRate: 4000, RequiredRate: 4727, Backlog: 6646, RestartSeconds: 5},
		}})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	out, _ := weir(t, "jobs", "scale", "j-1", "win=4", "--coordinator", srv.URL)
	if got["win"] != 4 || len(got) != 1 || out != "win 2 -> 4\n" {
		t.Errorf("jobs scale j-1 win=4: sent %v, printed %q", got, out)
	}
	if _, stderr, code := execWeir("jobs", "scale", "j-1", "win:4", "--coordinator", srv.URL); code != 2 || !strings.Contains(stderr, `"win:4": want NAME=N`) {
		t.Errorf("a malformed NAME=N: exit %d, %q", code, stderr)
	}
	out, _ = weir(t, "jobs", "scaling", "j-1", "--coordinator", srv.URL)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "TRUE RATE/s") || !strings.Contains(lines[1], "stay 2") ||
		!strings.Contains(lines[2], "2 -> 4") || !strings.Contains(lines[2], "1858") || !strings.Contains(lines[2], "falls behind") {
		t.Errorf("jobs scaling:\n%s", out)
	}
	out, _ = weir(t, "jobs", "scaling", "j-1", "-o", "json", "--coordinator", srv.URL)
	var ds []coordinator.ScalingDecision
	if err := json.Unmarshal([]byte(out), &ds); err != nil || len(ds) != 2 || ds[1].RequiredRate != 4727 {
		t.Errorf("jobs scaling -o json: %v\n%s", err, out)
	}
}

// weir jobs scale --wait asks again while the coordinator refuses the
// rescale for the job's state now (409 with retryLater: it restarts),
// and says so once; without --wait that refusal is the command's error,
// and a refusal waiting would not change ends even a waiting command.
func TestScaleWaitsOutARestart(t *testing.T) {
	var posts atomic.Int32
	refusals := int32(3)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/jobs/j-1/scale", func(w http.ResponseWriter, r *http.Request) {
		if posts.Add(1) <= refusals {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(coordinator.APIError{Error: "rescale j-1: the job is RESTARTING; try again when it runs: coordinator: rescale refused", RetryLater: true})
			return
		}
		_ = json.NewEncoder(w).Encode(coordinator.ScaleResponse{Job: "j-1", Before: map[string]int{"win": 2}, After: map[string]int{"win": 3}, Attempt: 4})
	})
	mux.HandleFunc("POST /api/v1/jobs/j-2/scale", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(coordinator.APIError{Error: "rescale j-2: nope: no vertex, operator or sink of that name (vertices: win): coordinator: rescale refused"})
	})
	mux.HandleFunc("GET /api/v1/jobs/j-1", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(coordinator.JobStatus{ID: "j-1", State: coordinator.JobRunning, Attempt: 4})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	_, stderr, code := execWeir("jobs", "scale", "j-1", "win=3", "--coordinator", srv.URL)
	if code != 1 || !strings.Contains(stderr, "RESTARTING; try again when it runs") || posts.Load() != 1 {
		t.Errorf("without --wait: exit %d after %d requests, %q; want exit 1 after one", code, posts.Load(), stderr)
	}
	posts.Store(0)
	out, stderr := weir(t, "jobs", "scale", "j-1", "win=3", "--wait", "--coordinator", srv.URL)
	if posts.Load() != refusals+1 || out != "win 2 -> 3\n" || strings.Count(stderr, "the rescale waits for the job to run") != 1 {
		t.Errorf("with --wait: %d requests, stdout %q, stderr %q; want %d requests and the wait said once", posts.Load(), out, stderr, refusals+1)
	}
	_, stderr, code = execWeir("jobs", "scale", "j-2", "nope=3", "--wait", "--coordinator", srv.URL)
	if code != 1 || !strings.Contains(stderr, "nope: no vertex") || strings.Contains(stderr, "waits") {
		t.Errorf("an unknown name with --wait: exit %d, %q; want exit 1 at once", code, stderr)
	}
}

// weir jobs stop --wait asks again while the job restarts, then waits
// for it to finish.
func TestStopWaitsOutARestart(t *testing.T) {
	var posts atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/jobs/j-3/stop", func(w http.ResponseWriter, r *http.Request) {
		if posts.Add(1) <= 2 {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(coordinator.APIError{Error: "stop j-3: the job is restarting; try again when it runs", RetryLater: true})
			return
		}
		_ = json.NewEncoder(w).Encode(coordinator.JobStatus{ID: "j-3", State: coordinator.JobRunning})
	})
	mux.HandleFunc("GET /api/v1/jobs/j-3", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(coordinator.JobStatus{ID: "j-3", State: coordinator.JobFinished})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	out, stderr := weir(t, "jobs", "stop", "j-3", "--wait", "--coordinator", srv.URL)
	if posts.Load() != 3 || !strings.Contains(out, "job j-3 FINISHED") || strings.Count(stderr, "the stop waits for the job to run") != 1 {
		t.Errorf("stop --wait: %d requests, stdout %q, stderr %q; want 3 requests, the wait said once, FINISHED", posts.Load(), out, stderr)
	}
}
