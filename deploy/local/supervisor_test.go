package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/integration/poll"
)

// sleeper is a child that runs until SIGTERM; with once, the first child
// process exits at once, to test restarts.
func sleeper(t *testing.T, once bool) Config {
	dir := t.TempDir()
	script := `trap 'exit 0' TERM; while :; do sleep 0.05; done`
	if once {
		script = fmt.Sprintf(`if [ ! -e %[1]s ]; then touch %[1]s; exit 3; fi; `, filepath.Join(dir, "once")) + script
	}
	return Config{Binary: "/bin/sh", Args: []string{"-c", script, "sh"}, IDPrefix: "w", StopTimeout: 5 * time.Second}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func running(t *testing.T, s *Supervisor, n int) []Child {
	t.Helper()
	var cs []Child
	poll.UntilNil(t, 10*time.Second, fmt.Sprintf("%d children running", n), func() error {
		cs = s.Children()
		if len(cs) != n {
			return fmt.Errorf("%d children", len(cs))
		}
		for _, c := range cs {
			if c.PID == 0 {
				return fmt.Errorf("%s not started", c.ID)
			}
		}
		return nil
	})
	return cs
}

func TestStartStop(t *testing.T) {
	cfg := sleeper(t, false)
	cfg.Count = 2
	s := NewSupervisor(cfg)
	if _, err := s.Start(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Start before Run: %v, want ErrNotRunning", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()

	cs := running(t, s, 2)
	if cs[0].ID != "w-1" || cs[1].ID != "w-2" {
		t.Fatalf("ids %s %s, want w-1 w-2", cs[0].ID, cs[1].ID)
	}
	if _, err := s.Start(); err != nil {
		t.Fatal(err)
	}
	cs = running(t, s, 3)

	// A child stopped on purpose exits and is not restarted: Stop returns
	// once it is gone from the children for good.
	if err := s.Stop(context.Background(), cs[1].ID); err != nil {
		t.Fatal(err)
	}
	if alive(cs[1].PID) {
		t.Errorf("pid %d of stopped %s still alive", cs[1].PID, cs[1].ID)
	}
	left := s.Children()
	if len(left) != 2 || left[0].ID != "w-1" || left[1].ID != "w-3" {
		t.Fatalf("children after stopping w-2: %+v, want w-1 and w-3", left)
	}
	if err := s.Stop(context.Background(), "w-2"); !errors.Is(err, ErrUnknownChild) {
		t.Fatalf("Stop of a stopped child: %v, want ErrUnknownChild", err)
	}

	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	for _, c := range left {
		if alive(c.PID) {
			t.Errorf("pid %d of %s alive after Run returned", c.PID, c.ID)
		}
	}
	if _, err := s.Start(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Start after Run: %v, want ErrNotRunning", err)
	}
}

// A child that exits is restarted in the same slot under a new id.
func TestRestartNewID(t *testing.T) {
	cfg := sleeper(t, true)
	cfg.Count = 1
	s := NewSupervisor(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	var c Child
	poll.UntilNil(t, 10*time.Second, "restarted as w-2", func() error {
		cs := s.Children()
		if len(cs) != 1 || cs[0].ID != "w-2" || cs[0].PID == 0 {
			return fmt.Errorf("children %+v", cs)
		}
		c = cs[0]
		return nil
	})
	if c.Slot != 0 {
		t.Errorf("slot %d after restart, want 0", c.Slot)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}
