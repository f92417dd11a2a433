package integration

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/worker"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/blob"
)

// benchEvents is the size of one end-to-end benchmark run.
const benchEvents = 10_000_000

// benchRides is the benchmarks' source: events rides of 1000 zones with
// up to 2 s of disorder.
func benchRides(events int) string {
	return fmt.Sprintf(`sources:
  - name: rides
    type: datagen
    count: %d
    schema: {ride_id: int64, zone: string, fare: float64, ts: timestamp_ms}
    eventTime: {column: ts, maxOutOfOrderness: 2s}
    datagen:
      seed: 1
      eventsPerSecond: 10000
      outOfOrderness: 2s
      fields:
        zone: {cardinality: 1000}
        fare: {min: 5, max: 80}
`, events)
}

// benchSpec is a keyed tumbling-window job: datagen -> keyBy zone ->
// 10 s tumbling count/sum/avg -> files sink. Parallelism 2 on 2 cores.
func benchSpec(events int) string {
	return `
job: bench-tumbling
parallelism: 2
` + benchRides(events) + `operators:
  - name: stats
    input: rides
    keyBy: [zone]
    window: {type: tumbling, size: 10s}
    aggregate: {n: count(), total: sum(fare), mean: avg(fare)}
sinks:
  - {name: out, input: stats, type: files, path: bench/out/, format: jsonl}
`
}

// BenchmarkEndToEnd runs the keyed tumbling-window job in this process
// (coordinator and one worker) with the in-process exchange and with the
// Redis exchange, and reports events per second of wall time and per
// CPU-second of weir plus Redis. "handwritten" is a single-threaded Go loop
// computing the same windows over the same kind of input: the limit.
//
//	go test -run '^$' -bench EndToEnd -benchtime 1x ./integration/
func BenchmarkEndToEnd(b *testing.B) {
	js, err := spec.Parse([]byte(benchSpec(benchEvents)), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("embedded", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			runBenchJob(b, js, benchEvents, exchange.NewLocal(), control.NewLocal(), benchDir(b), nil)
		}
	})
	b.Run("redis", func(b *testing.B) {
		srv := testenv.StartRedis(b)
		for i := 0; i < b.N; i++ {
			tr, err := exchange.NewRedis(exchange.RedisOptions{Addr: srv.Addr})
			if err != nil {
				b.Fatal(err)
			}
			pl, err := control.NewRedis(context.Background(), control.RedisOptions{Addr: srv.Addr})
			if err != nil {
				b.Fatal(err)
			}
			runBenchJob(b, js, benchEvents, tr, pl, benchDir(b), map[string]int{"redis": srv.PID()})
		}
	})
	b.Run("handwritten", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cpu0, _ := testenv.ProcessCPU(0)
			start := time.Now()
			windows := handwrittenTumbling(benchEvents)
			wall := time.Since(start)
			cpu1, _ := testenv.ProcessCPU(0)
			if windows == 0 {
				b.Fatal("no windows")
			}
			report(b, benchEvents, wall, cpu1-cpu0)
		}
	})
}

// runBenchJob runs js to the end in this process (coordinator and one
// worker with two slots) on the given exchange, control plane and bucket,
// and reports throughput per CPU-second of this process plus the helper
// processes pids (Redis, MinIO). It returns the coordinator and the job id
// for further metrics.
func runBenchJob(b *testing.B, js *spec.Job, events int, tr exchange.Transport, pl control.Plane, bucket blob.Bucket, pids map[string]int) (*coordinator.Coordinator, string) {
	b.Helper()
	r, coord, id := measureJob(b, js, events, tr, pl, bucket, pids)
	for name, c := range r.helpers {
		b.ReportMetric(c.Seconds(), name+"-cpu-s")
	}
	report(b, events, r.wall, r.cpu)
	return coord, id
}

// jobRun is what measureJob measured of one run.
type jobRun struct {
	wall    time.Duration
	cpu     time.Duration            // this process plus the helpers
	helpers map[string]time.Duration // CPU of each helper process
	status  coordinator.JobStatus    // at the end
}

// measureJob runs js to the end as runBenchJob does and returns what it
// measured, reporting nothing.
func measureJob(b *testing.B, js *spec.Job, events int, tr exchange.Transport, pl control.Plane, bucket blob.Bucket, pids map[string]int) (jobRun, *coordinator.Coordinator, string) {
	b.Helper()
	ctx, coord, stop := startEmbedded(b, tr, pl, bucket)
	defer stop()
	runtime.GC()
	cpu0, _ := testenv.ProcessCPU(0)
	other0 := map[string]time.Duration{}
	for name, pid := range pids {
		other0[name], _ = testenv.ProcessCPU(pid)
	}
	start := time.Now()
	id, err := coord.Submit(ctx, js)
	if err != nil {
		b.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Minute)
	st, err := coord.Wait(wctx, id)
	wcancel()
	r := jobRun{wall: time.Since(start), helpers: map[string]time.Duration{}, status: st}
	if err != nil || st.State != coordinator.JobFinished {
		b.Fatalf("job %s: %s %v %s", id, st.State, err, st.Error)
	}
	cpu1, _ := testenv.ProcessCPU(0)
	r.cpu = cpu1 - cpu0
	for name, pid := range pids {
		c, _ := testenv.ProcessCPU(pid)
		r.helpers[name] = c - other0[name]
		r.cpu += c - other0[name]
	}
	if st.Totals.RecordsIn != int64(events) {
		b.Fatalf("read %d events, want %d", st.Totals.RecordsIn, events)
	}
	return r, coord, id
}

// startEmbedded starts a coordinator and one worker with two slots in
// this process on the given exchange, control plane and bucket, and waits
// for the worker to register. stop ends them and closes tr and pl.
func startEmbedded(b *testing.B, tr exchange.Transport, pl control.Plane, bucket blob.Bucket) (context.Context, *coordinator.Coordinator, func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	coord := coordinator.New(coordinator.Config{Plane: pl, Bucket: bucket, Transport: tr})
	w := worker.New(worker.Config{ID: "bench", Slots: 2, Plane: pl, Transport: tr, Bucket: bucket})
	done := make(chan struct{}, 2)
	go func() { _ = coord.Run(ctx); done <- struct{}{} }()
	go func() { _ = w.Run(ctx); done <- struct{}{} }()
	stop := func() {
		cancel()
		<-done
		<-done
		_ = tr.Close()
		_ = pl.Close()
	}
	started := false
	defer func() {
		if !started { // the poll failed the benchmark
			stop()
		}
	}()
	poll.UntilNil(b, 10*time.Second, "the worker registered", func() error {
		if ws, err := pl.Workers(ctx); err != nil || len(ws) == 0 {
			return fmt.Errorf("%d workers: %v", len(ws), err)
		}
		return nil
	})
	started = true
	return ctx, coord, stop
}

// benchDir is a directory bucket for one run.
func benchDir(b *testing.B) blob.Bucket {
	bucket, err := blob.NewDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bucket.Close() })
	return bucket
}

func report(b *testing.B, events int, wall, cpu time.Duration) {
	b.ReportMetric(float64(events)/wall.Seconds(), "events/s")
	b.ReportMetric(float64(events)/cpu.Seconds(), "events/cpu-s")
	b.ReportMetric(cpu.Seconds(), "cpu-s")
}

// handwrittenTumbling is the straightforward single-threaded program for
// the benchmark's job: generate events (same shape: 1000 zones, uniform
// fare, timestamps with bounded jitter) and aggregate 10 s tumbling windows
// per zone in a map, firing windows as event time passes. It returns the
// number of windows emitted.
func handwrittenTumbling(n int) int {
	type acc struct {
		n     int64
		total float64
	}
	type wkey struct {
		start int64
		zone  int
	}
	zones := make([]string, 1000)
	for i := range zones {
		zones[i] = fmt.Sprintf("zone-%d", i)
	}
	const size, bound = 10_000, 2_000
	open := map[wkey]*acc{}
	var fired int
	var out []byte
	maxTs := int64(math.MinInt64)
	lastFire := int64(math.MinInt64)
	for i := 0; i < n; i++ {
		h := splitmix(uint64(i))
		zone := int(h % 1000)
		fare := 5 + 75*float64(splitmix(h)>>11)/(1<<53)
		ts := 1_767_225_600_000 + int64(i)/10 - int64(splitmix(h^0x9e37)%(bound+1))
		k := wkey{start: ts - ts%size, zone: zone}
		a := open[k]
		if a == nil {
			a = &acc{}
			open[k] = a
		}
		a.n++
		a.total += fare
		maxTs = max(maxTs, ts)
		if wm := maxTs - bound - 1; wm-lastFire >= 1000 || i == n-1 {
			if i == n-1 {
				wm = math.MaxInt64
			}
			lastFire = wm
			for k, a := range open {
				if k.start+size-1 <= wm {
					out = fmt.Appendf(out[:0], `{"window_start":%d,"zone":%q,"n":%d,"total":%g,"mean":%g}`, k.start, zones[k.zone], a.n, a.total, a.total/float64(a.n))
					fired++
					delete(open, k)
				}
			}
		}
	}
	return fired
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
