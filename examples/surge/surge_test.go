package surge

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions"
	"github.com/weirstream/weir/functions/builtin"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

func TestMultiplier(t *testing.T) {
	for _, c := range []struct {
		requests int64
		history  []int64
		want     float64
	}{
		{100, nil, 1},              // first window
		{100, []int64{100}, 1},     // usual demand
		{50, []int64{100, 100}, 1}, // below usual: never a discount
		{200, []int64{100}, 1.5},   // twice the usual at sensitivity 0.5
		{150, []int64{100, 50, 150}, 1.25},
		{1000, []int64{100}, 3},             // capped
		{10, []int64{0, 0}, 1},              // no baseline demand
		{133, []int64{100, 100, 100}, 1.17}, // 1.165 rounded
	} {
		if got := Multiplier(c.requests, c.history, 0.5, 3); got != c.want {
			t.Errorf("Multiplier(%d, %v) = %v, want %v", c.requests, c.history, got, c.want)
		}
	}
	if got := Multiplier(300, []int64{100}, 1, 2.5); got != 2.5 {
		t.Errorf("Multiplier with sensitivity 1, max 2.5 = %v", got)
	}
}

func TestRecord(t *testing.T) {
	var h []Window
	for _, w := range []Window{{3, 30}, {1, 10}, {2, 20}, {2, 25}, {4, 40}} {
		h = Record(h, w, 3)
	}
	if want := []Window{{2, 25}, {3, 30}, {4, 40}}; !slices.Equal(h, want) {
		t.Errorf("history %v, want %v", h, want)
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(nil)
	if err != nil || c != (Config{History: 5, Sensitivity: 0.5, MaxMultiplier: 3}) {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	c, err = ParseConfig(map[string]any{"history": 3, "sensitivity": 1.0, "maxMultiplier": int64(2)})
	if err != nil || c != (Config{History: 3, Sensitivity: 1, MaxMultiplier: 2}) {
		t.Errorf("set: %+v, %v", c, err)
	}
	_, err = ParseConfig(map[string]any{"history": 2.5, "sensitivity": "high", "maxMultiplier": 0.5, "histroy": 1})
	want := `history: 2.5: want a whole number of windows in 1..1000
unknown key "histroy": accepted: history, maxMultiplier, sensitivity
maxMultiplier: 0.5: want a number at least 1
sensitivity: high: want a positive number`
	if err == nil || err.Error() != want {
		t.Errorf("bad config error:\n%v\nwant:\n%s", err, want)
	}
}

// TestJobBuilderMatchesYAML checks that the Go builder and the YAML file
// give the same job spec.
func TestJobBuilderMatchesYAML(t *testing.T) {
	data, err := os.ReadFile("../surge-pricing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fromYAML, err := spec.Parse(data, "surge-pricing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fromGo, err := Job()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromYAML, fromGo) {
		y, _ := json.MarshalIndent(fromYAML, "", "  ")
		g, _ := json.MarshalIndent(fromGo, "", "  ")
		t.Fatalf("builder and YAML differ:\nYAML: %s\nGo:   %s", y, g)
	}
	y, _ := json.Marshal(fromYAML)
	g, _ := json.Marshal(fromGo)
	if string(y) != string(g) {
		t.Fatalf("JSON differs:\n%s\n%s", y, g)
	}
}

// pipeline returns the spec's surge operator and the stream that reaches
// it, computed like the planner does: source schema, then window schema.
func pipeline(t *testing.T) (*spec.Operator, builtin.Stream) {
	t.Helper()
	job, err := Job()
	if err != nil {
		t.Fatal(err)
	}
	src, err := connector.SourceSchema(&job.Sources[0])
	if err != nil {
		t.Fatal(err)
	}
	win, err := builtin.WindowSchema(&job.Operators[0], src)
	if err != nil {
		t.Fatal(err)
	}
	return &job.Operators[1], win
}

func TestSchema(t *testing.T) {
	op, in := pipeline(t)
	out, err := builtin.ProcessSchema(op, in)
	if err != nil {
		t.Fatal(err)
	}
	fields, _ := arrowfmt.Fields(out.Schema)
	want := []arrowfmt.Field{
		{Name: "zone", Type: arrowfmt.String}, {Name: "window_end", Type: arrowfmt.TimestampMs},
		{Name: "requests", Type: arrowfmt.Int64}, {Name: "avg_fare", Type: arrowfmt.Float64},
		{Name: "multiplier", Type: arrowfmt.Float64},
	}
	if !slices.Equal(fields, want) || out.TimeColumn != 1 || out.TimeOffset != 0 {
		t.Errorf("output %v time column %d offset %d", fields, out.TimeColumn, out.TimeOffset)
	}

	// An input without what the function reads is refused at deploy time.
	bad, _ := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "zone", Type: arrowfmt.String}, {Name: "requests", Type: arrowfmt.Float64}})
	_, err = builtin.ProcessSchema(op, builtin.Stream{Schema: bad, TimeColumn: -1})
	for _, frag := range []string{
		"operators[surge].function: surge-multiplier: output schema:",
		`input has no column "window_end" (want timestamp_ms; input columns: zone, requests)`,
		`input column "requests" is float64, want int64`,
	} {
		if err == nil || !strings.Contains(err.Error(), frag) {
			t.Errorf("bad input: error %v\nwant it to contain %q", err, frag)
		}
	}

	// So is a bad config.
	op2 := *op
	op2.Config = map[string]any{"history": 0}
	if _, err := builtin.ProcessSchema(&op2, in); err == nil || !strings.Contains(err.Error(), "operators[surge].config: surge-multiplier: history: 0") {
		t.Errorf("bad config: error %v", err)
	}
}

type collect struct {
	rows [][]any
}

func (c *collect) Emit(b arrow.RecordBatch) error {
	for r := 0; r < int(b.NumRows()); r++ {
		row := make([]any, b.NumCols())
		for i := range row {
			row[i] = arrowfmt.Value(b.Column(i), r)
		}
		c.rows = append(c.rows, row)
	}
	return nil
}

// TestSurgeOperator feeds window results through the process operator as
// the runtime would and checks the multipliers and the per-zone history.
func TestSurgeOperator(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	op, in := pipeline(t)
	// The expected multipliers below are worked out for sensitivity 0.5
	// (the example's spec raises it to make the demo livelier).
	op.Config = map[string]any{"sensitivity": 0.5}
	proc, err := builtin.NewProcess(op, in, builtin.ProcessEnv{})
	if err != nil {
		t.Fatal(err)
	}
	out := &collect{}
	ctx := &task.Context{
		Job: "surge-pricing", Node: "surge", Subtask: 0, Parallelism: 1, MaxParallelism: 128,
		KeyGroupStart: 0, KeyGroupEnd: 128, Mem: mem, Now: time.Now, Out: out,
		Counters: &task.Counters{},
	}
	if err := proc.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := proc.Close(); err != nil {
			t.Error(err)
		}
	}()

	minute := int64(time.Minute / time.Millisecond)
	b := arrowfmt.NewBuilder(in.Schema, mem)
	defer b.Release()
	feed := func(rows ...[]any) {
		t.Helper()
		for _, r := range rows { // window_start, window_end, zone, requests, avg_fare
			for c, v := range r {
				if err := b.AppendAny(c, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		rec := b.NewBatch()
		defer rec.Release()
		if err := proc.ProcessBatch(rec); err != nil {
			t.Fatal(err)
		}
	}
	w := func(end int64, zone string, requests int64, fare float64) []any {
		return []any{(end - 5) * minute, end * minute, zone, requests, fare}
	}
	feed(
		w(1, "downtown", 100, 20),
		w(1, "airport", 50, 40),
		w(2, "downtown", 100, 21),
		w(3, "downtown", 200, 22), // baseline 100: ×1.5
		w(2, "airport", 150, 41),  // baseline 50: 1+0.5×2 = 2
	)
	feed(
		w(3, "airport", 1000, 42), // baseline (50+150)/2 = 100: capped at 3
		w(2, "downtown", 300, 23), // window 2 fires again: replaces 100, baseline 100 (window 1)
		w(4, "downtown", 100, 24), // baseline (100+300+200)/3 = 200: ×1 (no discount)
		w(5, "downtown", 600, 25), // baseline (100+300+200+100)/4 = 175: 1+0.5×(600/175-1) = 2.214…
	)
	if err := proc.ProcessWatermark(10 * minute); err != nil {
		t.Fatal(err)
	}
	if err := proc.Finish(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"downtown 1 100 20 1",
		"airport 1 50 40 1",
		"downtown 2 100 21 1",
		"downtown 3 200 22 1.5",
		"airport 2 150 41 2",
		"airport 3 1000 42 3",
		"downtown 2 300 23 2",
		"downtown 4 100 24 1",
		"downtown 5 600 25 2.21",
	}
	var got []string
	for _, r := range out.rows {
		end := r[1].(time.Time).UnixMilli() / minute
		got = append(got, fmt.Sprintf("%v %d %v %v %v", r[0], end, r[2], r[3], r[4]))
	}
	if !slices.Equal(got, want) {
		t.Errorf("output\n got %q\nwant %q", got, want)
	}
}

func TestRegistered(t *testing.T) {
	def, ok := functions.Lookup(Name)
	if !ok || def.TimeColumn != "window_end" || def.Doc == "" {
		t.Fatalf("Lookup(%q) = %+v, %v", Name, def, ok)
	}
}
