package coordinator_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// slowDeletes is a bucket whose deletes take a while, counting them by
// key.
type slowDeletes struct {
	blob.Bucket
	mu sync.Mutex
	n  map[string]int
}

func (b *slowDeletes) Delete(ctx context.Context, key string) error {
	b.mu.Lock()
	b.n[key]++
	b.mu.Unlock()
	time.Sleep(25 * time.Millisecond)
	return b.Bucket.Delete(ctx, key)
}

// TestGarbageCollectedOnce: checkpoints every 150 ms with retain 2
// against a store whose deletes take 25 ms, so a collection is still
// deleting when the next checkpoint completes. Collections do not
// overlap: no state file is deleted twice, and once the job ended every
// state file left in the bucket is one a manifest there references.
func TestGarbageCollectedOnce(t *testing.T) {
	sd := &slowDeletes{n: map[string]int{}}
	e := newEnvWrapped(t, 90*time.Second, func(b blob.Bucket) blob.Bucket { sd.Bucket = b; return sd })
	e.startWorker("w1", 4, workerOpts{})
	id := e.submitSpec(eoSpec("out", 3000), coordinator.SubmitOptions{})
	st := e.wait(id, time.Minute)
	if st.State != coordinator.JobFinished || st.Checkpoints == nil || st.Checkpoints.Completed < 10 {
		t.Fatalf("job ended %s with checkpoints %+v: %s", st.State, st.Checkpoints, st.Error)
	}
	poll.UntilNil(t, 20*time.Second, "only referenced state files left", func() error {
		objs, err := e.bucket.List(e.ctx, layout.StatePrefix(id))
		if err != nil {
			return err
		}
		ms, err := e.bucket.List(e.ctx, "jobs/"+id+"/checkpoints/")
		if err != nil {
			return err
		}
		referenced := map[string]bool{}
		for _, o := range ms {
			if !strings.HasSuffix(o.Key, "/manifest.json") {
				continue
			}
			raw, err := e.bucket.Get(e.ctx, o.Key)
			if err != nil {
				return err
			}
			m, err := manifest.Decode(raw)
			if err != nil {
				return fmt.Errorf("%s: %w", o.Key, err)
			}
			for _, f := range m.Files() {
				referenced[f] = true
			}
		}
		var garbage []string
		for _, o := range objs {
			if !referenced[o.Key] {
				garbage = append(garbage, o.Key)
			}
		}
		if len(garbage) > 0 {
			return fmt.Errorf("%d of %d state files unreferenced, e.g. %s", len(garbage), len(objs), garbage[0])
		}
		return nil
	})
	sd.mu.Lock()
	defer sd.mu.Unlock()
	deleted, twice := 0, 0
	for key, n := range sd.n {
		if strings.HasPrefix(key, layout.StatePrefix(id)) {
			deleted++
			if n > 1 {
				twice++
			}
		}
	}
	t.Logf("%d checkpoints, %d state files deleted, %d of them more than once", st.Checkpoints.Completed, deleted, twice)
	if deleted == 0 || twice > 0 {
		t.Errorf("%d state files deleted, %d more than once: want some, each once", deleted, twice)
	}
}
