// Package checkpoint is the checkpoint coordinator's protocol core: a pure
// state machine that decides when to trigger a checkpoint, collects the
// acknowledgements of every subtask, asks for the manifest (the commit
// point) to be written, and completes, aborts or discards checkpoints.
//
// It does no I/O and reads no clock: events come in as method calls with
// the time, decisions come out as values, and one goroutine (the job's
// driver in package coordinator) owns it and carries the decisions out.
// That makes every protocol path testable as a scripted trace
// (testdata/*.txt), as etcd's raft core is.
//
//	decisions := c.Tick(now)                   // maybe Trigger, maybe Abort (timeout)
//	decisions  = c.Ack(now, id, task, handle)  // maybe WriteManifest
//	decisions  = c.ManifestWritten(now, id, err) // Complete + Discard, or Abort
//
// One checkpoint is in flight at a time. A checkpoint counts as complete
// only once its manifest is written: Complete is decided after
// ManifestWritten(nil), never before.
package checkpoint

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Config says how often checkpoints are taken and how long they may take.
type Config struct {
	// Interval between the starts of two periodic checkpoints; 0 turns
	// periodic checkpoints off (savepoints can still be triggered).
	Interval time.Duration
	// Timeout aborts a checkpoint not acknowledged by every subtask in
	// time (default 10 minutes).
	Timeout time.Duration
	// MinPause is the least time between the end of one checkpoint and the
	// start of the next, so that slow checkpoints cannot starve processing.
	MinPause time.Duration
	// Retain is how many completed checkpoints are kept (default 1); older
	// ones are discarded once a newer one completes.
	Retain int
}

// DefaultTimeout is Config.Timeout's default.
const DefaultTimeout = 10 * time.Minute

// Validate reports every problem with the config.
func (c Config) Validate() error {
	var errs []error
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("interval %s is negative", c.Interval))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %s is negative", c.Timeout))
	}
	if c.MinPause < 0 {
		errs = append(errs, fmt.Errorf("minPause %s is negative", c.MinPause))
	}
	if c.Retain < 0 {
		errs = append(errs, fmt.Errorf("retain %d is negative", c.Retain))
	}
	return errors.Join(errs...)
}

// Task names one subtask.
type Task struct {
	Vertex  string
	Subtask int
}

func (t Task) String() string { return fmt.Sprintf("%s/%d", t.Vertex, t.Subtask) }

// Ack is a subtask's acknowledgement of a checkpoint: its state handles,
// source positions and pre-committed sink transactions, opaque here.
type Ack struct {
	Task   Task
	Handle any
}

// Kind is what a Decision asks the driver to do.
type Kind int

const (
	// Trigger: start checkpoint Checkpoint at the Sources.
	Trigger Kind = iota + 1
	// WriteManifest: every subtask acknowledged or had finished; write
	// the manifest with Acks and Finished (conditionally), then report
	// ManifestWritten.
	WriteManifest
	// Complete: the manifest is written; tell the subtasks (sinks commit
	// their transactions).
	Complete
	// Abort: give up Checkpoint for Reason; tell the subtasks and clean
	// up its files.
	Abort
	// Discard: the completed checkpoints Discarded are no longer retained;
	// delete what only they reference.
	Discard
)

// Decision is one thing the driver must do, in order.
type Decision struct {
	Kind       Kind
	Checkpoint int64
	Savepoint  bool
	Sources    []Task // Trigger
	Acks       []Ack  // WriteManifest, sorted by task
	// Finished are the subtasks that had finished their input without
	// acknowledging (WriteManifest, sorted): the manifest records their
	// final snapshot, and their final transactions commit with it.
	Finished  []Task
	Reason    string  // Abort
	Discarded []int64 // Discard
	Duration  time.Duration
}

func (d Decision) String() string {
	var b strings.Builder
	switch d.Kind {
	case Trigger:
		kind := "checkpoint"
		if d.Savepoint {
			kind = "savepoint"
		}
		fmt.Fprintf(&b, "trigger %s %d at", kind, d.Checkpoint)
		for _, s := range d.Sources {
			fmt.Fprintf(&b, " %s", s)
		}
	case WriteManifest:
		fmt.Fprintf(&b, "write manifest %d with %d acks", d.Checkpoint, len(d.Acks))
		if len(d.Finished) > 0 {
			fmt.Fprintf(&b, " and %d finished", len(d.Finished))
		}
	case Complete:
		fmt.Fprintf(&b, "complete %d in %s", d.Checkpoint, d.Duration)
	case Abort:
		fmt.Fprintf(&b, "abort %d: %s", d.Checkpoint, d.Reason)
	case Discard:
		fmt.Fprintf(&b, "discard %v", d.Discarded)
	default:
		fmt.Fprintf(&b, "decision(%d)", d.Kind)
	}
	return b.String()
}

// Coordinator is the state machine. It is not safe for concurrent use: one
// goroutine owns it.
type Coordinator struct {
	cfg     Config
	tasks   map[Task]bool
	sources []Task
	// finished are the subtasks that finished their input (Finished):
	// they acknowledge no more checkpoints, and finished sources start
	// none.
	finished map[Task]bool

	next        int64     // id of the next checkpoint
	pending     *pending  // the one in flight, if any
	completed   []int64   // retained, oldest first
	lastTrigger time.Time // start of the last checkpoint
	lastEnd     time.Time // end (complete or abort) of the last checkpoint
	started     bool
	stopped     bool
}

type pending struct {
	id        int64
	savepoint bool
	triggered time.Time
	acks      map[Task]Ack
	writing   bool
}

// New returns a coordinator for a job whose subtasks are tasks, of which
// sources start checkpoints. lastCompleted is the id of the latest
// completed checkpoint the job restored from (0 for none); ids continue
// after it.
func New(cfg Config, tasks, sources []Task, lastCompleted int64) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint config: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Retain == 0 {
		cfg.Retain = 1
	}
	c := &Coordinator{cfg: cfg, tasks: map[Task]bool{}, finished: map[Task]bool{}, next: lastCompleted + 1}
	for _, t := range tasks {
		c.tasks[t] = true
	}
	for _, s := range sources {
		if !c.tasks[s] {
			return nil, fmt.Errorf("source %s is not one of the tasks", s)
		}
	}
	if len(sources) == 0 {
		return nil, errors.New("a job needs at least one source task to start checkpoints")
	}
	c.sources = append([]Task(nil), sources...)
	if lastCompleted > 0 {
		c.completed = []int64{lastCompleted}
	}
	return c, nil
}

// InFlight returns the checkpoint in flight, if any.
func (c *Coordinator) InFlight() (int64, bool) {
	if c.pending == nil {
		return 0, false
	}
	return c.pending.id, true
}

// Completed returns the retained completed checkpoints, oldest first.
func (c *Coordinator) Completed() []int64 { return append([]int64(nil), c.completed...) }

// SkipTo makes the next checkpoint id at least next: ids stay unique per
// job across attempts, even those of checkpoints that never completed.
func (c *Coordinator) SkipTo(next int64) { c.next = max(c.next, next) }

// Next returns the id the next checkpoint will get.
func (c *Coordinator) Next() int64 { return c.next }

// Stop ends periodic triggering (the job is finishing or stopping). A
// checkpoint in flight may still complete.
func (c *Coordinator) Stop() { c.stopped = true }

// Tick advances time: it aborts a checkpoint that timed out and triggers
// the next periodic one when it is due.
func (c *Coordinator) Tick(now time.Time) []Decision {
	var out []Decision
	if p := c.pending; p != nil && !p.writing && now.Sub(p.triggered) >= c.cfg.Timeout {
		out = append(out, c.abort(now, fmt.Sprintf("timed out after %s with %d of %d acks", c.cfg.Timeout, len(p.acks), len(c.tasks))))
	}
	if c.pending != nil || c.stopped || c.cfg.Interval == 0 || len(c.liveSources()) == 0 {
		return out
	}
	if !c.started {
		// The first periodic checkpoint comes one interval after the
		// first tick, not at once.
		c.started, c.lastTrigger = true, now
		return out
	}
	if now.Sub(c.lastTrigger) < c.cfg.Interval || (!c.lastEnd.IsZero() && now.Sub(c.lastEnd) < c.cfg.MinPause) {
		return out
	}
	return append(out, c.trigger(now, false))
}

// TriggerSavepoint starts a savepoint now, unless a checkpoint is in
// flight.
func (c *Coordinator) TriggerSavepoint(now time.Time) (Decision, error) {
	if err := c.canTrigger(); err != nil {
		return Decision{}, err
	}
	return c.trigger(now, true), nil
}

// TriggerNow starts a checkpoint now instead of at the next interval
// (before a rescale, so it replays nothing), unless one is in flight.
// The next periodic one is due an interval after it.
func (c *Coordinator) TriggerNow(now time.Time) (Decision, error) {
	if err := c.canTrigger(); err != nil {
		return Decision{}, err
	}
	return c.trigger(now, false), nil
}

func (c *Coordinator) canTrigger() error {
	switch {
	case c.pending != nil:
		return fmt.Errorf("checkpoint %d is in flight; try again when it ends", c.pending.id)
	case len(c.liveSources()) == 0:
		return errors.New("every source has finished its input")
	}
	return nil
}

func (c *Coordinator) trigger(now time.Time, savepoint bool) Decision {
	c.pending = &pending{id: c.next, savepoint: savepoint, triggered: now, acks: map[Task]Ack{}}
	c.next++
	c.lastTrigger = now
	return Decision{Kind: Trigger, Checkpoint: c.pending.id, Savepoint: savepoint, Sources: c.liveSources()}
}

// liveSources are the sources that have not finished.
func (c *Coordinator) liveSources() []Task {
	var out []Task
	for _, s := range c.sources {
		if !c.finished[s] {
			out = append(out, s)
		}
	}
	return out
}

// Finished records that subtask t finished its input (its final
// acknowledgement came): it takes part in no more checkpoints, and the
// one in flight completes without it once every other subtask
// acknowledged. Once every subtask has finished, the checkpoint in flight
// is aborted: the job's final manifest commits what is left.
func (c *Coordinator) Finished(now time.Time, t Task) []Decision {
	if !c.tasks[t] || c.finished[t] {
		return nil
	}
	c.finished[t] = true
	p := c.pending
	if p == nil || p.writing {
		return nil
	}
	if len(c.finished) == len(c.tasks) {
		return []Decision{c.abort(now, "every subtask has finished: the final checkpoint commits what is left")}
	}
	if !c.covered(p) {
		return nil
	}
	return []Decision{c.write(p)}
}

// covered reports whether every subtask acknowledged p or had finished.
func (c *Coordinator) covered(p *pending) bool {
	for t := range c.tasks {
		if _, ok := p.acks[t]; !ok && !c.finished[t] {
			return false
		}
	}
	return true
}

// Ack records a subtask's acknowledgement. Acks for checkpoints no longer
// in flight, and repeated acks, are ignored (nil). Once every subtask has
// acknowledged, the decision is to write the manifest.
func (c *Coordinator) Ack(now time.Time, id int64, a Ack) ([]Decision, error) {
	if !c.tasks[a.Task] {
		return nil, fmt.Errorf("ack of checkpoint %d from %s, which is not a task of this job", id, a.Task)
	}
	p := c.pending
	if p == nil || p.id != id || p.writing {
		return nil, nil
	}
	if _, dup := p.acks[a.Task]; dup {
		return nil, nil
	}
	p.acks[a.Task] = a
	if !c.covered(p) {
		return nil, nil
	}
	return []Decision{c.write(p)}, nil
}

// write decides to write p's manifest: every subtask acknowledged it or
// had finished.
func (c *Coordinator) write(p *pending) Decision {
	p.writing = true
	acks := make([]Ack, 0, len(p.acks))
	for _, a := range p.acks {
		acks = append(acks, a)
	}
	less := func(a, b Task) bool {
		if a.Vertex != b.Vertex {
			return a.Vertex < b.Vertex
		}
		return a.Subtask < b.Subtask
	}
	sort.Slice(acks, func(i, j int) bool { return less(acks[i].Task, acks[j].Task) })
	var fin []Task
	for t := range c.finished {
		if _, ok := p.acks[t]; !ok {
			fin = append(fin, t)
		}
	}
	sort.Slice(fin, func(i, j int) bool { return less(fin[i], fin[j]) })
	return Decision{Kind: WriteManifest, Checkpoint: p.id, Savepoint: p.savepoint, Acks: acks, Finished: fin}
}

// Decline aborts checkpoint id: a subtask could not take it.
func (c *Coordinator) Decline(now time.Time, id int64, t Task, reason string) []Decision {
	if p := c.pending; p == nil || p.id != id || p.writing {
		return nil
	}
	return []Decision{c.abort(now, fmt.Sprintf("declined by %s: %s", t, reason))}
}

// TaskFailed aborts the checkpoint in flight: the job restarts anyway.
func (c *Coordinator) TaskFailed(now time.Time, t Task) []Decision {
	if c.pending == nil {
		return nil
	}
	return []Decision{c.abort(now, fmt.Sprintf("%s failed", t))}
}

// Abort aborts the checkpoint in flight for reason (the job restarts or
// ends anyway): the reason names the failure, such as which subtask
// failed.
func (c *Coordinator) Abort(now time.Time, reason string) []Decision {
	if c.pending == nil {
		return nil
	}
	return []Decision{c.abort(now, reason)}
}

// ManifestWritten reports the outcome of a WriteManifest decision. Only a
// written manifest completes the checkpoint; a failed write aborts it.
func (c *Coordinator) ManifestWritten(now time.Time, id int64, err error) []Decision {
	p := c.pending
	if p == nil || p.id != id || !p.writing {
		return nil
	}
	if err != nil {
		return []Decision{c.abort(now, "write manifest: "+err.Error())}
	}
	c.pending = nil
	c.lastEnd = now
	out := []Decision{{Kind: Complete, Checkpoint: id, Savepoint: p.savepoint, Duration: now.Sub(p.triggered)}}
	if p.savepoint {
		return out // savepoints are retained apart, by name
	}
	c.completed = append(c.completed, id)
	if n := len(c.completed) - c.cfg.Retain; n > 0 {
		out = append(out, Decision{Kind: Discard, Discarded: append([]int64(nil), c.completed[:n]...)})
		c.completed = c.completed[n:]
	}
	return out
}

func (c *Coordinator) abort(now time.Time, reason string) Decision {
	id, sp := c.pending.id, c.pending.savepoint
	c.pending = nil
	c.lastEnd = now
	return Decision{Kind: Abort, Checkpoint: id, Savepoint: sp, Reason: reason}
}
