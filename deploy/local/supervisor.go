// Package local runs weir worker processes on this machine: a supervisor
// starts children, restarts any that exits with a short backoff, and stops
// a given one on request, until it is stopped. `weir up` uses it, with a
// decision of how many to run (internal/follow).
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Config configures a Supervisor.
type Config struct {
	Binary string   // executable to run
	Args   []string // its arguments
	Env    []string // its environment
	Count  int      // how many children Run starts
	// IDPrefix, if set, gives each child process "--id <IDPrefix>-<n>",
	// n counting up from 1 and never reused: a child that exits and is
	// restarted gets a new id, so the coordinator sees the old worker die
	// and recovers its tasks rather than mistake the new process for it.
	IDPrefix string
	Logger   *slog.Logger
	Stdout   io.Writer
	Stderr   io.Writer
	// StopTimeout is how long a child gets after SIGTERM before SIGKILL
	// (default 10s).
	StopTimeout time.Duration
}

// ErrNotRunning is returned by Start before Run or after it ends.
var ErrNotRunning = errors.New("local: supervisor not running")

// ErrUnknownChild is returned by Stop for an id it does not run.
var ErrUnknownChild = errors.New("local: unknown child")

// Child is one child the supervisor keeps running.
type Child struct {
	Slot int // which child: stable across restarts
	ID   string
	PID  int // 0 while (re)starting
	// Stopping: Stop was called and the process has not exited yet.
	Stopping bool
}

// Supervisor keeps child processes running.
type Supervisor struct {
	cfg Config
	wg  sync.WaitGroup
	mu  struct {
		sync.Mutex
		ctx      context.Context // Run's; nil when not running
		nextSlot int
		nextID   int
		children map[int]*child // by slot
	}
}

type child struct {
	Child
	runs int           // processes started
	stop chan struct{} // closed by Stop
	done chan struct{} // closed when keep returns
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
	s.mu.children = map[int]*child{}
	return s
}

// PIDs returns the current child pids by slot.
func (s *Supervisor) PIDs() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]int, len(s.mu.children))
	for k, c := range s.mu.children {
		if c.PID != 0 {
			out[k] = c.PID
		}
	}
	return out
}

// Children returns the children, oldest first.
func (s *Supervisor) Children() []Child {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Child, 0, len(s.mu.children))
	for _, c := range s.mu.children {
		out = append(out, c.Child)
	}
	slices.SortFunc(out, func(a, b Child) int { return a.Slot - b.Slot })
	return out
}

// Run starts Count children and keeps them, and those Start adds, running
// until ctx is done, then stops them (SIGTERM, then SIGKILL after
// StopTimeout) and returns.
func (s *Supervisor) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.mu.ctx != nil {
		s.mu.Unlock()
		return errors.New("local: supervisor already running")
	}
	s.mu.ctx = ctx
	s.mu.Unlock()
	for i := 0; i < s.cfg.Count; i++ {
		if _, err := s.Start(); err != nil {
			break // ctx is done
		}
	}
	<-ctx.Done()
	s.wg.Wait()
	return nil
}

// Start adds a child and returns its slot; it does not wait for the
// process to start.
func (s *Supervisor) Start() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := s.mu.ctx
	if ctx == nil || ctx.Err() != nil {
		return 0, ErrNotRunning
	}
	c := &child{Child: Child{Slot: s.mu.nextSlot, ID: s.newIDLocked()}, stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.nextSlot++
	s.mu.children[c.Slot] = c
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(c.done)
		s.keep(ctx, c)
		s.mu.Lock()
		delete(s.mu.children, c.Slot)
		s.mu.Unlock()
	}()
	return c.Slot, nil
}

// Stop stops the child with the given worker id (SIGTERM, then SIGKILL
// after StopTimeout) for good, and waits until it has exited or ctx is
// done. It returns ErrUnknownChild if no child has that id.
func (s *Supervisor) Stop(ctx context.Context, id string) error {
	done, err := s.stop(id)
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop worker %s: %w", id, ctx.Err())
	}
}

// stop marks the child with id as stopping and signals it; done is closed
// when it has exited.
func (s *Supervisor) stop(id string) (done <-chan struct{}, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.mu.children {
		if c.ID != id || id == "" {
			continue
		}
		if !c.Stopping {
			c.Stopping = true
			close(c.stop)
		}
		return c.done, nil
	}
	return nil, fmt.Errorf("stop worker %s: %w", id, ErrUnknownChild)
}

// newIDLocked returns the next worker id ("" without IDPrefix); s.mu is
// held.
func (s *Supervisor) newIDLocked() string {
	if s.cfg.IDPrefix == "" {
		return ""
	}
	s.mu.nextID++
	return fmt.Sprintf("%s-%d", s.cfg.IDPrefix, s.mu.nextID)
}

func (s *Supervisor) keep(ctx context.Context, c *child) {
	backoff := 100 * time.Millisecond
	for {
		started := time.Now()
		err := s.runOnce(ctx, c)
		select {
		case <-ctx.Done():
			return
		case <-c.stop:
			s.cfg.Logger.Info("worker process stopped", "slot", c.Slot, "id", c.ID, "err", err)
			return
		default:
		}
		s.cfg.Logger.Warn("worker process exited; restarting", "slot", c.Slot, "id", c.ID, "err", err, "after", backoff)
		if time.Since(started) > 10*time.Second {
			backoff = 100 * time.Millisecond
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.stop:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (s *Supervisor) runOnce(ctx context.Context, c *child) error {
	args := slices.Clone(s.cfg.Args)
	s.mu.Lock()
	c.PID = 0
	if c.runs++; c.runs > 1 {
		c.ID = s.newIDLocked()
	}
	if c.ID != "" {
		args = append(args, "--id", c.ID)
	}
	s.mu.Unlock()
	cmd := exec.Command(s.cfg.Binary, args...)
	cmd.Env = s.cfg.Env
	cmd.Stdout, cmd.Stderr = s.cfg.Stdout, s.cfg.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	s.mu.Lock()
	c.PID = cmd.Process.Pid
	s.mu.Unlock()
	s.cfg.Logger.Info("worker process started", "slot", c.Slot, "id", c.ID, "pid", cmd.Process.Pid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	case <-c.stop:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(s.cfg.StopTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		_ = cmd.Process.Kill()
		return <-done
	}
}
