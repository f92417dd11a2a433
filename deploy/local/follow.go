package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weirstream/weir/deploy/local/internal/follow"
	"github.com/weirstream/weir/exchange/control"
)

// Cluster is what Follow reads of the coordinator.
type Cluster interface {
	// Status returns the slots the jobs that have not ended want (GET
	// /api/v1/cluster's slotsWanted) and the live workers with their usage
	// (GET /api/v1/workers). It blocks at most until ctx is done.
	Status(ctx context.Context) (slotsWanted int, workers []control.WorkerInfo, err error)
}

// FollowConfig configures Follow.
type FollowConfig struct {
	Min, Max       int // workers, 0 ≤ Min ≤ Max, Max ≥ 1
	SlotsPerWorker int // each worker's --slots
	// ScaleDownDelay is how long a surplus of workers lasts before one is
	// stopped (DefaultScaleDownDelay if 0).
	ScaleDownDelay time.Duration
	Every          time.Duration // how often to look (default 1s)
	Logger         *slog.Logger
	Now            func() time.Time // default time.Now
}

// DefaultScaleDownDelay outlasts a rescale's restart (tasks canceled, then
// redeployed a few seconds later).
const DefaultScaleDownDelay = 10 * time.Second

// Validate reports every problem at once.
func (c FollowConfig) Validate() error {
	return follow.Config{Min: c.Min, Max: c.Max, SlotsPerWorker: c.SlotsPerWorker, ScaleDownDelay: c.ScaleDownDelay}.Validate()
}

// Follow keeps as many children of s running as the cluster's jobs need
// slots for, within cfg.Min and cfg.Max, until ctx is done: every
// cfg.Every it reads the cluster, asks the decision (internal/follow) and
// starts children or stops one. s must give its children ids (IDPrefix),
// so that their usage can be matched, and runs (Run) beside Follow.
func Follow(ctx context.Context, s *Supervisor, c Cluster, cfg FollowConfig) error {
	if s.cfg.IDPrefix == "" {
		return errors.New("follow workers: the supervisor has no IDPrefix")
	}
	if cfg.ScaleDownDelay == 0 {
		cfg.ScaleDownDelay = DefaultScaleDownDelay
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("follow workers: %w", err)
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := follow.New(follow.Config{Min: cfg.Min, Max: cfg.Max, SlotsPerWorker: cfg.SlotsPerWorker, ScaleDownDelay: cfg.ScaleDownDelay})
	var stops sync.WaitGroup
	defer stops.Wait()
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	var lastErr string
	for {
		if err := followOnce(ctx, s, c, f, cfg, &stops); err != nil && ctx.Err() == nil {
			if err.Error() != lastErr {
				cfg.Logger.Warn("follow workers", "err", err)
			}
			lastErr = err.Error()
		} else {
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// followOnce makes one decision and carries it out; a stop goes on in the
// background, in stops.
func followOnce(ctx context.Context, s *Supervisor, c Cluster, f *follow.Follower, cfg FollowConfig, stops *sync.WaitGroup) error {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	wanted, live, err := c.Status(sctx)
	if err != nil {
		return fmt.Errorf("read cluster: %w", err)
	}
	tasks := make(map[string]int, len(live))
	for _, w := range live {
		tasks[w.ID] = -1
		if w.Usage != nil {
			tasks[w.ID] = w.Usage.Tasks
		}
	}
	in := follow.Input{Now: cfg.Now(), SlotsWanted: wanted}
	for _, ch := range s.Children() {
		n, ok := tasks[ch.ID]
		in.Workers = append(in.Workers, follow.Worker{ID: ch.ID, Registered: ok && ch.PID != 0, Tasks: n, Stopping: ch.Stopping})
	}
	d := f.Decide(in)
	switch {
	case d.Start > 0:
		cfg.Logger.Info("starting workers", "n", d.Start, "reason", d.Reason)
		for range d.Start {
			if _, err := s.Start(); err != nil {
				return fmt.Errorf("start worker: %w", err)
			}
		}
	case d.Stop != "":
		cfg.Logger.Info("stopping worker", "id", d.Stop, "reason", d.Reason)
		// Marked stopping at once, so the next decision sees it; the
		// process gets StopTimeout to exit, in the background.
		done, err := s.stop(d.Stop)
		if err != nil {
			return err
		}
		stops.Add(1)
		go func() {
			defer stops.Done()
			select {
			case <-done:
				cfg.Logger.Info("worker stopped", "id", d.Stop)
			case <-ctx.Done():
			}
		}()
	default:
		cfg.Logger.Debug("workers follow", "decision", d.Reason)
	}
	return nil
}
