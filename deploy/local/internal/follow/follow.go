// Package follow decides how many worker processes `weir up` runs: as many
// as the coordinator's jobs need slots for, between a minimum and a
// maximum. It is a pure state machine: the driver (cli upCmd) feeds it the
// cluster status and the workers it runs once a second and carries out
// what it returns.
//
// The rules:
//   - at least Min and at most Max workers;
//   - start every worker the wanted slots need at once (a job waits in
//     CREATED or RESTARTING until its slots exist, so a slow ramp only
//     makes it wait longer), but none while started ones have not
//     registered yet: their slots are on the way;
//   - stop only an idle worker (0 tasks in its latest heartbeat, or one not
//     registered yet, which cannot have any), one at a time, and only after
//     the surplus has lasted ScaleDownDelay, so a rescale (tasks canceled,
//     then redeployed) does not make workers flap.
package follow

import (
	"errors"
	"fmt"
	"time"
)

// Config bounds the workers.
type Config struct {
	Min, Max       int           // workers; 0 ≤ Min ≤ Max, Max ≥ 1
	SlotsPerWorker int           // the --slots of each worker, ≥ 1
	ScaleDownDelay time.Duration // how long a surplus lasts before a stop
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Min < 0 {
		errs = append(errs, fmt.Errorf("min workers %d: want ≥ 0", c.Min))
	}
	if c.Max < 1 {
		errs = append(errs, fmt.Errorf("max workers %d: want ≥ 1", c.Max))
	}
	if c.Min > c.Max {
		errs = append(errs, fmt.Errorf("min workers %d above max workers %d: want min ≤ max", c.Min, c.Max))
	}
	if c.SlotsPerWorker < 1 {
		errs = append(errs, fmt.Errorf("slots per worker %d: want ≥ 1", c.SlotsPerWorker))
	}
	if c.ScaleDownDelay < 0 {
		errs = append(errs, fmt.Errorf("scale-down delay %s: want ≥ 0", c.ScaleDownDelay))
	}
	return errors.Join(errs...)
}

// Worker is one worker process the deployer runs.
type Worker struct {
	ID string
	// Registered: the coordinator lists it as live. A worker started but
	// not registered yet is starting.
	Registered bool
	// Tasks is what its latest heartbeat said it runs; -1 if it has sent
	// none yet.
	Tasks int
	// Stopping: a stop was asked and has not finished.
	Stopping bool
}

// Input is what the driver observed.
type Input struct {
	Now         time.Time
	SlotsWanted int      // the cluster's slotsWanted
	Workers     []Worker // in the order they were started, oldest first
}

// Decision is what to do now: start Start workers, stop worker Stop, or
// nothing (both zero). Reason says why, for the log.
type Decision struct {
	Start  int
	Stop   string
	Reason string
}

func (d Decision) String() string {
	switch {
	case d.Start > 0:
		return fmt.Sprintf("start %d: %s", d.Start, d.Reason)
	case d.Stop != "":
		return fmt.Sprintf("stop %s: %s", d.Stop, d.Reason)
	}
	return "nothing: " + d.Reason
}

// Follower is the state between decisions: since when the surplus lasts.
type Follower struct {
	cfg          Config
	surplusSince time.Time // zero: no surplus
}

// New returns a Follower; cfg must be valid.
func New(cfg Config) *Follower { return &Follower{cfg: cfg} }

// Want is the workers the wanted slots need, within Min and Max.
func (f *Follower) Want(slotsWanted int) int {
	n := (max(slotsWanted, 0) + f.cfg.SlotsPerWorker - 1) / f.cfg.SlotsPerWorker
	return min(max(n, f.cfg.Min), f.cfg.Max)
}

// Decide returns what to do about in.
func (f *Follower) Decide(in Input) Decision {
	want := f.Want(in.SlotsWanted)
	var running, starting, stopping int
	for _, w := range in.Workers {
		switch {
		case w.Stopping:
			stopping++
		case !w.Registered:
			starting++
			running++
		default:
			running++
		}
	}
	need := fmt.Sprintf("%d slots wanted, %d per worker: want %d workers (min %d, max %d), run %d", in.SlotsWanted, f.cfg.SlotsPerWorker, want, f.cfg.Min, f.cfg.Max, running)
	if running <= want {
		f.surplusSince = time.Time{}
	}
	switch {
	case running < want && starting > 0:
		return Decision{Reason: fmt.Sprintf("%s; %d starting, wait for them to register", need, starting)}
	case running < want:
		return Decision{Start: want - running, Reason: need}
	case running == want:
		return Decision{Reason: need}
	}
	if f.surplusSince.IsZero() {
		f.surplusSince = in.Now
	}
	if lasted := in.Now.Sub(f.surplusSince); lasted < f.cfg.ScaleDownDelay {
		return Decision{Reason: fmt.Sprintf("%s; surplus for %s, stop after %s", need, lasted, f.cfg.ScaleDownDelay)}
	}
	if stopping > 0 {
		return Decision{Reason: fmt.Sprintf("%s; %d stopping, one at a time", need, stopping)}
	}
	// The newest idle worker: the oldest ones keep the longest-lived tasks.
	for i := len(in.Workers) - 1; i >= 0; i-- {
		w := in.Workers[i]
		if w.Stopping || (w.Registered && w.Tasks != 0) {
			continue
		}
		why := "idle"
		if !w.Registered {
			why = "not registered yet"
		}
		return Decision{Stop: w.ID, Reason: fmt.Sprintf("%s; surplus for %s, %s is %s", need, in.Now.Sub(f.surplusSince), w.ID, why)}
	}
	return Decision{Reason: fmt.Sprintf("%s; surplus for %s, but every worker runs tasks", need, in.Now.Sub(f.surplusSince))}
}
