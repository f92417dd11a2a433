package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// recoverLocked starts a new attempt (lifecycle.Recover): it finds the
// latest usable checkpoint, commits its transactions again if it is the
// final one, aborts every other staged transaction, deletes the old
// attempt's channels and records the next attempt; then the lifecycle
// has the tasks deployed to restore from it.
func (c *Coordinator) recoverLocked(j *job, d lifecycle.Decision) {
	k := j.ck
	old, bad, origin, fences := d.Attempt, d.Bad, k.origin, slices.Clone(j.fences)
	c.goAsync(2*time.Minute, func(ctx context.Context) func(context.Context) {
		key, m, maxID, older, err := c.findManifests(ctx, j.id, bad, fences, true)
		if err == nil && c.cfg.Epoch > 0 {
			// This leader's fence: it has listed up to maxID.
			c.mu.Lock()
			j.fences = addFence(j.fences, c.cfg.Epoch, maxID)
			c.mu.Unlock()
		}
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
			err = c.checkFence(ctx, j.id)
			for _, t := range txnsOf(m) {
				if err != nil {
					break
				}
				if cerr := c.commitTxn(ctx, j, t.txn); cerr != nil {
					err = fmt.Errorf("commit transaction %s of checkpoint %d: %w", t.txn.ID, m.Checkpoint, cerr)
				}
			}
		}
		if err == nil && (m == nil || !m.Final) {
			keep := map[string]bool{}
			if m != nil {
				for _, t := range txnsOf(m) {
					keep[t.txn.ID] = true
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
		return func(ctx context.Context) {
			now := c.now()
			if err != nil {
				var fatal *fatalRestoreError
				isFatal := errors.As(err, &fatal)
				if !isFatal && j.lc.State() == JobRestarting {
					c.cfg.Logger.Warn("recovery failed; retrying", "job", j.id, "err", err)
				}
				c.exec(ctx, j, j.lc.RecoveryFailed(now, err.Error(), isFatal))
				return
			}
			if j.lc.State() != JobRestarting {
				c.exec(ctx, j, j.lc.Recovered(now, 0, false)) // canceled meanwhile: only ends the recovery
				return
			}
			k.maxID = max(k.maxID, maxID)
			clear(k.txns)
			clear(k.retained)
			k.latest, k.restoreKey = 0, ""
			var restored int64
			if m != nil {
				restored = m.Checkpoint
				k.latest, k.restoreKey = m.Checkpoint, key
				k.retained[m.Checkpoint] = m
				// The checkpoints retained before stay until newer
				// ones complete: they go then, as this attempt's do
				// (the checkpoint state machine retains only m).
				for _, om := range older {
					k.retained[om.Checkpoint] = om
				}
				// The restored checkpoint's transactions commit with the
				// new attempt's first checkpoint (or its final one): by
				// then every task has restored, so the checkpoint is
				// known good. Until then the janitor keeps them staged,
				// and if the restore fails they are aborted with it.
				if !m.Final {
					for _, t := range txnsOf(m) {
						t.task.Job = j.id
						k.txns[t.txn.ID] = pendingTxn{checkpoint: m.Checkpoint, task: t.task, txn: t.txn}
					}
				}
			}
			c.exec(ctx, j, j.lc.Recovered(now, restored, m != nil && m.Final))
			if j.lc.WantsDeploy() {
				c.cfg.Logger.Info("job restarting", "job", j.id, "attempt", j.lc.Attempt(), "checkpoint", restored)
				c.mu.wantSchedule = true
			}
		}
	})
}

// txnOf is a transaction listed in a manifest, with its subtask.
type txnOf struct {
	task control.TaskID // Vertex and Subtask
	txn  manifest.Txn
}

// txnsOf lists every sink transaction in m.
func txnsOf(m *manifest.Manifest) []txnOf {
	var out []txnOf
	for _, v := range m.Vertices {
		for s, st := range v.Subtasks {
			for _, t := range st.SinkTransactions {
				out = append(out, txnOf{task: control.TaskID{Vertex: v.Name, Subtask: s}, txn: t})
			}
		}
	}
	return out
}

// cancelStragglers tells every live worker to cancel the old attempt's
// tasks: after a coordinator restart it does not know where they run.
func (c *Coordinator) cancelStragglers(ctx context.Context, j *job, d lifecycle.Decision) {
	if len(d.Tasks) == 0 {
		return
	}
	workers, err := c.cfg.Plane.Workers(ctx)
	if err != nil {
		return
	}
	for _, w := range workers {
		for _, p := range d.Tasks {
			id := control.TaskID{Job: j.id, Attempt: d.Attempt, Vertex: p.Task.Vertex, Subtask: p.Task.Subtask}
			_ = c.send(ctx, w.ID, control.Command{Kind: control.CmdCancel, Task: id})
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
func (c *Coordinator) latestManifest(ctx context.Context, jobID string, bad map[int64]bool, fences []Fence) (string, *manifest.Manifest, int64, error) {
	key, m, maxID, _, err := c.findManifests(ctx, jobID, bad, fences, false)
	return key, m, maxID, err
}

// findManifests is latestManifest, and with older also every manifest
// before the newest usable one that decodes and is the job's: the
// checkpoints retained before a restart, which the new attempt retains
// until newer ones complete, and then drops (with their state files) as
// it drops its own. One it cannot read is left where it is.
func (c *Coordinator) findManifests(ctx context.Context, jobID string, bad map[int64]bool, fences []Fence, older bool) (string, *manifest.Manifest, int64, []*manifest.Manifest, error) {
	key, m, maxID, rest, err := c.newestManifest(ctx, jobID, bad, fences)
	if err != nil || m == nil || !older {
		return key, m, maxID, nil, err
	}
	var olderMs []*manifest.Manifest
	for _, k := range rest {
		raw, err := c.cfg.Bucket.Get(ctx, k)
		if err != nil {
			c.cfg.Logger.Warn("an older checkpoint manifest could not be read", "key", k, "err", err)
			continue
		}
		om, err := manifest.Decode(raw)
		if err != nil || om.Job != jobID {
			continue
		}
		if _, out := fencedOut(fences, om); out {
			continue
		}
		olderMs = append(olderMs, om)
	}
	return key, m, maxID, olderMs, nil
}

// newestManifest is latestManifest, also returning the keys of the
// manifests older than the one it returns, newest first.
func (c *Coordinator) newestManifest(ctx context.Context, jobID string, bad map[int64]bool, fences []Fence) (string, *manifest.Manifest, int64, []string, error) {
	infos, err := c.cfg.Bucket.List(ctx, layout.CheckpointsPrefix(jobID))
	if err != nil {
		return "", nil, 0, nil, fmt.Errorf("list checkpoints: %w", err)
	}
	type cand struct {
		key string
		id  int64
	}
	var cands []cand
	var maxID int64
	for _, o := range infos {
		if _, id, ok := layout.ParseManifestKey(o.Key); ok {
			cands = append(cands, cand{o.Key, id})
			maxID = max(maxID, id)
		}
	}
	sort.Slice(cands, func(a, b int) bool { return cands[a].id > cands[b].id })
	var skipped []string
	for i, cd := range cands {
		if bad[cd.id] {
			skipped = append(skipped, fmt.Sprintf("checkpoint %d: its state could not be restored", cd.id))
			continue
		}
		raw, err := c.cfg.Bucket.Get(ctx, cd.key)
		if err != nil {
			return "", nil, 0, nil, fmt.Errorf("read %s: %w", cd.key, err)
		}
		m, err := manifest.Decode(raw)
		if errors.Is(err, manifest.ErrUnsupportedVersion) {
			return "", nil, 0, nil, &fatalRestoreError{fmt.Sprintf("restore from %s: %v", cd.key, err)}
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
		if f, out := fencedOut(fences, m); out {
			// Not a checkpoint of the job's history: nothing of it was
			// committed, and it is not counted as unusable.
			c.cfg.Logger.Warn("skipping a checkpoint a deposed leader wrote", "key", cd.key, "epoch", m.Epoch, "takeover", f.Epoch, "listed", f.Checkpoint)
			continue
		}
		var rest []string
		for _, o := range cands[i+1:] {
			if !bad[o.id] {
				rest = append(rest, o.key)
			}
		}
		return cd.key, m, maxID, rest, nil
	}
	if len(skipped) > 0 {
		return "", nil, 0, nil, &fatalRestoreError{fmt.Sprintf("no usable checkpoint to restore (keep more with checkpoint.retain): %s", strings.Join(skipped, "; "))}
	}
	return "", nil, maxID, nil, nil
}

// putStatus records the job's attempt in the bucket, so that a restarted
// coordinator continues with the next one.
func (c *Coordinator) putStatus(ctx context.Context, j *job, attempt int) error {
	c.mu.Lock()
	st := c.statusLocked(j)
	c.mu.Unlock()
	st.Attempt, st.Vertices = attempt, nil
	if st.State == "" || lifecycle.Terminal(st.State) {
		st.State = JobRestarting
	}
	return c.storeStatus(ctx, j.id, st)
}
