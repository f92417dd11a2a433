package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm"
	"github.com/weirstream/weir/functions/wasm/registry"
)

// zoneStatsSDK is examples/wasm/zone-stats written with the Go SDK, the
// baseline the Wasm builds are measured against: a count and a sum per
// zone and 10 s event-time window in a MapState keyed by window start, an
// event-time timer at each window's end.
type zoneStatsSDK struct {
	windows *functions.MapState[int64, zoneAcc]
}

type zoneAcc struct {
	N     int64
	Total float64
}

const zoneStatsSize = 10_000

func init() {
	functions.Register("zone-stats-sdk", functions.Definition{
		New: func(map[string]any) (functions.ProcessFunction, error) { return &zoneStatsSDK{}, nil },
		Output: func(in *arrow.Schema) ([]arrowfmt.Field, error) {
			return []arrowfmt.Field{
				{Name: "window_start", Type: arrowfmt.TimestampMs}, {Name: "window_end", Type: arrowfmt.TimestampMs},
				{Name: "zone", Type: arrowfmt.String}, {Name: "n", Type: arrowfmt.Int64}, {Name: "total", Type: arrowfmt.Float64},
			}, nil
		},
		TimeColumn: "window_end",
		Doc:        "zone-stats on the Go SDK (the Wasm benchmark's baseline)",
	})
}

func (z *zoneStatsSDK) Open(oc *functions.OpenContext) error {
	z.windows = functions.Map[int64, zoneAcc](oc, "windows")
	return nil
}

func (z *zoneStatsSDK) ProcessElement(ctx *functions.Context, row functions.Row, out *functions.Collector) error {
	ts, ok := ctx.Timestamp()
	if !ok {
		return nil
	}
	start := ts - ((ts%zoneStatsSize)+zoneStatsSize)%zoneStatsSize
	end := start + zoneStatsSize
	if end-1 <= ctx.Watermark() {
		return nil // late
	}
	a, _ := z.windows.Get(start)
	a.N++
	a.Total += row.Float64("fare")
	z.windows.Put(start, a)
	ctx.Timers().RegisterEventTime(end - 1)
	return nil
}

func (z *zoneStatsSDK) OnTimer(ctx *functions.Context, t functions.Timer, out *functions.Collector) error {
	start := t.Timestamp + 1 - zoneStatsSize
	a, ok := z.windows.Get(start)
	if !ok {
		return nil
	}
	z.windows.Delete(start)
	zone, _ := ctx.Key()[0].(string)
	return out.Emit(time.UnixMilli(start), time.UnixMilli(start+zoneStatsSize), zone, a.N, a.Total)
}

// wasmBenchSpec is datagen -> keyBy zone -> the function -> blackhole, at
// parallelism 2 on the in-process exchange.
func wasmBenchSpec(events int, function string) string {
	return `
job: bench-wasm
parallelism: 2
` + benchRides(events) + `operators:
  - name: stats
    input: rides
    keyBy: [zone]
    function: ` + function + `
sinks:
  - {name: out, input: stats, type: blackhole}
`
}

// BenchmarkWasmFunction runs the same keyed function (zone-stats) as a Go
// SDK function, built for Wasm from Go and from C (each also deployed
// --trusted: without deadline checks), over benchEvents events
// embedded (coordinator, worker and in-process exchange in this process),
// and reports events per CPU-second of the process and the time inside the
// guest. It also reports a module's first start (fetch and compile) and a
// start from the compilation cache.
//
//	go test -run '^$' -bench WasmFunction -benchtime 1x ./integration/
func BenchmarkWasmFunction(b *testing.B) {
	events := benchEvents
	if s := os.Getenv("WASM_BENCH_EVENTS"); s != "" {
		_, _ = fmt.Sscan(s, &events)
	}
	modules := map[string]string{"zone-stats-go": wasmExample(b, "zone-stats-go"), "zone-stats-c": wasmExample(b, "zone-stats-c")}
	for _, run := range []string{"zone-stats-sdk", "zone-stats-go", "zone-stats-c", "zone-stats-go-trusted", "zone-stats-c-trusted"} {
		fn, trusted := strings.CutSuffix(run, "-trusted")
		b.Run(run, func(b *testing.B) {
			js, err := spec.Parse([]byte(wasmBenchSpec(events, fn)), "bench-wasm.yaml")
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				bucket := benchDir(b)
				if path, ok := modules[fn]; ok {
					mod, err := os.ReadFile(path)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := registry.Deploy(context.Background(), bucket, fn, mod, wasm.Limits{Trusted: trusted}, time.Now()); err != nil {
						b.Fatal(err)
					}
				}
				coord, id := runBenchJob(b, js, events, exchange.NewLocal(), control.NewLocal(), bucket, nil)
				st, err := coord.Status(id)
				if err != nil {
					b.Fatal(err)
				}
				for _, v := range st.Vertices {
					for _, f := range v.Totals.Functions {
						b.ReportMetric(f.GuestSeconds, "guest-s")
						b.ReportMetric(float64(f.HostCalls)/float64(f.RowsIn), "host-calls/row")
					}
				}
			}
		})
	}
	for name, path := range modules {
		b.Run("start-"+name, func(b *testing.B) {
			mod, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			pin := &spec.Module{Name: name, Version: 1, SHA256: sha256Hex(mod)}
			fetch := func(context.Context, *spec.Module) ([]byte, error) { return mod, nil }
			dir := b.TempDir()
			load := func() time.Duration {
				eng, err := wasm.NewEngine(wasm.EngineConfig{CacheDir: dir, Fetch: fetch})
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = eng.Close() }()
				start := time.Now()
				if _, err := eng.Load(context.Background(), pin); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			for i := 0; i < b.N; i++ {
				if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
					b.Fatal(err)
				}
				b.ReportMetric(float64(load().Microseconds())/1000, "first-ms")
				b.ReportMetric(float64(load().Microseconds())/1000, "cached-ms")
			}
			b.ReportMetric(float64(len(mod))/1024, "module-KiB")
		})
	}
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
