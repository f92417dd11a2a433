package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// cleanStaging is the janitor: it deletes every staged transaction of
// the job's two-phase sinks that keep does not keep.
func (c *Coordinator) cleanStaging(ctx context.Context, j *job, keep func(string) bool) error {
	if err := c.checkFence(ctx, j.id); err != nil {
		return fmt.Errorf("clean the staging areas of %s: %w", j.id, err)
	}
	var errs []error
	for _, n := range j.plan.Nodes {
		if n.Kind != plan.KindSink && n.Kind != plan.KindSource { // a source: its dead letters
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
// checkpoint in flight). One collection runs at a time per job: one asked
// for while another runs waits for it and then runs once for everything
// dropped meanwhile, so collections that overlap (checkpoints every second
// against a slow store) do not list and delete the same files twice.
func (c *Coordinator) collectGarbage(j *job, dropped []*manifest.Manifest) {
	k := j.ck
	if !k.collecting.IsZero() && c.now().Sub(k.collecting) < gcTimeout+time.Minute {
		k.collectNext = append(k.collectNext, dropped...)
		return
	}
	k.collecting = c.now()
	keep := map[string]bool{}
	for _, m := range k.retained {
		for _, f := range m.Files() {
			keep[f] = true
		}
	}
	latest := k.latest
	c.goAsync(gcTimeout, func(ctx context.Context) func(context.Context) {
		c.collect(ctx, j.id, dropped, keep, latest)
		return func(context.Context) {
			k.collecting = time.Time{}
			if next := k.collectNext; len(next) > 0 {
				k.collectNext = nil
				c.collectGarbage(j, next)
			}
		}
	})
}

// gcTimeout bounds one garbage collection; one that has not reported back
// a minute after it no longer holds the next back (its result was lost
// with a Run that ended).
const gcTimeout = time.Minute

// collect is one garbage collection's I/O (see collectGarbage).
func (c *Coordinator) collect(ctx context.Context, job string, dropped []*manifest.Manifest, keep map[string]bool, latest int64) {
	bucket, log := c.cfg.Bucket, c.cfg.Logger
	if err := c.checkFence(ctx, job); err != nil {
		log.Warn("not collecting garbage", "job", job, "err", err)
		return
	}
	for _, m := range dropped {
		if err := bucket.Delete(ctx, layout.ManifestKey(m.Job, m.Checkpoint)); err != nil && !errors.Is(err, blob.ErrNotFound) {
			log.Warn("delete discarded manifest failed", "job", job, "checkpoint", m.Checkpoint, "err", err)
		}
	}
	infos, err := bucket.List(ctx, layout.StatePrefix(job))
	if err != nil {
		log.Warn("list state files failed", "job", job, "err", err)
		return
	}
	for _, o := range infos {
		id, ok := layout.StateFileCheckpoint(o.Key)
		if !ok || id >= latest || keep[o.Key] {
			continue
		}
		if err := bucket.Delete(ctx, o.Key); err != nil && !errors.Is(err, blob.ErrNotFound) {
			log.Warn("delete state file failed", "key", o.Key, "err", err)
		}
	}
}
