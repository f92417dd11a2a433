package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/integration/testenv"
)

// The chaos job on a Redis Cluster of three masters with a replica each:
// channels spread over the masters by consumer subtask, the control keys
// share one slot (weir:{ctl}:...). chaos-short.yaml is chaos.yaml with half
// the rides (about 15 s), so that each test stays near a minute and a half
// on two cores.
const clusterChaosSpec = "testdata/chaos-short.yaml"

// TestRedisClusterWorkerKills is TestChaosWorkerKills on a Redis Cluster:
// a worker running tasks is killed -9 three times while the job runs (and
// replaced); its dead connection on the control keys' master tells the
// coordinator at once, the job restarts from its latest checkpoint, and
// the output is exactly the failure-free output.
func TestRedisClusterWorkerKills(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	rc := testenv.StartRedisCluster(t, 3, 1)
	c := startClusterOnRedisCluster(t, 3, 3, rc)
	kills := 0
	st := chaosRunSpec(t, c, clusterChaosSpec, func(ctx context.Context, id string) {
		for kills < 3 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(3500 * time.Millisecond):
			}
			if victim, _ := c.killOneOf(id, 3); victim != "" {
				kills++
			}
		}
	})
	if kills < 2 {
		t.Errorf("only %d kills happened while the job ran", kills)
	}
	if len(st.Recoveries) < kills {
		t.Errorf("%d recoveries for %d kills", len(st.Recoveries), kills)
	}
}

// TestRedisClusterFailover fails every master over to its replica, one
// after another, while the chaos job runs: first the one holding the
// control keys (worker registry, inboxes, events, lease), then the others,
// which hold channels of the job. The output is exactly the failure-free
// output, whether the job rode through a failover or restarted from its
// latest checkpoint; and the workers, alive all along, stay registered.
func TestRedisClusterFailover(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	rc := testenv.StartRedisCluster(t, 3, 1)
	c := startClusterOnRedisCluster(t, 3, 3, rc)
	ctl := rc.ShardOf("weir:{ctl}:workers")
	order := []int{ctl}
	for s := range rc.Shards() {
		if s != ctl {
			order = append(order, s)
		}
	}
	done := 0
	st := chaosRunSpec(t, c, clusterChaosSpec, func(ctx context.Context, id string) {
		for _, s := range order {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2500 * time.Millisecond):
			}
			old := rc.Master(s)
			start := time.Now()
			now := rc.Failover(s)
			done++
			t.Logf("failover of shard %d: %s -> %s in %v", s, old, now, time.Since(start).Round(time.Millisecond))
		}
	})
	if done < 2 {
		t.Errorf("only %d failovers happened while the job ran", done)
	}
	var ws []json.RawMessage
	if err := getJSON(c.api+"/api/v1/workers", &ws); err != nil || len(ws) != 3 {
		t.Errorf("after the failovers the coordinator lists %d workers (%v), want the 3 that lived throughout", len(ws), err)
	}
	for _, r := range st.Recoveries {
		// Every worker lived throughout: their named connections moved
		// with the control keys' master, and none may look dead.
		if strings.Contains(r.Reason, "was lost") {
			t.Errorf("a live worker was taken for dead across a failover: recovery to attempt %d: %s", r.Attempt, r.Reason)
		}
	}
	t.Logf("%d failovers, %d recoveries", done, len(st.Recoveries))
}

// TestRedisClusterMasterCrash kills -9 the master holding channels of the
// job (not the control keys') mid-run; its replica takes over after the
// node timeout (5 s), perhaps without the last writes. Tasks on its slots
// fail meanwhile, or detect what was lost, and the job restarts from its
// latest checkpoint until the cluster is whole again: the output is
// exactly the failure-free output, and live workers are never dropped.
func TestRedisClusterMasterCrash(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	masterCrash(t, false)
}

// TestRedisClusterControlMasterCrash is TestRedisClusterMasterCrash of the
// master holding the control keys: the workers' named connections, their
// inboxes, the event stream and the coordinator's lease go down with it.
func TestRedisClusterControlMasterCrash(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	masterCrash(t, true)
}

func masterCrash(t *testing.T, control bool) {
	rc := testenv.StartRedisCluster(t, 3, 1)
	c := startClusterOnRedisCluster(t, 3, 3, rc)
	ctl := rc.ShardOf("weir:{ctl}:workers")
	victim := (ctl + 1) % rc.Shards()
	if control {
		victim = ctl
	}
	crashed := false
	st := chaosRunSpec(t, c, clusterChaosSpec, func(ctx context.Context, id string) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(4 * time.Second):
		}
		m, rep := rc.Master(victim), rc.Replica(victim)
		keys, _ := testenv.Dial(m, "KEYS", "weir:{*")
		t.Logf("kill -9 master %s of shard %d (control keys: %t), holding %d keys", m, victim, control, strings.Count(keys, "\n")+1)
		rc.Kill(m)
		crashed = true
		start := time.Now()
		rc.WaitMaster(victim, rep, 45*time.Second)
		t.Logf("replica %s leads shard %d %v after the crash", rep, victim, time.Since(start).Round(time.Millisecond))
	})
	if !crashed {
		t.Fatal("the job ended before the crash")
	}
	for _, r := range st.Recoveries {
		if strings.Contains(r.Reason, "was lost") {
			t.Errorf("a live worker was taken for dead across the crash of a master: %s", r.Reason)
		}
	}
}
