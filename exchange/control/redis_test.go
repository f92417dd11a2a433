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

func openRedis(t *testing.T, addr string) control.Plane {
	t.Helper()
	p, err := control.NewRedis(context.Background(), control.RedisOptions{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Workers and the coordinator are separate processes with their own
// planes on one Redis.
func TestRedisAcrossProcesses(t *testing.T) {
	r := testenv.StartRedis(t)
	worker, coord := openRedis(t, r.Addr), openRedis(t, r.Addr)
	ctx := ctxT(t)
	register(t, worker, info("w1", 4), 10*time.Second)
	if ids := workerIDs(t, coord); !reflect.DeepEqual(ids, []string{"w1"}) {
		t.Fatalf("coordinator sees workers %v", ids)
	}
	if err := coord.Send(ctx, "w1", cmd(3)); err != nil {
		t.Fatal(err)
	}
	c, ok, err := worker.Receive(ctx, "w1", time.Second)
	if !ok || err != nil || c.Task.Subtask != 3 {
		t.Fatalf("worker received %+v, ok %v, %v", c, ok, err)
	}
	prime(t, coord)
	if err := worker.Report(ctx, event(1, 5)); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, coord, 1); got[0].Stats.RecordsIn != 5 {
		t.Errorf("coordinator got %+v", got[0])
	}
}

// A coordinator's plane reads the events reported after its first Events
// call, not the stream's history: a restarted coordinator does not replay
// old task events.
func TestRedisEventsStartAtTheEnd(t *testing.T) {
	r := testenv.StartRedis(t)
	worker := openRedis(t, r.Addr)
	ctx := ctxT(t)
	for i := range 3 {
		if err := worker.Report(ctx, event(0, i)); err != nil {
			t.Fatal(err)
		}
	}
	coord := openRedis(t, r.Addr)
	if ev, err := coord.Events(ctx, 50*time.Millisecond); len(ev) != 0 || err != nil {
		t.Fatalf("first Events returned history: %d events, %v", len(ev), err)
	}
	// Reported between two calls: not missed.
	if err := worker.Report(ctx, event(0, 3)); err != nil {
		t.Fatal(err)
	}
	got := collect(t, coord, 1)
	if got[0].Stats.RecordsIn != 3 {
		t.Errorf("got event %d, want 3", got[0].Stats.RecordsIn)
	}
}

func TestRedisBadAddress(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := control.NewRedis(ctx, control.RedisOptions{Addr: addr})
	if err == nil {
		p.Close()
		t.Fatal("NewRedis on a closed port succeeded")
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error %q does not name the address", err)
	}
}

// A plane whose Redis is gone reports errors rather than hanging or
// pretending.
func TestRedisServerGone(t *testing.T) {
	r := testenv.StartRedis(t)
	p := openRedis(t, r.Addr)
	register(t, p, info("w", 1), 10*time.Second)
	r.Stop()
	op := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	if _, err := p.Workers(op()); err == nil {
		t.Error("Workers with Redis down: no error")
	}
	if err := p.Send(op(), "w", cmd(1)); err == nil || errors.Is(err, control.ErrUnknownWorker) {
		t.Errorf("Send with Redis down = %v, want a connection error", err)
	}
	if err := p.Report(op(), event(0, 1)); err == nil || !strings.Contains(err.Error(), "job-1") {
		t.Errorf("Report with Redis down = %v, want an error naming the task", err)
	}
}

// A worker whose process dies drops its named connection: the coordinator
// stops listing it at once, long before its heartbeat would lapse. A live
// worker that lost that connection (and so was dropped) is told it is
// unknown at its next heartbeat, and registers again.
func TestRedisNoticesADeadWorkerAtOnce(t *testing.T) {
	r := testenv.StartRedis(t)
	coord := openRedis(t, r.Addr)
	ctx := ctxT(t)

	dying, err := control.NewRedis(ctx, control.RedisOptions{Addr: r.Addr})
	if err != nil {
		t.Fatal(err)
	}
	register(t, dying, info("w1", 2), time.Minute)
	if ids := workerIDs(t, coord); !reflect.DeepEqual(ids, []string{"w1"}) {
		t.Fatalf("coordinator sees workers %v", ids)
	}
	dying.Close() // as when the process dies: its connections close
	deadline := time.Now().Add(2 * time.Second)
	for len(workerIDs(t, coord)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("a worker whose connections closed is still listed after 2s (its heartbeat has a minute left)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("a closed worker left the list within %v", 2*time.Second-time.Until(deadline))

	live := openRedis(t, r.Addr)
	register(t, live, info("w2", 2), time.Minute)
	if _, err := r.Do("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil {
		t.Fatal(err)
	}
	// The coordinator's own connections were killed too; it reconnects.
	for range 50 {
		if ids, err := coord.Workers(ctx); err == nil && len(ids) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ids := workerIDs(t, coord); len(ids) != 0 {
		t.Fatalf("workers %v listed after their connections were killed", ids)
	}
	err = live.Heartbeat(ctx, "w2", time.Minute, control.WorkerUsage{})
	if !errors.Is(err, control.ErrUnknownWorker) {
		t.Fatalf("heartbeat of a dropped worker: %v, want ErrUnknownWorker", err)
	}
	register(t, live, info("w2", 2), time.Minute)
	if ids := workerIDs(t, coord); !reflect.DeepEqual(ids, []string{"w2"}) {
		t.Fatalf("after registering again the coordinator sees %v", ids)
	}
}

// Two clusters on one Redis: each sees only its own workers and events.
func TestRedisClustersShareARedis(t *testing.T) {
	r := testenv.StartRedis(t)
	ctx := ctxT(t)
	open := func(cluster string) control.Plane {
		p, err := control.NewRedis(ctx, control.RedisOptions{Addr: r.Addr, Cluster: cluster})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	a, b, def := open("blue"), open("green"), open("")
	register(t, a, info("wa", 1), time.Minute)
	register(t, b, info("wb", 1), time.Minute)
	register(t, def, info("wd", 1), time.Minute)
	for _, c := range []struct {
		p    control.Plane
		want []string
	}{{a, []string{"wa"}}, {b, []string{"wb"}}, {def, []string{"wd"}}} {
		if ids := workerIDs(t, c.p); !reflect.DeepEqual(ids, c.want) {
			t.Errorf("a cluster sees workers %v, want %v", ids, c.want)
		}
	}
	if err := a.Send(ctx, "wb", cmd(1)); !errors.Is(err, control.ErrUnknownWorker) {
		t.Errorf("blue sent to green's worker: %v", err)
	}
	prime(t, a)
	prime(t, b)
	if err := b.Report(ctx, event(1, 9)); err != nil {
		t.Fatal(err)
	}
	if evs, err := a.Events(ctx, 100*time.Millisecond); err != nil || len(evs) != 0 {
		t.Errorf("blue got green's events: %v %v", evs, err)
	}
	if got := collect(t, b, 1); got[0].Stats.RecordsIn != 9 {
		t.Errorf("green got %+v", got[0])
	}
	if _, err := control.NewRedis(ctx, control.RedisOptions{Addr: r.Addr, Cluster: "Bad Name"}); err == nil || !strings.Contains(err.Error(), `cluster "Bad Name"`) {
		t.Errorf("a bad cluster id: %v", err)
	}
}

// TestRedisLeaseOfADeadLeader: a standby takes the lease at once when the
// leader's process is gone (its named connection closed), long before
// the lease's ttl.
func TestRedisLeaseOfADeadLeader(t *testing.T) {
	r := testenv.StartRedis(t)
	ctx := context.Background()
	leaderPlane, standby := openRedis(t, r.Addr), openRedis(t, r.Addr)
	a, ok, err := leaderPlane.Acquire(ctx, control.Leader{ID: "a"}, time.Hour, 0)
	if err != nil || !ok {
		t.Fatalf("Acquire(a) = %v, %v", ok, err)
	}
	if _, ok, err := standby.Acquire(ctx, control.Leader{ID: "b"}, time.Hour, 0); err != nil || ok {
		t.Fatalf("Acquire(b) while a lives = %v, %v", ok, err)
	}
	leaderPlane.Close() // as kill -9 would: the connections close
	var b control.Leader
	poll.UntilNil(t, 5*time.Second, "b takes the dead leader's lease", func() error {
		var err error
		if b, ok, err = standby.Acquire(ctx, control.Leader{ID: "b"}, time.Hour, 0); err != nil || !ok {
			return fmt.Errorf("not yet: %v %v", ok, err)
		}
		return nil
	})
	if b.Epoch != a.Epoch+1 {
		t.Errorf("epoch after takeover = %d, want %d", b.Epoch, a.Epoch+1)
	}
}
