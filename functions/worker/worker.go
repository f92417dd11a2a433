// Package worker is the process that runs tasks: it registers with the
// control plane, heartbeats, receives deploy and cancel commands, runs each
// assigned subtask's chain (package task) in its own goroutine, and reports
// task states and metrics back. A worker keeps nothing of its own: any
// worker can run any task.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/functions/wasm"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
	"github.com/weirstream/weir/statestore/pebblestate"
	"github.com/weirstream/weir/statestore/statepack"
)

// Config configures a worker.
type Config struct {
	ID        string // default: <hostname>-<pid>
	Slots     int    // subtasks it runs at once (default 4)
	Plane     control.Plane
	Transport exchange.Transport
	Bucket    blob.Bucket
	RedisAddr string
	// HeartbeatTTL is how long the worker stays live without a heartbeat
	// (default DefaultHeartbeatTimeout): the time a slow or paused worker
	// is given before it is declared lost. A worker whose process dies is
	// noticed sooner where the plane can tell (Redis: its named
	// connection closes). It heartbeats every third of it, at most every
	// second.
	HeartbeatTTL time.Duration
	// WasmCache is the directory where compiled Wasm functions are kept
	// between runs ("" keeps them in memory only).
	WasmCache string
	// StateDir is where tasks of jobs with state: {backend: pebble} keep
	// their state on disk ("": the system's temporary directory), in
	// weir-state-<pid>/: each store makes its own directory there and
	// deletes it when its task ends, and a worker starting deletes those
	// of processes that are gone (killed -9).
	StateDir string
	// StatsInterval is how often running tasks report metrics (default 1s).
	StatsInterval time.Duration
	Logger        *slog.Logger
	Mem           memory.Allocator
	// Tap is passed to every task (see task.Config.Tap).
	Tap func(sink string, b arrow.RecordBatch)
}

// DefaultHeartbeatTimeout is how long a worker stays live without a
// heartbeat unless configured otherwise (Flink's is 50 s).
const DefaultHeartbeatTimeout = 30 * time.Second

// Worker runs tasks.
type Worker struct {
	cfg Config
	mu  struct {
		sync.Mutex
		tasks map[control.TaskID]*running
		// packs are the state groups of the job attempts running here
		// (task.Checkpointing.Pack), while any of their tasks runs.
		packs map[packKey]*packRef
	}
	wg sync.WaitGroup
	// wasm runs the tasks' deployed Wasm functions; Run makes it and closes
	// it after every task has ended.
	wasm *wasm.Engine
	// stateDir is where this process's tasks open pebble stores (Run
	// sets it from Config.StateDir).
	stateDir string
	// stateObjects and stateFiles count the state objects the worker's
	// tasks wrote and the state files packed into them (metrics).
	stateObjects, stateFiles atomic.Int64
}

type packKey struct {
	job     string
	attempt int
}

type packRef struct {
	group *statepack.Group
	tasks int
}

// pack returns the state group of a job attempt for one more task of it;
// unpack gives it back when the task has ended.
func (w *Worker) pack(job string, attempt int) *statepack.Group {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := packKey{job, attempt}
	ref := w.mu.packs[k]
	if ref == nil {
		ref = &packRef{group: statepack.New(statepack.Config{Bucket: w.cfg.Bucket, Job: job, Attempt: attempt, Worker: w.cfg.ID,
			Written: func(files int) {
				w.stateObjects.Add(1)
				w.stateFiles.Add(int64(files))
			}})}
		w.mu.packs[k] = ref
	}
	ref.tasks++
	return ref.group
}

func (w *Worker) unpack(job string, attempt int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := packKey{job, attempt}
	if ref := w.mu.packs[k]; ref != nil {
		if ref.tasks--; ref.tasks <= 0 {
			delete(w.mu.packs, k)
		}
	}
}

type running struct {
	cancel context.CancelFunc
	task   *task.Task
	done   chan struct{}
}

// New returns a worker; Run starts it.
func New(cfg Config) *Worker {
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 4
	}
	if cfg.HeartbeatTTL <= 0 {
		cfg.HeartbeatTTL = DefaultHeartbeatTimeout
	}
	if cfg.StatsInterval <= 0 {
		cfg.StatsInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Mem == nil {
		cfg.Mem = memory.DefaultAllocator
	}
	w := &Worker{cfg: cfg}
	w.mu.tasks = map[control.TaskID]*running{}
	w.mu.packs = map[packKey]*packRef{}
	return w
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Run registers the worker and serves commands until ctx is done; then it
// cancels its tasks, waits for them and deregisters.
func (w *Worker) Run(ctx context.Context) error {
	eng, err := wasm.NewEngine(wasm.EngineConfig{CacheDir: w.cfg.WasmCache, Fetch: w.fetchModule, Logger: w.cfg.Logger})
	if err != nil {
		return err
	}
	w.wasm = eng
	defer func() {
		if err := eng.Close(); err != nil {
			w.cfg.Logger.Warn("close wasm engine", "err", err)
		}
	}()
	// Stores of workers killed before they closed them are deleted here.
	dir, removed, err := pebblestate.ProcessDir(w.cfg.StateDir)
	if err != nil {
		w.cfg.Logger.Warn("state directory", "err", err)
	}
	if len(removed) > 0 {
		w.cfg.Logger.Info("removed the state stores of processes gone", "dirs", removed)
	}
	w.stateDir = dir
	host, _ := os.Hostname()
	info := control.WorkerInfo{ID: w.cfg.ID, Slots: w.cfg.Slots, Host: host, PID: os.Getpid(), Started: time.Now()}
	if err := w.cfg.Plane.Register(ctx, info, w.cfg.HeartbeatTTL); err != nil {
		return err
	}
	w.cfg.Logger.Info("worker registered", "worker", w.cfg.ID, "slots", w.cfg.Slots)
	defer func() {
		w.cancelAll()
		w.wg.Wait()
		// Each store deleted its own directory as its task ended; the
		// process's goes too once empty. While another worker of this
		// process still has stores there, Remove fails and leaves it (a
		// store opened later makes it again).
		if w.stateDir != "" {
			_ = os.Remove(w.stateDir)
		}
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = w.cfg.Plane.Deregister(dctx, w.cfg.ID)
	}()

	var epoch int64 // the highest leader epoch seen (fromLeader)
	var usage usageMeter
	hb := time.NewTicker(min(w.cfg.HeartbeatTTL/3, time.Second))
	defer hb.Stop()
	stats := time.NewTicker(w.cfg.StatsInterval)
	defer stats.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hb.C:
			if err := w.cfg.Plane.Heartbeat(ctx, w.cfg.ID, w.cfg.HeartbeatTTL, usage.sample(time.Now(), w.taskCount())); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if errors.Is(err, control.ErrUnknownWorker) {
					// Our registration lapsed (e.g. Redis restarted):
					// register again.
					err = w.cfg.Plane.Register(ctx, info, w.cfg.HeartbeatTTL)
				}
				if err != nil {
					w.cfg.Logger.Warn("heartbeat failed", "err", err)
				}
			}
		case <-stats.C:
			w.reportStats(ctx)
		default:
		}
		c, ok, err := w.cfg.Plane.Receive(ctx, w.cfg.ID, 200*time.Millisecond)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			w.cfg.Logger.Warn("receive command failed", "err", err)
			if sleep(ctx, 200*time.Millisecond) != nil {
				return nil
			}
			continue
		}
		if ok && w.fromLeader(ctx, c, &epoch) {
			w.handle(ctx, c)
		}
	}
}

// fromLeader reports whether c comes from the leading coordinator. A
// command whose epoch is older than the cluster's (Leases.Epoch) was sent
// by a deposed leader, one paused or cut off while a standby took over,
// and is dropped. seen is the highest epoch this worker has learnt of. A
// command without an epoch comes from a coordinator without a lease (the
// embedded one) and is always carried out.
func (w *Worker) fromLeader(ctx context.Context, c control.Command, seen *int64) bool {
	if c.Epoch == 0 {
		return true
	}
	cur, err := w.cfg.Plane.Epoch(ctx)
	if err != nil {
		w.cfg.Logger.Warn("read the leader epoch failed; judging the command by the epochs seen", "err", err)
	}
	*seen = max(*seen, cur)
	if c.Epoch < *seen {
		w.cfg.Logger.Warn("dropped a command from a deposed coordinator",
			"kind", c.Kind, "task", fmt.Sprintf("%s/%d %s[%d]", c.Task.Job, c.Task.Attempt, c.Task.Vertex, c.Task.Subtask),
			"epoch", c.Epoch, "leading epoch", *seen)
		return false
	}
	*seen = c.Epoch
	return true
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (w *Worker) handle(ctx context.Context, c control.Command) {
	switch c.Kind {
	case control.CmdDeploy:
		if err := w.deploy(ctx, c); err != nil {
			w.report(ctx, c.Task, control.StateFailed, err.Error(), control.Stats{})
		}
	case control.CmdTrigger:
		w.mu.Lock()
		r := w.mu.tasks[c.Task]
		w.mu.Unlock()
		if r != nil {
			r.task.TriggerCheckpoint(c.Checkpoint)
		}
	case control.CmdCancel, control.CmdStop:
		w.mu.Lock()
		r := w.mu.tasks[c.Task]
		w.mu.Unlock()
		if r == nil {
			return
		}
		if c.Kind == control.CmdStop {
			r.task.Stop()
		} else {
			r.cancel()
		}
	default:
		w.cfg.Logger.Warn("unknown command", "kind", c.Kind)
	}
}

func (w *Worker) deploy(ctx context.Context, c control.Command) error {
	var job spec.Job
	if err := json.Unmarshal(c.Spec, &job); err != nil {
		return fmt.Errorf("decode spec of %s: %w", c.Task.Job, err)
	}
	p, err := plan.Build(&job)
	if err != nil {
		return fmt.Errorf("plan %s: %w", c.Task.Job, err)
	}
	p.Wasm = w.wasm
	p.StateDir = w.stateDir
	v := p.Vertex(c.Task.Vertex)
	if v == nil {
		return fmt.Errorf("plan %s: no vertex %q", c.Task.Job, c.Task.Vertex)
	}
	cfg, err := p.TaskConfig(c.Task.Job, c.Task.Attempt, v, c.Task.Subtask)
	if err != nil {
		return err
	}
	cfg.Transport = w.cfg.Transport
	cfg.Bucket = w.cfg.Bucket
	cfg.RedisAddr = w.cfg.RedisAddr
	cfg.Mem = w.cfg.Mem
	cfg.Tap = w.cfg.Tap
	cfg.Logger = w.cfg.Logger.With("job", c.Task.Job, "attempt", c.Task.Attempt, "vertex", c.Task.Vertex, "subtask", c.Task.Subtask)
	var restoring int64
	if job.Checkpoint != nil {
		id := c.Task
		codec := arrowfmt.CompressLZ4
		if s := job.Checkpoint.Compression; s != "" {
			if codec, err = arrowfmt.ParseCompression(s); err != nil {
				return fmt.Errorf("job %s: checkpoint.compression: %w", c.Task.Job, err)
			}
		}
		cfg.Checkpoints = &task.Checkpointing{
			PartBytes:   int(job.Checkpoint.PartSize),
			Compression: codec,
			Ack: func(a task.Ack) {
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				e := control.Event{Task: id, Worker: w.cfg.ID, State: control.StateRunning, Ack: &a, Time: time.Now()}
				if err := w.cfg.Plane.Report(rctx, e); err != nil {
					w.cfg.Logger.Warn("report checkpoint ack failed", "task", id, "checkpoint", a.Checkpoint, "err", err)
				}
			},
		}
		if c.Restore != "" {
			rs, cp, err := w.restoreFor(ctx, c.Restore, &cfg)
			if err != nil {
				w.report(ctx, c.Task, control.StateFailed, err.Error(), control.Stats{}, cp)
				return nil
			}
			cfg.Checkpoints.Restore = rs
			restoring = rs.Checkpoint
		}
	}
	if cfg.Checkpoints != nil {
		// The task's state files go into one object per checkpoint
		// with those of the attempt's other tasks here.
		cfg.Checkpoints.Pack = w.pack(c.Task.Job, c.Task.Attempt)
	}
	t := task.New(cfg)
	tctx, cancel := context.WithCancel(ctx)
	r := &running{cancel: cancel, task: t, done: make(chan struct{})}
	w.mu.Lock()
	if _, dup := w.mu.tasks[c.Task]; dup {
		w.mu.Unlock()
		cancel()
		if cfg.Checkpoints != nil {
			w.unpack(c.Task.Job, c.Task.Attempt)
		}
		return fmt.Errorf("task %v is already running here", c.Task)
	}
	w.mu.tasks[c.Task] = r
	w.mu.Unlock()
	w.report(ctx, c.Task, control.StateRunning, "", control.Stats{})
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer close(r.done)
		err := t.Run(tctx)
		state, msg := control.StateFinished, ""
		var corrupt int64
		if errors.Is(err, task.ErrCorruptState) {
			corrupt = restoring
		}
		switch {
		case err == nil:
		case tctx.Err() != nil:
			state = control.StateCanceled
		default:
			state, msg = control.StateFailed, err.Error()
			cfg.Logger.Error("task failed", "err", err)
		}
		cancel()
		if cfg.Checkpoints != nil {
			w.unpack(c.Task.Job, c.Task.Attempt)
		}
		w.mu.Lock()
		delete(w.mu.tasks, c.Task)
		w.mu.Unlock()
		// Report even when the worker is stopping.
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		w.report(rctx, c.Task, state, msg, t.Stats().Snapshot(), corrupt)
	}()
	return nil
}

// restoreFor reads the manifest at key and picks the task's share of it.
// On a damaged manifest it returns the checkpoint's id with the error.
func (w *Worker) restoreFor(ctx context.Context, key string, cfg *task.Config) (*task.Restore, int64, error) {
	_, id, _ := layout.ParseManifestKey(key)
	raw, err := w.cfg.Bucket.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("restore %s[%d]: read %s: %w", cfg.Vertex, cfg.Subtask, key, err)
	}
	m, err := manifest.Decode(raw)
	if err != nil {
		return nil, id, fmt.Errorf("restore %s[%d]: %s: %w: %w", cfg.Vertex, cfg.Subtask, key, task.ErrCorruptState, err)
	}
	var stateful []string
	for _, n := range cfg.Nodes {
		if _, ok := n.Op.(task.Stateful); ok {
			stateful = append(stateful, n.Name)
		}
	}
	var source task.SourceRestore
	if cfg.Source != nil {
		source = task.SourceRestore{Name: cfg.Source.Name, Splits: cfg.Source.Splits}
	}
	kgStart, kgEnd := arrowfmt.KeyGroupRange(cfg.Subtask, cfg.MaxParallelism, cfg.Parallelism)
	rs, err := task.RestoreFor(m, cfg.Vertex, cfg.Subtask, cfg.Parallelism, kgStart, kgEnd, stateful, source)
	if err != nil {
		return nil, 0, fmt.Errorf("restore %s[%d]: %w", cfg.Vertex, cfg.Subtask, err)
	}
	return rs, 0, nil
}

func (w *Worker) report(ctx context.Context, id control.TaskID, state, msg string, st control.Stats, corrupt ...int64) {
	e := control.Event{Task: id, Worker: w.cfg.ID, State: state, Error: msg, Stats: st, Time: time.Now()}
	if len(corrupt) > 0 {
		e.CorruptCheckpoint = corrupt[0]
	}
	if err := w.cfg.Plane.Report(ctx, e); err != nil {
		w.cfg.Logger.Warn("report task state failed", "task", id, "state", state, "err", err)
	}
}

func (w *Worker) reportStats(ctx context.Context) {
	w.mu.Lock()
	snaps := make(map[control.TaskID]control.Stats, len(w.mu.tasks))
	for id, r := range w.mu.tasks {
		snaps[id] = r.task.Stats().Snapshot()
	}
	w.mu.Unlock()
	for id, s := range snaps {
		w.report(ctx, id, control.StateRunning, "", s)
	}
}

func (w *Worker) cancelAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.mu.tasks {
		r.cancel()
	}
}

// fetchModule reads a deployed Wasm module from the bucket.
func (w *Worker) fetchModule(ctx context.Context, pin *spec.Module) ([]byte, error) {
	b, err := w.cfg.Bucket.Get(ctx, layout.ModuleKey(pin.Name, pin.SHA256))
	if err != nil {
		return nil, fmt.Errorf("read module of function %s version %d from %s: %w", pin.Name, pin.Version, w.cfg.Bucket.Describe(), err)
	}
	return b, nil
}
