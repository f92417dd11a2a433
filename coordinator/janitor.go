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
	c.goAsync(time.Minute, func(ctx context.Context) func(context.Context) {
		if err := c.checkFence(ctx, j.id); err != nil {
			log.Warn("not collecting garbage", "job", j.id, "err", err)
			return nil
		}
		for _, m := range dropped {
			if err := bucket.Delete(ctx, layout.ManifestKey(m.Job, m.Checkpoint)); err != nil && !errors.Is(err, blob.ErrNotFound) {
				log.Warn("delete discarded manifest failed", "job", j.id, "checkpoint", m.Checkpoint, "err", err)
			}
		}
		infos, err := bucket.List(ctx, layout.StatePrefix(j.id))
		if err != nil {
			log.Warn("list state files failed", "job", j.id, "err", err)
			return nil
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
		return nil
	})
}
