package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// isolated is a weir process in a network namespace of the test's own,
// reaching Redis and MinIO only through the test's links (loopback
// addresses on both sides), so the test can cut its path to Redis while
// its path to MinIO stays up.
type isolated struct {
	ns           *testenv.Netns
	redis, minio *testenv.Link
}

func (c *cluster) isolate(t *testing.T) *isolated {
	t.Helper()
	ns := testenv.NewNetns(t)
	return &isolated{ns: ns,
		redis: testenv.NewLink(t, ns, nil, c.redis.Addr),
		minio: testenv.NewLink(t, ns, nil, strings.TrimPrefix(c.minio.Endpoint, "http://"))}
}

// start runs weir with args in the namespace, as a named process of c.
func (iso *isolated) start(c *cluster, name string, args ...string) {
	c.t.Helper()
	cmd := iso.ns.Command(weirBin, args...)
	for _, kv := range c.env {
		switch {
		case strings.HasPrefix(kv, "WEIR_REDIS_ADDR="):
			kv = "WEIR_REDIS_ADDR=" + iso.redis.Addr()
		case strings.HasPrefix(kv, "WEIR_S3_ENDPOINT="):
			kv = "WEIR_S3_ENDPOINT=http://" + iso.minio.Addr()
		case strings.HasPrefix(kv, "AWS_ENDPOINT_URL="):
			kv = "AWS_ENDPOINT_URL=http://" + iso.minio.Addr()
		}
		cmd.Env = append(cmd.Env, kv)
	}
	c.startCmd(name, cmd)
}

// TestPartitionedLeader runs the leading coordinator in a network
// namespace and cuts its path to Redis while it still reaches MinIO: the
// standby takes over when the lease lapses, the cut-off leader steps down
// on its own clock and writes nothing with its epoch after its lease
// lapsed (no manifest, no status; sink commits would show in the output),
// the output is exact; healed, it rejoins as a standby.
func TestPartitionedLeader(t *testing.T) {
	h := startHACluster(t, 3, 3)
	iso := h.isolate(t)
	// The namespace's API, reached from outside through a link too.
	const nsAPI = "127.0.0.1:8081" // the namespace is empty: any port is free
	api := testenv.NewLink(t, nil, iso.ns, nsAPI)
	h.apis["coordinator-ns"] = "http://" + api.Addr()
	iso.start(h.cluster, "coordinator-ns", "coordinator", "--listen", nsAPI, "--id", "coordinator-ns",
		"--advertise", h.apis["coordinator-ns"], "--lease-ttl", haLeaseTTL)
	poll.UntilNil(t, 30*time.Second, "coordinator-ns a standby", func() error {
		_, err := h.role("coordinator-ns")
		return err
	})
	// Make the namespaced coordinator the leader: kill the others, then
	// start them again as standbys.
	h.kill("coordinator")
	h.kill("coordinator-2")
	h.waitLeader(t, "coordinator-ns")
	h.startCoordinator("coordinator")
	h.startCoordinator("coordinator-2")
	h.cluster.api = strings.Join([]string{h.apis["coordinator"], h.apis["coordinator-2"], h.apis["coordinator-ns"]}, ",")

	var oldEpoch int64
	var lapsed time.Time
	chaosRun(t, h.cluster, func(ctx context.Context, id string) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(6 * time.Second):
		}
		_, epoch, err := h.leader()
		if err != nil {
			t.Errorf("before the cut: %v", err)
			return
		}
		oldEpoch = epoch
		start := time.Now()
		t.Logf("cut coordinator-ns (epoch %d) from Redis; MinIO stays reachable", epoch)
		iso.redis.Cut()
		// Its lease lapses at most a TTL after the cut: from then on
		// nothing of its epoch may be written.
		ttl, _ := time.ParseDuration(haLeaseTTL)
		lapsed = start.Add(ttl)
		lead, resume, newEpoch := h.takeover(t, id, "coordinator-ns", start)
		t.Logf("takeover: epoch %d leads after %v, checkpoints complete again after %v", newEpoch, lead.Round(time.Millisecond), resume.Round(time.Millisecond))
		info, err := h.role("coordinator-ns")
		if err != nil || info.Role != "standby" {
			t.Errorf("the cut-off coordinator says %+v (%v) after the takeover, want standby", info, err)
		}
		time.Sleep(3 * time.Second)
		t.Log("heal")
		iso.redis.Heal()
		poll.UntilNil(t, 30*time.Second, "coordinator-ns knows the new leader", func() error {
			info, err := h.role("coordinator-ns")
			if err != nil {
				return err
			}
			if info.Role != "standby" || info.Leader == nil || info.Leader.Epoch != newEpoch {
				return fmt.Errorf("it says %+v", info)
			}
			return nil
		})
	})
	if oldEpoch == 0 {
		t.Fatal("the link was never cut")
	}
	h.checkNothingAfter(t, oldEpoch, lapsed)
	if b, err := os.ReadFile(h.logOf("coordinator-ns")); err != nil || !strings.Contains(string(b), "stepping down") {
		t.Errorf("the cut-off coordinator's log does not say it stepped down (%v)", err)
	}
}

// TestPartitionedWorker cuts a worker running tasks off from Redis (it
// still reaches MinIO): after its heartbeat timeout it is declared lost,
// its tasks run elsewhere, the output is exact, and once healed it
// registers again and is offered new tasks.
func TestPartitionedWorker(t *testing.T) {
	c := startCluster(t, 2, 3)
	iso := c.isolate(t)
	iso.start(c, "worker-ns", "worker", "--slots", "3", "--id", "worker-ns", "--heartbeat-timeout", "3s")
	c.waitWorkers(t, 3)
	var cut bool
	st := chaosRun(t, c, func(ctx context.Context, id string) {
		poll.UntilNil(t, 30*time.Second, "worker-ns runs tasks", func() error {
			for _, w := range c.workersWithTasks(id) {
				if w == "worker-ns" {
					return nil
				}
			}
			return fmt.Errorf("not yet")
		})
		select {
		case <-ctx.Done():
			return
		case <-time.After(4 * time.Second):
		}
		t.Log("cut worker-ns from Redis; MinIO stays reachable")
		start := time.Now()
		iso.redis.Cut()
		cut = true
		poll.UntilNil(t, 30*time.Second, "worker-ns declared lost", func() error {
			ws, err := c.workers()
			if err != nil {
				return err
			}
			for _, w := range ws {
				if w == "worker-ns" {
					return fmt.Errorf("still listed")
				}
			}
			return nil
		})
		t.Logf("worker-ns declared lost %v after the cut (heartbeat timeout 3s)", time.Since(start).Round(time.Millisecond))
		time.Sleep(3 * time.Second)
		t.Log("heal")
		iso.redis.Heal()
		poll.UntilNil(t, 30*time.Second, "worker-ns registered again", func() error {
			ws, err := c.workers()
			if err != nil {
				return err
			}
			for _, w := range ws {
				if w == "worker-ns" {
					return nil
				}
			}
			return fmt.Errorf("not listed")
		})
	})
	if !cut {
		t.Fatal("the link was never cut")
	}
	if len(st.Recoveries) == 0 {
		t.Errorf("no recovery after the worker was cut off")
	}
	// Served new tasks: a second job runs on all three workers.
	id := c.deploy(chaosSpec)
	poll.UntilNil(t, time.Minute, "worker-ns runs tasks of a new job", func() error {
		for _, w := range c.workersWithTasks(id) {
			if w == "worker-ns" {
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
	if _, err := c.weir("jobs", "cancel", id); err != nil {
		t.Fatal(err)
	}
}

// waitLeader waits until coordinator want leads.
func (h *haCluster) waitLeader(t *testing.T, want string) {
	t.Helper()
	poll.UntilNil(t, 30*time.Second, want+" leads", func() error {
		n, _, err := h.leader()
		if err != nil || n != want {
			return fmt.Errorf("leader %q: %v", n, err)
		}
		return nil
	})
}

// checkNothingAfter fails the test for a manifest or status of epoch
// written after the given time.
func (c *cluster) checkNothingAfter(t *testing.T, epoch int64, after time.Time) {
	t.Helper()
	ctx := context.Background()
	objs, err := c.bucket.List(ctx, layout.JobsPrefix)
	if err != nil {
		t.Fatal(err)
	}
	suffix := strings.TrimPrefix(layout.StatusKeyAt("x", epoch), layout.JobPrefix("x"))
	for _, o := range objs {
		if job, _, ok := layout.ParseManifestKey(o.Key); ok {
			raw, err := c.bucket.Get(ctx, o.Key)
			if err != nil {
				continue // collected meanwhile
			}
			m, err := manifest.Decode(raw)
			if err != nil {
				t.Errorf("%s: %v", o.Key, err)
				continue
			}
			if m.Epoch == epoch && o.Modified.After(after) {
				t.Errorf("job %s: manifest %d of the deposed epoch %d written at %v, after its lease lapsed at %v", job, m.Checkpoint, epoch, o.Modified, after)
			}
		}
		if strings.HasSuffix(o.Key, suffix) && o.Modified.After(after) {
			t.Errorf("status %s of the deposed epoch %d written at %v, after its lease lapsed at %v", o.Key, epoch, o.Modified, after)
		}
	}
}

// logOf is the log file of a named process (running or not).
func (c *cluster) logOf(name string) string { return c.logDir + "/" + name + ".log" }

// workers lists the registered workers' ids.
func (c *cluster) workers() ([]string, error) {
	var ws []control.WorkerInfo
	base, _, _ := strings.Cut(c.api, ",")
	if err := getJSON(base+"/api/v1/workers", &ws); err != nil {
		return nil, err
	}
	var out []string
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out, nil
}

// waitWorkers waits until n workers are registered.
func (c *cluster) waitWorkers(t testing.TB, n int) {
	t.Helper()
	poll.UntilNil(t, 30*time.Second, fmt.Sprintf("%d workers", n), func() error {
		ws, err := c.workers()
		if err != nil {
			return err
		}
		if len(ws) < n {
			return fmt.Errorf("%d workers", len(ws))
		}
		return nil
	})
}
