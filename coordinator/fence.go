package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// Fencing: what keeps a deposed leader from changing anything after a
// standby took over (docs/architecture.md, "Coordinator failover").
//
//   - It stops acting once its lease is no longer trusted (Config.Leading):
//     every command, manifest, commit, deletion and status write checks it
//     first, and Run returns.
//   - Commands carry its epoch; workers drop commands older than the
//     cluster's epoch.
//   - Statuses are written per epoch and the highest is read, so its late
//     status writes are never read.
//   - A new leader writes each job's status under its epoch (the claim)
//     before it lists the job's checkpoints; a leader checks, after it
//     wrote a manifest and before it commits sink transactions or deletes
//     staged ones, that no newer epoch's status exists (checkFence). So a
//     manifest a deposed leader writes is either seen by the new leader's
//     listing (and restored from, its transactions committed by the new
//     leader) or found stale by its writer before any commit.
//   - The new leader records a fence {its epoch, the highest checkpoint it
//     listed}; a manifest of an older epoch above a fence's checkpoint
//     was written after the takeover and is never restored from.

// Fence is a takeover of a job by the leader of Epoch, which had listed
// checkpoints up to Checkpoint: a manifest of an older epoch with a
// higher id was written by a deposed leader and is not restored from.
type Fence struct {
	Epoch      int64 `json:"epoch"`
	Checkpoint int64 `json:"checkpoint"`
}

// maxFences bounds the fences a status keeps: the oldest go first.
const maxFences = 16

// fencedOut reports whether the fences exclude manifest m, and which.
func fencedOut(fences []Fence, m *manifest.Manifest) (Fence, bool) {
	for _, f := range fences {
		if f.Epoch > m.Epoch && m.Checkpoint > f.Checkpoint {
			return f, true
		}
	}
	return Fence{}, false
}

// addFence returns fences with {epoch, checkpoint} added, unless epoch
// has one already.
func addFence(fences []Fence, epoch, checkpoint int64) []Fence {
	for _, f := range fences {
		if f.Epoch == epoch {
			return fences
		}
	}
	fences = append(fences, Fence{Epoch: epoch, Checkpoint: checkpoint})
	if len(fences) > maxFences {
		fences = fences[len(fences)-maxFences:]
	}
	return fences
}

// leads reports whether this coordinator may act: its lease is trusted
// and no newer leader's status was seen.
func (c *Coordinator) leads() bool {
	return c.deposed.Load() == 0 && (c.cfg.Leading == nil || c.cfg.Leading())
}

// leadership is nil while c leads, else why not.
func (c *Coordinator) leadership() error {
	if e := c.deposed.Load(); e != 0 {
		return fmt.Errorf("%w: the leader of epoch %d took over (this one has epoch %d)", control.ErrNotLeader, e, c.cfg.Epoch)
	}
	if c.cfg.Leading != nil && !c.cfg.Leading() {
		return fmt.Errorf("%w: the lease of epoch %d is no longer trusted", control.ErrNotLeader, c.cfg.Epoch)
	}
	return nil
}

// send queues a command for a worker, stamped with c's epoch.
func (c *Coordinator) send(ctx context.Context, worker string, cmd control.Command) error {
	if err := c.leadership(); err != nil {
		return fmt.Errorf("send to %s: %w", worker, err)
	}
	cmd.Epoch = c.cfg.Epoch
	return c.cfg.Plane.Send(ctx, worker, cmd)
}

// checkFence returns an error wrapping control.ErrNotLeader when c must
// not commit or delete for job id: its lease is not trusted, or a newer
// epoch wrote the job's status (then Run stops too).
func (c *Coordinator) checkFence(ctx context.Context, id string) error {
	if err := c.leadership(); err != nil {
		return err
	}
	if c.cfg.Epoch <= 0 {
		return nil
	}
	newest, _, err := newestStatus(ctx, c.cfg.Bucket, id)
	if err != nil {
		return fmt.Errorf("check the leader epoch of job %s: %w", id, err)
	}
	if newest > c.cfg.Epoch {
		c.deposed.CompareAndSwap(0, newest)
		return c.leadership()
	}
	return nil
}

// newestStatus returns the highest epoch that wrote job id's status and
// that status's key ("" if it has none).
func newestStatus(ctx context.Context, b blob.BucketReader, id string) (int64, string, error) {
	objs, err := b.List(ctx, layout.StatusPrefix(id))
	if err != nil {
		return 0, "", err
	}
	newest, key := int64(-1), ""
	for _, o := range objs {
		if e, ok := layout.ParseStatusKey(id, o.Key); ok && e > newest {
			newest, key = e, o.Key
		}
	}
	return max(newest, 0), key, nil
}

// readStatus reads job id's newest status; ok is false if it has none or
// it does not decode.
func readStatus(ctx context.Context, b blob.BucketReader, id string) (JobStatus, bool, error) {
	_, key, err := newestStatus(ctx, b, id)
	if err != nil || key == "" {
		return JobStatus{}, false, err
	}
	raw, err := b.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return JobStatus{}, false, nil
	}
	if err != nil {
		return JobStatus{}, false, fmt.Errorf("read %s: %w", key, err)
	}
	var st JobStatus
	if json.Unmarshal(raw, &st) != nil {
		return JobStatus{}, false, nil
	}
	return st, true, nil
}
