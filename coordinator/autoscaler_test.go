package coordinator_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions"
)

// rowCost is what coord-test-costly spends on a row: it sleeps, so the
// time counts as busy without burning the machine's two cores.
const rowCost = 500 * time.Microsecond

// costlyFn passes ids through and spends rowCost per row, sleeping once
// its debt reaches a few milliseconds (a sleep per row would be the
// timer's granularity, not rowCost).
type costlyFn struct{ debt time.Duration }

func (f *costlyFn) ProcessElement(ctx *functions.Context, row functions.Row, out *functions.Collector) error {
	if f.debt += rowCost; f.debt >= 5*time.Millisecond {
		time.Sleep(f.debt)
		f.debt = 0
	}
	return out.Emit(row.Int64("id"))
}

func init() {
	functions.Register("coord-test-costly", functions.Definition{
		New: func(map[string]any) (functions.ProcessFunction, error) { return &costlyFn{}, nil },
		Output: func(in *arrow.Schema) ([]arrowfmt.Field, error) {
			if len(in.FieldIndices("id")) == 0 {
				return nil, errors.New(`the input has no column "id"`)
			}
			return []arrowfmt.Field{{Name: "id", Type: arrowfmt.Int64}}, nil
		},
	})
}

// TestAutoscalerScalesUnderLoad runs a keyed operator that does 2,000
// rows per busy second per subtask at parallelism 1 behind a source of
// 4,000 events a second: the autoscaler scales it up within seconds of
// its first window, every decision is in the history with its inputs,
// and the output holds every event exactly once.
func TestAutoscalerScalesUnderLoad(t *testing.T) {
	e := newEnv(t)
	e.startWorker("w1", 8, workerOpts{})
	const events = 60000
	id := e.submit(fmt.Sprintf(`
job: autoscaled
parallelism: 1
checkpoint: {interval: 500ms, timeout: 10s}
autoscale: {enabled: true, maxParallelism: 4, window: 3s, stabilization: 5s, catchUp: 10s}
sources:
  - name: gen
    type: datagen
    count: %d
    rate: 4000
    schema: {id: int64, k: int64}
    datagen: {fields: {k: {min: 0, max: 999}}}
operators:
  - {name: costly, input: gen, keyBy: [k], function: coord-test-costly}
sinks:
  - {name: out, input: costly, type: files, path: auto/, format: jsonl}
`, events))
	start := time.Now()
	defer func() {
		if t.Failed() {
			st, _ := e.c.Status(id)
			for _, d := range st.Scaling {
				t.Logf("history: %.1fs %s %s %d->%d: %s", d.Time.Sub(start).Seconds(), d.Kind, d.Vertex, d.From, d.To, d.Reason)
			}
		}
	}()
	st := e.waitForWithin(id, "the autoscaler's scale-up", 40*time.Second, func(st coordinator.JobStatus) bool {
		for _, d := range st.Scaling {
			if d.Kind == "scale" && d.To > d.From {
				return true
			}
		}
		return false
	})
	for _, d := range st.Scaling {
		if d.Kind == "scale" {
			t.Logf("%.1fs after the start: %s %d -> %d: %s (busy %.2f, true rate %.0f/s, required %.0f/s, backlog %.0f)",
				d.Time.Sub(start).Seconds(), d.Vertex, d.From, d.To, d.Reason, d.Busy, d.TrueRate, d.RequiredRate, d.Backlog)
			if d.RequiredRate <= 0 || d.TrueRate <= 0 || d.Reason == "" {
				t.Errorf("a scale decision without its inputs: %+v", d)
			}
		}
	}
	st = e.wait(id, 2*time.Minute)
	if st.State != coordinator.JobFinished {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	for _, r := range st.Recoveries {
		t.Logf("attempt %d from checkpoint %d in %.2fs: %s", r.Attempt, r.RestoredFrom, r.Seconds, r.Reason)
		if !strings.HasPrefix(r.Reason, "rescale: ") {
			t.Errorf("a recovery that is no rescale: %+v", r)
		}
	}
	var none int
	for _, d := range st.Scaling {
		if d.Kind == "none" {
			none++
		}
	}
	if none == 0 {
		t.Errorf("no decision not to act in the history: %+v", st.Scaling)
	}
	seen := map[int64]int{}
	for _, r := range e.readJSONL("auto/") {
		seen[int64Of(t, r["id"])]++
	}
	dups := 0
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	if len(seen) != events || dups != 0 {
		t.Errorf("%d distinct ids of %d, %d duplicated", len(seen), events, dups)
	}
}

// TestAutoscalerSteadyLoadStays runs the costly operator at parallelism 2
// behind a steady 2,800 events a second (utilization about 0.7, the
// target) for 20 s (WEIR_SOAK_SECONDS in make chaos: 180): the autoscaler
// takes no action, and says why in its history.
func TestAutoscalerSteadyLoadStays(t *testing.T) {
	seconds := 20
	if s := os.Getenv("WEIR_SOAK_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("WEIR_SOAK_SECONDS=%q: want a whole number of seconds", s)
		}
		seconds = n
	}
	e := newEnvWithin(t, time.Duration(seconds+60)*time.Second)
	e.startWorker("w1", 4, workerOpts{})
	const rate = 2800
	id := e.submit(fmt.Sprintf(`
job: steady
checkpoint: {interval: 1s, timeout: 10s}
autoscale: {enabled: true, maxParallelism: 4, window: 3s, stabilization: 5s, catchUp: 10s}
sources:
  - name: gen
    type: datagen
    parallelism: 1
    count: %d
    rate: %d
    schema: {id: int64, k: int64}
    datagen: {fields: {k: {min: 0, max: 999}}}
operators:
  - {name: costly, input: gen, parallelism: 2, keyBy: [k], function: coord-test-costly}
sinks:
  - {name: out, input: costly, parallelism: 2, type: blackhole}
`, rate*seconds, rate))
	st := e.wait(id, time.Duration(seconds+50)*time.Second)
	if st.State != coordinator.JobFinished {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	var decided int
	for _, d := range st.Scaling {
		if d.Kind != "none" {
			t.Errorf("a steady load caused %s %s %d -> %d: %s (busy %.2f, utilization %.2f)", d.Kind, d.Vertex, d.From, d.To, d.Reason, d.Busy, d.Utilization)
		}
		if d.Vertex == "costly" && strings.HasPrefix(d.Reason, "utilization") {
			decided++
			t.Logf("%s: %s", d.Time.Format(time.TimeOnly), d.Reason)
		}
	}
	if decided == 0 {
		t.Errorf("no decision on costly with a full window in %d s: %+v", seconds, st.Scaling)
	}
	if len(st.Recoveries) != 0 {
		t.Errorf("%d recoveries under a steady load", len(st.Recoveries))
	}
}
