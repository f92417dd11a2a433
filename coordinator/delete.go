package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

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
	if !lifecycle.Terminal(j.lc.State()) {
		c.mu.Unlock()
		return fmt.Errorf("delete %s: the job is %s; cancel or stop it first", id, j.lc.State())
	}
	delete(c.mu.jobs, id)
	c.mu.Unlock()
	infos, err := c.cfg.Bucket.List(ctx, layout.JobPrefix(id))
	if err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	var errs []error
	for _, o := range infos {
		if strings.HasPrefix(o.Key, layout.SavepointsPrefix(id)) {
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
