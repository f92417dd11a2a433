// Package local runs weir worker processes on this machine: a supervisor
// starts N children and restarts any that exits, with a short backoff, until
// it is stopped. `weir up` uses it.
package local

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Config configures a Supervisor.
type Config struct {
	Binary string   // executable to run
	Args   []string // its arguments
	Env    []string // its environment
	Count  int      // how many children
	Logger *slog.Logger
	Stdout io.Writer
	Stderr io.Writer
	// StopTimeout is how long a child gets after SIGTERM before SIGKILL
	// (default 10s).
	StopTimeout time.Duration
}

// Supervisor keeps Count child processes running.
type Supervisor struct {
	cfg Config
	mu  struct {
		sync.Mutex
		pids map[int]int // slot -> pid
	}
}

// NewSupervisor returns a supervisor; Run starts it.
func NewSupervisor(cfg Config) *Supervisor {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 10 * time.Second
	}
	s := &Supervisor{cfg: cfg}
	s.mu.pids = map[int]int{}
	return s
}

// PIDs returns the current child pids by slot.
func (s *Supervisor) PIDs() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]int, len(s.mu.pids))
	for k, v := range s.mu.pids {
		out[k] = v
	}
	return out
}

// Run starts the children and keeps them running until ctx is done, then
// stops them (SIGTERM, then SIGKILL after StopTimeout) and returns.
func (s *Supervisor) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for i := 0; i < s.cfg.Count; i++ {
		wg.Add(1)
		go func(slot int) {
			defer wg.Done()
			s.keep(ctx, slot)
		}(i)
	}
	wg.Wait()
	return nil
}

func (s *Supervisor) keep(ctx context.Context, slot int) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		started := time.Now()
		err := s.runOnce(ctx, slot)
		if ctx.Err() != nil {
			return
		}
		s.cfg.Logger.Warn("worker process exited; restarting", "slot", slot, "err", err, "after", backoff)
		if time.Since(started) > 10*time.Second {
			backoff = 100 * time.Millisecond
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (s *Supervisor) runOnce(ctx context.Context, slot int) error {
	cmd := exec.Command(s.cfg.Binary, s.cfg.Args...)
	cmd.Env = s.cfg.Env
	cmd.Stdout, cmd.Stderr = s.cfg.Stdout, s.cfg.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	s.mu.Lock()
	s.mu.pids[slot] = cmd.Process.Pid
	s.mu.Unlock()
	s.cfg.Logger.Info("worker process started", "slot", slot, "pid", cmd.Process.Pid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			return err
		case <-time.After(s.cfg.StopTimeout):
			_ = cmd.Process.Kill()
			return <-done
		}
	}
}
