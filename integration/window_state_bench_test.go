package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/trace"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/offheap"
)

// windowStateSpec is issue 14's state job: datagen at parallelism 2 with a
// uniform int64 key of keys values, into a 1-day tumbling count (every key
// stays in state for the whole run), into a blackhole; checkpoints every
// 2 s (their state files' codec STATE_BENCH_COMPRESSION, the job's
// default (lz4) if unset, and the size of their parts STATE_BENCH_PART_SIZE, 32MiB by
// default), or none; STATE_BENCH_ENCODING sets exchange.encoding
// (compact, the default, or plain: distributed, the keyBy edge crosses
// processes). STATE_BENCH_AGGREGATES replaces the count with the
// aggregates it lists (`n: count(), total: sum(v), top: max(v)`), over
// the key and an int64 column v of values from 0 to 1,000,000.
// STATE_BENCH_STATE is the job's state section (`{backend: pebble,
// memory: 64MiB}`: the window's state in pebble stores), the heap's if
// unset.
func windowStateSpec(events, keys int, checkpoints bool) string {
	ck := ""
	if st := os.Getenv("STATE_BENCH_STATE"); st != "" {
		ck = "state: " + st + "\n"
	}
	if checkpoints {
		codec := ""
		if c := os.Getenv("STATE_BENCH_COMPRESSION"); c != "" {
			codec = ", compression: " + c
		}
		if p := os.Getenv("STATE_BENCH_PART_SIZE"); p != "" {
			codec += ", partSize: " + p
		}
		ck += "checkpoint: {interval: 2s, timeout: 10m" + codec + "}\n"
	}
	if e := os.Getenv("STATE_BENCH_ENCODING"); e != "" {
		ck += "exchange: {encoding: " + e + "}\n"
	}
	schema, fields, aggs := "{key: int64, ts: timestamp_ms}", "", "{n: count()}"
	if a := os.Getenv("STATE_BENCH_AGGREGATES"); a != "" {
		schema, fields, aggs = "{key: int64, v: int64, ts: timestamp_ms}", "\n        v: {min: 0, max: 1000000}", "{"+a+"}"
	}
	return fmt.Sprintf(`job: bench-window-state
parallelism: 2
%ssources:
  - name: events
    type: datagen
    count: %d
    schema: %s
    eventTime: {column: ts, maxOutOfOrderness: 1s}
    datagen:
      seed: 1
      eventsPerSecond: 1000000
      fields:
        key: {min: 0, max: %d}%s
operators:
  - name: counts
    input: events
    keyBy: [key]
    window: {type: tumbling, size: 24h}
    aggregate: %s
sinks:
  - {name: out, input: counts, type: blackhole}
`, ck, events, schema, keys, fields, aggs)
}

// startTrace writes an execution trace to path until the returned stop
// (`go tool trace`; `-pprof=sched` shows what waited for a processor).
func startTrace(b *testing.B, path string) (stop func()) {
	b.Helper()
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := trace.Start(out); err != nil {
		b.Fatal(err)
	}
	return func() {
		trace.Stop()
		if err := out.Close(); err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkWindowState runs the state job embedded (directory bucket) for
// each key count of STATE_BENCH_KEYS (comma-separated, default
// 100000,1000000) with STATE_BENCH_EVENTS events (default 20M), with
// checkpoints off and every 2 s, and reports events per CPU-second, the
// largest resident memory and its growth per key, the Go heap's largest
// size (STATE_BENCH_HEAP_PROFILE=file writes a heap profile at each new
// peak; STATE_BENCH_MEMORY_TRACE=file every sample of both, sampleMemory),
// and with checkpoints:
// the longest stall (the synchronous part of a snapshot, or a step of a
// capture beside processing),
// the longest checkpoint, the bytes uploaded in all and the state's size;
// then keys=N/restore, the time a restore from a savepoint of the state
// takes (measureRestore).
// WINDOW_STATE_TRACE=file writes an execution trace of the runs with
// checkpoints (the last one's stays). `make bench-state` runs it at
// 100K, 1M, 5M and 10M keys.
//
// STATE_BENCH_MODE=distributed runs the job as the issue measured it
// instead: a `weir coordinator` and a `weir worker` process on Redis and
// MinIO (distributedEnv), every event crossing the keyBy edge through
// Redis; events are counted per CPU-second of all four processes, the
// memory is the weir processes' largest RSS (VmHWM) and its growth over
// the run, and keys=N/restore-after-kill kills the worker with SIGKILL
// (measureRestoreAfterKill). `make bench-state-distributed`. The weir
// processes run the binary TestMain builds from the working tree, not
// the code in the test binary: to compare two versions distributed,
// switch the tree.
//
// WEIR_HUGE_PAGES=true runs the state with transparent huge pages, as a
// worker's --huge-pages does (offheap.SetHugePages), in both modes.
//
//	go test -run '^$' -bench WindowState -benchtime 1x ./integration/
func BenchmarkWindowState(b *testing.B) {
	events := 20_000_000
	if s := os.Getenv("STATE_BENCH_EVENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("STATE_BENCH_EVENTS=%q: want a positive whole number", s)
		}
		events = n
	}
	keyCounts := []int{100_000, 1_000_000}
	if s := os.Getenv("STATE_BENCH_KEYS"); s != "" {
		keyCounts = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("STATE_BENCH_KEYS=%q: want positive whole numbers, comma-separated", s)
			}
			keyCounts = append(keyCounts, n)
		}
	}
	if s := os.Getenv("WEIR_HUGE_PAGES"); s != "" {
		on, err := strconv.ParseBool(s)
		if err != nil {
			b.Fatalf("WEIR_HUGE_PAGES=%q: want true or false", s)
		}
		defer offheap.SetHugePages(offheap.SetHugePages(on))
	}
	var dist *distributedEnv
	switch mode := os.Getenv("STATE_BENCH_MODE"); mode {
	case "", "embedded":
	case "distributed":
		dist = newDistributedEnv(b)
	default:
		b.Fatalf("STATE_BENCH_MODE=%q: want embedded or distributed", mode)
	}
	for _, keys := range keyCounts {
		for _, ck := range []bool{false, true} {
			name := fmt.Sprintf("keys=%d/checkpoints=off", keys)
			if ck {
				name = fmt.Sprintf("keys=%d/checkpoints=2s", keys)
			}
			b.Run(name, func(b *testing.B) {
				js, err := spec.Parse([]byte(windowStateSpec(events, keys, ck)), "bench-window-state.yaml")
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < b.N; i++ {
					if dist != nil {
						reportDistributed(b, dist.run(b, js), events, keys, ck)
						continue
					}
					debug.FreeOSMemory()
					base := residentBytes()
					stop := sampleMemory()
					stopTrace := func() {}
					if f := os.Getenv("WINDOW_STATE_TRACE"); f != "" && ck {
						stopTrace = startTrace(b, f)
					}
					r, coord, id := measureJob(b, js, events, exchange.NewLocal(), control.NewLocal(), benchDir(b), nil)
					stopTrace()
					peak, heap := stop()
					b.ReportMetric(perCPU(events, r), "events/cpu-s")
					b.ReportMetric(float64(peak)/(1<<20), "max-rss-MiB")
					b.ReportMetric(float64(heap)/(1<<20), "max-go-heap-MiB")
					b.ReportMetric(float64(peak-base)/float64(keys), "rss-B/key")
					// Uniform draws do not reach every key: 20M events
					// reach about 86% of 10M keys.
					reached := keysReached(events, keys)
					b.ReportMetric(reached, "keys-reached")
					b.ReportMetric(float64(peak-base)/reached, "rss-B/key-reached")
					if !ck {
						continue
					}
					reportCheckpoints(b, coord, id)
				}
			})
		}
		name := fmt.Sprintf("keys=%d/restore", keys)
		if dist != nil {
			name = fmt.Sprintf("keys=%d/restore-after-kill", keys)
		}
		b.Run(name, func(b *testing.B) {
			js, err := spec.Parse([]byte(windowStateSpec(events, keys, true)), "bench-window-state.yaml")
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				if dist != nil {
					measureRestoreAfterKill(b, keys, events)
					continue
				}
				took, read := measureRestore(b, js, events)
				b.ReportMetric(took.Seconds(), "restore-s")
				b.ReportMetric(float64(read)/(1<<20), "restored-MiB")
			}
		})
	}
}

// measureRestore runs the checkpointed state job embedded, stops it with
// a savepoint once half its events are read (the keys they reach are in
// state), and runs it again from the savepoint. It returns how long the
// slowest subtask took to restore (read, check and decode its state
// files, rebuild its keys: what a restart after kill -9 does once the
// task is deployed) and the bytes of state files the restore read.
func measureRestore(b *testing.B, js *spec.Job, events int) (time.Duration, int64) {
	b.Helper()
	ctx, coord, stop := startEmbedded(b, exchange.NewLocal(), control.NewLocal(), benchDir(b))
	defer stop()
	run := func(what string, opts coordinator.SubmitOptions, whileRunning func(id string)) coordinator.JobStatus {
		id, err := coord.SubmitWith(ctx, js, opts)
		if err != nil {
			b.Fatal(err)
		}
		if whileRunning != nil {
			whileRunning(id)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		st, err := coord.Wait(wctx, id)
		if err != nil || st.State != coordinator.JobFinished {
			b.Fatalf("%s job %s: %s %v %s", what, id, st.State, err, st.Error)
		}
		return st
	}
	var savepoint string
	run("first", coordinator.SubmitOptions{}, func(id string) {
		poll.UntilNil(b, 10*time.Minute, "half the events read", func() error {
			st, err := coord.Status(id)
			if err != nil {
				return err
			}
			if n := st.Totals.RecordsIn; n < int64(events)/2 {
				return fmt.Errorf("%d events read", n)
			}
			return nil
		})
		var err error
		if savepoint, err = coord.StopWithSavepoint(ctx, id); err != nil {
			b.Fatal(err)
		}
	})
	st := run("restored", coordinator.SubmitOptions{FromSavepoint: savepoint}, nil)
	if st.Totals.RestoreTotal == 0 || st.Totals.RestoreRead != st.Totals.RestoreTotal {
		b.Fatalf("the restored job read %d of %d bytes of state", st.Totals.RestoreRead, st.Totals.RestoreTotal)
	}
	return time.Duration(st.Totals.RestoreSeconds * float64(time.Second)), st.Totals.RestoreTotal
}

// reportDistributed reports a run of the state job on the distributed
// cluster as the embedded runs are reported: events per CPU-second of
// every process (the coordinator and worker, Redis and MinIO; each of the
// last two also apart), the weir processes' largest resident memory and
// its growth over the run per key, and the checkpoints.
func reportDistributed(b *testing.B, r nexmarkRun, events, keys int, checkpoints bool) {
	b.Helper()
	if n := r.status.Totals.RecordsIn; n != int64(events) {
		b.Fatalf("read %d events, want %d", n, events)
	}
	b.ReportMetric(float64(events)/r.totalCPU().Seconds(), "events/cpu-s")
	b.ReportMetric(r.cpu["redis"].Seconds(), "redis-cpu-s")
	b.ReportMetric(r.cpu["minio"].Seconds(), "minio-cpu-s")
	b.ReportMetric(float64(r.rss["weir"])/(1<<20), "max-rss-MiB")
	growth := float64(r.rss["weir"] - r.base["weir"])
	b.ReportMetric(growth/float64(keys), "rss-B/key")
	reached := keysReached(events, keys)
	b.ReportMetric(reached, "keys-reached")
	b.ReportMetric(growth/reached, "rss-B/key-reached")
	if checkpoints {
		reportCheckpointHistory(b, r.ckpts)
	}
}

// measureRestoreAfterKill runs the checkpointed state job of twice
// events events on a cluster of its own (a coordinator and a worker
// process on Redis and MinIO), kills the worker with SIGKILL once events
// events are read (the state of the other runs) and a checkpoint has
// completed since, starts another worker, and reports what the job's
// restart measured when it finished: how long the coordinator took to
// see the worker gone (detect-s) and to have every task running again on
// the new worker (redeploy-s), the slowest subtask's restore then (read,
// check and decode its state files, rebuild its keys) and the state's
// bytes.
func measureRestoreAfterKill(b *testing.B, keys, events int) {
	b.Helper()
	js, err := spec.Parse([]byte(windowStateSpec(2*events, keys, true)), "bench-window-state.yaml")
	if err != nil {
		b.Fatal(err)
	}
	c := startCluster(b, 1, nexmarkSlots)
	body, err := json.Marshal(js)
	if err != nil {
		b.Fatal(err)
	}
	id := submitJSON(b, c.api, js.Name, body).ID
	completed := func() int {
		var hist []coordinator.CheckpointInfo
		if err := getJSON(c.api+"/api/v1/jobs/"+id+"/checkpoints", &hist); err != nil {
			return 0
		}
		n := 0
		for _, h := range hist {
			if h.Status == coordinator.CheckpointCompleted {
				n++
			}
		}
		return n
	}
	before := 0
	poll.UntilNil(b, 10*time.Minute, fmt.Sprintf("%d events read", events), func() error {
		var st coordinator.JobStatus
		if err := getJSON(c.api+"/api/v1/jobs/"+id, &st); err != nil {
			return err
		}
		if n := st.Totals.RecordsIn; n < int64(events) {
			return fmt.Errorf("%d events read", n)
		}
		before = completed()
		return nil
	})
	poll.UntilNil(b, 5*time.Minute, "a checkpoint since", func() error {
		if n := completed(); n <= before {
			return fmt.Errorf("%d checkpoints completed", n)
		}
		return nil
	})
	if victim, _ := c.killOneOf(id, nexmarkSlots); victim == "" {
		b.Fatal("no worker runs the job's tasks")
	}
	killed := time.Now()
	st := c.waitState(id, coordinator.JobFinished, 10*time.Minute)
	if st.Totals.RestoreTotal == 0 || st.Totals.RestoreRead != st.Totals.RestoreTotal {
		b.Fatalf("the restarted job read %d of %d bytes of state", st.Totals.RestoreRead, st.Totals.RestoreTotal)
	}
	if len(st.Recoveries) != 1 || st.Recoveries[0].RestoredFrom == 0 {
		b.Fatalf("want one recovery from a checkpoint, have %+v", st.Recoveries)
	}
	rec := st.Recoveries[0]
	b.ReportMetric(rec.Detected.Sub(killed).Seconds(), "detect-s")
	b.ReportMetric(rec.Seconds, "redeploy-s")
	b.ReportMetric(st.Totals.RestoreSeconds, "restore-s")
	b.ReportMetric(float64(st.Totals.RestoreTotal)/(1<<20), "restored-MiB")
}

// reportCheckpoints reports what the job's completed checkpoints cost the
// task (reportCheckpointHistory).
func reportCheckpoints(b *testing.B, coord *coordinator.Coordinator, id string) {
	b.Helper()
	hist, err := coord.Checkpoints(id)
	if err != nil {
		b.Fatal(err)
	}
	reportCheckpointHistory(b, hist)
	if st, err := coord.Status(id); err == nil {
		reportCopies(b, st.Totals)
	}
}

// reportCopies reports the rows the job's captures copied on write (keys
// that changed before a capture's walk reached them), and of those, the
// rows encoded as they waited for their part.
func reportCopies(b *testing.B, s control.Stats) {
	b.ReportMetric(float64(s.CopiedRows), "copied-rows")
	b.ReportMetric(float64(s.CopiedEncoded), "copied-encoded-rows")
}

// reportCheckpointHistory reports what completed checkpoints cost the
// task: how many, the longest stall (the barrier's synchronous part, or
// a step of a capture beside processing), the longest checkpoint, and
// the bytes uploaded. With -test.v it logs each checkpoint.
func reportCheckpointHistory(b *testing.B, hist []coordinator.CheckpointInfo) {
	b.Helper()
	var (
		sync, step time.Duration
		longest    time.Duration
		uploaded   int64
		state      int64
		completed  int
	)
	for _, h := range hist {
		if h.Status != coordinator.CheckpointCompleted {
			continue
		}
		completed++
		b.Logf("checkpoint %d: triggered at %s, %.2f s (sync %d ms, longest step %d ms, async %d ms), %.1f MiB uploaded, final %v",
			h.ID, h.Triggered.Format("15:04:05.000"), h.Duration, h.SyncMs, h.StepMs, h.AsyncMs, float64(h.Bytes)/(1<<20), h.Final)
		sync = max(sync, time.Duration(h.SyncMs)*time.Millisecond)
		step = max(step, time.Duration(h.StepMs)*time.Millisecond)
		longest = max(longest, time.Duration(h.Duration*float64(time.Second)))
		uploaded += h.Bytes
		state = max(state, h.StateSize)
	}
	b.ReportMetric(float64(completed), "checkpoints")
	b.ReportMetric(max(sync, step).Seconds()*1000, "max-stall-ms")
	b.ReportMetric(sync.Seconds()*1000, "max-sync-ms")
	b.ReportMetric(step.Seconds()*1000, "max-step-ms")
	b.ReportMetric(longest.Seconds(), "max-checkpoint-s")
	b.ReportMetric(float64(uploaded)/(1<<20), "uploaded-MiB")
	b.ReportMetric(float64(state)/(1<<20), "max-state-MiB")
}

// keysReached is how many distinct keys events uniform draws from keys
// values reach, expected: keys × (1 − (1 − 1/keys)^events). Its spread is
// below 0.1% at these sizes.
func keysReached(events, keys int) float64 {
	k := float64(keys)
	return k * -math.Expm1(float64(events)*math.Log1p(-1/k))
}
