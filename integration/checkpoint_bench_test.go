package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/blob"
)

// checkpointBenchEvents makes a run long enough (~25 s) for a few 10 s
// checkpoints.
const checkpointBenchEvents = 120_000_000

// BenchmarkCheckpointOverhead runs the end-to-end benchmark job with
// checkpoints off, every 10 s and every 1 s, with state and sink
// transactions in a real MinIO, and reports events per CPU-second of weir
// plus MinIO and what an average checkpoint cost: its duration, and the
// largest alignment, synchronous and asynchronous (upload) time of any
// subtask.
//
//	go test -run '^$' -bench CheckpointOverhead -benchtime 1x ./integration/
func BenchmarkCheckpointOverhead(b *testing.B) {
	minio := testenv.StartMinIO(b)
	for _, interval := range []string{"off", "10s", "1s"} {
		b.Run(interval, func(b *testing.B) {
			src := benchSpec(checkpointBenchEvents)
			if interval != "off" {
				src = strings.Replace(src, "parallelism: 2\n", fmt.Sprintf("parallelism: 2\ncheckpoint: {interval: %s}\n", interval), 1)
			}
			js, err := spec.Parse([]byte(src), "bench.yaml")
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				bucket, err := blob.NewS3(context.Background(), minio.S3Config())
				if err != nil {
					b.Fatal(err)
				}
				runCheckpointBench(b, js, bucket, minio.PID())
				bucket.Close()
			}
		})
	}
}

func runCheckpointBench(b *testing.B, js *spec.Job, bucket blob.Bucket, minioPID int) {
	b.Helper()
	coord, id := runBenchJob(b, js, checkpointBenchEvents, exchange.NewLocal(), control.NewLocal(), bucket, map[string]int{"minio": minioPID})
	cps, err := coord.Checkpoints(id)
	if err != nil {
		b.Fatal(err)
	}
	var n int
	var dur, align, sync, async, bytes float64
	for _, c := range cps {
		if c.Status != coordinator.CheckpointCompleted || c.Final {
			continue
		}
		n++
		dur += c.Duration * 1000
		align += float64(c.AlignMs)
		sync += float64(c.SyncMs)
		async += float64(c.AsyncMs)
		bytes += float64(c.Bytes)
	}
	b.ReportMetric(float64(n), "checkpoints")
	if n > 0 {
		b.ReportMetric(dur/float64(n), "ckpt-ms")
		b.ReportMetric(align/float64(n), "align-ms")
		b.ReportMetric(sync/float64(n), "sync-ms")
		b.ReportMetric(async/float64(n), "async-ms")
		b.ReportMetric(bytes/float64(n)/1024, "upload-KiB")
	}
}

// BenchmarkRecovery measures how long a job takes to run again after one
// of its workers is killed with SIGKILL: from the kill, and from the
// coordinator noticing (heartbeat expiry) to every task of the new attempt
// running. The cluster is real processes (coordinator, three workers) on
// Redis and MinIO.
//
//	go test -run '^$' -bench Recovery -benchtime 3x ./integration/
func BenchmarkRecovery(b *testing.B) {
	c := startCluster(b, 3, 3)
	id := c.deploy(chaosSpec)
	c.waitState(id, coordinator.JobRunning, time.Minute)
	var killToRun, detectToRun float64
	for i := 0; i < b.N; i++ {
		poll.UntilNil(b, time.Minute, "a completed checkpoint", func() error {
			st, err := c.status(id)
			if err != nil {
				return err
			}
			if st.State != coordinator.JobRunning || st.Checkpoints == nil || st.Checkpoints.Completed == 0 {
				return fmt.Errorf("state %s", st.State)
			}
			return nil
		})
		st, err := c.status(id)
		if err != nil {
			b.Fatal(err)
		}
		attempt := st.Attempt
		var victim string
		for _, w := range c.workersWithTasks(id) {
			c.mu.Lock()
			alive := c.procs[w] != nil
			c.mu.Unlock()
			if alive {
				victim = w
				break
			}
		}
		if victim == "" {
			b.Fatal("no live worker runs the job")
		}
		c.kill(victim)
		killed := time.Now()
		c.addWorker(3)
		poll.UntilNil(b, time.Minute, "running again", func() error {
			st, err = c.status(id)
			if err != nil {
				return err
			}
			if st.Attempt <= attempt || st.State != coordinator.JobRunning {
				return fmt.Errorf("attempt %d, %s", st.Attempt, st.State)
			}
			return nil
		})
		killToRun += time.Since(killed).Seconds()
		if n := len(st.Recoveries); n > 0 {
			detectToRun += st.Recoveries[n-1].Seconds
		}
	}
	b.ReportMetric(killToRun/float64(b.N), "kill-to-running-s")
	b.ReportMetric(detectToRun/float64(b.N), "detect-to-running-s")
	if _, err := c.weir("jobs", "cancel", id); err != nil {
		b.Fatal(err)
	}
}
