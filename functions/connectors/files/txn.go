package files

import (
	"context"
	"errors"
	"fmt"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

var (
	_ task.TwoPhaseSink        = (*fileSink)(nil)
	_ connector.StagingCleaner = (*fileSink)(nil)
)

// CleanStaging deletes the staged objects under <path>/_staging/ of every
// transaction keep does not keep, and returns how many it deleted. It is
// the janitor run on recovery: keep the transactions of the latest
// completed checkpoint (commit them first or after, either order is safe),
// drop the rest. It must not run while a sink may still pre-commit a
// transaction it does not keep. It goes on past a failed delete and
// reports all failures.
func CleanStaging(ctx context.Context, bucket blob.Bucket, path string, keep func(txnID string) bool) (removed int, err error) {
	dir := layout.StagingPrefix(path)
	infos, err := bucket.List(ctx, dir)
	if err != nil {
		return 0, fmt.Errorf("clean staging %s: %w", dir, err)
	}
	var errs []error
	for _, info := range infos {
		txn, _, ok := layout.ParseStagedKey(path, info.Key)
		if !ok || keep(txn) {
			continue
		}
		if err := bucket.Delete(ctx, info.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("clean staging %s: %w", dir, errors.Join(errs...))
	}
	return removed, nil
}

// CleanStaging is the janitor of a files sink: see the package function.
func (s *fileSink) CleanStaging(ctx context.Context, keep func(txnID string) bool) (int, error) {
	if s.bucket == nil {
		return 0, fmt.Errorf("clean staging of files sink %s: not open", s.node)
	}
	return CleanStaging(ctx, s.bucket, s.path, keep)
}
