package wasm_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/examples/surge"
	"github.com/weirstream/weir/functions"
	"github.com/weirstream/weir/functions/builtin"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	weirwasm "github.com/weirstream/weir/functions/wasm"
	"github.com/weirstream/weir/functions/wasm/wasmtest"
)

// newMem returns an allocator that fails the test if anything allocated
// from it is still held once the test and its cleanups are done.
func newMem(t *testing.T) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// built holds the modules build-go.sh makes, what Check found in them,
// and the engine that runs them, once per test binary: compiling a module
// takes seconds (minutes under the race detector).
var built struct {
	sync.Mutex
	dir  string
	err  error
	pins map[string]*spec.Module
	mods map[string][]byte
	eng  *weirwasm.Engine
}

// closeBuilt releases what built holds; TestMain calls it.
func closeBuilt() error {
	var err error
	if built.eng != nil {
		err = built.eng.Close()
	}
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	return err
}

// deployed builds the example name, checks it as `weir functions deploy`
// does, and returns the pin a deployed job spec carries and the engine
// that loads it.
func deployed(t testing.TB, name string) (*spec.Module, *weirwasm.Engine) {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if built.dir == "" && built.err == nil {
		built.dir, built.err = os.MkdirTemp("", "weir-wasm-examples-")
		if built.err == nil {
			out, err := exec.Command("bash", "build-go.sh", built.dir).CombinedOutput()
			if err != nil {
				built.err = fmt.Errorf("build-go.sh: %v\n%s", err, out)
			}
		}
		built.pins, built.mods = map[string]*spec.Module{}, map[string][]byte{}
		if built.err == nil {
			mods, _ := filepath.Glob(filepath.Join(built.dir, "*.wasm"))
			wasmtest.Precompile(t, mods...)
			built.eng, built.err = weirwasm.NewEngine(weirwasm.EngineConfig{
				CacheDir: wasmtest.CacheDir(t),
				Fetch:    func(_ context.Context, pin *spec.Module) ([]byte, error) { return built.mods[pin.Name], nil },
			})
		}
	}
	if built.err != nil {
		t.Fatal(built.err)
	}
	if pin, ok := built.pins[name]; ok {
		return pin, built.eng
	}
	mod, err := os.ReadFile(filepath.Join(built.dir, name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	// Through the engine that runs it: its cache then has the module
	// (weirwasm.Check alone compiles it again, ~10 CPU-s under -race).
	d, err := built.eng.Check(context.Background(), mod, weirwasm.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(mod)
	pin := &spec.Module{Name: name, Version: 1, SHA256: hex.EncodeToString(sum[:]), TimeColumn: d.TimeColumn}
	for _, f := range d.Input {
		pin.Input = append(pin.Input, spec.ModuleColumn{Name: f.Name, Type: string(f.Type)})
	}
	for _, f := range d.Output {
		pin.Output = append(pin.Output, spec.ModuleColumn{Name: f.Name, Type: string(f.Type)})
	}
	built.pins[name], built.mods[name] = pin, mod
	return pin, built.eng
}

// collect keeps the rows an operator emits, as Go values.
type collect struct{ rows [][]any }

func (c *collect) Emit(b arrow.RecordBatch) error {
	for r := range int(b.NumRows()) {
		row := make([]any, b.NumCols())
		for i := range row {
			row[i] = arrowfmt.Value(b.Column(i), r)
		}
		c.rows = append(c.rows, row)
	}
	return nil
}

// step is what the runtime hands an operator: a batch, or a watermark.
type step struct {
	rec arrow.RecordBatch
	wm  int64
}

// run opens op, feeds it steps, finishes it as at the end of a bounded
// input and returns what it emitted.
func run(t *testing.T, mem memory.Allocator, op task.Operator, steps []step) [][]any {
	rows, _ := runCounted(t, mem, op, steps)
	return rows
}

func runCounted(t *testing.T, mem memory.Allocator, op task.Operator, steps []step) ([][]any, *task.Counters) {
	t.Helper()
	out := &collect{}
	ctx := &task.Context{
		Job: "examples", Node: "op", Parallelism: 1, MaxParallelism: 128, KeyGroupEnd: 128,
		Mem: mem, Now: time.Now, Out: out, Counters: &task.Counters{},
	}
	if err := op.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := op.Close(); err != nil {
			t.Error(err)
		}
	}()
	for _, s := range steps {
		var err error
		if s.rec != nil {
			err = op.ProcessBatch(s.rec)
		} else {
			err = op.ProcessWatermark(s.wm)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := op.ProcessWatermark(functions.MaxWatermark); err != nil {
		t.Fatal(err)
	}
	if err := op.Finish(); err != nil {
		t.Fatal(err)
	}
	return out.rows, ctx.Counters
}

func rowString(r []any) string {
	s := make([]string, len(r))
	for i, v := range r {
		if tm, ok := v.(time.Time); ok {
			v = tm.UnixMilli()
		}
		s[i] = fmt.Sprintf("%v", v)
	}
	return strings.Join(s, " ")
}

func rowStrings(rows [][]any) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = rowString(r)
	}
	return out
}

// rides returns batches of random rides over a few zones (some zones,
// fares and times null; times before and after the epoch, out of order
// by up to 6 s) with a watermark 3 s behind the latest time after most
// batches, so that some rows are late.
func rides(t *testing.T, mem memory.Allocator, schema *arrow.Schema, seed uint64) []step {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	zones := []any{"north", "south", "east", "west", "port", nil}
	b := arrowfmt.NewBuilder(schema, mem)
	defer b.Release()
	var steps []step
	clock, maxTS, id := int64(-95_000), int64(-1<<62), int64(0)
	for range 60 {
		for range rng.IntN(200) + 1 {
			clock += rng.Int64N(60)
			ts := clock - rng.Int64N(6000)
			maxTS = max(maxTS, ts)
			var tsv, fare any = ts, float64(rng.IntN(8000)) / 100
			if rng.IntN(50) == 0 {
				tsv = nil
			}
			if rng.IntN(20) == 0 {
				fare = nil
			}
			id++
			for c, v := range []any{id, zones[rng.IntN(len(zones))], fare, tsv} {
				if err := b.AppendAny(c, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		rec := b.NewBatch()
		t.Cleanup(rec.Release)
		steps = append(steps, step{rec: rec})
		if rng.IntN(4) != 0 {
			steps = append(steps, step{wm: maxTS - 3000})
		}
	}
	return steps
}

func ridesStream(t *testing.T) builtin.Stream {
	t.Helper()
	src := spec.Source{Name: "rides", Type: spec.SourceDatagen,
		Schema: functions.Schema("ride_id", "int64", "zone", "string", "fare", "float64", "ts", "timestamp_ms"),
		Event:  &spec.EventTime{Column: "ts", MaxOutOfOrderness: spec.Duration(5 * time.Second)}}
	s, err := connector.SourceSchema(&src)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestZoneStatsEqualsBuiltinWindow: zone-stats, run by the host as a
// deployed function, emits what the built-in tumbling window with
// count() and sum(fare) emits for the same input and watermarks, late
// rows included, for each way of giving its size.
func TestZoneStatsEqualsBuiltinWindow(t *testing.T) {
	mem := newMem(t)
	pin, eng := deployed(t, "zone-stats-go")
	in := ridesStream(t)
	for _, c := range []struct {
		size time.Duration
		cfg  map[string]any
	}{
		{10 * time.Second, nil},
		{10 * time.Second, map[string]any{"size": "10s"}},
		{7 * time.Second, map[string]any{"size": 7000}},
	} {
		t.Run(fmt.Sprint(c.cfg), func(t *testing.T) {
			steps := rides(t, mem, in.Schema, uint64(c.size))
			win, err := builtin.NewWindow(&spec.Operator{
				Name: "builtin", Input: "rides", KeyBy: []string{"zone"},
				Window: functions.Tumbling(c.size), Aggregate: functions.Aggregate("n", "count()", "total", "sum(fare)"),
			}, in)
			if err != nil {
				t.Fatal(err)
			}
			want, counters := runCounted(t, mem, win, steps)
			if late := counters.LateDropped.Load(); late < 10 {
				t.Fatalf("only %d late rows: the test data does not test lateness", late)
			}

			op := &spec.Operator{Name: "wasm", Input: "rides", KeyBy: []string{"zone"}, Function: pin.Name, Module: pin, Config: c.cfg}
			out, err := builtin.ProcessSchema(op, in)
			if err != nil {
				t.Fatal(err)
			}
			if !out.Schema.Equal(windowSchema(t, in, c.size)) {
				t.Errorf("output schema %v", out.Schema)
			}
			proc, err := builtin.NewProcess(op, in, builtin.ProcessEnv{Engine: eng})
			if err != nil {
				t.Fatal(err)
			}
			got := run(t, mem, proc, steps)

			// Within a watermark, timers fire in timestamp order but keys in
			// no particular order; the built-in window orders them by key.
			g, w := rowStrings(got), rowStrings(want)
			slices.Sort(g)
			slices.Sort(w)
			if len(w) < 50 {
				t.Fatalf("only %d windows: the test data is too thin", len(w))
			}
			t.Logf("%d windows, %d late rows dropped", len(w), counters.LateDropped.Load())
			if !slices.Equal(g, w) {
				t.Errorf("zone-stats differs from the built-in window:\n got %d rows %q\nwant %d rows %q", len(g), g, len(w), w)
			}
		})
	}
}

// windowSchema is what the built-in tumbling window of size with count()
// and sum(fare) emits.
func windowSchema(t *testing.T, in builtin.Stream, size time.Duration) *arrow.Schema {
	t.Helper()
	s, err := builtin.WindowSchema(&spec.Operator{
		Name: "builtin", Input: "rides", KeyBy: []string{"zone"},
		Window: functions.Tumbling(size), Aggregate: functions.Aggregate("n", "count()", "total", "sum(fare)"),
	}, in)
	if err != nil {
		t.Fatal(err)
	}
	return s.Schema
}

func TestZoneStatsBadConfig(t *testing.T) {
	pin, eng := deployed(t, "zone-stats-go")
	op := &spec.Operator{Name: "wasm", Input: "rides", KeyBy: []string{"zone"}, Function: pin.Name, Module: pin,
		Config: map[string]any{"size": "-3s", "slide": 1}}
	err := openError(t, op, ridesStream(t), eng)
	for _, want := range []string{
		`size: -3s: want a window length in whole milliseconds, as a number (10000) or a duration ("10s")`,
		`unknown key "slide": accepted: size`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant it to contain %q", err, want)
		}
	}
}

// windowResults returns batches of what the surge-pricing job's sliding
// window feeds the surge function: per zone, windows ending every minute
// in order, now and then one that fires again with a new count, some
// avg_fare null.
func windowResults(t *testing.T, mem memory.Allocator, schema *arrow.Schema) []step {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	zones := []string{"downtown", "airport", "harbor", "university"}
	b := arrowfmt.NewBuilder(schema, mem)
	defer b.Release()
	minute := int64(time.Minute / time.Millisecond)
	var steps []step
	for end := int64(1); end <= 40; end++ {
		for _, z := range zones {
			for _, e := range []int64{end, end - 1 - rng.Int64N(2)} {
				if e < 1 || (e != end && rng.IntN(5) != 0) {
					continue // a re-fire of an earlier window, now and then
				}
				var fare any = float64(rng.IntN(6000)) / 100
				if rng.IntN(10) == 0 {
					fare = nil
				}
				for c, v := range []any{(e - 5) * minute, e * minute, z, rng.Int64N(400), fare} {
					if err := b.AppendAny(c, v); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if end%3 == 0 {
			rec := b.NewBatch()
			t.Cleanup(rec.Release)
			steps = append(steps, step{rec: rec}, step{wm: end*minute - 1})
		}
	}
	return steps
}

// surgeJob returns the surge-pricing job and the stream its surge operator
// reads (what the sliding window emits).
func surgeJob(t testing.TB) (*spec.Job, builtin.Stream) {
	t.Helper()
	job, err := surge.Job()
	if err != nil {
		t.Fatal(err)
	}
	src, err := connector.SourceSchema(&job.Sources[0])
	if err != nil {
		t.Fatal(err)
	}
	in, err := builtin.WindowSchema(&job.Operators[0], src)
	if err != nil {
		t.Fatal(err)
	}
	return job, in
}

// openError returns the error of opening op, which must fail.
func openError(t *testing.T, op *spec.Operator, in builtin.Stream, eng *weirwasm.Engine) error {
	t.Helper()
	proc, err := builtin.NewProcess(op, in, builtin.ProcessEnv{Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	err = proc.Open(&task.Context{MaxParallelism: 128, KeyGroupEnd: 128, Mem: newMem(t), Now: time.Now, Out: &collect{}, Counters: &task.Counters{}})
	if err == nil {
		_ = proc.Close()
		t.Fatal("open succeeded")
	}
	return err
}

// TestSurgeMultiplierEqualsGoFunction: the port emits, row for row, what
// examples/surge (a Go function compiled into weir) emits, with the
// config of the example job and with others.
func TestSurgeMultiplierEqualsGoFunction(t *testing.T) {
	mem := newMem(t)
	pin, eng := deployed(t, "surge-multiplier")
	job, in := surgeJob(t)
	steps := windowResults(t, mem, in.Schema)
	for _, cfg := range []map[string]any{
		job.Operators[1].Config,
		nil,
		{"history": 2, "sensitivity": 1.5, "maxMultiplier": 2.25},
	} {
		t.Run(fmt.Sprint(cfg), func(t *testing.T) {
			goOp := job.Operators[1]
			goOp.Config = cfg
			goProc, err := builtin.NewProcess(&goOp, in, builtin.ProcessEnv{})
			if err != nil {
				t.Fatal(err)
			}
			want := run(t, mem, goProc, steps)

			wasmOp := goOp
			wasmOp.Module = pin
			goOut, _ := builtin.ProcessSchema(&goOp, in)
			wasmOut, err := builtin.ProcessSchema(&wasmOp, in)
			if err != nil {
				t.Fatal(err)
			}
			if !wasmOut.Schema.Equal(goOut.Schema) || wasmOut.TimeColumn != goOut.TimeColumn || wasmOut.TimeOffset != goOut.TimeOffset {
				t.Errorf("output %v (time column %d%+d), the Go function's %v (%d%+d)",
					wasmOut.Schema, wasmOut.TimeColumn, wasmOut.TimeOffset, goOut.Schema, goOut.TimeColumn, goOut.TimeOffset)
			}
			wasmProc, err := builtin.NewProcess(&wasmOp, in, builtin.ProcessEnv{Engine: eng})
			if err != nil {
				t.Fatal(err)
			}
			got := run(t, mem, wasmProc, steps)
			if len(want) < 100 {
				t.Fatalf("only %d rows: the test data is too thin", len(want))
			}
			if g, w := rowStrings(got), rowStrings(want); !slices.Equal(g, w) {
				t.Errorf("surge-multiplier differs from examples/surge:\n got %q\nwant %q", g, w)
			}
		})
	}
}

func TestSurgeMultiplierBadConfig(t *testing.T) {
	pin, eng := deployed(t, "surge-multiplier")
	job, in := surgeJob(t)
	op := job.Operators[1]
	op.Module = pin
	op.Config = map[string]any{"history": 2.5, "sensitivity": "high", "maxMultiplier": 0.5, "histroy": 1}
	err := openError(t, &op, in, eng)
	// The messages of examples/surge's ParseConfig, in its order.
	_, goErr := surge.ParseConfig(op.Config)
	if !strings.Contains(err.Error(), goErr.Error()) {
		t.Errorf("error %v\nwant it to contain\n%v", err, goErr)
	}
}

// BenchmarkSurgeMultiplier runs the surge function over the same window
// results as a Go function compiled into weir and as the Wasm port, both
// through the process operator; ns/row compares them.
func BenchmarkSurgeMultiplier(b *testing.B) {
	mem := memory.NewGoAllocator()
	job, in := surgeJob(b)
	bb := arrowfmt.NewBuilder(in.Schema, mem)
	defer bb.Release()
	minute := int64(time.Minute / time.Millisecond)
	const rows = 8192
	for i := range rows {
		end := int64(i/64+1) * minute
		for c, v := range []any{end - 5*minute, end, fmt.Sprint("zone-", i%64), int64(i % 300), float64(i%50) + 0.5} {
			if err := bb.AppendAny(c, v); err != nil {
				b.Fatal(err)
			}
		}
	}
	rec := bb.NewBatch()
	defer rec.Release()

	for _, kind := range []string{"go", "wasm"} {
		b.Run(kind, func(b *testing.B) {
			op := job.Operators[1]
			var eng *weirwasm.Engine
			if kind == "wasm" {
				op.Module, eng = deployed(b, "surge-multiplier")
			}
			proc, err := builtin.NewProcess(&op, in, builtin.ProcessEnv{Engine: eng})
			if err != nil {
				b.Fatal(err)
			}
			ctx := &task.Context{MaxParallelism: 128, KeyGroupEnd: 128, Mem: mem, Now: time.Now, Out: discard{}, Counters: &task.Counters{}}
			if err := proc.Open(ctx); err != nil {
				b.Fatal(err)
			}
			defer proc.Close()
			b.ResetTimer()
			for range b.N {
				if err := proc.ProcessBatch(rec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
		})
	}
}

type discard struct{}

func (discard) Emit(arrow.RecordBatch) error { return nil }
