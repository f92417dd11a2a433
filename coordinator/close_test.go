package coordinator_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/blob"
)

// hangingBucket blocks every manifest write until its context ends, the
// way a store that stopped answering does.
type hangingBucket struct {
	blob.Bucket
	once    sync.Once
	hanging chan struct{} // closed when the first write hangs
}

func (b *hangingBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if strings.HasSuffix(key, "/manifest.json") {
		b.once.Do(func() { close(b.hanging) })
		<-ctx.Done()
		return ctx.Err()
	}
	return b.Bucket.PutIfAbsent(ctx, key, data)
}

// coordinatorGoroutines lists the goroutines running the coordinator's
// code.
func coordinatorGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "weir/coordinator.(*Coordinator)") {
			out = append(out, g)
		}
	}
	return out
}

// TestCloseWaitsForEverything: Close returns only once Run and every
// goroutine the coordinator started for I/O have ended, even with a
// manifest write hanging on the store.
func TestCloseWaitsForEverything(t *testing.T) {
	dir, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bucket := &hangingBucket{Bucket: dir, hanging: make(chan struct{})}
	e := &env{t: t, plane: control.NewLocal(), xch: exchange.NewLocal(), bucket: bucket}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	e.ctx = ctx
	t.Cleanup(func() {
		cancel()
		e.xch.Close()
		e.plane.Close()
		e.bucket.Close()
	})
	e.c = coordinator.New(coordinator.Config{Plane: e.plane, Bucket: bucket, Transport: e.xch, CancelTimeout: 5 * time.Second})
	runDone := make(chan error, 1)
	go func() { runDone <- e.c.Run(context.Background()) }()
	e.startWorker("w1", 2, workerOpts{})

	id := e.submit(eoSpec("out", 500))
	e.waitRunning(id)
	select {
	case <-bucket.hanging:
	case <-time.After(20 * time.Second):
		t.Fatal("no manifest write started within 20s")
	}
	savepoint := make(chan error, 1)
	go func() {
		_, err := e.c.Savepoint(ctx, id)
		savepoint <- err
	}()

	if err := e.c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Run must have finished by now. Its deferred close of runDone, which
	// Close waits for, is its last act, but its goroutine may not have
	// been scheduled since: it may still show Run's frame, under Run's
	// deferred function returning, or under the runtime closing the
	// channel (waking Close). Any other frame above Run's, still calling
	// anything, means Close returned too early. (Run's result reaches
	// runDone a moment later, once the goroutine that called it runs
	// again.)
	for _, g := range coordinatorGoroutines() {
		if !strings.Contains(g, "(*Coordinator).Run(") {
			continue
		}
		lines := strings.Split(g, "\n")
		for i := 1; i < len(lines); i += 2 { // function lines, innermost first
			fn := lines[i]
			if strings.Contains(fn, "(*Coordinator).Run(") {
				break
			}
			if !strings.HasPrefix(fn, "runtime.") && !strings.Contains(fn, "(*Coordinator).Run.func") {
				t.Fatalf("Close returned before Run did:\n%s", g)
			}
		}
	}
	poll.UntilNil(t, 5*time.Second, "Run's frame gone", func() error {
		for _, g := range coordinatorGoroutines() {
			if strings.Contains(g, "(*Coordinator).Run(") {
				return errors.New(g)
			}
		}
		return nil
	})
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run's result did not arrive within 5s of Close")
	}
	poll.UntilNil(t, 5*time.Second, "the waiting savepoint to fail", func() error {
		select {
		case err := <-savepoint:
			if err == nil {
				t.Fatal("Savepoint succeeded on a stopped coordinator")
			}
			return nil
		default:
			return context.DeadlineExceeded
		}
	})
	if gs := coordinatorGoroutines(); len(gs) > 0 {
		t.Fatalf("%d coordinator goroutines still run after Close:\n%s", len(gs), strings.Join(gs, "\n\n"))
	}
	if err := e.c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := e.c.Run(context.Background()); err == nil {
		t.Fatal("Run after Close: no error")
	}
}
