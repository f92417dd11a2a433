package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/coordinator/internal/checkpoint"
	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

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
	StepMs    int64     `json:"maxStepMs,omitempty"` // the longest capture step
	AsyncMs   int64     `json:"maxAsyncMs"`
	Reason    string    `json:"reason,omitempty"`
}

// ckpt is a job's checkpointing, commit and savepoint state, owned by
// the loop (with c.mu held).
type ckpt struct {
	cfg *checkpoint.Config // nil: checkpoints off
	sm  *checkpoint.Coordinator

	// txns are pre-committed sink transactions not yet known committed,
	// by id. Every manifest carries those up to its checkpoint, so a
	// transaction of a checkpoint that aborted commits with the next one.
	txns map[string]pendingTxn
	// latest is the newest completed checkpoint (0 for none) and
	// retained the manifests of those still kept.
	latest   int64
	retained map[int64]*manifest.Manifest
	maxID    int64 // highest checkpoint id seen
	acks     map[int64]map[checkpoint.Task]control.Ack
	// finals are the subtasks of this attempt that finished their input,
	// with their final acknowledgement (no state: a finished operator has
	// fired everything). While the rest of the job runs on, its
	// checkpoints record them so, and commit their final transactions.
	finals map[checkpoint.Task]manifest.Subtask

	restoreKey string // manifest the next deploy restores from

	history []CheckpointInfo
	// detail holds the newest checkpoints' acknowledgements (explain.go).
	detail map[int64][]CheckpointSubtask

	origin string // savepoint the job started from, "" for none
	waits  []*savepointWait
	// copying counts the savepoint being copied (nil when none is).
	copying *savepointCopy

	// collecting is when the garbage collection under way started (zero:
	// none), and collectNext the manifests dropped meanwhile, collected
	// after it (janitor.go).
	collecting  time.Time
	collectNext []*manifest.Manifest

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
	k := &ckpt{txns: map[string]pendingTxn{}, retained: map[int64]*manifest.Manifest{},
		acks: map[int64]map[checkpoint.Task]control.Ack{}, finals: map[checkpoint.Task]manifest.Subtask{}, sinks: map[string]task.TwoPhaseSink{}}
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
	for t := range k.finals { // finished before every task ran
		sm.Finished(c.now(), t)
	}
	k.sm = sm
}

// execLocked carries out checkpoint decisions.
func (c *Coordinator) execLocked(ctx context.Context, j *job, ds []checkpoint.Decision) {
	k := j.ck
	for _, d := range ds {
		switch d.Kind {
		case checkpoint.Trigger:
			k.maxID = max(k.maxID, d.Checkpoint)
			k.addHistory(CheckpointInfo{ID: d.Checkpoint, Attempt: j.lc.Attempt(), Status: CheckpointInProgress,
				Savepoint: d.Savepoint, Triggered: c.now(), Tasks: len(j.lc.Tasks())})
			for _, s := range d.Sources {
				lt := lifecycle.Task(s)
				worker, state, ok := j.lc.Task(lt)
				if !ok || lifecycle.Terminal(state) {
					continue
				}
				id := j.taskID(lt)
				if err := c.send(ctx, worker, control.Command{Kind: control.CmdTrigger, Task: id, Checkpoint: d.Checkpoint}); err != nil {
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
			what := "checkpoint"
			if d.Savepoint {
				what = "savepoint"
			}
			k.finishWaitsLocked(d.Checkpoint, "", fmt.Errorf("%s %d aborted: %s", what, d.Checkpoint, d.Reason))
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
	t := checkpoint.Task{Vertex: e.Task.Vertex, Subtask: e.Task.Subtask}
	if a.Final {
		st := a.Subtask
		st.State = nil
		k.finals[t] = st
		if k.sm != nil {
			c.execLocked(ctx, j, k.sm.Finished(c.now(), t))
		}
		return
	}
	if k.sm == nil {
		return
	}
	if a.Decline != "" {
		c.execLocked(ctx, j, k.sm.Decline(c.now(), a.Checkpoint, t, a.Decline))
		return
	}
	if inflight, ok := k.sm.InFlight(); !ok || inflight != a.Checkpoint {
		return
	}
	if k.acks[a.Checkpoint] == nil {
		k.acks[a.Checkpoint] = map[checkpoint.Task]control.Ack{}
	}
	k.acks[a.Checkpoint][t] = a
	if h := k.find(a.Checkpoint); h != nil {
		h.Acks = len(k.acks[a.Checkpoint])
		h.Bytes += a.Subtask.Metrics.UploadedBytes
		h.AlignMs = max(h.AlignMs, a.Subtask.Metrics.AlignMs)
		h.SyncMs = max(h.SyncMs, a.Subtask.Metrics.SyncMs)
		h.StepMs = max(h.StepMs, a.Subtask.Metrics.StepMs)
		h.AsyncMs = max(h.AsyncMs, a.Subtask.Metrics.AsyncMs)
		for _, f := range a.Subtask.State {
			h.StateSize += f.Size
		}
		m := a.Subtask.Metrics
		k.recordAck(a.Checkpoint, CheckpointSubtask{Vertex: t.Vertex, Subtask: t.Subtask, Worker: e.Worker,
			AckedMs: c.now().Sub(h.Triggered).Milliseconds(), AlignMs: m.AlignMs, SyncMs: m.SyncMs, CaptureMs: m.CaptureMs, StepMs: m.StepMs, AsyncMs: m.AsyncMs, UploadedBytes: m.UploadedBytes, LastInput: m.LastInput})
	}
	ds, err := k.sm.Ack(c.now(), a.Checkpoint, checkpoint.Ack{Task: t})
	if err != nil {
		c.cfg.Logger.Warn("checkpoint ack refused", "job", j.id, "task", e.Task, "err", err)
		return
	}
	c.execLocked(ctx, j, ds)
}

// buildManifest assembles the manifest of checkpoint id from the
// subtasks' acknowledgements, with every pending transaction up to id.
func (c *Coordinator) buildManifest(j *job, id int64, triggered time.Time, acks map[checkpoint.Task]control.Ack, final, savepoint bool) *manifest.Manifest {
	sum := sha256.Sum256(j.specJSON)
	m := &manifest.Manifest{Version: manifest.Version, Job: j.id, Checkpoint: id, Attempt: j.lc.Attempt(), Epoch: c.cfg.Epoch,
		Savepoint: savepoint, Final: final, Triggered: triggered.UTC(), Completed: c.now().UTC(),
		MaxParallelism: j.plan.Job.MaxParallelism, SpecSHA256: hex.EncodeToString(sum[:])}
	if m.Completed.Before(m.Triggered) {
		m.Completed = m.Triggered
	}
	// finishedHere: a subtask this manifest records as finished (it had
	// not acknowledged id when it finished), whose final transactions
	// commit with it.
	finishedHere := func(t checkpoint.Task) bool {
		_, acked := acks[t]
		_, fin := j.ck.finals[t]
		return fin && !acked
	}
	byTask := map[checkpoint.Task][]manifest.Txn{}
	for _, p := range j.ck.txns {
		t := checkpoint.Task{Vertex: p.task.Vertex, Subtask: p.task.Subtask}
		if p.checkpoint <= id || final || p.checkpoint == math.MaxInt64 && finishedHere(t) {
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
			} else if f, ok := j.ck.finals[t]; ok && !final {
				st = f
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
	m.Version = m.LowestVersion()
	return m
}

// writeManifestLocked writes the manifest of a fully acknowledged
// checkpoint (the commit point), then commits its transactions.
func (c *Coordinator) writeManifestLocked(j *job, d checkpoint.Decision) {
	k := j.ck
	triggered := c.now()
	if h := k.find(d.Checkpoint); h != nil {
		triggered = h.Triggered
	}
	m := c.buildManifest(j, d.Checkpoint, triggered, k.acks[d.Checkpoint], false, d.Savepoint)
	delete(k.acks, d.Checkpoint)
	j.lc.ManifestWriting()
	id, attempt := d.Checkpoint, j.lc.Attempt()
	var cp *savepointCopy
	if m.Savepoint {
		cp = newSavepointCopy(m)
		k.copying = cp
	}
	c.goAsync(time.Minute, func(ctx context.Context) func(context.Context) {
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
		writtenAt := c.now()
		if err == nil && c.crash("manifest-written") {
			return nil
		}
		var committed []string
		if err == nil {
			var crashed bool
			if committed, crashed = c.commitAll(ctx, j, cm); crashed {
				return nil
			}
		}
		var spKey string
		var spErr error
		if err == nil && m.Savepoint {
			spKey, spErr = c.copySavepoint(ctx, cm, cp)
		}
		return func(ctx context.Context) {
			stop := false // a stop-with-savepoint waits for this one
			if k.copying == cp {
				k.copying = nil
			}
			if err != nil {
				spErr = err
			}
			// Savepoints, and checkpoints taken now (before a rescale).
			stop = k.finishWaitsLocked(id, spKey, spErr)
			if err == nil {
				m = cm
				k.retained[id] = m
				k.maxID = max(k.maxID, id)
				for _, t := range committed {
					delete(k.txns, t)
				}
			} else {
				c.cfg.Logger.Warn("manifest write failed", "job", j.id, "checkpoint", id, "err", err)
			}
			if k.sm != nil && j.lc.Attempt() == attempt {
				c.execLocked(ctx, j, k.sm.ManifestWritten(writtenAt, id, err))
			} else if err == nil {
				// The attempt failed meanwhile; the checkpoint is
				// complete all the same, and recovery starts from it.
				k.latest = max(k.latest, id)
				if h := k.find(id); h != nil {
					h.Status = CheckpointCompleted
				}
			}
			allCommitted := err == nil && len(committed) == len(txnIDs(cm))
			c.exec(ctx, j, j.lc.ManifestWritten(c.now(), id, err == nil, allCommitted))
			if stop {
				// Before the loop can trigger another checkpoint.
				ds, _ := j.lc.StoppedWithSavepoint(c.now(), spKey)
				c.exec(ctx, j, ds)
			}
		}
	})
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
	key := layout.ManifestKey(m.Job, m.Checkpoint)
	if !c.leads() {
		return fmt.Errorf("write %s: %w", key, control.ErrNotLeader)
	}
	if err := c.cfg.Bucket.PutIfAbsent(ctx, key, data); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
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
