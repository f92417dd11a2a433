package local

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/integration/poll"
)

// fakeCluster registers every started child at once, idle.
type fakeCluster struct {
	s      *Supervisor
	mu     sync.Mutex
	wanted int
}

func (f *fakeCluster) set(n int) { f.mu.Lock(); f.wanted = n; f.mu.Unlock() }

func (f *fakeCluster) Status(context.Context) (int, []control.WorkerInfo, error) {
	var ws []control.WorkerInfo
	for _, c := range f.s.Children() {
		if c.PID != 0 {
			ws = append(ws, control.WorkerInfo{ID: c.ID, Usage: &control.WorkerUsage{}})
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wanted, ws, nil
}

// Workers follow the wanted slots up at once and down after the delay;
// with min 0 and nothing wanted, none run.
func TestFollow(t *testing.T) {
	s := NewSupervisor(sleeper(t, false))
	c := &fakeCluster{s: s}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = s.Run(ctx) }()
	go func() {
		defer wg.Done()
		err := Follow(ctx, s, c, FollowConfig{Min: 0, Max: 3, SlotsPerWorker: 2, ScaleDownDelay: 100 * time.Millisecond, Every: 10 * time.Millisecond})
		if err != nil {
			t.Error(err)
		}
	}()
	defer wg.Wait()
	defer cancel()

	count := func(n int) {
		t.Helper()
		poll.UntilNil(t, 10*time.Second, fmt.Sprintf("%d workers", n), func() error {
			if got := len(s.Children()); got != n {
				return fmt.Errorf("%d workers", got)
			}
			return nil
		})
	}
	count(0)
	c.set(9) // 5 workers, capped at max 3
	count(3)
	c.set(2)
	count(1)
	c.set(0)
	count(0)
}

func TestFollowConfig(t *testing.T) {
	s := NewSupervisor(Config{Binary: "/bin/true"})
	if err := Follow(context.Background(), s, &fakeCluster{s: s}, FollowConfig{Max: 1, SlotsPerWorker: 1}); err == nil {
		t.Error("Follow without IDPrefix: no error")
	}
	s = NewSupervisor(Config{Binary: "/bin/true", IDPrefix: "w"})
	err := Follow(context.Background(), s, &fakeCluster{s: s}, FollowConfig{Min: 2, Max: 1})
	want := "follow workers: min workers 2 above max workers 1: want min ≤ max\nslots per worker 0: want ≥ 1"
	if err == nil || err.Error() != want {
		t.Errorf("Follow with min > max: %v, want %q", err, want)
	}
}
