package statetest

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/statestore"
)

// BenchmarkCapture measures what a base snapshot of s, which holds rows
// rows, costs its task at the barrier: taken at once (at-barrier: what
// the barrier did before captures in steps) or begun and captured in
// steps of 5 ms (in-steps). It reports the barrier's part and the longest
// step in ms, and rows captured per second. change, if not nil, is
// called before each snapshot, untimed: the changes a task makes between
// two checkpoints.
func BenchmarkCapture(b *testing.B, s statestore.SteppedSnapshotter, mem memory.Allocator, rows int, change func()) {
	check := func(batches []arrow.RecordBatch) {
		n := 0
		for _, r := range batches {
			n += int(r.NumRows())
			r.Release()
		}
		if n != rows {
			b.Fatalf("%d state rows, want %d", n, rows)
		}
	}
	for _, stepped := range []bool{false, true} {
		name := "at-barrier"
		if stepped {
			name = "in-steps"
		}
		b.Run(name, func(b *testing.B) {
			var barrier, step time.Duration
			for range b.N {
				if change != nil {
					b.StopTimer()
					change()
					b.StartTimer()
				}
				t0 := time.Now()
				if !stepped {
					batches, err := s.Snapshot(mem, true)
					if err != nil {
						b.Fatal(err)
					}
					barrier = max(barrier, time.Since(t0))
					check(batches)
					continue
				}
				c, err := s.BeginSnapshot(mem, true)
				if err != nil {
					b.Fatal(err)
				}
				barrier = max(barrier, time.Since(t0))
				for {
					t1 := time.Now()
					done, err := c.Step(t1.Add(5 * time.Millisecond))
					if err != nil {
						b.Fatal(err)
					}
					step = max(step, time.Since(t1))
					if done {
						break
					}
				}
				check(c.Batches())
			}
			b.ReportMetric(float64(barrier.Microseconds())/1000, "barrier-ms")
			b.ReportMetric(float64(step.Microseconds())/1000, "max-step-ms")
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
