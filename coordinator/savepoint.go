package coordinator

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/coordinator/internal/checkpoint"
	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// savepointWait is a caller of Savepoint waiting for checkpoint id.
type savepointWait struct {
	id   int64
	key  string // manifest key once written
	err  error
	done chan struct{}
	// stop: cancel the job as soon as the savepoint is written, on the
	// loop, before another checkpoint can commit output past it.
	stop bool
	// plain: a checkpoint taken now, not a savepoint (checkpointNow).
	plain bool
}

// Savepoint takes a savepoint of a running job now: a checkpoint whose
// manifest and state files are also copied, self-contained, under
// jobs/<job>/savepoints/<name>/, where no retention deletes them. It waits
// until the savepoint is written and returns its manifest's key.
func (c *Coordinator) Savepoint(ctx context.Context, id string) (string, error) {
	return c.savepoint(ctx, id, false)
}

// checkpointNow takes a checkpoint of a running job now, instead of at
// its next interval, and waits until it completes (a rescale restores from
// it, so it replays nothing).
func (c *Coordinator) checkpointNow(ctx context.Context, id string) error {
	_, err := c.waitCheckpoint(ctx, id, &savepointWait{done: make(chan struct{}), plain: true})
	return err
}

func (c *Coordinator) savepoint(ctx context.Context, id string, stop bool) (string, error) {
	return c.waitCheckpoint(ctx, id, &savepointWait{done: make(chan struct{}), stop: stop})
}

func (c *Coordinator) waitCheckpoint(ctx context.Context, id string, w *savepointWait) (string, error) {
	what := "savepoint"
	if w.plain {
		what = "checkpoint"
	}
	c.mu.Lock()
	j := c.mu.jobs[id]
	if j == nil {
		c.mu.Unlock()
		return "", fmt.Errorf("%s of %s: %w", what, id, ErrNotFound)
	}
	k := j.ck
	switch {
	case lifecycle.Terminal(j.lc.State()):
		c.mu.Unlock()
		return "", fmt.Errorf("%s of %s (%s): %w", what, id, j.lc.State(), ErrEnded)
	case k == nil || k.cfg == nil:
		c.mu.Unlock()
		return "", fmt.Errorf("%s of %s: the job has no checkpoint section; %ss need checkpoints on", what, id, what)
	case !j.lc.CanCheckpoint() || k.sm == nil:
		c.mu.Unlock()
		return "", notRunning(fmt.Errorf("%s of %s: the job is %s; try again when it runs", what, id, j.lc.State()))
	}
	if c.endedLocked() {
		c.mu.Unlock()
		return "", fmt.Errorf("%s of %s: %w", what, id, ErrStopped)
	}
	// The savepoint is triggered as soon as no checkpoint is in flight
	// (tick), instead of the next periodic checkpoint.
	k.waits = append(k.waits, w)
	c.mu.Unlock()
	select {
	case <-w.done:
		return w.key, w.err
	case <-ctx.Done():
		return "", fmt.Errorf("%s of %s: %w", what, id, ctx.Err())
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
	if len(waiting) == 0 || j.lc.Writing() {
		return
	}
	if _, inflight := k.sm.InFlight(); inflight {
		return
	}
	trigger := k.sm.TriggerNow // a savepoint serves a plain wait too
	for _, w := range waiting {
		if !w.plain {
			trigger = k.sm.TriggerSavepoint
		}
	}
	d, err := trigger(now)
	if err != nil {
		return
	}
	for _, w := range waiting {
		w.id = d.Checkpoint
	}
	c.execLocked(ctx, j, []checkpoint.Decision{d})
}

// finishWaitsLocked tells the callers waiting for savepoint id.
// It reports whether one of them asked to stop the job (and the savepoint
// was written).
func (k *ckpt) finishWaitsLocked(id int64, key string, err error) (stop bool) {
	kept := k.waits[:0]
	for _, w := range k.waits {
		if w.id == id {
			w.key, w.err = key, err
			stop = stop || w.stop && err == nil
			close(w.done)
			continue
		}
		kept = append(kept, w)
	}
	k.waits = kept
	return stop
}

// failWaitsLocked fails every waiting savepoint (the attempt failed).
func (k *ckpt) failWaitsLocked(reason string) {
	for _, w := range k.waits {
		w.err = fmt.Errorf("savepoint %d failed: %s", w.id, reason)
		close(w.done)
	}
	k.waits = nil
}

// failWaits fails every waiting savepoint with err (the coordinator
// stopped).
func (k *ckpt) failWaits(err error) {
	for _, w := range k.waits {
		w.err = fmt.Errorf("savepoint %d: %w", w.id, err)
		close(w.done)
	}
	k.waits = nil
}

// copySavepoint copies checkpoint m's state files under the savepoint's
// prefix and writes its self-contained manifest there. Its sink
// transactions are committed already and are left out: a job restored
// from the savepoint starts with nothing pending.
//
// cp, if not nil, counts the files and bytes as they are copied.
func (c *Coordinator) copySavepoint(ctx context.Context, m *manifest.Manifest, cp *savepointCopy) (string, error) {
	name := fmt.Sprintf("sp-%d-%s", m.Checkpoint, c.now().UTC().Format("20060102T150405Z"))
	sp := *m
	sp.Savepoint = true
	sp.Vertices = make([]manifest.Vertex, len(m.Vertices))
	copied := map[string]string{}
	objects := stateObjects(m)
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
					// On the store's side (S3's CopyObject): the state
					// does not pass through the coordinator.
					to = layout.SavepointStateKey(m.Job, name, file.Key)
					if err := c.cfg.Bucket.Copy(ctx, file.Key, to); err != nil {
						return "", fmt.Errorf("copy %s to %s: %w", file.Key, to, err)
					}
					copied[file.Key] = to
					if cp != nil {
						cp.files.Add(1)
						cp.bytes.Add(objects[file.Key])
					}
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
	key := layout.SavepointManifestKey(m.Job, name)
	if err := c.cfg.Bucket.PutIfAbsent(ctx, key, data); err != nil {
		return "", fmt.Errorf("write %s: %w", key, err)
	}
	return key, nil
}

// savepointCopy counts a savepoint's copy while it runs. The loop makes
// it (with the totals) and reads it for the status; the goroutine that
// copies only adds to the counters.
type savepointCopy struct {
	checkpoint             int64
	filesTotal, bytesTotal int64
	files, bytes           atomic.Int64
}

// newSavepointCopy counts the distinct state files of m, as
// copySavepoint copies them.
func newSavepointCopy(m *manifest.Manifest) *savepointCopy {
	cp := &savepointCopy{checkpoint: m.Checkpoint}
	for _, n := range stateObjects(m) {
		cp.filesTotal++
		cp.bytesTotal += n
	}
	return cp
}

// stateObjects is the bytes of m's state in each object it lists: the
// sizes of the distinct state files in it (a packed object holds several).
func stateObjects(m *manifest.Manifest) map[string]int64 {
	seen := map[string]bool{}
	bytes := map[string]int64{}
	for _, v := range m.Vertices {
		for _, st := range v.Subtasks {
			for _, f := range st.State {
				if seg := f.Segment(); !seen[seg] {
					seen[seg] = true
					bytes[f.Key] += f.Size
				}
			}
		}
	}
	return bytes
}

// SavepointProgress is how far the copy of a savepoint's state files is.
type SavepointProgress struct {
	Checkpoint int64 `json:"checkpoint"`
	Files      int64 `json:"files"`
	FilesTotal int64 `json:"filesTotal"`
	Bytes      int64 `json:"bytes"`
	BytesTotal int64 `json:"bytesTotal"`
}

func (cp *savepointCopy) progress() *SavepointProgress {
	return &SavepointProgress{Checkpoint: cp.checkpoint, Files: cp.files.Load(), FilesTotal: cp.filesTotal,
		Bytes: cp.bytes.Load(), BytesTotal: cp.bytesTotal}
}

// StopWithSavepoint takes a savepoint and then cancels the job, aborting
// whatever its sinks staged after the savepoint: deploying the spec again
// with --from-savepoint continues exactly where it stopped.
func (c *Coordinator) StopWithSavepoint(ctx context.Context, id string) (string, error) {
	// The cancel happens on the loop the moment the savepoint is written
	// (writeManifestLocked): were it left to this goroutine, a periodic
	// checkpoint completing in between would commit output that a job
	// resumed from the savepoint produces again.
	return c.savepoint(ctx, id, true)
}
