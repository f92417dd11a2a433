package integration

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/manifest"
	"github.com/weirstream/weir/statestore/statefile"
)

// BenchmarkIncrementalState measures what incremental checkpoints upload
// and what a restore reads, with the runtime's own pieces: a keyed state
// backend of 1M keys (an int64 counter each, 128 key groups), a base
// snapshot, then ten checkpoint intervals in each of which 1% of the keys
// change, each a delta; every snapshot written as the state file the
// runtime uploads (Arrow IPC, zstd). Restore decodes the base and all ten
// deltas (statefile.Decode, as a restoring task does) into a fresh backend.
//
//	go test -run '^$' -bench IncrementalState -benchtime 1x ./integration/
func BenchmarkIncrementalState(b *testing.B) {
	const keys, intervals, groups = 1_000_000, 10, 128
	mem := memory.DefaultAllocator
	for i := 0; i < b.N; i++ {
		be := statestore.NewMemory(0, groups)
		tbl, err := statestore.OpenTable[int64](be, "count", nil)
		if err != nil {
			b.Fatal(err)
		}
		key := func(k int) string { return fmt.Sprintf("user-%07d", k) }
		for k := range keys {
			tbl.Put(k%groups, key(k), "", int64(k))
		}
		snapshot := func(full bool) ([]byte, time.Duration) {
			t0 := time.Now()
			batches, err := be.Snapshot(mem, full)
			if err != nil {
				b.Fatal(err)
			}
			sync := time.Since(t0)
			_, data, err := statefile.Encode(manifest.File{}, statestore.SnapshotSchema(), batches, mem, arrowfmt.CompressZstd)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range batches {
				r.Release()
			}
			return data, sync
		}
		base, baseSync := snapshot(true)
		files := [][]byte{base}
		rng := rand.New(rand.NewPCG(1, 2))
		var deltaBytes int64
		var deltaSync time.Duration
		for range intervals {
			for range keys / 100 {
				k := rng.IntN(keys)
				v, _ := tbl.Get(k%groups, key(k), "")
				tbl.Put(k%groups, key(k), "", v+1)
			}
			d, s := snapshot(false)
			files = append(files, d)
			deltaBytes += int64(len(d))
			deltaSync += s
		}

		t0 := time.Now()
		restored := statestore.NewMemory(0, groups)
		rt, err := statestore.OpenTable[int64](restored, "count", nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range files {
			_, batches, err := statefile.Decode(f, statestore.SnapshotSchema(), mem)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range batches {
				if err := restored.Restore(r); err != nil {
					b.Fatal(err)
				}
				r.Release()
			}
		}
		restore := time.Since(t0)
		for _, k := range []int{0, keys / 2, keys - 1} {
			want, _ := tbl.Get(k%groups, key(k), "")
			if got, ok := rt.Get(k%groups, key(k), ""); !ok || got != want {
				b.Fatalf("restored %s = %d, %v; want %d", key(k), got, ok, want)
			}
		}
		mean := float64(deltaBytes) / intervals
		b.ReportMetric(float64(len(base))/(1<<20), "base-MiB")
		b.ReportMetric(mean/(1<<10), "delta-KiB")
		b.ReportMetric(100*mean/float64(len(base)), "delta-%-of-base")
		b.ReportMetric(float64(baseSync.Milliseconds()), "base-capture-ms")
		b.ReportMetric(float64(deltaSync.Milliseconds())/intervals, "delta-capture-ms")
		b.ReportMetric(restore.Seconds(), "restore-s")
	}
}
