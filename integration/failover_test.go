package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
)

// haLeaseTTL is the coordinators' lease in the failover tests: short, so
// that a paused leader is replaced within seconds.
const haLeaseTTL = "2s"

// haCluster is a cluster with two coordinators, "coordinator" and
// "coordinator-2", each with its own API; the CLI is given both.
type haCluster struct {
	*cluster
	apis map[string]string // coordinator name -> API URL
}

func startHACluster(t *testing.T, workers, slots int) *haCluster {
	t.Helper()
	c := startClusterOn(t, workers, slots, nil, "", "--lease-ttl", haLeaseTTL)
	h := &haCluster{cluster: c, apis: map[string]string{"coordinator": c.api}}
	port := testenv.FreePort(t)
	h.apis["coordinator-2"] = fmt.Sprintf("http://127.0.0.1:%d", port)
	h.startCoordinator("coordinator-2")
	poll.UntilNil(t, 30*time.Second, "coordinator-2 a standby", func() error {
		_, err := h.role("coordinator-2")
		return err
	})
	c.api = h.apis["coordinator"] + "," + h.apis["coordinator-2"]
	return h
}

func (h *haCluster) startCoordinator(name string) {
	h.start(name, "coordinator", "--listen", strings.TrimPrefix(h.apis[name], "http://"), "--id", name, "--lease-ttl", haLeaseTTL)
}

// quick asks one coordinator's API with a short timeout: a paused
// coordinator accepts connections but never answers.
func (h *haCluster) quick(name, path string, out any) error {
	client := &http.Client{Timeout: time.Second}
	resp, err := client.Get(h.apis[name] + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// role returns what a coordinator says it is, and the leader it knows.
func (h *haCluster) role(name string) (coordinator.LeaderInfo, error) {
	var info coordinator.LeaderInfo
	err := h.quick(name, "/api/v1/leader", &info)
	return info, err
}

// leader returns the name of the coordinator that says it leads, and its
// epoch.
func (h *haCluster) leader() (string, int64, error) {
	for name := range h.apis {
		if info, err := h.role(name); err == nil && info.Role == "leader" && info.Leader != nil {
			return name, info.Leader.Epoch, nil
		}
	}
	return "", 0, fmt.Errorf("no coordinator leads")
}

// completed is the job's completed checkpoint count as coordinator name
// reports it (-1 if unknown), and whether the job finished.
func (h *haCluster) completed(name, id string) (int, bool) {
	var st coordinator.JobStatus
	if err := h.quick(name, "/api/v1/jobs/"+id, &st); err != nil || st.Checkpoints == nil {
		return -1, false
	}
	return st.Checkpoints.Completed, st.State == coordinator.JobFinished
}

// takeover waits for the coordinator other than deposed to lead, then
// for the job's checkpoints to complete again, and returns both times
// since start.
func (h *haCluster) takeover(t *testing.T, id, deposed string, start time.Time) (lead, checkpointing time.Duration, epoch int64) {
	t.Helper()
	var next string
	poll.UntilNil(t, 30*time.Second, "a standby leads", func() error {
		for name := range h.apis {
			if name == deposed {
				continue
			}
			if info, err := h.role(name); err == nil && info.Role == "leader" && info.Leader != nil {
				next, epoch = name, info.Leader.Epoch
				return nil
			}
		}
		return fmt.Errorf("no standby leads yet")
	})
	lead = time.Since(start)
	// A new leader restarts the job from its latest checkpoint; its own
	// count starts again from what it finds.
	base, _ := h.completed(next, id)
	poll.UntilNil(t, time.Minute, "checkpoints complete again", func() error {
		n, finished := h.completed(next, id)
		if finished || n > max(base, 0) {
			return nil
		}
		base = max(base, n)
		return fmt.Errorf("completed %d", n)
	})
	return lead, time.Since(start), epoch
}

// TestCoordinatorFailover kills the leading coordinator with SIGKILL three
// times while a checkpointed windows job runs, each time restarting it as
// a standby: the other takes over, the job finishes with output equal to
// the batch recomputation, and the takeovers are reported.
func TestCoordinatorFailover(t *testing.T) {
	h := startHACluster(t, 3, 3)
	var leads, resumes []time.Duration
	chaosRun(t, h.cluster, func(ctx context.Context, id string) {
		for range 3 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
			name, epoch, err := h.leader()
			if err != nil {
				t.Errorf("before a kill: %v", err)
				return
			}
			start := time.Now()
			t.Logf("kill -9 %s (epoch %d)", name, epoch)
			h.kill(name)
			lead, resume, newEpoch := h.takeover(t, id, name, start)
			t.Logf("takeover: epoch %d leads after %v, checkpoints complete again after %v", newEpoch, lead.Round(time.Millisecond), resume.Round(time.Millisecond))
			if newEpoch <= epoch {
				t.Errorf("epoch after takeover %d, want above %d", newEpoch, epoch)
			}
			leads, resumes = append(leads, lead), append(resumes, resume)
			h.startCoordinator(name)
		}
	})
	if len(leads) < 3 {
		t.Fatalf("%d takeovers happened while the job ran, want 3", len(leads))
	}
	slices.Sort(leads)
	slices.Sort(resumes)
	t.Logf("takeovers: leading after p50 %v max %v; checkpoints again after p50 %v max %v",
		leads[1].Round(time.Millisecond), leads[2].Round(time.Millisecond), resumes[1].Round(time.Millisecond), resumes[2].Round(time.Millisecond))
	// A dead leader's named connection closes at once: a standby leads
	// within its next tries, far below the lease.
	if leads[2] > 5*time.Second {
		t.Errorf("slowest takeover %v, want a standby leading within 5s of the kill", leads[2])
	}
}

// TestCoordinatorSplitBrain pauses the leader (SIGSTOP) past its lease: a
// standby takes over; the old leader, resumed, steps down and writes
// nothing more (no manifest or status of its epoch after the takeover),
// and the output is exact.
func TestCoordinatorSplitBrain(t *testing.T) {
	h := startHACluster(t, 3, 3)
	var oldEpoch int64
	var tookOver time.Time
	var paused string
	chaosRun(t, h.cluster, func(ctx context.Context, id string) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(6 * time.Second):
		}
		name, epoch, err := h.leader()
		if err != nil {
			t.Errorf("before the pause: %v", err)
			return
		}
		paused, oldEpoch = name, epoch
		h.mu.Lock()
		p := h.procs[name]
		h.mu.Unlock()
		t.Logf("SIGSTOP %s (epoch %d)", name, epoch)
		start := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Error(err)
			return
		}
		// The API of a stopped process does not answer: look at the other.
		lead, resume, newEpoch := h.takeover(t, id, name, start)
		tookOver = start.Add(lead)
		t.Logf("takeover: epoch %d leads after %v, checkpoints complete again after %v", newEpoch, lead.Round(time.Millisecond), resume.Round(time.Millisecond))
		time.Sleep(2 * time.Second)
		t.Logf("SIGCONT %s", name)
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Error(err)
			return
		}
		poll.UntilNil(t, 20*time.Second, name+" a standby again", func() error {
			info, err := h.role(name)
			if err != nil {
				return err
			}
			if info.Role != "standby" {
				return fmt.Errorf("role %s", info.Role)
			}
			return nil
		})
	})
	if paused == "" {
		t.Fatal("the leader was never paused")
	}
	// Nothing of the old epoch was written after the takeover: its
	// manifests are older, its status objects too.
	h.checkNothingAfter(t, oldEpoch, tookOver)
	b, err := os.ReadFile(h.logOf(paused))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "stepping down") {
		t.Errorf("the resumed leader's log does not say it stepped down")
	}
}
