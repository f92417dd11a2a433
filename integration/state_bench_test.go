package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/spec"

	_ "github.com/weirstream/weir/examples/seqcheck" // sequence-check
)

// stateBenchSpec is datagen (one subtask, so each key's rows stay in
// order) -> a key ride_id % keys -> the sequence checker (a Go SDK
// function with one ValueState[int64] per key) at parallelism 2 ->
// blackhole, with checkpoints every 2 s into a directory bucket (parts of
// STATE_BENCH_PART_SIZE, 32MiB by default) and the given state section.
func stateBenchSpec(events, keys int, state string) string {
	part := ""
	if p := os.Getenv("STATE_BENCH_PART_SIZE"); p != "" {
		part = ", partSize: " + p
	}
	return fmt.Sprintf(`
job: bench-state
parallelism: 2
checkpoint: {interval: 2s, timeout: 5m%s}
%s
sources:
  - {name: rides, type: datagen, parallelism: 1, count: %d, schema: {ride_id: int64}}
operators:
  - {name: keyed, input: rides, parallelism: 1, select: {k: "ride_id %% %d", seq: ride_id}}
  - {name: check, input: keyed, keyBy: [k], function: sequence-check, config: {stride: %d}}
sinks:
  - {name: out, input: check, type: blackhole}
`, part, state, events, keys, keys)
}

// BenchmarkProcessState runs the sequence checker over STATE_BENCH_KEYS
// keys (default 1M; STATE_BENCH_EVENTS events, default 4M) with its state
// on the heap and in pebble stores of 64 MiB each, embedded, checkpoints
// every 2 s, and reports events per CPU-second and the process's largest
// resident memory sampled every 100 ms.
//
//	go test -run '^$' -bench ProcessState -benchtime 1x ./integration/
func BenchmarkProcessState(b *testing.B) {
	events, keys := 4_000_000, 1_000_000
	if s := os.Getenv("STATE_BENCH_EVENTS"); s != "" {
		_, _ = fmt.Sscan(s, &events)
	}
	if s := os.Getenv("STATE_BENCH_KEYS"); s != "" {
		_, _ = fmt.Sscan(s, &keys)
	}
	for _, run := range []struct{ name, state string }{
		{"memory", ""},
		{"pebble-64MiB", "state: {backend: pebble, memory: 64MiB}"},
	} {
		b.Run(run.name, func(b *testing.B) {
			js, err := spec.Parse([]byte(stateBenchSpec(events, keys, run.state)), "bench-state.yaml")
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				debug.FreeOSMemory()
				stop := sampleMemory()
				coord, id := runBenchJob(b, js, events, exchange.NewLocal(), control.NewLocal(), benchDir(b), nil)
				rss, heap := stop()
				b.ReportMetric(float64(rss)/(1<<20), "max-rss-MiB")
				b.ReportMetric(float64(heap)/(1<<20), "max-go-heap-MiB")
				reportCheckpoints(b, coord, id)
			}
		})
	}
}

// sampleMemory samples the process's resident memory and the Go heap's
// live and free spans (runtime/metrics: what the heap holds, whatever the
// garbage collector has not returned) every 100 ms until the returned
// stop, which returns the largest sample of each in bytes.
// STATE_BENCH_MEMORY_TRACE=file writes every sample there (seconds since
// the start, RSS and Go heap in MiB), to see when the peak comes.
func sampleMemory() (stop func() (rss, heap int64)) {
	var (
		mu         sync.Mutex
		peak, heap int64
	)
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	done := make(chan struct{})
	finished := make(chan struct{})
	var trace *os.File
	if path := os.Getenv("STATE_BENCH_MEMORY_TRACE"); path != "" {
		var err error
		if trace, err = os.Create(path); err != nil {
			fmt.Fprintf(os.Stderr, "STATE_BENCH_MEMORY_TRACE: %v\n", err)
		} else {
			fmt.Fprintln(trace, "# seconds, RSS MiB, Go heap MiB")
		}
	}
	start := time.Now()
	go func() {
		defer close(finished)
		if trace != nil {
			defer trace.Close()
		}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(samples)
			var h int64
			for _, s := range samples {
				if s.Value.Kind() == metrics.KindUint64 {
					h += int64(s.Value.Uint64())
				}
			}
			n := residentBytes()
			if trace != nil {
				fmt.Fprintf(trace, "%.1f %d %d\n", time.Since(start).Seconds(), n>>20, h>>20)
			}
			mu.Lock()
			if path := os.Getenv("STATE_BENCH_HEAP_PROFILE"); path != "" && h > heap*11/10 {
				// A heap profile at each new peak (10% above the last),
				// to see what the memory is.
				writeHeapProfile(path)
			}
			peak, heap = max(peak, n), max(heap, h)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() (int64, int64) {
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return peak, heap
	}
}

// writeHeapProfile writes the heap profile (pprof) to path.
func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("heap").WriteTo(f, 0)
}

// residentBytes reads VmRSS from /proc/self/status (0 if it cannot).
func residentBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
			f := bytes.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
