package coordinator_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm/wasmtest"
	"github.com/weirstream/weir/functions/worker"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// env is the embedded mode's pieces, in process: a coordinator driven by
// Run, the in-process control plane and exchange, a directory bucket, and
// the workers a test starts.
type env struct {
	t      *testing.T
	ctx    context.Context
	plane  control.Plane
	xch    exchange.Transport
	bucket blob.Bucket
	c      *coordinator.Coordinator
	stopC  func() // stops the first coordinator's Run
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWithin(t, 60*time.Second)
}

// newEnvWithin is newEnv whose e.ctx, bounding the test's calls, lasts
// within (tests that build and compile Wasm guests under -race need more
// than a minute on a busy machine).
func newEnvWithin(t *testing.T, within time.Duration) *env {
	t.Helper()
	return newEnvWrapped(t, within, nil)
}

// newEnvWrapped is newEnvWithin whose bucket, for the coordinator, the
// workers and the test, is wrap(a directory bucket) (nil: as it is).
func newEnvWrapped(t *testing.T, within time.Duration, wrap func(blob.Bucket) blob.Bucket) *env {
	t.Helper()
	var bucket blob.Bucket
	bucket, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		bucket = wrap(bucket)
	}
	e := &env{t: t, plane: control.NewLocal(), xch: exchange.NewLocal(), bucket: bucket}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	e.ctx = ctx
	e.c = coordinator.New(coordinator.Config{Plane: e.plane, Bucket: bucket, Transport: e.xch, CancelTimeout: 5 * time.Second,
		WasmCache: wasmtest.CacheDir(t)})
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.c.Run(runCtx) }()
	var once sync.Once
	e.stopC = func() {
		once.Do(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("coordinator Run: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		e.stopC()
		cancel()
		e.xch.Close()
		e.plane.Close()
		e.bucket.Close()
	})
	return e
}

// stopCoordinator stops the env's first coordinator.
func (e *env) stopCoordinator() { e.stopC() }

// startCoordinator starts another coordinator over the env's plane and
// bucket, as a restarted process would: it loads the jobs and runs until
// the test ends. It becomes e.c.
func (e *env) startCoordinator(cfg coordinator.Config) *coordinator.Coordinator {
	e.t.Helper()
	c := coordinator.New(cfg)
	if err := c.Load(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	e.t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			e.t.Errorf("coordinator Run: %v", err)
		}
	})
	e.c = c
	return c
}

// workerOpts tune startWorker.
type workerOpts struct {
	ttl      time.Duration // heartbeat TTL (default 6s, as in production)
	plane    control.Plane // the worker's view of the plane (default e.plane)
	stateDir string        // where pebble state goes (default the temporary directory)
}

// startWorker runs a worker until the test ends or the returned stop is
// called, and waits until the coordinator can see it.
func (e *env) startWorker(id string, slots int, o workerOpts) (stop func()) {
	e.t.Helper()
	plane := o.plane
	if plane == nil {
		plane = e.plane
	}
	w := worker.New(worker.Config{ID: id, Slots: slots, Plane: plane, Transport: e.xch, Bucket: e.bucket,
		HeartbeatTTL: o.ttl, StatsInterval: 100 * time.Millisecond, StateDir: o.stateDir, WasmCache: wasmtest.CacheDir(e.t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			e.t.Errorf("worker %s: %v", id, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	poll.UntilNil(e.t, 10*time.Second, "worker "+id+" registered", func() error {
		ws, err := e.plane.Workers(e.ctx)
		if err != nil {
			return err
		}
		for _, w := range ws {
			if w.ID == id {
				return nil
			}
		}
		return fmt.Errorf("workers: %v", ws)
	})
	return stop
}

func (e *env) submit(src string) string {
	e.t.Helper()
	js, err := spec.Parse([]byte(src), "job.yaml")
	if err != nil {
		e.t.Fatalf("Parse: %v", err)
	}
	id, err := e.c.Submit(e.ctx, js)
	if err != nil {
		e.t.Fatalf("Submit: %v", err)
	}
	return id
}

// wait waits for the job to end and returns its status.
func (e *env) wait(id string, within time.Duration) coordinator.JobStatus {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, within)
	defer cancel()
	st, err := e.c.Wait(ctx, id)
	if err != nil {
		e.t.Fatalf("job %s did not end within %s: state %s, error %q: %v", id, within, st.State, st.Error, err)
	}
	return st
}

// waitFor polls the job's status until cond accepts it.
func (e *env) waitFor(id, what string, cond func(coordinator.JobStatus) bool) coordinator.JobStatus {
	e.t.Helper()
	return e.waitForWithin(id, what, 20*time.Second, cond)
}

// waitForWithin is waitFor with its own deadline.
func (e *env) waitForWithin(id, what string, within time.Duration, cond func(coordinator.JobStatus) bool) coordinator.JobStatus {
	e.t.Helper()
	var st coordinator.JobStatus
	poll.UntilNil(e.t, within, what, func() error {
		var err error
		st, err = e.c.Status(id)
		if err != nil {
			return err
		}
		if !cond(st) {
			return fmt.Errorf("state %s (%s), totals %+v", st.State, st.Error, st.Totals)
		}
		return nil
	})
	return st
}

func (e *env) waitRunning(id string) coordinator.JobStatus {
	e.t.Helper()
	return e.waitFor(id, "job "+id+" RUNNING", func(st coordinator.JobStatus) bool { return st.State == coordinator.JobRunning })
}

// readJSONL reads every JSON-lines object under prefix, as rows.
func (e *env) readJSONL(prefix string) []map[string]any {
	e.t.Helper()
	objs, err := e.bucket.List(e.ctx, prefix)
	if err != nil {
		e.t.Fatal(err)
	}
	var rows []map[string]any
	for _, o := range objs {
		data, err := e.bucket.Get(e.ctx, o.Key)
		if err != nil {
			e.t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
			dec.UseNumber()
			var r map[string]any
			if err := dec.Decode(&r); err != nil {
				e.t.Fatalf("%s: %v: %s", o.Key, err, sc.Bytes())
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// storedStatus reads jobs/<id>/status.json.
func (e *env) storedStatus(id string) coordinator.JobStatus {
	e.t.Helper()
	raw, err := e.bucket.Get(e.ctx, layout.StatusKey(id))
	if err != nil {
		e.t.Fatalf("read status of %s: %v", id, err)
	}
	var st coordinator.JobStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		e.t.Fatalf("decode status of %s: %v\n%s", id, err, raw)
	}
	return st
}

func int64Of(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func msOf(t *testing.T, v any) int64 {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		return int64Of(t, v)
	}
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("timestamp %q: %v", s, err)
	}
	return tm.UnixMilli()
}

// cutPlane is a worker's view of the control plane that can be cut off,
// the way a worker process that crashes or loses its network disappears:
// no heartbeats, no events, no commands, and no goodbye.
type cutPlane struct {
	control.Plane
	cut atomic.Bool
}

var errCut = errors.New("test: worker cut off")

func (p *cutPlane) Register(ctx context.Context, w control.WorkerInfo, ttl time.Duration) error {
	if p.cut.Load() {
		return errCut
	}
	return p.Plane.Register(ctx, w, ttl)
}

func (p *cutPlane) Heartbeat(ctx context.Context, id string, ttl time.Duration, u control.WorkerUsage) error {
	if p.cut.Load() {
		return errCut
	}
	return p.Plane.Heartbeat(ctx, id, ttl, u)
}

func (p *cutPlane) Deregister(ctx context.Context, id string) error {
	if p.cut.Load() {
		return errCut
	}
	return p.Plane.Deregister(ctx, id)
}

func (p *cutPlane) Receive(ctx context.Context, id string, wait time.Duration) (control.Command, bool, error) {
	if p.cut.Load() {
		return control.Command{}, false, errCut
	}
	return p.Plane.Receive(ctx, id, wait)
}

func (p *cutPlane) Report(ctx context.Context, ev control.Event) error {
	if p.cut.Load() {
		return errCut
	}
	return p.Plane.Report(ctx, ev)
}

// Close leaves the shared plane to its owner.
func (p *cutPlane) Close() error { return nil }
