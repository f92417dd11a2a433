package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/examples"
	"github.com/weirstream/weir/examples/surge"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm"
	"github.com/weirstream/weir/functions/wasm/registry"
)

func (a *app) demoCmd() *cobra.Command {
	var duration time.Duration
	var dir, wasmFile string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the surge-pricing example in this process with a live view",
		Long: `Run examples/surge-pricing.yaml embedded (in-process exchange and control
plane, a local directory store unless --store says otherwise) with a live
terminal view: events per second in and out, the watermark, and the latest
surge multiplier per zone. It runs until the job finishes, Ctrl-C, or
--duration. It never joins a cluster: WEIR_REDIS_ADDR is ignored and
--redis-addr refused.

With --wasm FILE.wasm the surge operator runs a WebAssembly module instead
of the Go surge-multiplier: FILE is deployed into the demo's store as
surge-multiplier-wasm (a new version when it changed) and the job pins it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := refuseCluster(cmd); err != nil {
				return err
			}
			js, err := parseSpec(examples.SurgePricing, "examples/surge-pricing.yaml")
			if err != nil {
				return err
			}
			if a.v.GetString("store") == "" {
				abs, err := filepath.Abs(dir)
				if err != nil {
					return err
				}
				a.v.Set("store", "file://"+abs)
				fmt.Fprintf(a.stdout, "weir demo: output files go to %s\n", filepath.Join(abs, "output"))
			} else {
				fmt.Fprintf(a.stdout, "weir demo: output files go to %s/output\n", a.v.GetString("store"))
			}
			if wasmFile != "" {
				if err := a.useWasmSurge(cmd.Context(), js, wasmFile); err != nil {
					return err
				}
			}
			isTTY := false
			if f, ok := a.stdout.(*os.File); ok {
				isTTY = term.IsTerminal(int(f.Fd()))
			}
			src := specSource{data: examples.SurgePricing, file: "examples/surge-pricing.yaml"}
			return a.runEmbedded(cmd.Context(), js, src, duration, newDemoView(a, isTTY), nil)
		},
	}
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long (0: until the job finishes or Ctrl-C)")
	cmd.Flags().StringVar(&dir, "dir", "weir-demo-output", "local directory for the demo's store when --store is not set")
	cmd.Flags().StringVar(&wasmFile, "wasm", "", "deploy this WebAssembly module as "+wasmSurge+" and run it instead of the Go "+surge.Name)
	return cmd
}

// wasmSurge is the name weir demo --wasm deploys its module under.
const wasmSurge = "surge-multiplier-wasm"

// useWasmSurge deploys file into the demo's store as wasmSurge and points
// the operators running the Go surge-multiplier at it.
func (a *app) useWasmSurge(ctx context.Context, js *spec.Job, file string) error {
	module, err := os.ReadFile(file)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	b, err := a.openStoreRW(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	v, err := registry.Deploy(ctx, b, wasmSurge, module, wasm.Limits{}, time.Now())
	if err != nil {
		return fmt.Errorf("deploy %s from %s: %w", wasmSurge, file, err)
	}
	fmt.Fprintf(a.stdout, "weir demo: %s is %s version %d (sha256 %s)\n", file, v.Name, v.Version, v.SHA256)
	for i := range js.Operators {
		if js.Operators[i].Function == surge.Name {
			js.Operators[i].Function = wasmSurge
		}
	}
	return nil
}

// demoView draws the live terminal view of the surge-pricing demo.
type demoView struct {
	a     *app
	tty   bool
	start time.Time
	mu    struct {
		sync.Mutex
		surge map[string]float64
		at    map[string]int64
	}
	samples []sample // the last few seconds, for rates
	lines   int
}

type sample struct {
	at      time.Time
	in, out int64
}

func newDemoView(a *app, tty bool) *demoView {
	v := &demoView{a: a, tty: tty, start: time.Now()}
	v.mu.surge = map[string]float64{}
	v.mu.at = map[string]int64{}
	return v
}

// tap keeps the latest multiplier per zone from the rows sent to the "out"
// sink.
func (v *demoView) tap(sink string, b arrow.RecordBatch) {
	if sink != "out" {
		return
	}
	zi, mi, ti := b.Schema().FieldIndices("zone"), b.Schema().FieldIndices("multiplier"), b.Schema().FieldIndices("window_end")
	if len(zi) == 0 || len(mi) == 0 {
		return
	}
	zones, ok1 := b.Column(zi[0]).(*array.String)
	mult, ok2 := b.Column(mi[0]).(*array.Float64)
	if !ok1 || !ok2 {
		return
	}
	var ends *array.Timestamp
	if len(ti) > 0 {
		ends, _ = b.Column(ti[0]).(*array.Timestamp)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := 0; i < int(b.NumRows()); i++ {
		if zones.IsNull(i) || mult.IsNull(i) {
			continue
		}
		z := zones.Value(i)
		var end int64
		if ends != nil && !ends.IsNull(i) {
			end = int64(ends.Value(i))
		}
		if end >= v.mu.at[z] {
			v.mu.at[z] = end
			v.mu.surge[z] = mult.Value(i)
		}
	}
}

func (v *demoView) update(st coordinator.JobStatus, final bool) {
	// Rates over the last five seconds: workers report every second, so a
	// one-second difference jitters.
	now := time.Now()
	in, out := st.Totals.RecordsIn, st.Totals.SinkIn
	v.samples = append(v.samples, sample{at: now, in: in, out: out})
	for len(v.samples) > 2 && now.Sub(v.samples[0].at) > 5*time.Second {
		v.samples = v.samples[1:]
	}
	var inRate, outRate float64
	if first := v.samples[0]; now.Sub(first.at) > 0 {
		dt := now.Sub(first.at).Seconds()
		inRate, outRate = float64(in-first.in)/dt, float64(out-first.out)/dt
	}

	var b strings.Builder
	wm := "-"
	if st.Totals.Watermark > 0 && st.Totals.Watermark < 1<<62 {
		wm = time.UnixMilli(st.Totals.Watermark).UTC().Format("2006-01-02 15:04:05")
	} else if st.Totals.Watermark >= 1<<62 {
		wm = "end of input"
	}
	fmt.Fprintf(&b, "surge-pricing  %-9s  %6s elapsed\n", st.State, time.Since(v.start).Round(time.Second))
	fmt.Fprintf(&b, "events in  %9.0f/s  (total %d)\n", inRate, in)
	fmt.Fprintf(&b, "rows out   %9.0f/s  (total %d)\n", outRate, out)
	fmt.Fprintf(&b, "watermark  %s\n", wm)
	v.mu.Lock()
	zones := make([]string, 0, len(v.mu.surge))
	for z := range v.mu.surge {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	b.WriteString("zone         surge\n")
	for _, z := range zones {
		fmt.Fprintf(&b, "%-12s %5.2fx\n", z, v.mu.surge[z])
	}
	v.mu.Unlock()

	text := b.String()
	if v.tty {
		if v.lines > 0 {
			fmt.Fprintf(v.a.stdout, "\x1b[%dA\x1b[J", v.lines)
		}
		fmt.Fprint(v.a.stdout, text)
		v.lines = strings.Count(text, "\n")
	} else if final || int(time.Since(v.start).Seconds())%5 == 0 {
		fmt.Fprint(v.a.stdout, text)
	}
	if final {
		v.a.printSummary(st)
	}
}
