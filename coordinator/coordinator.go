// Package coordinator accepts jobs, plans them, schedules their subtasks
// onto workers' slots, follows their lifecycle from the workers' events,
// drives their checkpoints, commits their sinks' transactions, recovers
// them from checkpoints, and serves the JSON HTTP API the CLI uses.
//
// The coordinator keeps its truth in the bucket (statestore/layout): each
// job's spec is stored before anything runs, its status as it changes,
// its checkpoints' manifests as they complete.
//
// Decisions are made by two pure state machines per job, package
// lifecycle (states, restarts, recovery, the end) and package checkpoint
// (trigger, acks, manifest); this package is their driver. One goroutine,
// Run, owns them:
//
//	for {
//		events := plane.Events(wait)     // task state changes, metrics, acks
//		apply(events)                     // lifecycle + checkpoint decisions, carried out
//		every 50 ms: tick both machines; every second: schedule, check workers
//		drain results of asynchronous I/O (manifest writes, recoveries, commits)
//	}
//
// Every goroutine it starts for I/O runs on an errgroup bound to Run's
// context; Run returns only when all of them have ended, and Close stops
// Run and releases what the coordinator opened.
//
// The files are named for what they drive: schedule.go (placing tasks),
// driver.go (lifecycle decisions), checkpoints.go (the checkpoint
// machine and manifests), commit.go (sink transactions and the final
// manifest), janitor.go (staging clean-up and garbage collection),
// recovery.go (restoring from a checkpoint), savepoint.go (savepoints,
// stop with savepoint), delete.go, functions.go (deployed Wasm functions
// and their API), upgrade.go (moving a job to another version of one).
package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm/registry"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// Job states. CANCELING and RESTARTING are transient.
const (
	JobCreated    = lifecycle.Created
	JobRunning    = lifecycle.Running
	JobRestarting = lifecycle.Restarting
	JobCanceling  = lifecycle.Canceling
	JobSuspended  = lifecycle.Suspended // for want of input (autoscale.scaleToZero)
	JobFinished   = lifecycle.Finished
	JobFailed     = lifecycle.Failed
	JobCanceled   = lifecycle.Canceled
)

// Recovery is one restart of a job.
type Recovery = lifecycle.Recovery

// Errors.
var (
	ErrNotFound = errors.New("coordinator: job not found")
	ErrEnded    = errors.New("coordinator: job has already ended")
	// ErrStopped is returned to callers waiting for a savepoint when the
	// coordinator stops.
	ErrStopped = errors.New("coordinator: stopped")
	// ErrNotRunning is wrapped by the refusal of a request a job takes
	// only while it runs (a rescale, a savepoint, a stop) when it is
	// starting or restarting: the same request may succeed once it runs
	// again. The API answers it 409 with retryLater set.
	ErrNotRunning = errors.New("coordinator: the job is not running")
)

// notRunning marks err as a refusal for the job's state now: errors.Is
// finds ErrNotRunning in it, and its message is err's.
func notRunning(err error) error { return notRunningError{err} }

type notRunningError struct{ err error }

func (e notRunningError) Error() string   { return e.err.Error() }
func (e notRunningError) Unwrap() []error { return []error{e.err, ErrNotRunning} }

// Config configures a coordinator.
type Config struct {
	Plane     control.Plane
	Bucket    blob.Bucket
	Transport exchange.Transport
	Logger    *slog.Logger
	// Now is the clock (default time.Now); nothing else reads the time.
	Now func() time.Time
	// CancelTimeout is how long a cancel waits for workers to confirm
	// before the job counts as CANCELED anyway (default 10s).
	CancelTimeout time.Duration
	// RedisAddr is the Redis that redis sinks without an address commit
	// their transactions to.
	RedisAddr string
	// WasmCache is the directory where the coordinator keeps the Wasm
	// functions it compiles to check them (deploys, submitted jobs), as
	// workers do theirs ("": in memory only). Shared with workers on the
	// same machine, a deployed module is compiled once there.
	WasmCache string
	// Epoch is the leader epoch this coordinator acts under (0: it holds
	// no lease, as the embedded coordinator). It goes into every command
	// it sends and every manifest and status it writes; statuses are
	// written per epoch (layout.StatusKeyAt), and a coordinator that finds
	// a newer epoch's status stops (see fence.go).
	Epoch int64
	// Leading reports whether this coordinator's lease is still trusted
	// (nil: always). Once it is not, Run returns control.ErrNotLeader and
	// no command, manifest, commit or status write is started.
	Leading func() bool
	// Crash is a fault-injection hook for tests: called at named points of
	// the commit protocol ("precommitted": an ack with a sink transaction came in; "manifest-written"; "txn-committed"), a true
	// result abandons the work there, as if the process had died.
	Crash func(point string) bool
}

// How often Run ticks the state machines, and schedules and checks
// workers.
const (
	tickInterval     = 50 * time.Millisecond
	scheduleInterval = time.Second
	// workerCheckInterval is how often the live workers are listed: a
	// worker whose process died is noticed within it (Redis drops its
	// named connection at once).
	workerCheckInterval = 250 * time.Millisecond
	eventWait           = 100 * time.Millisecond
)

// Coordinator manages jobs.
type Coordinator struct {
	cfg Config
	mu  struct {
		sync.Mutex
		jobs    map[string]*job
		changed chan struct{} // closed and replaced whenever a job changes
		// wantSchedule asks the loop to schedule at its next turn.
		wantSchedule bool
		// run is the running loop's errgroup for asynchronous I/O (nil
		// while Run is not running).
		run *runGroup
		// runDone is closed when Run returns.
		runDone chan struct{}
		closed  bool
	}
	// results carries the outcomes of asynchronous work (manifest
	// writes, recoveries) back to the loop.
	results chan func(context.Context)
	dead    atomic.Bool // a Crash hook fired: Run stops
	// deposed is set when a newer leader's status was found: Run stops.
	deposed atomic.Int64
	stop    context.CancelFunc
	stopped context.Context
	// idle runs asynchronous work started while no Run runs; Close waits
	// for it.
	idle errgroup.Group
	// wasm opens submitted jobs' Wasm functions to check their config.
	wasm wasmChecker
}

type runGroup struct {
	g   *errgroup.Group
	ctx context.Context
}

type job struct {
	id       string
	spec     *spec.Job
	specJSON []byte
	plan     *plan.Plan
	created  time.Time
	lc       *lifecycle.Job
	// tasks holds what the current attempt's tasks reported beyond their
	// state (which the lifecycle keeps).
	tasks map[lifecycle.Task]*taskInfo
	ck    *ckpt // checkpoints, commits, savepoints
	// fences are the job's takeovers by leaders (fence.go).
	fences []Fence
	// scaler drives the job's autoscaling policy (nil when off).
	scaler *autoscaler
}

type taskInfo struct {
	errMsg string
	stats  control.Stats
	// The report rates are computed from, and the rates since it.
	sampled   control.Stats
	sampledAt time.Time
	rates     TaskRates
	hasRates  bool
}

// New returns a coordinator; Run drives it and Close releases it.
func New(cfg Config) *Coordinator {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CancelTimeout <= 0 {
		cfg.CancelTimeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Coordinator{cfg: cfg, results: make(chan func(context.Context), 64)}
	c.stopped, c.stop = context.WithCancel(context.Background())
	c.mu.jobs = map[string]*job{}
	c.mu.changed = make(chan struct{})
	return c
}

func (c *Coordinator) now() time.Time { return c.cfg.Now() }

func (c *Coordinator) newJob(id string, js *spec.Job, specJSON []byte, p *plan.Plan) *job {
	j := &job{id: id, spec: js, specJSON: specJSON, plan: p, created: c.now(), tasks: map[lifecycle.Task]*taskInfo{}, ck: newCkpt(js)}
	j.scaler = newAutoscaler(j)
	return j
}

// lifecycleConfig describes the job to its lifecycle machine.
func (j *job) lifecycleConfig(cancelTimeout time.Duration) lifecycle.Config {
	r := j.spec.EffectiveRestart()
	cfg := lifecycle.Config{Checkpointing: j.ck.cfg != nil, CancelTimeout: cancelTimeout,
		Restart: lifecycle.Restart{Attempts: r.Attempts, Backoff: time.Duration(r.Backoff),
			MaxBackoff: time.Duration(r.MaxBackoff), ResetAfter: time.Duration(r.ResetAfter), Immediate: r.Immediate}}
	for _, v := range j.plan.Vertices {
		for s := 0; s < v.Parallelism; s++ {
			cfg.Tasks = append(cfg.Tasks, lifecycle.Task{Vertex: v.Name, Subtask: s})
		}
	}
	return cfg
}

// taskID names a task of the job's current attempt.
func (j *job) taskID(t lifecycle.Task) control.TaskID {
	return control.TaskID{Job: j.id, Attempt: j.lc.Attempt(), Vertex: t.Vertex, Subtask: t.Subtask}
}

// Submit validates a job fully, pins the deployed Wasm functions its
// operators name (registry.Pin: the stored spec records each module's
// version and SHA-256), stores its spec and schedules it. It returns the
// job id. A spec that does not validate, or names a function neither
// registered nor deployed, is refused with spec.Problems and nothing is
// stored.
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
			if s.Parallelism != 0 || from == nil || connector.SplitSource(s.Type) {
				continue // a source of splits restores at any parallelism
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
	// Pin the deployed Wasm functions the operators name, so that the
	// stored spec says which module every attempt runs.
	if err := registry.Pin(ctx, c.cfg.Bucket, js); err != nil {
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
	if err := c.checkFunctions(ctx, p); err != nil {
		return "", err
	}
	if from != nil && from.MaxParallelism != p.Job.MaxParallelism {
		return "", fmt.Errorf("restore from %s: it has %d key groups (maxParallelism) and the spec %d; they must be equal", opts.FromSavepoint, from.MaxParallelism, p.Job.MaxParallelism)
	}
	id := js.Name + "-" + randomID()
	if err := c.cfg.Bucket.PutIfAbsent(ctx, layout.SpecKey(id), specJSON); err != nil {
		return "", fmt.Errorf("store spec of %s: %w", id, err)
	}
	j := c.newJob(id, js, specJSON, p)
	j.lc = lifecycle.New(j.lifecycleConfig(c.cfg.CancelTimeout))
	if from != nil {
		j.ck.origin, j.ck.restoreKey = opts.FromSavepoint, opts.FromSavepoint
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
// lists them, and resumes those that had not ended (lifecycle.Resume).
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
		j := c.newJob(id, &js, raw, p)
		j.created = o.Modified
		stored := lifecycle.Stored{State: JobFailed, Message: lifecycle.RestartedMessage, Attempt: 1}
		s, ok, err := readStatus(ctx, c.cfg.Bucket, id)
		if err != nil {
			return fmt.Errorf("read the status of %s: %w", id, err)
		}
		if ok {
			msg := s.Error // FAILED's; another end's is in Message
			if msg == "" {
				msg = s.Message
			}
			stored = lifecycle.Stored{State: s.State, Message: msg, Attempt: s.Attempt, Started: s.Started, Ended: s.Ended,
				Restarts: s.Restarts, Exceptions: s.Exceptions}
			j.created = s.Created
			j.fences = s.Fences
			if s.Epoch > c.cfg.Epoch && c.cfg.Epoch > 0 {
				c.deposed.CompareAndSwap(0, s.Epoch)
				return fmt.Errorf("load job %s: %w", id, c.leadership())
			}
		}
		if origin, err := c.cfg.Bucket.Get(ctx, layout.OriginKey(id)); err == nil {
			j.ck.origin = strings.TrimSpace(string(origin))
		}
		j.lc = lifecycle.Resume(j.lifecycleConfig(c.cfg.CancelTimeout), c.now(), stored)
		if j.lc.State() == JobRestarting {
			c.cfg.Logger.Info("resuming job", "job", id, "attempt", j.lc.Attempt()+1)
			if c.cfg.Epoch > 0 {
				// The claim: this epoch's status exists before the job's
				// checkpoints are listed (fence.go).
				if err := c.putStatus(ctx, j, stored.Attempt); err != nil {
					return fmt.Errorf("claim job %s for epoch %d: %w", id, c.cfg.Epoch, err)
				}
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

// Run drives the coordinator until ctx is done or Close is called. It
// returns once every goroutine it started has ended.
func (c *Coordinator) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	stopRun := context.AfterFunc(c.stopped, cancel)
	g, gctx := errgroup.WithContext(ctx)
	c.mu.Lock()
	if c.mu.closed || c.mu.run != nil {
		c.mu.Unlock()
		stopRun()
		cancel()
		return errors.New("coordinator: Run called twice or after Close")
	}
	c.mu.run = &runGroup{g: g, ctx: gctx}
	c.mu.runDone = make(chan struct{})
	c.mu.Unlock()
	defer func() {
		cancel()
		_ = g.Wait()
		stopRun()
		c.mu.Lock()
		c.mu.run = nil
		for _, j := range c.mu.jobs {
			j.ck.failWaits(ErrStopped)
		}
		done := c.mu.runDone
		c.mu.Unlock()
		// Close waits for this: nothing of Run is left after it but
		// returning.
		close(done)
	}()
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
	lastSchedule, lastWorkerCheck := c.now(), c.now()
	for {
		if err := c.leadership(); err != nil {
			return err
		}
		evs, err := c.cfg.Plane.Events(ctx, eventWait)
		if ctx.Err() != nil || c.dead.Load() {
			return nil
		}
		if err != nil {
			c.cfg.Logger.Warn("read task events failed", "err", err)
			sleepCtx(ctx, eventWait)
		}
		for _, e := range evs {
			c.apply(ctx, e)
		}
		c.drainResults(ctx)
		select {
		case <-tick.C:
			c.tick(ctx, c.now())
		default:
		}
		c.mu.Lock()
		want := c.mu.wantSchedule
		c.mu.wantSchedule = false
		c.mu.Unlock()
		if want {
			c.schedule(ctx)
		}
		if now := c.now(); now.Sub(lastWorkerCheck) >= workerCheckInterval {
			lastWorkerCheck = now
			c.checkWorkers(ctx)
		}
		if now := c.now(); now.Sub(lastSchedule) >= scheduleInterval {
			lastSchedule = now
			c.schedule(ctx)
		}
	}
}

// Close stops Run (if it runs), waits until it has returned, and closes
// the sinks opened to commit transactions. It is safe to call twice.
func (c *Coordinator) Close() error {
	c.stop()
	c.mu.Lock()
	c.mu.closed = true
	done := c.mu.runDone
	c.mu.Unlock()
	if done != nil {
		<-done
	}
	_ = c.idle.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, j := range c.mu.jobs {
		errs = append(errs, j.ck.closeSinks())
	}
	errs = append(errs, c.wasm.close())
	return errors.Join(errs...)
}

// endedLocked reports whether the coordinator was closed or its Run
// returned: nothing will carry out a request any more.
func (c *Coordinator) endedLocked() bool {
	return c.mu.closed || c.mu.runDone != nil && c.mu.run == nil
}

// goAsync runs I/O off the loop, bounded by timeout, on Run's errgroup
// (or, while no Run is running, on one that Close waits for); the
// function it returns (if any) runs on the loop with c.mu held. The
// caller holds c.mu.
func (c *Coordinator) goAsync(timeout time.Duration, work func(ctx context.Context) func(context.Context)) {
	g, gctx := &c.idle, c.stopped
	if run := c.mu.run; run != nil {
		g, gctx = run.g, run.ctx
	}
	g.Go(func() error {
		ctx, cancel := context.WithTimeout(gctx, timeout)
		defer cancel()
		done := work(ctx)
		if done == nil {
			return nil
		}
		select {
		case c.results <- done:
		case <-gctx.Done():
		}
		return nil
	})
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

// storeStatus writes a job's status under this coordinator's epoch.
func (c *Coordinator) storeStatus(ctx context.Context, id string, st JobStatus) error {
	st.Epoch = c.cfg.Epoch
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	key := layout.StatusKeyAt(id, c.cfg.Epoch)
	if !c.leads() {
		return fmt.Errorf("write %s: %w", key, control.ErrNotLeader)
	}
	return c.cfg.Bucket.Put(ctx, key, b)
}

func (c *Coordinator) notifyLocked() {
	close(c.mu.changed)
	c.mu.changed = make(chan struct{})
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
	ds, ok := j.lc.Cancel(c.now())
	if !ok {
		return fmt.Errorf("cancel %s (%s): %w", id, j.lc.State(), ErrEnded)
	}
	c.exec(ctx, j, ds)
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
	state := j.lc.State()
	if lifecycle.Terminal(state) || state == JobCanceling {
		return fmt.Errorf("stop %s (%s): %w", id, state, ErrEnded)
	}
	if state == JobRestarting {
		return notRunning(fmt.Errorf("stop %s: the job is restarting; try again when it runs", id))
	}
	if state == JobSuspended {
		// Draining needs its tasks: its windows' state is in its
		// checkpoint, not in a task that could fire them.
		return fmt.Errorf("stop %s: the job is SUSPENDED for want of input; it wakes when input arrives, or cancel it (its output up to its latest checkpoint is committed)", id)
	}
	for _, p := range j.lc.Tasks() {
		_, ts, _ := j.lc.Task(p.Task)
		v := j.plan.Vertex(p.Task.Vertex)
		if lifecycle.Terminal(ts) || v == nil || v.Nodes[0].Kind != plan.KindSource {
			continue
		}
		if err := c.send(ctx, p.Worker, control.Command{Kind: control.CmdStop, Task: j.taskID(p.Task)}); err != nil {
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
		ch := c.mu.changed
		c.mu.Unlock()
		if lifecycle.Terminal(st.State) {
			return st, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}
