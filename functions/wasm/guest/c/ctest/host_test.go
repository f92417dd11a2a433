package ctest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm"
	"github.com/weirstream/weir/statestore"
)

var ridesFields = []arrowfmt.Field{
	{Name: "ride_id", Type: arrowfmt.Int64}, {Name: "zone", Type: arrowfmt.String},
	{Name: "fare", Type: arrowfmt.Float64}, {Name: "ts", Type: arrowfmt.TimestampMs},
}

var zoneStatsOutput = []arrowfmt.Field{
	{Name: "window_start", Type: arrowfmt.TimestampMs}, {Name: "window_end", Type: arrowfmt.TimestampMs},
	{Name: "zone", Type: arrowfmt.String}, {Name: "n", Type: arrowfmt.Int64}, {Name: "total", Type: arrowfmt.Float64},
}

// zoneStats is the C zone-stats module on the wazero host: one instance
// over a Memory backend, collecting what it emits.
type zoneStats struct {
	inst *wasm.Instance
	out  []string
}

func newZoneStats(t *testing.T, module []byte, keyBy []string, config map[string]any) (*zoneStats, error) {
	t.Helper()
	eng, err := wasm.NewEngine(wasm.EngineConfig{
		CacheDir: t.TempDir(),
		Fetch:    func(context.Context, *spec.Module) ([]byte, error) { return module, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Error(err)
		}
	})
	sum := sha256.Sum256(module)
	m, err := eng.Load(context.Background(), &spec.Module{Name: "zone-stats-c", Version: 1, SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatal(err)
	}
	z := &zoneStats{}
	z.inst, err = m.NewInstance(context.Background(), wasm.InstanceConfig{
		Operator: "stats", Input: mustSchema(t, ridesFields), InputTimeColumn: 3,
		KeyColumns: keyBy, Output: mustSchema(t, zoneStatsOutput), Config: config,
		State: statestore.NewMemory(0, 128), Subtask: 0, Parallelism: 1,
		Emit: func(r arrow.RecordBatch) error {
			z.out = append(z.out, rowsOf(r, nil)...)
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := z.inst.Close(); err != nil {
			t.Error(err)
		}
	})
	return z, nil
}

func (z *zoneStats) process(rec arrow.RecordBatch) error {
	n := int(rec.NumRows())
	hashes := arrowfmt.HashKeys(rec, []int{1}, nil)
	groups, keys := make([]int, n), make([]string, n)
	for i := range n {
		groups[i] = arrowfmt.KeyGroup(hashes[i], 128)
		keys[i] = arrowfmt.KeyString(rec, []int{1}, i)
	}
	return z.inst.ProcessBatch(rec, groups, keys)
}

func TestZoneStatsChecks(t *testing.T) {
	d, err := wasm.Check(context.Background(), buildWasm(t), wasm.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Output, zoneStatsOutput) || d.TimeColumn != "window_end" || len(d.Input) != 3 || d.Doc == "" {
		t.Errorf("description %+v", d)
	}
}

// TestZoneStatsOnHost: out-of-order rides in batches while the watermark
// trails them by one window; the windows emitted must equal a
// recomputation from the rides that were not late when they came.
func TestZoneStatsOnHost(t *testing.T) {
	module := buildWasm(t)
	for _, c := range []struct {
		name   string
		config map[string]any
		size   int64
	}{
		{"default", nil, 10000},
		{"ms", map[string]any{"size": 5000}, 5000},
		{"duration", map[string]any{"size": "1m"}, 60000},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			z, err := newZoneStats(t, module, []string{"zone"}, c.config)
			if err != nil {
				t.Fatal(err)
			}
			want := runRides(t, z, c.size, mem)
			slices.Sort(want)
			got := slices.Clone(z.out)
			slices.Sort(got)
			equalRows(t, "windows", got, want)
			st := z.inst.Stats()
			t.Logf("%d windows; %d calls, %d host calls, %d rows in", len(got), st.Calls.Load(), st.HostCalls.Load(), st.RowsIn.Load())
		})
	}
}

// runRides feeds rides to z and returns the rendered windows it must emit.
func runRides(t *testing.T, z *zoneStats, size int64, mem memory.Allocator) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	zones := []string{"north", "south", "", "harbour é"}
	type win struct {
		zone     any
		start    int64
		n        int64
		total    float64
		hasTotal bool
	}
	wins := map[string]*win{}
	schema := mustSchema(t, ridesFields)
	wm := int64(math.MinInt64 + 1)
	maxTs, id := int64(-3*size), int64(0)
	for batch := range 120 {
		b := arrowfmt.NewBuilder(schema, mem)
		for range 1 + rng.IntN(50) {
			ts := maxTs - size + rng.Int64N(size+size/4+1)
			maxTs = max(maxTs, ts)
			var zone any
			if rng.IntN(15) > 0 {
				zone = zones[rng.IntN(len(zones))]
			}
			fare := any(float64(rng.IntN(9000)) / 100)
			if rng.IntN(8) == 0 {
				fare = nil
			}
			tsv := any(ts)
			if rng.IntN(25) == 0 {
				tsv = nil
			}
			for c, v := range []any{id, zone, fare, tsv} {
				if err := b.AppendAny(c, v); err != nil {
					t.Fatal(err)
				}
			}
			id++
			if tsv == nil {
				continue
			}
			start := ts - ((ts%size)+size)%size
			if start+size-1 <= wm {
				continue // late
			}
			k := fmt.Sprint(zone, start)
			w := wins[k]
			if w == nil {
				w = &win{zone: zone, start: start}
				wins[k] = w
			}
			w.n++
			if fare != nil {
				w.total += fare.(float64)
				w.hasTotal = true
			}
		}
		rec := b.NewBatch()
		b.Release()
		if err := z.process(rec); err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		rec.Release()
		if batch%4 == 3 {
			wm = maxTs - size
			if err := z.inst.AdvanceWatermark(wm); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := z.inst.AdvanceWatermark(math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, w := range wins {
		var total any
		if w.hasTotal {
			total = w.total
		}
		row := []string{fmt.Sprintf("t:%d", w.start), fmt.Sprintf("t:%d", w.start+size), render(w.zone), render(w.n), render(total)}
		want = append(want, strings.Join(row, " "))
	}
	if len(want) < 20 {
		t.Fatalf("only %d windows", len(want))
	}
	return want
}

// TestZoneStatsRefusesConfig: a bad config or keyBy fails the instance
// with zone-stats' own message.
func TestZoneStatsRefusesConfig(t *testing.T) {
	module := buildWasm(t)
	for _, c := range []struct {
		keyBy  []string
		config map[string]any
		want   string
	}{
		{[]string{"zone"}, map[string]any{"size": -5}, "config size"},
		{[]string{"zone"}, map[string]any{"size": "10x"}, "config size"},
		{[]string{"zone"}, map[string]any{"window": "10s"}, "unknown config window"},
		{[]string{"ride_id"}, nil, "want keyBy: [zone]"},
	} {
		_, err := newZoneStats(t, module, c.keyBy, c.config)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("keyBy %v config %v: err = %v, want %q", c.keyBy, c.config, err, c.want)
		}
	}
}
