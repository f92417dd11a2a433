package coordinator_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// failingStorePuts is a bucket whose puts of the sequence checker's store
// sstables take 5 ms and fail every fifth. (Every fifth of all the
// job's, the window's too, would fail every checkpoint: each puts more
// than five.)
type failingStorePuts struct {
	blob.Bucket
	n, failed atomic.Int64
}

func (b *failingStorePuts) Put(ctx context.Context, key string, data []byte) error {
	if strings.Contains(key, "/seqcheck/") && strings.Contains(key, "-store-") && strings.HasSuffix(key, ".sst") {
		time.Sleep(5 * time.Millisecond)
		if b.n.Add(1)%5 == 0 {
			b.failed.Add(1)
			return errors.New("injected: the store refused the put")
		}
	}
	return b.Bucket.Put(ctx, key, data)
}

// TestPebbleStoreUploadsFail runs the exactly-once job on pebble state
// against a bucket that fails every fifth put of an sstable, with a
// worker stopped midway: a checkpoint whose store files did not all
// reach the bucket does not complete, every store file a completed
// checkpoint lists is in the bucket, and the output is exact.
func TestPebbleStoreUploadsFail(t *testing.T) {
	b := &failingStorePuts{}
	e := newEnvWrapped(t, 90*time.Second, func(inner blob.Bucket) blob.Bucket { b.Bucket = inner; return b })
	base := t.TempDir()
	stop1 := e.startWorker("w1", 8, workerOpts{stateDir: base})
	e.startWorker("w2", 8, workerOpts{stateDir: base})
	wantW, wantS := e.reference()
	id := e.submitSpec(eoSpec("out", 1500)+"state: {backend: pebble, memory: 4MiB}\n", coordinator.SubmitOptions{})
	e.waitFor(id, "a failed store put and a checkpoint after it", func(st coordinator.JobStatus) bool {
		return b.failed.Load() > 0 && st.Checkpoints != nil && st.Checkpoints.Completed > 3
	})
	stop1()
	st := e.wait(id, time.Minute)
	if st.State != coordinator.JobFinished {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	t.Logf("%d of %d sstable puts failed; checkpoints %+v", b.failed.Load(), b.n.Load(), *st.Checkpoints)
	e.checkExact("pebble state, failed store puts and a worker stopped", e.lines("out/windows/"), e.lines("out/seq/"), wantW, wantS)

	objs, err := e.bucket.List(e.ctx, layout.CheckpointsPrefix(id))
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, o := range objs {
		if filepath.Base(o.Key) != "manifest.json" {
			continue
		}
		raw, err := e.bucket.Get(e.ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range m.Vertices {
			for _, s := range v.Subtasks {
				for _, f := range s.State {
					if f.Kind != manifest.KindStore || f.Packed {
						continue
					}
					listed++
					if _, err := e.bucket.Get(e.ctx, f.Key); err != nil {
						t.Errorf("checkpoint %d lists %s: %v", m.Checkpoint, f.Key, err)
					}
				}
			}
		}
	}
	if listed == 0 {
		t.Fatal("no retained checkpoint lists a store file")
	}
}
