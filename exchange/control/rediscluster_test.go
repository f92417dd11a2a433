package control_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
)

func openCluster(t *testing.T, c *testenv.RedisCluster, cluster string) control.Plane {
	t.Helper()
	p, err := control.NewRedis(context.Background(), control.RedisOptions{Addr: c.Addr(), Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestRedisCluster runs the contract on a Redis Cluster of three masters
// with a replica each.
func TestRedisCluster(t *testing.T) {
	c := testenv.StartRedisCluster(t, 3, 1)
	planeContract(t, func(t *testing.T) control.Plane {
		for s := range c.Shards() {
			if _, err := testenv.Dial(c.Master(s), "FLUSHALL"); err != nil {
				t.Fatal(err)
			}
		}
		p, err := control.NewRedis(context.Background(), control.RedisOptions{Addr: c.Addr()})
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// ctlKey is a control key of the default weir cluster on a Redis Cluster:
// every one shares its slot.
const ctlKey = "weir:{ctl}:workers"

// TestRedisClusterPresenceAcrossFailover: the master holding the control
// keys fails over to its replica. Live workers stay listed (their named
// connections are still open on the old master, now a replica), a worker's
// next heartbeat moves its connection to the new master, the leader keeps
// its lease, and afterwards a worker or leader whose process dies is still
// noticed at once, not when its heartbeat or lease lapses.
func TestRedisClusterPresenceAcrossFailover(t *testing.T) {
	c := testenv.StartRedisCluster(t, 3, 1)
	ctx := ctxT(t)
	coord := openCluster(t, c, "")
	live := openCluster(t, c, "")
	dying, err := control.NewRedis(ctx, control.RedisOptions{Addr: c.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	register(t, live, info("w1", 2), time.Minute)
	register(t, dying, info("w2", 2), time.Minute)
	if ids := workerIDs(t, coord); !reflect.DeepEqual(ids, []string{"w1", "w2"}) {
		t.Fatalf("coordinator sees workers %v before the failover", ids)
	}
	leaderPlane := openCluster(t, c, "")
	lead, ok, err := leaderPlane.Acquire(ctx, control.Leader{ID: "a"}, time.Hour, 0)
	if err != nil || !ok {
		t.Fatalf("Acquire(a) = %v, %v", ok, err)
	}

	shard := c.ShardOf(ctlKey)
	old := c.Master(shard)
	c.Failover(shard)

	// Both workers' connections are still open (on the old master), and
	// no heartbeat has moved them yet.
	if ids := workerIDs(t, coord); !reflect.DeepEqual(ids, []string{"w1", "w2"}) {
		t.Fatalf("coordinator sees workers %v right after the failover of %s", ids, old)
	}
	// Heartbeats (a worker sends one a second) move the named connections
	// to the new master, once the client has learned it from a redirect.
	poll.UntilNil(t, 5*time.Second, "worker connections on the new master only", func() error {
		for _, w := range []struct {
			p  control.Plane
			id string
		}{{live, "w1"}, {dying, "w2"}} {
			if err := w.p.Heartbeat(ctx, w.id, time.Minute, control.WorkerUsage{}); err != nil {
				return fmt.Errorf("heartbeat of %s after the failover: %w", w.id, err)
			}
		}
		for addr, want := range map[string]bool{c.Master(shard): true, old: false} {
			list, err := testenv.Dial(addr, "CLIENT", "LIST")
			if err != nil {
				return err
			}
			for _, id := range []string{"w1", "w2"} {
				if got := strings.Contains(list, "name=weir-worker:weir:"+id+" "); got != want {
					return fmt.Errorf("%s has the connection of %s: %t, want %t", addr, id, got, want)
				}
			}
		}
		return nil
	})
	if ok, err := leaderPlane.Renew(ctx, lead, time.Hour); err != nil || !ok {
		t.Fatalf("renew of the lease after the failover = %v, %v", ok, err)
	}
	if _, ok, err := coord.Acquire(ctx, control.Leader{ID: "b"}, time.Hour, 0); err != nil || ok {
		t.Fatalf("Acquire(b) while a lives, after the failover = %v, %v", ok, err)
	}
	if ids := workerIDs(t, coord); !reflect.DeepEqual(ids, []string{"w1", "w2"}) {
		t.Fatalf("coordinator sees workers %v after their heartbeats", ids)
	}

	start := time.Now()
	dying.Close() // as when the process dies: its connections close
	poll.Until(t, 2*time.Second, "the dead worker w2 dropped (its heartbeat has a minute left)", func() bool {
		return reflect.DeepEqual(workerIDs(t, coord), []string{"w1"})
	})
	t.Logf("after the failover, a closed worker left the list within %v", time.Since(start).Round(time.Millisecond))

	leaderPlane.Close()
	start = time.Now()
	var b control.Leader
	poll.Until(t, 5*time.Second, "b takes the dead leader's lease (ttl an hour)", func() bool {
		var err error
		b, ok, err = coord.Acquire(ctx, control.Leader{ID: "b"}, time.Hour, 0)
		return err == nil && ok
	})
	if b.Epoch != lead.Epoch+1 {
		t.Errorf("epoch after takeover = %d, want %d", b.Epoch, lead.Epoch+1)
	}
	t.Logf("after the failover, a standby took a dead leader's lease within %v", time.Since(start).Round(time.Millisecond))
}

// TestRedisClusterClustersShareARedis: weir clusters on one Redis Cluster
// see only their own workers, and their control keys hash by different
// tags.
func TestRedisClusterClustersShareARedis(t *testing.T) {
	c := testenv.StartRedisCluster(t, 3, 1)
	ctx := ctxT(t)
	a, b := openCluster(t, c, "blue"), openCluster(t, c, "green")
	register(t, a, info("wa", 1), time.Minute)
	register(t, b, info("wb", 1), time.Minute)
	if ids := workerIDs(t, a); !reflect.DeepEqual(ids, []string{"wa"}) {
		t.Errorf("blue sees workers %v", ids)
	}
	if ids := workerIDs(t, b); !reflect.DeepEqual(ids, []string{"wb"}) {
		t.Errorf("green sees workers %v", ids)
	}
	prime(t, a)
	if err := a.Report(ctx, event(1, 4)); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, a, 1); got[0].Stats.RecordsIn != 4 {
		t.Errorf("blue got %+v", got[0])
	}
	for _, k := range []string{"weir:{blue:ctl}:workers", "weir:{green:ctl}:workers"} {
		v, err := testenv.Dial(c.Master(c.ShardOf(k)), "HLEN", k)
		if err != nil || v != "1" {
			t.Errorf("HLEN %s on its master = %q, %v; want 1", k, v, err)
		}
	}
}

// TestRedisClusterPresenceAcrossCrash: the master holding the control keys
// crashes, with the workers' named connections on it, and its replica
// takes over. Workers that live and heartbeat are never dropped on the
// way (their connections are gone, and until they open new ones on the
// new master, absence says nothing), and afterwards a dead worker is
// still noticed by its connection, not after its minute of heartbeat.
func TestRedisClusterPresenceAcrossCrash(t *testing.T) {
	c := testenv.StartRedisCluster(t, 3, 1)
	ctx := ctxT(t)
	coord := openCluster(t, c, "")
	live := openCluster(t, c, "")
	dying, err := control.NewRedis(ctx, control.RedisOptions{Addr: c.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer dying.Close()
	register(t, live, info("w1", 2), time.Minute)
	register(t, dying, info("w2", 2), time.Minute)

	// The workers heartbeat every second, as worker processes do, failing
	// while the master is down.
	hbCtx, stopHB := context.WithCancel(ctx)
	unknown := make(chan string, 2)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		for hbCtx.Err() == nil {
			for _, w := range []struct {
				p  control.Plane
				id string
			}{{live, "w1"}, {dying, "w2"}} {
				octx, cancel := context.WithTimeout(hbCtx, time.Second)
				if err := w.p.Heartbeat(octx, w.id, time.Minute, control.WorkerUsage{}); errors.Is(err, control.ErrUnknownWorker) {
					select {
					case unknown <- w.id:
					default:
					}
				}
				cancel()
			}
			select {
			case <-hbCtx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	defer func() { stopHB(); <-hbDone }()

	shard := c.ShardOf(ctlKey)
	m, rep := c.Master(shard), c.Replica(shard)
	// The registrations must be on the replica before the crash, else the
	// new master has no workers to list and the test fails on a loss that
	// Redis's asynchronous replication allows (a CI run met it: the
	// replica was in a second full sync when the master died).
	c.WaitReplicated(shard, 10*time.Second)
	c.Kill(m)
	start := time.Now()
	check := func(until time.Time) {
		for time.Now().Before(until) {
			octx, cancel := context.WithTimeout(ctx, time.Second)
			ws, err := coord.Workers(octx)
			cancel()
			if err == nil && len(ws) != 2 {
				t.Fatalf("%v after master %s crashed the coordinator lists %d workers, want both (they live)", time.Since(start).Round(time.Millisecond), m, len(ws))
			}
			select {
			case id := <-unknown:
				t.Fatalf("%v after master %s crashed, worker %s was dropped (its heartbeat found it unknown)", time.Since(start).Round(time.Millisecond), m, id)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.WaitMaster(shard, rep, 45*time.Second)
	}()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		default:
			check(time.Now().Add(200 * time.Millisecond))
		}
	}
	t.Logf("replica %s leads %v after master %s crashed", rep, time.Since(start).Round(time.Millisecond), m)
	check(time.Now().Add(3 * time.Second))

	dying.Close() // its process dies
	dead := time.Now()
	poll.Until(t, 30*time.Second, "the dead worker w2 dropped (its heartbeat has a minute left)", func() bool {
		return reflect.DeepEqual(workerIDs(t, coord), []string{"w1"})
	})
	t.Logf("a worker that died %v after the crash was dropped %v after it died", dead.Sub(start).Round(time.Millisecond), time.Since(dead).Round(time.Millisecond))
}
