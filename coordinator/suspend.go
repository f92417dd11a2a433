package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/weirstream/weir/coordinator/internal/autoscale"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
)

// Scale to zero. A job whose spec sets autoscale.scaleToZero, and whose
// sources all were idle that long, is suspended (lifecycle.Suspend: its
// tasks canceled, no slot held, SUSPENDED in its stored status); the
// coordinator then asks its sources once a second whether input arrived
// after the positions of its latest checkpoint (connector.Pending: a redis
// stream with entries after the position), and wakes it (lifecycle.Wake:
// a recovery from that checkpoint) when one did.

// wakeEvery is how often the sources of a suspended job are asked.
const wakeEvery = time.Second

// suspendLocked suspends j on the policy's decision d, if every source can
// say when input arrives and a checkpoint was taken while the sources were
// idle (its positions are past everything read, so input after them is
// new). It reports whether it did.
func (c *Coordinator) suspendLocked(ctx context.Context, j *job, now time.Time, d autoscale.Decision) (bool, string) {
	for _, s := range j.spec.Sources {
		if !connector.CanWake(s.Type) {
			return false, fmt.Sprintf("source %s (%s) cannot say when input arrives, so the job stays", s.Name, s.Type)
		}
	}
	k := j.ck
	h := k.find(k.latest)
	idle := time.Duration(j.scaler.cfg.ScaleToZero)
	if k.latest == 0 || h == nil || h.Status != CheckpointCompleted || now.Sub(h.Triggered) > idle/2 {
		return false, "waiting for a checkpoint taken while the sources were idle"
	}
	ds, ok := j.lc.Suspend(now, d.Reason)
	if !ok {
		return false, "the job is " + j.lc.State()
	}
	c.cfg.Logger.Info("job suspended", "job", j.id, "checkpoint", k.latest, "reason", d.Reason)
	c.exec(ctx, j, ds)
	j.scaler.wakeCheck = now
	attempt := j.lc.Attempt()
	c.goAsync(time.Minute, func(ctx context.Context) func(context.Context) {
		if err := c.putStatus(ctx, j, attempt); err != nil {
			c.cfg.Logger.Warn("store the status of a suspended job", "job", j.id, "err", err)
		}
		return nil
	})
	c.notifyLocked()
	return true, ""
}

// wakeLocked asks, once every wakeEvery, whether a suspended job's sources
// received input after its latest checkpoint, and wakes the job if so.
func (c *Coordinator) wakeLocked(j *job, now time.Time) {
	as := j.scaler
	if as == nil || j.lc.State() != JobSuspended || as.waking || now.Sub(as.wakeCheck) < wakeEvery {
		return
	}
	as.waking, as.wakeCheck = true, now
	id, sources, fences := j.id, j.spec.Sources, slices.Clone(j.fences)
	c.goAsync(30*time.Second, func(ctx context.Context) func(context.Context) {
		arrived, err := c.arrived(ctx, id, sources, fences)
		return func(ctx context.Context) {
			as.waking = false
			if err != nil {
				c.cfg.Logger.Warn("ask a suspended job's sources", "job", id, "err", err)
				return
			}
			if arrived == "" {
				return
			}
			now := c.now()
			if ds, ok := j.lc.Wake(now, arrived); ok {
				c.cfg.Logger.Info("job woken", "job", id, "why", arrived)
				as.record(now, autoscale.Decision{Kind: autoscale.None, Vertex: "", Reason: "woken: " + arrived})
				if as.policy != nil {
					as.policy.Woken(now)
				}
				c.exec(ctx, j, ds)
				c.notifyLocked()
			}
		}
	})
}

// arrived names the first source of the job that has input after the
// positions of its latest checkpoint, the one it wakes from ("" if none
// has). A coordinator that restarted finds it in the bucket as recovery
// does.
func (c *Coordinator) arrived(ctx context.Context, id string, sources []spec.Source, fences []Fence) (string, error) {
	_, m, _, err := c.latestManifest(ctx, id, nil, fences)
	if err != nil {
		return "", err
	}
	if m == nil {
		return "", fmt.Errorf("no checkpoint to wake from")
	}
	checkpoint := m.Checkpoint
	for i := range sources {
		s := &sources[i]
		var positions []json.RawMessage
		for _, v := range m.Vertices {
			for _, st := range v.Subtasks {
				if p, ok := st.SourcePositions[s.Name]; ok {
					var sc struct {
						Position json.RawMessage `json:"position"`
					}
					if err := json.Unmarshal(p, &sc); err != nil {
						return "", fmt.Errorf("checkpoint %d: source %s: %w", checkpoint, s.Name, err)
					}
					positions = append(positions, sc.Position)
				}
			}
		}
		if len(positions) == 0 {
			continue
		}
		known, pending, err := connector.Pending(ctx, s, positions, connector.PendingEnv{RedisAddr: c.cfg.RedisAddr, Bucket: c.cfg.Bucket})
		if err != nil {
			return "", fmt.Errorf("source %s: %w", s.Name, err)
		}
		if known && pending {
			return fmt.Sprintf("input arrived at source %s after checkpoint %d", s.Name, checkpoint), nil
		}
	}
	return "", nil
}
