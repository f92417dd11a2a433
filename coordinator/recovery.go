package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/coordinator/checkpoint"
	"github.com/weirstream/weir/coordinator/control"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/manifest"
)

// JobRestarting: a task failed or a worker was lost; the job restarts
// from its latest completed checkpoint after a backoff.
const JobRestarting = "RESTARTING"

// Checkpoint statuses in the history.
const (
	CheckpointInProgress = "IN_PROGRESS"
	CheckpointCompleted  = "COMPLETED"
	CheckpointFailed     = "FAILED"
)

// CheckpointInfo is one checkpoint in a job's history.
type CheckpointInfo struct {
	ID        int64     `json:"id"`
	Attempt   int       `json:"attempt"`
	Status    string    `json:"status"`
	Savepoint bool      `json:"savepoint,omitempty"`
	Final     bool      `json:"final,omitempty"`
	Triggered time.Time `json:"triggered"`
	Duration  float64   `json:"durationSeconds,omitempty"`
	Bytes     int64     `json:"uploadedBytes"` // new state bytes uploaded
	StateSize int64     `json:"stateBytes"`    // bytes of every state file it references
	Acks      int       `json:"acks"`
	Tasks     int       `json:"tasks"`
	AlignMs   int64     `json:"maxAlignMs"`
	SyncMs    int64     `json:"maxSyncMs"`
	AsyncMs   int64     `json:"maxAsyncMs"`
	Reason    string    `json:"reason,omitempty"`
}

// Recovery is one restart of a job.
type Recovery struct {
	Attempt  int       `json:"attempt"` // the attempt it started
	Reason   string    `json:"reason"`
	Detected time.Time `json:"detected"`
	// Running is when every task of the new attempt ran again (zero while
	// it has not).
	Running      time.Time `json:"running,omitzero"`
	Seconds      float64   `json:"seconds,omitempty"` // Running - Detected
	RestoredFrom int64     `json:"restoredFrom"`      // checkpoint id, 0 for the beginning
}

// ckpt is a job's checkpointing and restart state, owned by the main loop.
type ckpt struct {
	cfg      *checkpoint.Config // nil: checkpoints off
	sm       *checkpoint.Coordinator
	restart  spec.Restart
	restarts int
	backoff  time.Duration

	// txns are pre-committed sink transactions not yet known committed,
	// by id. Every manifest carries those up to its checkpoint, so a
	// transaction of a checkpoint that aborted commits with the next one.
	txns map[string]pendingTxn
	// latest is the newest completed checkpoint (0 for none) and
	// retained the manifests of those still kept.
	latest   int64
	retained map[int64]*manifest.Manifest
	maxID    int64 // highest checkpoint id seen
	bad      map[int64]bool
	// committed is the newest checkpoint whose transactions all committed
	// (known to this coordinator).
	committed int64
	busy      bool // a manifest write, recovery or finalization is running
	acks      map[int64]map[checkpoint.Task]task.Ack

	restartAt  time.Time
	recovering bool
	restoreKey string // manifest the next deploy restores from
	restoring  int64
	finalizing bool
	retryAt    time.Time // of a failed finalization
	ready      bool      // recovered: deploy the new attempt
	// recovered: the restart's recovery is done and its attempt deployed
	// (or about to be); a failure now needs another restart.
	recovered bool

	history    []CheckpointInfo
	recoveries []Recovery

	origin    string // savepoint the job started from, "" for none
	waits     []*savepointWait
	stoppedAt string // savepoint a stop-with-savepoint took

	sinkMu sync.Mutex
	sinks  map[string]task.TwoPhaseSink // opened to commit
}

type pendingTxn struct {
	checkpoint int64 // math.MaxInt64 for a final transaction
	task       control.TaskID
	txn        manifest.Txn
}

const maxHistory = 200

func newCkpt(js *spec.Job) *ckpt {
	k := &ckpt{restart: js.EffectiveRestart(), txns: map[string]pendingTxn{}, retained: map[int64]*manifest.Manifest{},
		bad: map[int64]bool{}, acks: map[int64]map[checkpoint.Task]task.Ack{}, sinks: map[string]task.TwoPhaseSink{}}
	k.backoff = time.Duration(k.restart.Backoff)
	if c := js.Checkpoint; c != nil {
		k.cfg = &checkpoint.Config{Interval: time.Duration(c.Interval), Timeout: time.Duration(c.Timeout),
			MinPause: time.Duration(c.MinPause), Retain: c.Retain}
		if k.cfg.Timeout == 0 {
			k.cfg.Timeout = checkpoint.DefaultTimeout
		}
		if k.cfg.Retain == 0 {
			k.cfg.Retain = 1
		}
	}
	return k
}

// done runs fn on the main loop with c.mu held: async work reports back
// through it.
func (c *Coordinator) done(fn func(ctx context.Context)) {
	c.results <- fn
}

// startCheckpointsLocked creates the checkpoint state machine of a job
// whose tasks all run.
func (c *Coordinator) startCheckpointsLocked(j *job) {
	k := j.ck
	if k.cfg == nil || k.sm != nil {
		return
	}
	var tasks, sources []checkpoint.Task
	for _, v := range j.plan.Vertices {
		for s := 0; s < v.Parallelism; s++ {
			t := checkpoint.Task{Vertex: v.Name, Subtask: s}
			tasks = append(tasks, t)
			if v.Nodes[0].Kind == plan.KindSource {
				sources = append(sources, t)
			}
		}
	}
	sm, err := checkpoint.New(*k.cfg, tasks, sources, k.latest)
	if err != nil {
		c.cfg.Logger.Error("checkpoints off", "job", j.id, "err", err)
		return
	}
	sm.SkipTo(k.maxID + 1)
	k.sm = sm
}

// checkpointTick drives every job's checkpoint state machine and restarts.
func (c *Coordinator) checkpointTick(ctx context.Context, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, j := range c.mu.jobs {
		k := j.ck
		if k == nil {
			continue
		}
		switch {
		case j.state == JobRunning && k.sm != nil && !k.finalizing:
			c.triggerSavepointLocked(ctx, j, now)
			c.execLocked(ctx, j, k.sm.Tick(now))
		case j.state == JobRestarting && !k.recovered && !k.recovering && !k.busy && !now.Before(k.restartAt):
			c.recoverLocked(ctx, j)
		}
		if k.finalizing && !k.busy && !now.Before(k.retryAt) {
			c.finalizeLocked(ctx, j)
		}
	}
}

// execLocked carries out checkpoint decisions.
func (c *Coordinator) execLocked(ctx context.Context, j *job, ds []checkpoint.Decision) {
	k := j.ck
	for _, d := range ds {
		switch d.Kind {
		case checkpoint.Trigger:
			k.maxID = max(k.maxID, d.Checkpoint)
			k.addHistory(CheckpointInfo{ID: d.Checkpoint, Attempt: j.attempt, Status: CheckpointInProgress,
				Savepoint: d.Savepoint, Triggered: time.Now(), Tasks: len(j.tasks)})
			for _, s := range d.Sources {
				id := control.TaskID{Job: j.id, Attempt: j.attempt, Vertex: s.Vertex, Subtask: s.Subtask}
				t := j.tasks[id]
				if t == nil || terminal(t.state) {
					continue
				}
				if err := c.cfg.Plane.Send(ctx, t.worker, control.Command{Kind: control.CmdTrigger, Task: id, Checkpoint: d.Checkpoint}); err != nil {
					c.cfg.Logger.Warn("send checkpoint trigger failed", "job", j.id, "checkpoint", d.Checkpoint, "err", err)
				}
			}
		case checkpoint.WriteManifest:
			c.writeManifestLocked(j, d)
		case checkpoint.Complete:
			k.latest = d.Checkpoint
			// A savepoint's checkpoint is not retained by the state
			// machine (its copy under savepoints/ is self-contained):
			// once a newer checkpoint completes it goes like a discarded
			// one.
			if k.sm != nil {
				kept := k.sm.Completed()
				var drop []*manifest.Manifest
				for id, m := range k.retained {
					if id < d.Checkpoint && !slices.Contains(kept, id) {
						drop = append(drop, m)
						delete(k.retained, id)
					}
				}
				if len(drop) > 0 {
					c.collectGarbage(j, drop)
				}
			}
			if h := k.find(d.Checkpoint); h != nil {
				h.Status, h.Duration = CheckpointCompleted, d.Duration.Seconds()
			}
			c.cfg.Logger.Info("checkpoint completed", "job", j.id, "checkpoint", d.Checkpoint, "duration", d.Duration)
		case checkpoint.Abort:
			var missing []string
			for _, v := range j.plan.Vertices {
				for s := 0; s < v.Parallelism; s++ {
					if _, ok := k.acks[d.Checkpoint][checkpoint.Task{Vertex: v.Name, Subtask: s}]; !ok {
						missing = append(missing, fmt.Sprintf("%s[%d]", v.Name, s))
					}
				}
			}
			c.cfg.Logger.Info("checkpoint not acknowledged by", "job", j.id, "checkpoint", d.Checkpoint, "tasks", strings.Join(missing, " "))
			delete(k.acks, d.Checkpoint)
			if d.Savepoint {
				k.finishWaitsLocked(d.Checkpoint, "", fmt.Errorf("savepoint %d aborted: %s", d.Checkpoint, d.Reason))
			}
			if h := k.find(d.Checkpoint); h != nil {
				h.Status, h.Reason = CheckpointFailed, d.Reason
			}
			c.cfg.Logger.Warn("checkpoint aborted", "job", j.id, "checkpoint", d.Checkpoint, "reason", d.Reason)
		case checkpoint.Discard:
			var drop []*manifest.Manifest
			for _, id := range d.Discarded {
				if m := k.retained[id]; m != nil {
					drop = append(drop, m)
				}
				delete(k.retained, id)
			}
			c.collectGarbage(j, drop)
		}
	}
}

func (k *ckpt) addHistory(h CheckpointInfo) {
	k.history = append(k.history, h)
	if len(k.history) > maxHistory {
		k.history = slices.Delete(k.history, 0, len(k.history)-maxHistory)
	}
}

func (k *ckpt) find(id int64) *CheckpointInfo {
	for i := len(k.history) - 1; i >= 0; i-- {
		if k.history[i].ID == id {
			return &k.history[i]
		}
	}
	return nil
}

// onAckLocked handles a checkpoint acknowledgement event.
func (c *Coordinator) onAckLocked(ctx context.Context, j *job, e control.Event) {
	k := j.ck
	a := *e.Ack
	for _, t := range a.Subtask.SinkTransactions {
		cp := a.Checkpoint
		if a.Final {
			cp = math.MaxInt64
		}
		k.txns[t.ID] = pendingTxn{checkpoint: cp, task: e.Task, txn: t}
	}
	if len(a.Subtask.SinkTransactions) > 0 && c.crash("precommitted") {
		return
	}
	c.cfg.Logger.Debug("checkpoint ack", "job", j.id, "task", e.Task, "checkpoint", a.Checkpoint, "final", a.Final, "decline", a.Decline)
	if a.Final || k.sm == nil {
		return
	}
	t := checkpoint.Task{Vertex: e.Task.Vertex, Subtask: e.Task.Subtask}
	if a.Decline != "" {
		c.execLocked(ctx, j, k.sm.Decline(time.Now(), a.Checkpoint, t, a.Decline))
		return
	}
	if inflight, ok := k.sm.InFlight(); !ok || inflight != a.Checkpoint {
		return
	}
	if k.acks[a.Checkpoint] == nil {
		k.acks[a.Checkpoint] = map[checkpoint.Task]task.Ack{}
	}
	k.acks[a.Checkpoint][t] = a
	if h := k.find(a.Checkpoint); h != nil {
		h.Acks = len(k.acks[a.Checkpoint])
		h.Bytes += a.Subtask.Metrics.UploadedBytes
		h.AlignMs = max(h.AlignMs, a.Subtask.Metrics.AlignMs)
		h.SyncMs = max(h.SyncMs, a.Subtask.Metrics.SyncMs)
		h.AsyncMs = max(h.AsyncMs, a.Subtask.Metrics.AsyncMs)
		for _, f := range a.Subtask.State {
			h.StateSize += f.Size
		}
	}
	ds, err := k.sm.Ack(time.Now(), a.Checkpoint, checkpoint.Ack{Task: t})
	if err != nil {
		c.cfg.Logger.Warn("checkpoint ack refused", "job", j.id, "task", e.Task, "err", err)
		return
	}
	c.execLocked(ctx, j, ds)
}

// buildManifest assembles the manifest of checkpoint id from the
// subtasks' acknowledgements, with every pending transaction up to id.
func (c *Coordinator) buildManifest(j *job, id int64, triggered time.Time, acks map[checkpoint.Task]task.Ack, final, savepoint bool) *manifest.Manifest {
	sum := sha256.Sum256(j.specJSON)
	m := &manifest.Manifest{Version: manifest.Version, Job: j.id, Checkpoint: id, Attempt: j.attempt,
		Savepoint: savepoint, Final: final, Triggered: triggered.UTC(), Completed: time.Now().UTC(),
		MaxParallelism: j.plan.Job.MaxParallelism, SpecSHA256: hex.EncodeToString(sum[:])}
	if m.Completed.Before(m.Triggered) {
		m.Completed = m.Triggered
	}
	byTask := map[checkpoint.Task][]manifest.Txn{}
	for _, p := range j.ck.txns {
		if p.checkpoint <= id || final {
			t := checkpoint.Task{Vertex: p.task.Vertex, Subtask: p.task.Subtask}
			if v := j.plan.Vertex(t.Vertex); v == nil || t.Subtask >= v.Parallelism {
				// A transaction of a subtask the plan no longer has
				// still commits: it goes with the first subtask.
				t = checkpoint.Task{Vertex: j.plan.Vertices[0].Name}
			}
			byTask[t] = append(byTask[t], p.txn)
		}
	}
	for _, v := range j.plan.Vertices {
		mv := manifest.Vertex{Name: v.Name, Parallelism: v.Parallelism}
		for s := 0; s < v.Parallelism; s++ {
			t := checkpoint.Task{Vertex: v.Name, Subtask: s}
			st := manifest.Subtask{Index: s}
			if a, ok := acks[t]; ok && !final {
				st = a.Subtask
				st.Index = s
			}
			st.SinkTransactions = byTask[t]
			sort.Slice(st.SinkTransactions, func(a, b int) bool { return st.SinkTransactions[a].ID < st.SinkTransactions[b].ID })
			if st.KeyGroupEnd > st.KeyGroupStart {
				mv.Keyed = true
			}
			mv.Subtasks = append(mv.Subtasks, st)
		}
		m.Vertices = append(m.Vertices, mv)
	}
	sort.Slice(m.Vertices, func(a, b int) bool { return m.Vertices[a].Name < m.Vertices[b].Name })
	return m
}

// writeManifestLocked writes the manifest of a fully acknowledged
// checkpoint (the commit point), then commits its transactions.
func (c *Coordinator) writeManifestLocked(j *job, d checkpoint.Decision) {
	k := j.ck
	triggered := time.Now()
	if h := k.find(d.Checkpoint); h != nil {
		triggered = h.Triggered
	}
	m := c.buildManifest(j, d.Checkpoint, triggered, k.acks[d.Checkpoint], false, d.Savepoint)
	delete(k.acks, d.Checkpoint)
	k.busy = true
	id, attempt := d.Checkpoint, j.attempt
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cm := m
		if m.Savepoint {
			// The checkpoint copy is an ordinary checkpoint: recovery
			// restores from it like any other.
			c2 := *m
			c2.Savepoint = false
			cm = &c2
		}
		err := c.putManifest(ctx, cm)
		// The checkpoint is complete now; committing its transactions
		// follows (and is not part of its duration).
		writtenAt := time.Now()
		if err == nil && c.crash("manifest-written") {
			return
		}
		var committed []string
		if err == nil {
			var crashed bool
			if committed, crashed = c.commitAll(ctx, j, cm); crashed {
				return
			}
		}
		var spKey string
		var spErr error
		if err == nil && m.Savepoint {
			spKey, spErr = c.copySavepoint(ctx, cm)
		}
		c.done(func(ctx context.Context) {
			k.busy = false
			if m.Savepoint {
				if err != nil {
					spErr = err
				}
				k.finishWaitsLocked(id, spKey, spErr)
			}
			if err == nil {
				m = cm
				k.retained[id] = m
				k.maxID = max(k.maxID, id)
				for _, t := range committed {
					delete(k.txns, t)
				}
				if len(committed) == len(k.txnIDs(m)) {
					k.committed = id
				}
			} else {
				c.cfg.Logger.Warn("manifest write failed", "job", j.id, "checkpoint", id, "err", err)
			}
			if k.sm != nil && j.attempt == attempt {
				c.execLocked(ctx, j, k.sm.ManifestWritten(writtenAt, id, err))
			} else if err == nil {
				// The attempt failed meanwhile; the checkpoint is
				// complete all the same, and recovery starts from it.
				k.latest = max(k.latest, id)
				if h := k.find(id); h != nil {
					h.Status = CheckpointCompleted
				}
			}
		})
	}()
}

// crash reports whether the test hook abandons the work at point.
func (c *Coordinator) crash(point string) bool {
	if c.cfg.Crash != nil && c.cfg.Crash(point) {
		c.dead.Store(true)
		return true
	}
	return false
}

func (c *Coordinator) putManifest(ctx context.Context, m *manifest.Manifest) error {
	data, err := m.Encode()
	if err != nil {
		return fmt.Errorf("encode manifest %d: %w", m.Checkpoint, err)
	}
	key := manifest.Key(m.Job, m.Checkpoint)
	if err := c.cfg.Bucket.PutIfAbsent(ctx, key, data); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

// commitAll commits every transaction in m and returns the ids committed.
// A failure is logged; the transaction stays pending and commits with
// the next checkpoint or on recovery.
func (c *Coordinator) commitAll(ctx context.Context, j *job, m *manifest.Manifest) (_ []string, crashed bool) {
	var ok []string
	for _, v := range m.Vertices {
		for _, st := range v.Subtasks {
			for _, t := range st.SinkTransactions {
				if err := c.commitTxn(ctx, j, t); err != nil {
					c.cfg.Logger.Warn("commit sink transaction failed", "job", j.id, "txn", t.ID, "err", err)
					continue
				}
				if c.crash("txn-committed") {
					return nil, true
				}
				ok = append(ok, t.ID)
			}
		}
	}
	return ok, false
}

func (c *Coordinator) commitTxn(ctx context.Context, j *job, t manifest.Txn) error {
	s, err := c.sink(j, t.Sink)
	if err != nil {
		return err
	}
	return s.Commit(ctx, t.Handle)
}

// sink returns the job's two-phase sink name, opened for commits.
func (c *Coordinator) sink(j *job, name string) (task.TwoPhaseSink, error) {
	k := j.ck
	k.sinkMu.Lock()
	defer k.sinkMu.Unlock()
	if s := k.sinks[name]; s != nil {
		return s, nil
	}
	n := j.plan.Node(name)
	if n == nil || n.Kind != plan.KindSink {
		return nil, fmt.Errorf("job %s has no sink %q", j.id, name)
	}
	s, err := connector.NewSink(n.Sink, n.Input.Stream)
	if err != nil {
		return nil, err
	}
	tp, ok := task.AsTwoPhase(s)
	if !ok {
		return nil, fmt.Errorf("sink %s of type %s has no transactions", name, n.Sink.Type)
	}
	sc := &task.SinkContext{Context: task.Context{Job: j.id, Node: name, Parallelism: 1, MaxParallelism: j.plan.Job.MaxParallelism,
		Logger: c.cfg.Logger, Now: time.Now, Counters: new(task.Counters)}, Bucket: c.cfg.Bucket, RedisAddr: c.cfg.RedisAddr, Attempt: j.attempt}
	if err := tp.Open(sc); err != nil {
		return nil, fmt.Errorf("open sink %s to commit: %w", name, err)
	}
	k.sinks[name] = tp
	return tp, nil
}

func (k *ckpt) closeSinks() {
	k.sinkMu.Lock()
	defer k.sinkMu.Unlock()
	for n, s := range k.sinks {
		_ = s.Close()
		delete(k.sinks, n)
	}
}

// cleanStaging is the janitor: it deletes every staged transaction of
// the job's two-phase sinks that keep does not keep.
func (c *Coordinator) cleanStaging(ctx context.Context, j *job, keep func(string) bool) error {
	var errs []error
	for _, n := range j.plan.Nodes {
		if n.Kind != plan.KindSink {
			continue
		}
		s, err := c.sink(j, n.Name)
		if err != nil {
			continue // not a two-phase sink
		}
		cl, ok := s.(connector.StagingCleaner)
		if !ok {
			continue
		}
		removed, err := cl.CleanStaging(ctx, func(id string) bool {
			// Only this job's transactions: sinks may share a path.
			return !strings.HasPrefix(id, j.id+"-a") || keep(id)
		})
		if err != nil {
			errs = append(errs, err)
		}
		if removed > 0 {
			c.cfg.Logger.Info("janitor removed staged transactions", "job", j.id, "sink", n.Name, "objects", removed)
		}
	}
	return errors.Join(errs...)
}

// collectGarbage deletes the manifests of discarded checkpoints and every
// state file of the job that no retained checkpoint references and that
// is older than the latest completed one (a newer file may belong to a
// checkpoint in flight).
func (c *Coordinator) collectGarbage(j *job, dropped []*manifest.Manifest) {
	k := j.ck
	keep := map[string]bool{}
	for _, m := range k.retained {
		for _, f := range m.Files() {
			keep[f] = true
		}
	}
	latest := k.latest
	bucket, log := c.cfg.Bucket, c.cfg.Logger
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, m := range dropped {
			if err := bucket.Delete(ctx, manifest.Key(m.Job, m.Checkpoint)); err != nil && !errors.Is(err, blob.ErrNotFound) {
				log.Warn("delete discarded manifest failed", "job", j.id, "checkpoint", m.Checkpoint, "err", err)
			}
		}
		infos, err := bucket.List(ctx, "jobs/"+j.id+"/state/")
		if err != nil {
			log.Warn("list state files failed", "job", j.id, "err", err)
			return
		}
		for _, o := range infos {
			id, ok := task.StateFileCheckpoint(o.Key)
			if !ok || id >= latest || keep[o.Key] {
				continue
			}
			if err := bucket.Delete(ctx, o.Key); err != nil && !errors.Is(err, blob.ErrNotFound) {
				log.Warn("delete state file failed", "key", o.Key, "err", err)
			}
		}
	}()
}

// failOrRestartLocked handles a failure of the job's current attempt: a
// restart after a backoff if the strategy allows one, else FAILED.
func (c *Coordinator) failOrRestartLocked(ctx context.Context, j *job, msg string, corrupt int64) {
	k := j.ck
	if k == nil || k.restart.Attempts == 0 {
		c.failLocked(ctx, j, msg)
		return
	}
	if corrupt > 0 {
		if corrupt <= k.committed {
			// Its output is visible: restoring an older checkpoint
			// would produce it again.
			c.failLocked(ctx, j, fmt.Sprintf("%s; checkpoint %d's output is committed, so no older checkpoint can replace it", msg, corrupt))
			return
		}
		k.bad[corrupt] = true
	}
	if j.state == JobRestarting && !k.recovered {
		return // a restart is pending already
	}
	now := time.Now()
	if j.state == JobRunning && now.Sub(j.started) >= time.Duration(k.restart.ResetAfter) {
		k.backoff = time.Duration(k.restart.Backoff)
		k.restarts = 0
	}
	k.restarts++
	if k.restarts > k.restart.Attempts {
		c.failLocked(ctx, j, fmt.Sprintf("%s (gave up after %d restarts)", msg, k.restart.Attempts))
		return
	}
	c.cfg.Logger.Warn("job failed; restarting", "job", j.id, "attempt", j.attempt, "in", k.backoff, "err", msg)
	if k.sm != nil {
		if _, ok := k.sm.InFlight(); ok {
			c.execLocked(ctx, j, k.sm.TaskFailed(now, checkpoint.Task{}))
		}
		k.sm = nil
	}
	clear(k.acks)
	k.failWaitsLocked(msg)
	j.state, j.errMsg = JobRestarting, msg
	k.recovered, k.ready = false, false
	k.restartAt = now.Add(k.backoff)
	k.backoff = min(2*k.backoff, time.Duration(k.restart.MaxBackoff))
	k.recoveries = append(k.recoveries, Recovery{Attempt: j.attempt + 1, Reason: msg, Detected: now})
	c.cancelTasksLocked(ctx, j)
	c.notifyLocked()
}

// recoverLocked starts a new attempt: it finds the latest usable
// checkpoint, commits its transactions again, aborts every other staged
// transaction, deletes the old attempt's channels, and schedules the
// tasks to restore from it.
func (c *Coordinator) recoverLocked(ctx context.Context, j *job) {
	k := j.ck
	k.recovering = true
	old := j.attempt
	oldTasks := make([]control.TaskID, 0, len(j.tasks))
	for id := range j.tasks {
		oldTasks = append(oldTasks, id)
	}
	bad := maps.Clone(k.bad)
	origin := k.origin
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		key, m, maxID, err := c.latestManifest(ctx, j.id, bad)
		if err == nil && m == nil && origin != "" {
			// No checkpoint of its own yet: back to the savepoint.
			var raw []byte
			if raw, err = c.cfg.Bucket.Get(ctx, origin); err == nil {
				if m, err = manifest.Decode(raw); err == nil {
					key = origin
				}
			}
		}
		if err == nil && m != nil && m.Final {
			// The job had finished: commit its last output and end.
			for _, v := range m.Vertices {
				for _, st := range v.Subtasks {
					for _, t := range st.SinkTransactions {
						if cerr := c.commitTxn(ctx, j, t); cerr != nil {
							err = fmt.Errorf("commit transaction %s of checkpoint %d: %w", t.ID, m.Checkpoint, cerr)
						}
					}
				}
			}
		}
		if err == nil && (m == nil || !m.Final) {
			keep := map[string]bool{}
			if m != nil {
				for _, v := range m.Vertices {
					for _, st := range v.Subtasks {
						for _, t := range st.SinkTransactions {
							keep[t.ID] = true
						}
					}
				}
			}
			err = c.cleanStaging(ctx, j, func(id string) bool { return keep[id] })
		}
		if err == nil && c.cfg.Transport != nil {
			err = c.cfg.Transport.DeleteAttempt(ctx, j.id, old)
		}
		if err == nil {
			err = c.putStatus(ctx, j, old+1)
		}
		c.done(func(ctx context.Context) {
			k.recovering = false
			if j.state != JobRestarting {
				return // cancelled meanwhile
			}
			if err != nil {
				var fatal *fatalRestoreError
				if errors.As(err, &fatal) {
					c.failLocked(ctx, j, err.Error())
					return
				}
				c.cfg.Logger.Warn("recovery failed; retrying", "job", j.id, "err", err)
				k.restartAt = time.Now().Add(time.Second)
				return
			}
			c.cancelStragglers(ctx, oldTasks)
			k.maxID = max(k.maxID, maxID)
			clear(k.txns)
			clear(k.retained)
			k.latest, k.restoreKey, k.restoring = 0, "", 0
			if m != nil {
				k.latest, k.restoreKey, k.restoring = m.Checkpoint, key, m.Checkpoint
				k.retained[m.Checkpoint] = m
				// The restored checkpoint's transactions commit with the
				// new attempt's first checkpoint (or its final one): by
				// then every task has restored, so the checkpoint is
				// known good. Until then the janitor keeps them staged,
				// and if the restore fails they are aborted with it.
				if !m.Final {
					for _, v := range m.Vertices {
						for s, st := range v.Subtasks {
							for _, t := range st.SinkTransactions {
								k.txns[t.ID] = pendingTxn{checkpoint: m.Checkpoint, task: control.TaskID{Job: j.id, Vertex: v.Name, Subtask: s}, txn: t}
							}
						}
					}
				}
				if m.Final {
					j.attempt = old + 1
					k.finalizing = false
					c.endLocked(ctx, j, JobFinished, "")
					return
				}
			}
			j.attempt = old + 1
			j.tasks = nil
			k.ready, k.recovered = true, true
			if n := len(k.recoveries); n > 0 {
				k.recoveries[n-1].RestoredFrom = k.restoring
			}
			c.cfg.Logger.Info("job restarting", "job", j.id, "attempt", j.attempt, "checkpoint", k.restoring)
			c.wantSchedule = true
		})
	}()
}

// cancelStragglers tells every live worker to cancel the old attempt's
// tasks: after a coordinator restart it does not know where they run.
func (c *Coordinator) cancelStragglers(ctx context.Context, ids []control.TaskID) {
	if len(ids) == 0 {
		return
	}
	workers, err := c.cfg.Plane.Workers(ctx)
	if err != nil {
		return
	}
	for _, w := range workers {
		for _, id := range ids {
			_ = c.cfg.Plane.Send(ctx, w.ID, control.Command{Kind: control.CmdCancel, Task: id})
		}
	}
}

// fatalRestoreError stops recovery: restoring would break exactly-once.
type fatalRestoreError struct{ msg string }

func (e *fatalRestoreError) Error() string { return e.msg }

// latestManifest returns the newest usable manifest of the job (nil if it
// has none) and the highest checkpoint id found. A corrupt manifest, or
// one whose state a task could not read (bad), is skipped for the one
// before it; a manifest from a newer weir stops recovery, as does a job
// whose every checkpoint is unusable (starting over would repeat output
// already committed).
func (c *Coordinator) latestManifest(ctx context.Context, jobID string, bad map[int64]bool) (string, *manifest.Manifest, int64, error) {
	infos, err := c.cfg.Bucket.List(ctx, "jobs/"+jobID+"/checkpoints/")
	if err != nil {
		return "", nil, 0, fmt.Errorf("list checkpoints: %w", err)
	}
	type cand struct {
		key string
		id  int64
	}
	var cands []cand
	var maxID int64
	for _, o := range infos {
		if _, id, ok := manifest.ParseKey(o.Key); ok {
			cands = append(cands, cand{o.Key, id})
			maxID = max(maxID, id)
		}
	}
	sort.Slice(cands, func(a, b int) bool { return cands[a].id > cands[b].id })
	var skipped []string
	for _, cd := range cands {
		if bad[cd.id] {
			skipped = append(skipped, fmt.Sprintf("checkpoint %d: its state could not be restored", cd.id))
			continue
		}
		raw, err := c.cfg.Bucket.Get(ctx, cd.key)
		if err != nil {
			return "", nil, 0, fmt.Errorf("read %s: %w", cd.key, err)
		}
		m, err := manifest.Decode(raw)
		if errors.Is(err, manifest.ErrUnsupportedVersion) {
			return "", nil, 0, &fatalRestoreError{fmt.Sprintf("restore from %s: %v", cd.key, err)}
		}
		if err != nil {
			c.cfg.Logger.Error("skipping corrupt checkpoint manifest", "key", cd.key, "err", err)
			skipped = append(skipped, fmt.Sprintf("%s: %v", cd.key, err))
			continue
		}
		if m.Job != jobID {
			skipped = append(skipped, fmt.Sprintf("%s: belongs to job %s", cd.key, m.Job))
			continue
		}
		return cd.key, m, maxID, nil
	}
	if len(skipped) > 0 {
		return "", nil, 0, &fatalRestoreError{fmt.Sprintf("no usable checkpoint to restore (keep more with checkpoint.retain): %s", strings.Join(skipped, "; "))}
	}
	return "", nil, maxID, nil
}

// putStatus records the job's attempt in the bucket, so that a restarted
// coordinator continues with the next one.
func (c *Coordinator) putStatus(ctx context.Context, j *job, attempt int) error {
	c.mu.Lock()
	st := c.statusLocked(j)
	c.mu.Unlock()
	st.Attempt, st.Vertices = attempt, nil
	if st.State == "" || terminal(st.State) {
		st.State = JobRestarting
	}
	return c.storeStatus(ctx, j.id, st)
}

// finalizeLocked completes a checkpointing job whose every task finished:
// it writes the final manifest with the sinks' last transactions, commits
// them, cleans the staging areas and ends the job FINISHED.
func (c *Coordinator) finalizeLocked(ctx context.Context, j *job) {
	k := j.ck
	if k.sm != nil {
		if _, ok := k.sm.InFlight(); ok {
			c.execLocked(ctx, j, k.sm.TaskFailed(time.Now(), checkpoint.Task{}))
		}
		k.sm = nil
	}
	id := k.maxID + 1
	k.maxID = id
	m := c.buildManifest(j, id, time.Now(), nil, true, false)
	k.busy = true
	k.addHistory(CheckpointInfo{ID: id, Attempt: j.attempt, Status: CheckpointInProgress, Final: true, Triggered: time.Now(), Tasks: len(j.tasks), Acks: len(j.tasks)})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := c.putManifest(ctx, m)
		var committed []string
		if err == nil {
			committed, _ = c.commitAll(ctx, j, m)
			if len(committed) < len(k.txnIDs(m)) {
				err = errors.New("some transactions did not commit")
			}
		}
		if err == nil {
			err = c.cleanStaging(ctx, j, func(string) bool { return false })
		}
		c.done(func(ctx context.Context) {
			k.busy = false
			if !k.finalizing {
				return
			}
			h := k.find(id)
			if err != nil {
				c.cfg.Logger.Warn("final checkpoint failed; retrying", "job", j.id, "err", err)
				if h != nil {
					h.Status, h.Reason = CheckpointFailed, err.Error()
				}
				k.retryAt = time.Now().Add(time.Second)
				return
			}
			if h != nil {
				h.Status, h.Duration = CheckpointCompleted, time.Since(h.Triggered).Seconds()
			}
			k.finalizing = false
			k.latest = id
			c.endLocked(ctx, j, JobFinished, "")
		})
	}()
}

func (k *ckpt) txnIDs(m *manifest.Manifest) []string {
	var ids []string
	for _, v := range m.Vertices {
		for _, st := range v.Subtasks {
			for _, t := range st.SinkTransactions {
				ids = append(ids, t.ID)
			}
		}
	}
	return ids
}

// Checkpoints returns a job's checkpoint history, newest first.
func (c *Coordinator) Checkpoints(id string) ([]CheckpointInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.mu.jobs[id]
	if j == nil {
		return nil, fmt.Errorf("checkpoints of %s: %w", id, ErrNotFound)
	}
	if j.ck == nil {
		return nil, nil
	}
	out := slices.Clone(j.ck.history)
	slices.Reverse(out)
	return out, nil
}

// SavepointPrefix returns the prefix of a savepoint's objects.
func SavepointPrefix(job, name string) string { return "jobs/" + job + "/savepoints/" + name + "/" }

// savepointWait is a caller of Savepoint waiting for checkpoint id.
type savepointWait struct {
	id   int64
	key  string // manifest key once written
	err  error
	done chan struct{}
}

// Savepoint takes a savepoint of a running job now: a checkpoint whose
// manifest and state files are also copied, self-contained, under
// jobs/<job>/savepoints/<name>/, where no retention deletes them. It waits
// until the savepoint is written and returns its manifest's key.
func (c *Coordinator) Savepoint(ctx context.Context, id string) (string, error) {
	c.mu.Lock()
	j := c.mu.jobs[id]
	if j == nil {
		c.mu.Unlock()
		return "", fmt.Errorf("savepoint of %s: %w", id, ErrNotFound)
	}
	k := j.ck
	switch {
	case terminal(j.state):
		c.mu.Unlock()
		return "", fmt.Errorf("savepoint of %s (%s): %w", id, j.state, ErrEnded)
	case k == nil || k.cfg == nil:
		c.mu.Unlock()
		return "", fmt.Errorf("savepoint of %s: the job has no checkpoint section; savepoints need checkpoints on", id)
	case j.state != JobRunning || k.sm == nil || k.finalizing:
		c.mu.Unlock()
		return "", fmt.Errorf("savepoint of %s: the job is %s; try again when it runs", id, j.state)
	}
	// The savepoint is triggered as soon as no checkpoint is in flight
	// (checkpointTick), instead of the next periodic checkpoint.
	w := &savepointWait{done: make(chan struct{})}
	k.waits = append(k.waits, w)
	c.mu.Unlock()
	select {
	case <-w.done:
		return w.key, w.err
	case <-ctx.Done():
		return "", fmt.Errorf("savepoint of %s: %w", id, ctx.Err())
	}
}

// triggerSavepointLocked starts the savepoint callers wait for, if any
// wait and no checkpoint is in flight.
func (c *Coordinator) triggerSavepointLocked(ctx context.Context, j *job, now time.Time) {
	k := j.ck
	var waiting []*savepointWait
	for _, w := range k.waits {
		if w.id == 0 {
			waiting = append(waiting, w)
		}
	}
	if len(waiting) == 0 || k.busy {
		return
	}
	if _, inflight := k.sm.InFlight(); inflight {
		return
	}
	d, err := k.sm.TriggerSavepoint(now)
	if err != nil {
		return
	}
	for _, w := range waiting {
		w.id = d.Checkpoint
	}
	c.execLocked(ctx, j, []checkpoint.Decision{d})
}

// finishWaitsLocked tells the callers waiting for savepoint id.
func (k *ckpt) finishWaitsLocked(id int64, key string, err error) {
	kept := k.waits[:0]
	for _, w := range k.waits {
		if w.id == id {
			w.key, w.err = key, err
			close(w.done)
			continue
		}
		kept = append(kept, w)
	}
	k.waits = kept
}

// failWaitsLocked fails every waiting savepoint (the attempt failed).
func (k *ckpt) failWaitsLocked(reason string) {
	for _, w := range k.waits {
		w.err = fmt.Errorf("savepoint %d failed: %s", w.id, reason)
		close(w.done)
	}
	k.waits = nil
}

// copySavepoint copies checkpoint m's state files under the savepoint's
// prefix and writes its self-contained manifest there. Its sink
// transactions are committed already and are left out: a job restored
// from the savepoint starts with nothing pending.
func (c *Coordinator) copySavepoint(ctx context.Context, m *manifest.Manifest) (string, error) {
	name := fmt.Sprintf("sp-%d-%s", m.Checkpoint, time.Now().UTC().Format("20060102T150405Z"))
	prefix := SavepointPrefix(m.Job, name)
	sp := *m
	sp.Savepoint = true
	sp.Vertices = make([]manifest.Vertex, len(m.Vertices))
	copied := map[string]string{}
	for i, v := range m.Vertices {
		nv := v
		nv.Subtasks = make([]manifest.Subtask, len(v.Subtasks))
		for s, st := range v.Subtasks {
			ns := st
			ns.SinkTransactions = nil
			ns.State = make([]manifest.File, len(st.State))
			for f, file := range st.State {
				to, ok := copied[file.Key]
				if !ok {
					rest := file.Key
					if i := strings.Index(rest, "/state/"); i >= 0 {
						rest = rest[i+len("/state/"):]
					}
					to = prefix + "state/" + rest
					data, err := c.cfg.Bucket.Get(ctx, file.Key)
					if err != nil {
						return "", fmt.Errorf("copy %s: %w", file.Key, err)
					}
					if err := c.cfg.Bucket.Put(ctx, to, data); err != nil {
						return "", fmt.Errorf("copy %s to %s: %w", file.Key, to, err)
					}
					copied[file.Key] = to
				}
				file.Key = to
				ns.State[f] = file
			}
			nv.Subtasks[s] = ns
		}
		sp.Vertices[i] = nv
	}
	data, err := sp.Encode()
	if err != nil {
		return "", fmt.Errorf("encode savepoint manifest: %w", err)
	}
	key := manifest.SavepointKey(m.Job, name)
	if err := c.cfg.Bucket.PutIfAbsent(ctx, key, data); err != nil {
		return "", fmt.Errorf("write %s: %w", key, err)
	}
	return key, nil
}

// StopWithSavepoint takes a savepoint and then cancels the job, aborting
// whatever its sinks staged after the savepoint: deploying the spec again
// with --from-savepoint continues exactly where it stopped.
func (c *Coordinator) StopWithSavepoint(ctx context.Context, id string) (string, error) {
	key, err := c.Savepoint(ctx, id)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	j := c.mu.jobs[id]
	if j != nil {
		j.ck.stoppedAt = key
	}
	c.mu.Unlock()
	if err := c.Cancel(ctx, id); err != nil {
		return key, err
	}
	return key, nil
}

// Delete removes an ended job: its spec, status, checkpoints, state files
// and dead letters. Its savepoints stay (jobs/<job>/savepoints/), so a new
// job can still start from them; so does its sink output, which is the
// user's.
func (c *Coordinator) Delete(ctx context.Context, id string) error {
	c.mu.Lock()
	j := c.mu.jobs[id]
	if j == nil {
		c.mu.Unlock()
		return fmt.Errorf("delete %s: %w", id, ErrNotFound)
	}
	if !terminal(j.state) {
		c.mu.Unlock()
		return fmt.Errorf("delete %s: the job is %s; cancel or stop it first", id, j.state)
	}
	delete(c.mu.jobs, id)
	c.mu.Unlock()
	infos, err := c.cfg.Bucket.List(ctx, "jobs/"+id+"/")
	if err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	var errs []error
	for _, o := range infos {
		if strings.HasPrefix(o.Key, "jobs/"+id+"/savepoints/") {
			continue
		}
		if err := c.cfg.Bucket.Delete(ctx, o.Key); err != nil && !errors.Is(err, blob.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete %s: %w", id, errors.Join(errs...))
	}
	return nil
}
