// Package coordinator accepts jobs, plans them, schedules their subtasks
// onto workers' slots, tracks job and task states from the workers' events,
// cancels jobs, and serves the JSON HTTP API the CLI uses.
//
// The coordinator keeps its truth in the bucket: each job's spec is stored
// at jobs/<id>/spec.json before anything runs, and its final status at
// jobs/<id>/status.json.
//
// The main loop, driven by one goroutine:
//
//	for {
//		events := plane.Events(wait)   // task state changes and metrics
//		apply(events)                   // job state follows task states
//		every second: schedule waiting jobs, fail jobs whose workers died
//	}
package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/coordinator/control"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// Job states. CANCELING is transient.
const (
	JobCreated   = control.StateCreated
	JobRunning   = control.StateRunning
	JobFinished  = control.StateFinished
	JobFailed    = control.StateFailed
	JobCanceled  = control.StateCanceled
	JobCanceling = "CANCELING"
)

// Errors.
var (
	ErrNotFound = errors.New("coordinator: job not found")
	ErrEnded    = errors.New("coordinator: job has already ended")
)

// Config configures a coordinator.
type Config struct {
	Plane     control.Plane
	Bucket    blob.Bucket
	Transport exchange.Transport
	Logger    *slog.Logger
	// CancelTimeout is how long a cancel waits for workers to confirm
	// before the job counts as CANCELED anyway (default 10s).
	CancelTimeout time.Duration
	// RedisAddr is the Redis that redis sinks without an address commit
	// their transactions to.
	RedisAddr string
	// Crash is a fault-injection hook for tests: called at named points of
	// the commit protocol ("precommitted": an ack with a sink transaction came in; "manifest-written"; "txn-committed"), a true
	// result abandons the work there, as if the process had died.
	Crash func(point string) bool
}

// Coordinator manages jobs.
type Coordinator struct {
	cfg Config
	mu  struct {
		sync.Mutex
		jobs map[string]*job
	}
	changed chan struct{} // closed and replaced whenever a job changes state
	// results carries the outcomes of asynchronous work (manifest
	// writes, recoveries) back to the main loop.
	results      chan func(context.Context)
	wantSchedule bool        // guarded by mu
	dead         atomic.Bool // a Crash hook fired: Run stops
}

type job struct {
	id       string
	spec     *spec.Job
	specJSON []byte
	plan     *plan.Plan
	state    string
	attempt  int
	created  time.Time
	started  time.Time
	ended    time.Time
	errMsg   string
	tasks    map[control.TaskID]*taskState
	cancelAt time.Time
	ck       *ckpt // checkpoints and restarts
}

type taskState struct {
	worker  string
	state   string
	errMsg  string
	stats   task.StatsSnapshot
	updated time.Time
}

// New returns a coordinator; Run drives it.
func New(cfg Config) *Coordinator {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CancelTimeout <= 0 {
		cfg.CancelTimeout = 10 * time.Second
	}
	c := &Coordinator{cfg: cfg, changed: make(chan struct{}), results: make(chan func(context.Context), 64)}
	c.mu.jobs = map[string]*job{}
	return c
}

// Submit validates a job fully, stores its spec and schedules it. It
// returns the job id. A spec that does not validate is refused with
// spec.Problems and nothing is stored.
func (c *Coordinator) Submit(ctx context.Context, js *spec.Job) (string, error) {
	return c.SubmitWith(ctx, js, SubmitOptions{})
}

// SubmitOptions are the ways to start a job other than from scratch.
type SubmitOptions struct {
	// FromSavepoint is the key of a savepoint's (or checkpoint's)
	// manifest to start from.
	FromSavepoint string
	// Parallelism, if not 0, replaces the job's default parallelism:
	// restoring at another parallelism redistributes key groups. Sources
	// keep the parallelism they had in the savepoint.
	Parallelism int
}

// SubmitWith is Submit with options.
func (c *Coordinator) SubmitWith(ctx context.Context, js *spec.Job, opts SubmitOptions) (string, error) {
	var from *manifest.Manifest
	if opts.FromSavepoint != "" {
		raw, err := c.cfg.Bucket.Get(ctx, opts.FromSavepoint)
		if err != nil {
			return "", fmt.Errorf("read savepoint %s: %w", opts.FromSavepoint, err)
		}
		if from, err = manifest.Decode(raw); err != nil {
			return "", fmt.Errorf("savepoint %s: %w", opts.FromSavepoint, err)
		}
		if js.Checkpoint == nil {
			return "", fmt.Errorf("restore from %s: the spec has no checkpoint section; a job restored from a savepoint must checkpoint to keep its exactly-once output", opts.FromSavepoint)
		}
	}
	if opts.Parallelism != 0 {
		js.Parallelism = opts.Parallelism
		for i := range js.Sources {
			s := &js.Sources[i]
			if s.Parallelism != 0 || from == nil {
				continue
			}
			for _, v := range from.Vertices {
				for _, st := range v.Subtasks {
					if _, ok := st.SourcePositions[s.Name]; ok {
						s.Parallelism = v.Parallelism
					}
				}
			}
		}
	}
	// Validate first: a spec that cannot be stored (NaN, say) gets
	// problems naming the field, not an encoding error.
	if err := js.Validate(); err != nil {
		return "", err
	}
	specJSON, err := json.MarshalIndent(js, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode spec: %w", err)
	}
	// Plan the job as the workers will see it: decoded from the stored
	// JSON (a Go builder's int config becomes float64 there, say).
	js = new(spec.Job)
	if err := json.Unmarshal(specJSON, js); err != nil {
		return "", fmt.Errorf("decode stored spec: %w", err)
	}
	p, err := plan.Build(js)
	if err != nil {
		return "", err
	}
	if from != nil && from.MaxParallelism != p.Job.MaxParallelism {
		return "", fmt.Errorf("restore from %s: it has %d key groups (maxParallelism) and the spec %d; they must be equal", opts.FromSavepoint, from.MaxParallelism, p.Job.MaxParallelism)
	}
	id := js.Name + "-" + randomID()
	if err := c.cfg.Bucket.PutIfAbsent(ctx, layout.SpecKey(id), specJSON); err != nil {
		return "", fmt.Errorf("store spec of %s: %w", id, err)
	}
	j := &job{id: id, spec: js, specJSON: specJSON, plan: p, state: JobCreated, attempt: 1, created: time.Now(), ck: newCkpt(js)}
	if from != nil {
		j.ck.origin, j.ck.restoreKey, j.ck.restoring = opts.FromSavepoint, opts.FromSavepoint, from.Checkpoint
		if err := c.cfg.Bucket.Put(ctx, layout.OriginKey(id), []byte(opts.FromSavepoint+"\n")); err != nil {
			return "", fmt.Errorf("store origin of %s: %w", id, err)
		}
	}
	c.mu.Lock()
	c.mu.jobs[id] = j
	c.mu.Unlock()
	c.cfg.Logger.Info("job submitted", "job", id)
	c.schedule(ctx)
	return id, nil
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Load reads the jobs stored in the bucket so that a restarted coordinator
// lists them. A job that had not ended when the coordinator stopped is
// marked FAILED: resuming from checkpoints is not available yet.
func (c *Coordinator) Load(ctx context.Context) error {
	objs, err := c.cfg.Bucket.List(ctx, layout.JobsPrefix)
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	for _, o := range objs {
		id, ok := layout.ParseSpecKey(o.Key)
		if !ok {
			continue
		}
		raw, err := c.cfg.Bucket.Get(ctx, o.Key)
		if err != nil {
			return fmt.Errorf("read %s: %w", o.Key, err)
		}
		var js spec.Job
		if err := json.Unmarshal(raw, &js); err != nil {
			c.cfg.Logger.Warn("skipping unreadable job spec", "key", o.Key, "err", err)
			continue
		}
		p, err := plan.Build(&js)
		if err != nil {
			c.cfg.Logger.Warn("skipping job whose spec no longer plans", "job", id, "err", err)
			continue
		}
		j := &job{id: id, spec: &js, specJSON: raw, plan: p, state: JobFailed, created: o.Modified, attempt: 1,
			errMsg: "coordinator restarted while the job ran", ck: newCkpt(&js)}
		if st, err := c.cfg.Bucket.Get(ctx, layout.StatusKey(id)); err == nil {
			var s JobStatus
			if json.Unmarshal(st, &s) == nil {
				j.state, j.errMsg, j.attempt = s.State, s.Error, max(s.Attempt, 1)
				j.created, j.started, j.ended = s.Created, s.Started, s.Ended
			}
		}
		if origin, err := c.cfg.Bucket.Get(ctx, layout.OriginKey(id)); err == nil {
			j.ck.origin = strings.TrimSpace(string(origin))
		}
		if !terminal(j.state) || (j.state == JobFailed && j.errMsg == "coordinator restarted while the job ran") {
			if j.ck.restart.Attempts > 0 {
				// Resume from the latest checkpoint as a new attempt.
				j.state, j.errMsg = JobRestarting, "coordinator restarted while the job ran"
				j.ck.recoveries = append(j.ck.recoveries, Recovery{Attempt: j.attempt + 1, Reason: j.errMsg, Detected: time.Now()})
				for _, v := range p.Vertices {
					for s := 0; s < v.Parallelism; s++ {
						if j.tasks == nil {
							j.tasks = map[control.TaskID]*taskState{}
						}
						j.tasks[control.TaskID{Job: id, Attempt: j.attempt, Vertex: v.Name, Subtask: s}] = &taskState{state: control.StateCanceled}
					}
				}
				c.cfg.Logger.Info("resuming job", "job", id, "attempt", j.attempt+1)
			} else {
				j.state, j.errMsg = JobFailed, "coordinator restarted while the job ran"
			}
		}
		c.mu.Lock()
		if _, exists := c.mu.jobs[id]; !exists {
			c.mu.jobs[id] = j
		}
		c.mu.Unlock()
	}
	return nil
}

// Run drives the coordinator until ctx is done.
func (c *Coordinator) Run(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastCk := time.Now()
	for {
		evs, err := c.cfg.Plane.Events(ctx, 100*time.Millisecond)
		if ctx.Err() != nil || c.dead.Load() {
			return nil
		}
		if err != nil {
			c.cfg.Logger.Warn("read task events failed", "err", err)
			sleepCtx(ctx, 100*time.Millisecond)
		}
		for _, e := range evs {
			c.apply(ctx, e)
		}
		c.drainResults(ctx)
		if now := time.Now(); now.Sub(lastCk) >= 50*time.Millisecond {
			lastCk = now
			c.checkpointTick(ctx, now)
		}
		c.mu.Lock()
		want := c.wantSchedule
		c.wantSchedule = false
		c.mu.Unlock()
		if want {
			c.schedule(ctx)
		}
		select {
		case <-tick.C:
			c.schedule(ctx)
			c.checkWorkers(ctx)
			c.checkCancels(ctx)
		default:
		}
	}
}

// drainResults applies the outcomes of finished asynchronous work.
func (c *Coordinator) drainResults(ctx context.Context) {
	for {
		select {
		case fn := <-c.results:
			c.mu.Lock()
			fn(ctx)
			c.mu.Unlock()
		default:
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// schedule places the subtasks of every CREATED job that has none placed
// yet, if the live workers have enough free slots.
//
// Slots are shared as in Flink: slot group i holds subtask i of every
// vertex, so a job needs as many slots as its largest parallelism, and a
// pipeline's subtasks sit together on one worker. Groups are spread: the
// worker with the most free slots takes the next group.
func (c *Coordinator) schedule(ctx context.Context) {
	workers, err := c.cfg.Plane.Workers(ctx)
	if err != nil {
		c.cfg.Logger.Warn("list workers failed", "err", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	used := map[string]int{} // worker -> slot groups in use
	var waiting []*job
	for _, j := range c.mu.jobs {
		groups := map[string]map[int]bool{}
		for id, t := range j.tasks {
			if terminal(t.state) {
				continue
			}
			if groups[t.worker] == nil {
				groups[t.worker] = map[int]bool{}
			}
			groups[t.worker][id.Subtask] = true
		}
		for w, g := range groups {
			used[w] += len(g)
		}
		if len(j.tasks) == 0 && (j.state == JobCreated || j.state == JobRestarting && j.ck != nil && j.ck.ready) {
			waiting = append(waiting, j)
		}
	}
	sort.Slice(waiting, func(a, b int) bool { return waiting[a].created.Before(waiting[b].created) })
	for _, j := range waiting {
		need := 0
		for _, v := range j.plan.Vertices {
			need = max(need, v.Parallelism)
		}
		free := 0
		for _, w := range workers {
			free += max(w.Slots-used[w.ID], 0)
		}
		if free < need {
			c.cfg.Logger.Debug("job waits for slots", "job", j.id, "need", need, "free", free)
			continue
		}
		j.tasks = map[control.TaskID]*taskState{}
		placement := make([]string, need) // slot group -> worker
		for g := range placement {
			best := -1
			for i, w := range workers {
				if best < 0 || w.Slots-used[w.ID] > workers[best].Slots-used[workers[best].ID] {
					best = i
				}
			}
			placement[g] = workers[best].ID
			used[workers[best].ID]++
		}
		failed := false
		for _, v := range j.plan.Vertices {
			for s := 0; s < v.Parallelism && !failed; s++ {
				id := control.TaskID{Job: j.id, Attempt: j.attempt, Vertex: v.Name, Subtask: s}
				wid := placement[s]
				j.tasks[id] = &taskState{worker: wid, state: control.StateCreated, updated: time.Now()}
				cmd := control.Command{Kind: control.CmdDeploy, Task: id, Spec: j.specJSON}
				if j.ck != nil {
					cmd.Restore = j.ck.restoreKey
				}
				if err := c.cfg.Plane.Send(ctx, wid, cmd); err != nil {
					c.failOrRestartLocked(ctx, j, fmt.Sprintf("deploy %s[%d] to worker %s: %v", id.Vertex, id.Subtask, wid, err), 0)
					failed = true
				}
			}
		}
		if j.ck != nil {
			j.ck.ready = false
		}
		c.cfg.Logger.Info("job scheduled", "job", j.id, "attempt", j.attempt, "tasks", len(j.tasks), "slots", need, "workers", len(workers))
	}
}

// apply records one task event and moves the job's state on.
func (c *Coordinator) apply(ctx context.Context, e control.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.mu.jobs[e.Task.Job]
	if j == nil || e.Task.Attempt != j.attempt {
		return
	}
	t := j.tasks[e.Task]
	if t == nil || terminal(t.state) {
		return // terminal task states are final; late metrics are dropped
	}
	t.state, t.errMsg, t.updated = e.State, e.Error, e.Time
	if e.Stats != (task.StatsSnapshot{}) { // a state change may carry no metrics
		t.stats = e.Stats
	}
	if j.state == JobRestarting && !j.ck.recovered {
		return // the old attempt winding down
	}
	if e.Ack != nil && j.ck != nil && !terminal(j.state) {
		c.onAckLocked(ctx, j, e)
	}
	switch {
	case e.State == control.StateFailed && !terminal(j.state) && j.state != JobCanceling:
		c.failOrRestartLocked(ctx, j, fmt.Sprintf("%s[%d] on worker %s: %s", e.Task.Vertex, e.Task.Subtask, e.Worker, e.Error), e.CorruptCheckpoint)
		return
	case e.State == control.StateFailed && j.state == JobCanceling && c.allTerminal(j):
		c.endLocked(ctx, j, JobCanceled, "")
		return
	case e.State == control.StateCanceled && !terminal(j.state) && j.state != JobCanceling:
		// Nobody asked: the worker is shutting down, and the job cannot
		// complete without the task.
		c.failOrRestartLocked(ctx, j, fmt.Sprintf("%s[%d] was stopped by worker %s (shutting down)", e.Task.Vertex, e.Task.Subtask, e.Worker), 0)
		return
	case j.state == JobCanceling:
		if c.allTerminal(j) {
			c.endLocked(ctx, j, JobCanceled, "")
		}
		return
	}
	if terminal(j.state) {
		return
	}
	running, finished := 0, 0
	for _, ts := range j.tasks {
		switch ts.state {
		case control.StateRunning:
			running++
		case control.StateFinished:
			finished++
		}
	}
	if finished > 0 && j.ck != nil && j.ck.sm != nil {
		j.ck.sm.Stop() // sources are ending: no new checkpoints
	}
	if finished == len(j.tasks) {
		if j.ck != nil && j.ck.cfg != nil {
			j.ck.finalizing = true // the final manifest commits the output
			return
		}
		c.endLocked(ctx, j, JobFinished, "")
		return
	}
	if (j.state == JobCreated || j.state == JobRestarting) && running+finished == len(j.tasks) {
		if j.state == JobRestarting {
			if n := len(j.ck.recoveries); n > 0 {
				r := &j.ck.recoveries[n-1]
				r.Running = time.Now()
				r.Seconds = r.Running.Sub(r.Detected).Seconds()
				c.cfg.Logger.Info("job recovered", "job", j.id, "attempt", j.attempt, "seconds", r.Seconds, "checkpoint", r.RestoredFrom)
			}
		}
		j.state = JobRunning
		j.started = time.Now()
		if j.ck != nil {
			c.startCheckpointsLocked(j)
		}
		c.notifyLocked()
		c.cfg.Logger.Info("job running", "job", j.id)
	}
}

func (c *Coordinator) allTerminal(j *job) bool {
	for _, t := range j.tasks {
		if !terminal(t.state) {
			return false
		}
	}
	return true
}

func terminal(s string) bool {
	return s == control.StateFinished || s == control.StateFailed || s == control.StateCanceled
}

// failLocked fails the job and cancels its other tasks.
func (c *Coordinator) failLocked(ctx context.Context, j *job, msg string) {
	c.cfg.Logger.Error("job failed", "job", j.id, "err", msg)
	c.cancelTasksLocked(ctx, j)
	c.endLocked(ctx, j, JobFailed, msg)
}

func (c *Coordinator) cancelTasksLocked(ctx context.Context, j *job) {
	for id, t := range j.tasks {
		if terminal(t.state) {
			continue
		}
		if err := c.cfg.Plane.Send(ctx, t.worker, control.Command{Kind: control.CmdCancel, Task: id}); err != nil {
			c.cfg.Logger.Warn("send cancel failed", "task", id, "worker", t.worker, "err", err)
		}
	}
}

// endLocked moves the job to a final state, stores its status, and deletes
// its attempt's channels.
func (c *Coordinator) endLocked(ctx context.Context, j *job, state, msg string) {
	j.state, j.errMsg, j.ended = state, msg, time.Now()
	if j.ck != nil {
		j.ck.sm = nil
		j.ck.finalizing = false
		j.ck.failWaitsLocked("the job ended " + state)
		j.ck.closeSinks()
		if j.ck.stoppedAt != "" && msg == "" {
			msg = "stopped with savepoint " + j.ck.stoppedAt
			j.errMsg = msg
		}
	}
	st := c.statusLocked(j)
	if err := c.storeStatus(ctx, j.id, st); err != nil {
		c.cfg.Logger.Warn("store job status failed", "job", j.id, "err", err)
	}
	if c.cfg.Transport != nil {
		if err := c.cfg.Transport.DeleteAttempt(ctx, j.id, j.attempt); err != nil {
			c.cfg.Logger.Warn("delete job channels failed", "job", j.id, "err", err)
		}
	}
	c.cfg.Logger.Info("job ended", "job", j.id, "state", state)
	c.notifyLocked()
}

func (c *Coordinator) storeStatus(ctx context.Context, id string, st JobStatus) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return c.cfg.Bucket.Put(ctx, layout.StatusKey(id), b)
}

func (c *Coordinator) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// checkWorkers fails running jobs whose tasks sit on workers whose
// heartbeat lapsed.
func (c *Coordinator) checkWorkers(ctx context.Context) {
	workers, err := c.cfg.Plane.Workers(ctx)
	if err != nil {
		return
	}
	live := map[string]bool{}
	for _, w := range workers {
		live[w.ID] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, j := range c.mu.jobs {
		if terminal(j.state) {
			continue
		}
		for id, t := range j.tasks {
			if terminal(t.state) || live[t.worker] {
				continue
			}
			if j.state == JobCanceling {
				t.state = control.StateCanceled
				continue
			}
			if j.state == JobRestarting && !j.ck.recovered {
				t.state = control.StateCanceled
				continue
			}
			c.failOrRestartLocked(ctx, j, fmt.Sprintf("worker %s running %s[%d] was lost (heartbeat expired)", t.worker, id.Vertex, id.Subtask), 0)
			break
		}
		if j.state == JobCanceling && c.allTerminal(j) {
			c.endLocked(ctx, j, JobCanceled, "")
		}
	}
}

func (c *Coordinator) checkCancels(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, j := range c.mu.jobs {
		if j.state == JobCanceling && time.Since(j.cancelAt) > c.cfg.CancelTimeout {
			c.endLocked(ctx, j, JobCanceled, "workers did not confirm the cancel in time")
		}
	}
}

// Cancel stops a job. It returns once the cancel is under way; the job
// reaches CANCELED when every task has stopped.
func (c *Coordinator) Cancel(ctx context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.mu.jobs[id]
	if j == nil {
		return fmt.Errorf("cancel %s: %w", id, ErrNotFound)
	}
	if terminal(j.state) {
		return fmt.Errorf("cancel %s (%s): %w", id, j.state, ErrEnded)
	}
	if j.state == JobCanceling {
		return nil
	}
	j.state, j.cancelAt = JobCanceling, time.Now()
	c.cancelTasksLocked(ctx, j)
	if c.allTerminal(j) {
		c.endLocked(ctx, j, JobCanceled, "")
	} else {
		c.notifyLocked()
	}
	return nil
}

// Stop drains a running job: its sources end their input early, every
// window fires, sinks flush, and the job reaches FINISHED as if its input
// had ended. Compare Cancel, which stops everything at once.
func (c *Coordinator) Stop(ctx context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.mu.jobs[id]
	if j == nil {
		return fmt.Errorf("stop %s: %w", id, ErrNotFound)
	}
	if terminal(j.state) || j.state == JobCanceling {
		return fmt.Errorf("stop %s (%s): %w", id, j.state, ErrEnded)
	}
	if j.state == JobRestarting {
		return fmt.Errorf("stop %s: the job is restarting; try again when it runs", id)
	}
	for tid, t := range j.tasks {
		v := j.plan.Vertex(tid.Vertex)
		if terminal(t.state) || v == nil || v.Nodes[0].Kind != plan.KindSource {
			continue
		}
		if err := c.cfg.Plane.Send(ctx, t.worker, control.Command{Kind: control.CmdStop, Task: tid}); err != nil {
			return fmt.Errorf("stop %s: %w", id, err)
		}
	}
	return nil
}

// Wait blocks until the job reaches a final state or ctx is done, and
// returns its status.
func (c *Coordinator) Wait(ctx context.Context, id string) (JobStatus, error) {
	for {
		c.mu.Lock()
		j := c.mu.jobs[id]
		if j == nil {
			c.mu.Unlock()
			return JobStatus{}, fmt.Errorf("wait for %s: %w", id, ErrNotFound)
		}
		st := c.statusLocked(j)
		ch := c.changed
		c.mu.Unlock()
		if terminal(st.State) {
			return st, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}
