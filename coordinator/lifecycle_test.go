package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/layout"
)

// evens reads 1000 generated ids on two subtasks, keeps the even ones and
// writes them from one sink subtask: the rebalance edge goes through the
// exchange.
const evens = `job: evens
sources:
  - name: nums
    type: datagen
    parallelism: 2
    count: 1000
    schema: {id: int64, ts: timestamp_ms}
    eventTime: {column: ts}
operators:
  - {name: even, input: nums, parallelism: 2, filter: id % 2 == 0}
sinks:
  - {name: out, input: even, parallelism: 1, type: files, path: out/evens/, format: jsonl}
`

func TestBoundedJobFinishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("w1", 2, workerOpts{})
	id := e.submit(evens)
	if !strings.HasPrefix(id, "evens-") {
		t.Errorf("job id %q does not start with the job's name", id)
	}
	st := e.wait(id, 20*time.Second)
	if st.State != coordinator.JobFinished || st.Error != "" {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	if st.Started.IsZero() || st.Ended.Before(st.Started) || st.Started.Before(st.Created) {
		t.Errorf("times: created %v started %v ended %v", st.Created, st.Started, st.Ended)
	}

	// The output is exactly the even ids, each once.
	rows := e.readJSONL("out/evens/")
	var ids []int64
	for _, r := range rows {
		ids = append(ids, int64Of(t, r["id"]))
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if len(ids) != 500 {
		t.Fatalf("got %d rows, want 500", len(ids))
	}
	for i, v := range ids {
		if v != int64(2*i) {
			t.Fatalf("row %d has id %d, want %d (ids lost, repeated or odd)", i, v, 2*i)
		}
	}
	if st.Totals.RecordsIn != 1000 || st.Totals.SinkIn != 500 || st.Totals.SinkRows != 500 {
		t.Errorf("totals: records in %d, sink in %d, sink rows %d; want 1000, 500, 500", st.Totals.RecordsIn, st.Totals.SinkIn, st.Totals.SinkRows)
	}

	// The spec is stored as submitted.
	raw, err := e.bucket.Get(e.ctx, layout.SpecKey(id))
	if err != nil {
		t.Fatalf("spec not stored: %v", err)
	}
	if layout.SpecKey(id) != "jobs/"+id+"/spec.json" {
		t.Errorf("SpecKey = %q", layout.SpecKey(id))
	}
	var stored spec.Job
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	want, _ := spec.Parse([]byte(evens), "job.yaml")
	if !reflect.DeepEqual(&stored, want) {
		t.Errorf("stored spec = %+v, want %+v", stored, *want)
	}

	// The final status is stored too.
	if s := e.storedStatus(id); s.ID != id || s.State != coordinator.JobFinished || s.Name != "evens" || s.Totals.SinkRows != 500 {
		t.Errorf("stored status = %+v", s)
	}

	// The status describes the vertices, each subtask with its worker.
	var names []string
	for _, v := range st.Vertices {
		names = append(names, fmt.Sprintf("%s%v", v.Name, v.Nodes))
		for _, ts := range v.Tasks {
			if ts.Worker != "w1" || ts.State != coordinator.JobFinished {
				t.Errorf("%s[%d]: worker %q state %s", v.Name, ts.Subtask, ts.Worker, ts.State)
			}
		}
	}
	if want := []string{"nums[nums even]", "out[out]"}; !reflect.DeepEqual(names, want) {
		t.Errorf("vertices = %v, want %v", names, want)
	}

	// The attempt's channels are gone.
	type keyCounter interface {
		CountKeys(ctx context.Context, job string, attempt int) (int, error)
	}
	if kc, ok := e.xch.(keyCounter); ok {
		if n, err := kc.CountKeys(e.ctx, id, -1); err != nil || n != 0 {
			t.Errorf("job %s left %d channels (%v)", id, n, err)
		}
	}

	if list := e.c.List(); len(list) != 1 || list[0].ID != id || list[0].State != coordinator.JobFinished || list[0].Vertices != nil {
		t.Errorf("List = %+v", list)
	}
}

func TestSubmitInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name  string
		job   string
		field string
	}{
		{"type error", strings.Replace(evens, "id % 2 == 0", "id + 1", 1), "operators[even].filter"},
		{"unknown input", strings.Replace(evens, "input: even,", "input: odd,", 1), "sinks[out].input"},
		{"unknown function", strings.Replace(evens, "filter: id % 2 == 0", "keyBy: [id], function: nope", 1), "operators[even].function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var js spec.Job
			if err := yamlToJob(tt.job, &js); err != nil {
				t.Fatal(err)
			}
			id, err := e.c.Submit(e.ctx, &js)
			ps, ok := spec.AsProblems(err)
			if !ok || id != "" {
				t.Fatalf("Submit = %q, %v; want spec.Problems", id, err)
			}
			found := false
			for _, p := range ps {
				found = found || p.Field == tt.field
			}
			if !found {
				t.Errorf("no problem at %s: %v", tt.field, ps)
			}
		})
	}
	objs, err := e.bucket.List(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 0 {
		t.Errorf("invalid specs left objects in the bucket: %v", objs)
	}
	if list := e.c.List(); len(list) != 0 {
		t.Errorf("invalid specs are listed: %+v", list)
	}
}

// yamlToJob decodes a spec without validating it (Parse would refuse the
// invalid ones before Submit sees them).
func yamlToJob(src string, js *spec.Job) error {
	j, err := spec.Parse([]byte(src), "job.yaml")
	if j != nil {
		*js = *j
		return nil
	}
	return err
}

// A job that needs more slots than the live workers have waits in
// CREATED, placing nothing, and is scheduled when a worker with free slots
// registers; its subtasks spread over both workers.
func TestJobWaitsForSlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("w1", 1, workerOpts{})
	id := e.submit(strings.Replace(evens, "parallelism: 1, type: files", "parallelism: 2, type: files", 1))
	st, err := e.c.Status(id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != coordinator.JobCreated {
		t.Fatalf("state = %s, want CREATED", st.State)
	}
	for _, v := range st.Vertices {
		for _, ts := range v.Tasks {
			if ts.Worker != "" {
				t.Errorf("%s[%d] placed on %s with too few slots", v.Name, ts.Subtask, ts.Worker)
			}
		}
	}
	e.startWorker("w2", 1, workerOpts{})
	st = e.wait(id, 20*time.Second)
	if st.State != coordinator.JobFinished {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	workers := map[string]bool{}
	for _, v := range st.Vertices {
		for _, ts := range v.Tasks {
			workers[ts.Worker] = true
		}
	}
	if !workers["w1"] || !workers["w2"] || len(workers) != 2 {
		t.Errorf("subtasks ran on %v, want w1 and w2", workers)
	}
	if rows := e.readJSONL("out/evens/"); len(rows) != 500 {
		t.Errorf("got %d rows, want 500", len(rows))
	}
}

// forever generates until it is stopped.
const forever = `job: forever
sources:
  - {name: ticks, type: datagen, rate: 200, schema: {id: int64}}
sinks:
  - {name: out, input: ticks, type: files, path: out/forever/, format: jsonl}
`

func TestCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("w1", 1, workerOpts{})
	id := e.submit(forever)
	e.waitFor(id, "ticks flowing", func(st coordinator.JobStatus) bool { return st.Totals.RecordsIn > 0 })
	if err := e.c.Cancel(e.ctx, id); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	// A second cancel while it stops is not an error.
	if err := e.c.Cancel(e.ctx, id); err != nil && !errors.Is(err, coordinator.ErrEnded) {
		t.Errorf("second Cancel = %v", err)
	}
	st := e.wait(id, 10*time.Second)
	if st.State != coordinator.JobCanceled || st.Error != "" {
		t.Fatalf("job ended %s (%q), want CANCELED", st.State, st.Error)
	}
	for _, v := range st.Vertices {
		for _, ts := range v.Tasks {
			if ts.State != coordinator.JobCanceled {
				t.Errorf("%s[%d] ended %s", v.Name, ts.Subtask, ts.State)
			}
		}
	}
	if s := e.storedStatus(id); s.State != coordinator.JobCanceled {
		t.Errorf("stored state = %s", s.State)
	}
	if err := e.c.Cancel(e.ctx, id); !errors.Is(err, coordinator.ErrEnded) {
		t.Errorf("Cancel of a cancelled job = %v, want ErrEnded", err)
	}
	if err := e.c.Stop(e.ctx, id); !errors.Is(err, coordinator.ErrEnded) {
		t.Errorf("Stop of a cancelled job = %v, want ErrEnded", err)
	}
	if err := e.c.Cancel(e.ctx, "no-such-job"); !errors.Is(err, coordinator.ErrNotFound) {
		t.Errorf("Cancel of an unknown job = %v, want ErrNotFound", err)
	}
	if err := e.c.Stop(e.ctx, "no-such-job"); !errors.Is(err, coordinator.ErrNotFound) {
		t.Errorf("Stop of an unknown job = %v, want ErrNotFound", err)
	}
	if _, err := e.c.Wait(e.ctx, "no-such-job"); !errors.Is(err, coordinator.ErrNotFound) {
		t.Errorf("Wait for an unknown job = %v, want ErrNotFound", err)
	}
	// A job cancelled before it was placed ends at once.
	queued := e.submit(strings.Replace(forever, "{name: ticks,", "{name: ticks, parallelism: 2,", 1))
	if err := e.c.Cancel(e.ctx, queued); err != nil {
		t.Fatal(err)
	}
	if st := e.wait(queued, 5*time.Second); st.State != coordinator.JobCanceled {
		t.Errorf("unplaced job ended %s", st.State)
	}
}

// windows counts rides per zone in 1s tumbling windows (event time runs
// four times faster than the wall clock) and also writes the raw rides.
const windows = `job: windows
sources:
  - name: rides
    type: datagen
    rate: 400
    schema: {id: int64, zone: string, ts: timestamp_ms}
    eventTime: {column: ts}
    datagen: {eventsPerSecond: 100, fields: {zone: {values: [a, b, c]}}}
operators:
  - {name: counts, input: rides, keyBy: [zone], window: {type: tumbling, size: 1s}, aggregate: {n: count()}}
sinks:
  - {name: out, input: counts, type: files, path: out/windows/, format: jsonl}
  - {name: raw, input: rides, type: files, path: out/raw/, format: jsonl}
`

// Stop drains: the source ends early, every window fires, the sinks flush,
// and the window output is what the raw rides it read add up to.
func TestStopDrains(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("w1", 1, workerOpts{})
	id := e.submit(windows)
	e.waitFor(id, "rides flowing", func(st coordinator.JobStatus) bool { return st.Totals.RecordsIn >= 300 })
	if err := e.c.Stop(e.ctx, id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	st := e.wait(id, 20*time.Second)
	if st.State != coordinator.JobFinished {
		t.Fatalf("drained job ended %s: %s", st.State, st.Error)
	}
	raw := e.readJSONL("out/raw/")
	if len(raw) < 300 {
		t.Fatalf("raw sink wrote %d rows, want at least the 300 seen before Stop", len(raw))
	}
	if int64(len(raw)) != st.Totals.RecordsIn {
		t.Errorf("raw rows %d, source read %d", len(raw), st.Totals.RecordsIn)
	}
	want := map[string]int64{}
	seen := map[int64]bool{}
	for _, r := range raw {
		id := int64Of(t, r["id"])
		if seen[id] {
			t.Fatalf("raw id %d written twice", id)
		}
		seen[id] = true
		ts := msOf(t, r["ts"])
		want[fmt.Sprintf("%s@%d", r["zone"], ts-ts%1000)]++
	}
	got := map[string]int64{}
	for _, r := range e.readJSONL("out/windows/") {
		k := fmt.Sprintf("%s@%d", r["zone"], msOf(t, r["window_start"]))
		if _, dup := got[k]; dup {
			t.Errorf("window %s fired twice", k)
		}
		got[k] = int64Of(t, r["n"])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("window counts differ from a recount of the raw rides:\ngot  %v\nwant %v", got, want)
	}
}

// A Go function that returns an error fails its task, and the job fails
// with a message naming the vertex, the subtask and the worker.
func TestTaskFailureFailsJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("w1", 2, workerOpts{})
	id := e.submit(`job: refuse
parallelism: 2
sources:
  - {name: nums, type: datagen, count: 100000, rate: 2000, schema: {id: int64}}
operators:
  - {name: check, input: nums, keyBy: [id], function: coord-test-refuse}
sinks:
  - {name: out, input: check, type: files, path: out/refuse/, format: jsonl}
`)
	st := e.wait(id, 20*time.Second)
	if st.State != coordinator.JobFailed {
		t.Fatalf("job ended %s, want FAILED", st.State)
	}
	if !regexp.MustCompile(`^check\[[01]\] on worker w1: .*refusing row 77`).MatchString(st.Error) {
		t.Errorf("error %q does not name the vertex, subtask, worker and cause", st.Error)
	}
	if s := e.storedStatus(id); s.State != coordinator.JobFailed || s.Error != st.Error {
		t.Errorf("stored status: %s %q", s.State, s.Error)
	}
	// The other tasks are stopped: every task reaches a final state.
	e.waitFor(id, "every task stopped", func(st coordinator.JobStatus) bool {
		for _, v := range st.Vertices {
			for _, ts := range v.Tasks {
				if ts.State == coordinator.JobRunning || ts.State == coordinator.JobCreated {
					return false
				}
			}
		}
		return true
	})
}

// A worker that vanishes (no heartbeat, no events, no goodbye) while its
// tasks run fails the job once its heartbeat lapses.
func TestWorkerCrashFailsJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cp := &cutPlane{Plane: e.plane}
	e.startWorker("w1", 1, workerOpts{ttl: time.Second, plane: cp})
	id := e.submit(forever)
	e.waitRunning(id)
	cp.cut.Store(true)
	st := e.wait(id, 10*time.Second)
	if st.State != coordinator.JobFailed {
		t.Fatalf("job ended %s, want FAILED", st.State)
	}
	if !strings.Contains(st.Error, "worker w1") || !strings.Contains(st.Error, "ticks[0]") || !strings.Contains(st.Error, "lost") {
		t.Errorf("error %q does not say that worker w1 running ticks[0] was lost", st.Error)
	}
}

// A worker that shuts down while its tasks run (its tasks are cancelled
// and it deregisters) must fail the job too, not leave it RUNNING with no
// task left.
func TestWorkerShutdownFailsJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stop := e.startWorker("w1", 1, workerOpts{})
	id := e.submit(forever)
	e.waitRunning(id)
	stop()
	st := e.wait(id, 10*time.Second)
	if st.State != coordinator.JobFailed {
		t.Fatalf("job ended %s, want FAILED", st.State)
	}
	if !strings.Contains(st.Error, "w1") || !strings.Contains(st.Error, "ticks[0]") {
		t.Errorf("error %q does not name the worker and the task", st.Error)
	}
}
