package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
)

// planeContract runs the cases every control plane must pass. open returns
// a fresh, empty plane for one case; the case closes it.
func planeContract(t *testing.T, open func(t *testing.T) control.Plane) {
	cases := []struct {
		name string
		run  func(t *testing.T, p control.Plane)
	}{
		{"RegisterListsWorkersSorted", testRegisterSorted},
		{"ReregisterUpdates", testReregister},
		{"TTLExpiry", testTTLExpiry},
		{"HeartbeatKeepsAlive", testHeartbeat},
		{"HeartbeatUnknown", testHeartbeatUnknown},
		{"Deregister", testDeregister},
		{"SendUnknown", testSendUnknown},
		{"SendExpired", testSendExpired},
		{"SendReceiveFIFO", testSendReceiveFIFO},
		{"InboxesAreSeparate", testInboxesSeparate},
		{"DeregisterDropsCommands", testDeregisterDropsCommands},
		{"ReceiveWakesOnSend", testReceiveWakes},
		{"ReceiveHonoursContext", testReceiveContext},
		{"EventsRoundTrip", testEventsRoundTrip},
		{"EventsNoneWithinWait", testEventsNone},
		{"EventsConcurrentNoLoss", testEventsConcurrent},
		{"CloseTwice", testCloseTwice},
		{"LeaseOneHolder", testLeaseOneHolder},
		{"LeaseLapses", testLeaseLapses},
		{"LeaseReleaseAndFloor", testLeaseReleaseAndFloor},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := open(t)
			t.Cleanup(func() { p.Close() })
			c.run(t, p)
		})
	}
}

func TestLocal(t *testing.T) {
	planeContract(t, func(t *testing.T) control.Plane { return control.NewLocal() })
}

func TestRedis(t *testing.T) {
	r := testenv.StartRedis(t)
	planeContract(t, func(t *testing.T) control.Plane {
		if _, err := r.Do("FLUSHALL"); err != nil {
			t.Fatal(err)
		}
		p, err := control.NewRedis(context.Background(), control.RedisOptions{Addr: r.Addr})
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func info(id string, slots int) control.WorkerInfo {
	return control.WorkerInfo{ID: id, Slots: slots, Host: "host-" + id, PID: 4242, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func register(t *testing.T, p control.Plane, w control.WorkerInfo, ttl time.Duration) {
	t.Helper()
	if err := p.Register(ctxT(t), w, ttl); err != nil {
		t.Fatalf("Register %s: %v", w.ID, err)
	}
}

func workerIDs(t *testing.T, p control.Plane) []string {
	t.Helper()
	ws, err := p.Workers(ctxT(t))
	if err != nil {
		t.Fatalf("Workers: %v", err)
	}
	ids := []string{}
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	return ids
}

func testRegisterSorted(t *testing.T, p control.Plane) {
	if ids := workerIDs(t, p); len(ids) != 0 {
		t.Fatalf("a new plane lists workers %v", ids)
	}
	for _, id := range []string{"w-b", "w-c", "w-a"} {
		register(t, p, info(id, 3), 10*time.Second)
	}
	ws, err := p.Workers(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	if want := []string{"w-a", "w-b", "w-c"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("Workers = %v, want %v", ids, want)
	}
	want := info("w-a", 3)
	if got := ws[0]; got.ID != want.ID || got.Slots != want.Slots || got.Host != want.Host || got.PID != want.PID || !got.Started.Equal(want.Started) {
		t.Errorf("Workers[0] = %+v, want %+v", got, want)
	}
}

func testReregister(t *testing.T, p control.Plane) {
	register(t, p, info("w", 2), 10*time.Second)
	register(t, p, info("w", 5), 10*time.Second)
	ws, err := p.Workers(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].Slots != 5 {
		t.Errorf("after re-registering: %+v, want one worker with 5 slots", ws)
	}
}

func testTTLExpiry(t *testing.T, p control.Plane) {
	register(t, p, info("short", 1), 300*time.Millisecond)
	register(t, p, info("long", 1), 30*time.Second)
	if ids := workerIDs(t, p); !reflect.DeepEqual(ids, []string{"long", "short"}) {
		t.Fatalf("Workers = %v right after registering", ids)
	}
	poll.UntilNil(t, 5*time.Second, "short-lived worker to expire", func() error {
		if ids := workerIDs(t, p); !reflect.DeepEqual(ids, []string{"long"}) {
			return fmt.Errorf("workers %v", ids)
		}
		return nil
	})
}

func testHeartbeat(t *testing.T, p control.Plane) {
	// Long enough that a loaded machine does not miss a beat.
	const ttl = time.Second
	register(t, p, info("w", 1), ttl)
	// Heartbeat every fifth of the TTL for two TTLs: the worker stays.
	tick := time.NewTicker(ttl / 5)
	defer tick.Stop()
	end := time.Now().Add(2 * ttl)
	if ws, err := p.Workers(ctxT(t)); err != nil || len(ws) != 1 || ws[0].Usage != nil {
		t.Fatalf("Workers before a heartbeat = %+v, %v; want one without usage", ws, err)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for n := 1; time.Now().Before(end); n++ {
		<-tick.C
		u := control.WorkerUsage{At: at.Add(time.Duration(n) * time.Second), Tasks: n, CPUSeconds: 1.5, CPUCores: 0.25, RSSBytes: 1 << 20}
		if err := p.Heartbeat(ctxT(t), "w", ttl, u); err != nil {
			t.Fatalf("Heartbeat: %v", err)
		}
		ws, err := p.Workers(ctxT(t))
		if err != nil || len(ws) != 1 || ws[0].ID != "w" {
			t.Fatalf("a heartbeating worker is missing: %+v %v", ws, err)
		}
		if ws[0].Usage == nil || !reflect.DeepEqual(*ws[0].Usage, u) {
			t.Fatalf("usage after a heartbeat = %+v, want %+v", ws[0].Usage, u)
		}
	}
	tick.Stop()
	poll.UntilNil(t, 5*time.Second, "worker to expire after its heartbeats stop", func() error {
		if ids := workerIDs(t, p); len(ids) != 0 {
			return fmt.Errorf("workers %v", ids)
		}
		return nil
	})
}

func testHeartbeatUnknown(t *testing.T, p control.Plane) {
	if err := p.Heartbeat(ctxT(t), "ghost", time.Second, control.WorkerUsage{}); !errors.Is(err, control.ErrUnknownWorker) {
		t.Errorf("Heartbeat of an unknown worker = %v, want ErrUnknownWorker", err)
	}
	register(t, p, info("w", 1), 10*time.Second)
	if err := p.Deregister(ctxT(t), "w"); err != nil {
		t.Fatal(err)
	}
	if err := p.Heartbeat(ctxT(t), "w", time.Second, control.WorkerUsage{}); !errors.Is(err, control.ErrUnknownWorker) {
		t.Errorf("Heartbeat after Deregister = %v, want ErrUnknownWorker", err)
	}
}

func testDeregister(t *testing.T, p control.Plane) {
	register(t, p, info("a", 1), 10*time.Second)
	register(t, p, info("b", 1), 10*time.Second)
	if err := p.Deregister(ctxT(t), "a"); err != nil {
		t.Fatal(err)
	}
	if ids := workerIDs(t, p); !reflect.DeepEqual(ids, []string{"b"}) {
		t.Errorf("after Deregister(a): %v, want [b]", ids)
	}
	if err := p.Send(ctxT(t), "a", control.Command{Kind: control.CmdCancel}); !errors.Is(err, control.ErrUnknownWorker) {
		t.Errorf("Send to a deregistered worker = %v, want ErrUnknownWorker", err)
	}
	if err := p.Deregister(ctxT(t), "never-was"); err != nil {
		t.Errorf("Deregister of an unknown worker = %v, want nil", err)
	}
}

func testSendUnknown(t *testing.T, p control.Plane) {
	err := p.Send(ctxT(t), "ghost", control.Command{Kind: control.CmdDeploy})
	if !errors.Is(err, control.ErrUnknownWorker) {
		t.Fatalf("Send to an unknown worker = %v, want ErrUnknownWorker", err)
	}
	if !strings.Contains(err.Error(), "ghost") {
		t.Errorf("error %q does not name the worker", err)
	}
}

// A worker whose heartbeat lapsed is gone for Send too, whether or not
// anyone listed the workers since.
func testSendExpired(t *testing.T, p control.Plane) {
	register(t, p, info("w", 1), 200*time.Millisecond)
	poll.UntilNil(t, 5*time.Second, "Send to refuse an expired worker", func() error {
		err := p.Send(ctxT(t), "w", control.Command{Kind: control.CmdCancel})
		if errors.Is(err, control.ErrUnknownWorker) {
			return nil
		}
		return fmt.Errorf("Send = %v", err)
	})
}

func cmd(i int) control.Command {
	return control.Command{
		Kind: control.CmdDeploy,
		Task: control.TaskID{Job: "job-1", Attempt: 1, Vertex: "v", Subtask: i},
		Spec: json.RawMessage(fmt.Sprintf(`{"job":"j","n":%d}`, i)),
	}
}

func testSendReceiveFIFO(t *testing.T, p control.Plane) {
	register(t, p, info("w", 1), 30*time.Second)
	const n = 20
	for i := range n {
		if err := p.Send(ctxT(t), "w", cmd(i)); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	for i := range n {
		c, ok, err := p.Receive(ctxT(t), "w", time.Second)
		if err != nil || !ok {
			t.Fatalf("Receive %d = ok %v, %v", i, ok, err)
		}
		if want := cmd(i); c.Kind != want.Kind || c.Task != want.Task || string(c.Spec) != string(want.Spec) {
			t.Fatalf("Receive %d = %+v (spec %s), want %+v (spec %s)", i, c, c.Spec, want, want.Spec)
		}
	}
	const wait = 150 * time.Millisecond
	start := time.Now()
	c, ok, err := p.Receive(ctxT(t), "w", wait)
	if err != nil || ok {
		t.Fatalf("Receive on an empty inbox = %+v, ok %v, %v; want ok=false", c, ok, err)
	}
	if el := time.Since(start); el > wait+3*time.Second {
		t.Errorf("Receive(%s) on an empty inbox took %s", wait, el)
	}
}

func testInboxesSeparate(t *testing.T, p control.Plane) {
	register(t, p, info("a", 1), 30*time.Second)
	register(t, p, info("b", 1), 30*time.Second)
	if err := p.Send(ctxT(t), "a", cmd(1)); err != nil {
		t.Fatal(err)
	}
	if c, ok, err := p.Receive(ctxT(t), "b", 50*time.Millisecond); ok || err != nil {
		t.Errorf("b received %+v, %v (a's command)", c, err)
	}
	if c, ok, err := p.Receive(ctxT(t), "a", time.Second); !ok || err != nil || c.Task.Subtask != 1 {
		t.Errorf("a received %+v, ok %v, %v", c, ok, err)
	}
}

func testDeregisterDropsCommands(t *testing.T, p control.Plane) {
	register(t, p, info("w", 1), 30*time.Second)
	if err := p.Send(ctxT(t), "w", cmd(1)); err != nil {
		t.Fatal(err)
	}
	if err := p.Deregister(ctxT(t), "w"); err != nil {
		t.Fatal(err)
	}
	register(t, p, info("w", 1), 30*time.Second)
	if c, ok, err := p.Receive(ctxT(t), "w", 50*time.Millisecond); ok || err != nil {
		t.Errorf("a re-registered worker received %+v, %v from before it deregistered", c, err)
	}
}

func testReceiveWakes(t *testing.T, p control.Plane) {
	register(t, p, info("w", 1), 30*time.Second)
	type result struct {
		c   control.Command
		ok  bool
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, ok, err := p.Receive(ctxT(t), "w", 2*time.Second)
		got <- result{c, ok, err}
	}()
	if err := p.Send(ctxT(t), "w", cmd(7)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if !r.ok || r.err != nil || r.c.Task.Subtask != 7 {
		t.Errorf("Receive during a Send = %+v, ok %v, %v", r.c, r.ok, r.err)
	}
}

func testReceiveContext(t *testing.T, p control.Plane) {
	register(t, p, info("w", 1), 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, ok, err := p.Receive(ctx, "w", 2*time.Second)
	if ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Receive past its context's deadline = ok %v, %v; want DeadlineExceeded", ok, err)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("Receive returned %s after its context's deadline of 100ms", el)
	}

	// Cancelled during the wait: an error, never a silent ok=false.
	cctx, ccancel := context.WithCancel(context.Background())
	stop := time.AfterFunc(100*time.Millisecond, ccancel)
	defer stop.Stop()
	_, ok, err = p.Receive(cctx, "w", time.Second)
	if ok || !errors.Is(err, context.Canceled) {
		t.Errorf("Receive cancelled during its wait = ok %v, %v; want Canceled", ok, err)
	}
}

func event(g, i int) control.Event {
	return control.Event{
		Task:   control.TaskID{Job: "job-1", Attempt: 1, Vertex: fmt.Sprintf("g%d", g), Subtask: g},
		Worker: "w",
		State:  control.StateRunning,
		Stats:  control.Stats{RecordsIn: int64(i), BusySeconds: 0.25},
		Time:   time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC),
	}
}

// prime makes the plane's event cursor start here (a Redis plane reads
// only the events reported after its first Events call).
func prime(t *testing.T, p control.Plane) {
	t.Helper()
	ev, err := p.Events(ctxT(t), 10*time.Millisecond)
	if err != nil || len(ev) != 0 {
		t.Fatalf("Events on a fresh plane = %v, %v", ev, err)
	}
}

func testEventsRoundTrip(t *testing.T, p control.Plane) {
	prime(t, p)
	want := []control.Event{
		event(0, 1),
		{Task: control.TaskID{Job: "job-1", Attempt: 2, Vertex: "sink", Subtask: 3}, Worker: "w9", State: control.StateFailed,
			Error: "boom: it broke", Stats: control.Stats{RecordsOut: 9, SinkRows: 4, Watermark: -5}, Time: time.Date(2026, 3, 4, 5, 6, 7, 8000, time.UTC)},
		event(0, 2),
	}
	for _, e := range want {
		if err := p.Report(ctxT(t), e); err != nil {
			t.Fatal(err)
		}
	}
	got := collect(t, p, len(want))
	for i := range want {
		g, w := got[i], want[i]
		if !g.Time.Equal(w.Time) {
			t.Errorf("event %d time = %v, want %v", i, g.Time, w.Time)
		}
		g.Time, w.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("event %d = %+v, want %+v", i, g, w)
		}
	}
}

func testEventsNone(t *testing.T, p control.Plane) {
	prime(t, p)
	if err := p.Report(ctxT(t), event(0, 1)); err != nil {
		t.Fatal(err)
	}
	collect(t, p, 1)
	start := time.Now()
	ev, err := p.Events(ctxT(t), 200*time.Millisecond)
	if err != nil || ev != nil {
		t.Errorf("Events with none pending = %v, %v; want nil, nil", ev, err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("Events(200ms) took %s", el)
	}
}

// Many events from several goroutines: none lost, none repeated, and each
// goroutine's in the order it reported them.
func testEventsConcurrent(t *testing.T, p control.Plane) {
	prime(t, p)
	const goroutines, each = 4, 125
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := p.Report(context.Background(), event(g, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	got := collect(t, p, goroutines*each)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Report: %v", err)
	}
	next := make([]int64, goroutines)
	for _, e := range got {
		g := e.Task.Subtask
		if e.Stats.RecordsIn != next[g] {
			t.Fatalf("goroutine %d: got event %d, want %d (lost, repeated or reordered)", g, e.Stats.RecordsIn, next[g])
		}
		next[g]++
	}
	for g, n := range next {
		if n != each {
			t.Errorf("goroutine %d: %d events, want %d", g, n, each)
		}
	}
	if ev, err := p.Events(ctxT(t), 50*time.Millisecond); len(ev) != 0 || err != nil {
		t.Errorf("extra events after all were read: %d, %v", len(ev), err)
	}
}

// collect reads events until it has n, failing on more or after a
// deadline.
func collect(t *testing.T, p control.Plane, n int) []control.Event {
	t.Helper()
	var got []control.Event
	deadline := time.Now().Add(15 * time.Second)
	for len(got) < n {
		if time.Now().After(deadline) {
			t.Fatalf("got %d events, want %d", len(got), n)
		}
		ev, err := p.Events(ctxT(t), 100*time.Millisecond)
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		got = append(got, ev...)
	}
	if len(got) != n {
		t.Fatalf("got %d events, want %d", len(got), n)
	}
	return got
}

func testCloseTwice(t *testing.T, p control.Plane) {
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func testLeaseOneHolder(t *testing.T, p control.Plane) {
	ctx := ctxT(t)
	if e, err := p.Epoch(ctx); err != nil || e != 0 {
		t.Fatalf("Epoch before any lease = %d, %v", e, err)
	}
	a, ok, err := p.Acquire(ctx, control.Leader{ID: "a", API: "http://a"}, time.Minute, 0)
	if err != nil || !ok || a.ID != "a" || a.API != "http://a" || a.Epoch != 1 {
		t.Fatalf("Acquire(a) = %+v, %v, %v", a, ok, err)
	}
	got, ok, err := p.Acquire(ctx, control.Leader{ID: "b", API: "http://b"}, time.Minute, 0)
	if err != nil || ok || got != a {
		t.Fatalf("Acquire(b) while a leads = %+v, %v, %v; want a's lease, false", got, ok, err)
	}
	if cur, ok, err := p.Current(ctx); err != nil || !ok || cur != a {
		t.Fatalf("Current = %+v, %v, %v", cur, ok, err)
	}
	if ok, err := p.Renew(ctx, control.Leader{ID: "b", Epoch: 1}, time.Minute); err != nil || ok {
		t.Fatalf("Renew by b = %v, %v; want false", ok, err)
	}
	if ok, err := p.Renew(ctx, a, time.Minute); err != nil || !ok {
		t.Fatalf("Renew by a = %v, %v", ok, err)
	}
	if e, err := p.Epoch(ctx); err != nil || e != 1 {
		t.Fatalf("Epoch = %d, %v; want 1", e, err)
	}
}

func testLeaseLapses(t *testing.T, p control.Plane) {
	ctx := ctxT(t)
	a, ok, err := p.Acquire(ctx, control.Leader{ID: "a"}, 200*time.Millisecond, 0)
	if err != nil || !ok {
		t.Fatalf("Acquire(a) = %v, %v", ok, err)
	}
	time.Sleep(300 * time.Millisecond)
	if ok, err := p.Renew(ctx, a, time.Minute); err != nil || ok {
		t.Fatalf("Renew after the lease lapsed = %v, %v; want false", ok, err)
	}
	if _, ok, err := p.Current(ctx); err != nil || ok {
		t.Fatalf("Current after the lease lapsed = %v, %v; want none", ok, err)
	}
	b, ok, err := p.Acquire(ctx, control.Leader{ID: "b"}, time.Minute, 0)
	if err != nil || !ok || b.Epoch <= a.Epoch {
		t.Fatalf("Acquire(b) after a lapsed = %+v, %v, %v; want an epoch above %d", b, ok, err, a.Epoch)
	}
	// The old holder cannot renew its way back.
	if ok, err := p.Renew(ctx, a, time.Minute); err != nil || ok {
		t.Fatalf("Renew by the deposed a = %v, %v; want false", ok, err)
	}
}

func testLeaseReleaseAndFloor(t *testing.T, p control.Plane) {
	ctx := ctxT(t)
	a, ok, err := p.Acquire(ctx, control.Leader{ID: "a"}, time.Minute, 41)
	if err != nil || !ok || a.Epoch != 42 {
		t.Fatalf("Acquire above floor 41 = %+v, %v, %v; want epoch 42", a, ok, err)
	}
	// Releasing someone else's lease does nothing.
	if err := p.Release(ctx, control.Leader{ID: "b", Epoch: 42}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := p.Current(ctx); !ok {
		t.Fatal("the lease went with another's release")
	}
	if err := p.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	b, ok, err := p.Acquire(ctx, control.Leader{ID: "b"}, time.Minute, 0)
	if err != nil || !ok || b.Epoch != 43 {
		t.Fatalf("Acquire after release = %+v, %v, %v; want epoch 43", b, ok, err)
	}
	// The holder itself may take its lease again, with a new epoch.
	b2, ok, err := p.Acquire(ctx, control.Leader{ID: "b"}, time.Minute, 0)
	if err != nil || !ok || b2.Epoch != 44 {
		t.Fatalf("Acquire by the holder = %+v, %v, %v; want epoch 44", b2, ok, err)
	}
	if ok, err := p.Renew(ctx, b, time.Minute); err != nil || ok {
		t.Fatalf("Renew of the older epoch = %v, %v; want false", ok, err)
	}
}
