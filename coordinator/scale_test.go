package coordinator_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// TestRescaleInPlace rescales a running exactly-once job three times
// (windows 2 -> 4, the sequence checker 2 -> 3, then both to 1), with a
// worker stopped between two of them: each rescale is a new attempt
// restored from the latest checkpoint, no restart is counted for it, the
// stored spec follows, and the committed output equals a run without any.
func TestRescaleInPlace(t *testing.T) {
	e := newEnv(t)
	stop1 := e.startWorker("w1", 4, workerOpts{})
	e.startWorker("w2", 4, workerOpts{})
	e.startWorker("w3", 4, workerOpts{})
	wantW, wantS := e.reference()

	id := e.submitSpec(eoSpec("out", 1500), coordinator.SubmitOptions{})
	// checkpointed waits for a checkpoint newer than any so far, taken
	// while the job runs: each rescale then restores a newer one.
	var latest int64
	checkpointed := func() {
		t.Helper()
		st := e.waitFor(id, "a new checkpoint of the running attempt", func(st coordinator.JobStatus) bool {
			return st.State == coordinator.JobRunning && st.Checkpoints != nil && st.Checkpoints.Latest > latest
		})
		latest = st.Checkpoints.Latest
	}
	parallelism := func(st coordinator.JobStatus, vertex string) int {
		for _, v := range st.Vertices {
			if v.Name == vertex {
				return v.Parallelism
			}
		}
		return 0
	}
	checkpointed()
	resp, err := e.c.Scale(e.ctx, id, map[string]int{"tumbling": 4})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Before["tumbling"] != 2 || resp.After["tumbling"] != 4 || resp.Attempt != 2 {
		t.Fatalf("scale tumbling=4: %+v", resp)
	}
	checkpointed()
	st, _ := e.c.Status(id)
	if parallelism(st, "tumbling") != 4 || st.Restarts != 0 {
		t.Fatalf("after the rescale: tumbling at %d, %d restarts; want 4 and none", parallelism(st, "tumbling"), st.Restarts)
	}
	stop1() // a failure between rescales: the job restarts at its new size
	e.waitFor(id, "a restart after the worker stopped", func(st coordinator.JobStatus) bool {
		return st.Restarts == 1 && st.State == coordinator.JobRunning && st.Checkpoints != nil
	})
	e.startWorker("w4", 4, workerOpts{})
	checkpointed()
	if _, err := e.c.Scale(e.ctx, id, map[string]int{"seqcheck": 3}); err != nil {
		t.Fatal(err)
	}
	checkpointed()
	if _, err := e.c.Scale(e.ctx, id, map[string]int{"tumbling": 1, "seqcheck": 1}); err != nil {
		t.Fatal(err)
	}
	st = e.wait(id, time.Minute)
	if st.State != coordinator.JobFinished {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	if parallelism(st, "tumbling") != 1 || parallelism(st, "seqcheck") != 1 || st.Restarts != 1 {
		t.Errorf("at the end: tumbling %d, seqcheck %d, %d restarts; want 1, 1 and the one failure", parallelism(st, "tumbling"), parallelism(st, "seqcheck"), st.Restarts)
	}
	rescales := 0
	var restored int64
	for _, r := range st.Recoveries {
		t.Logf("attempt %d from checkpoint %d in %.2fs: %s", r.Attempt, r.RestoredFrom, r.Seconds, r.Reason)
		if strings.HasPrefix(r.Reason, "rescale: ") {
			rescales++
			if r.RestoredFrom <= restored {
				t.Errorf("a rescale restored from checkpoint %d, not one newer than the last restore's %d: %+v", r.RestoredFrom, restored, r)
			}
		}
		restored = max(restored, r.RestoredFrom)
	}
	if rescales != 3 {
		t.Errorf("%d rescales among the recoveries, want 3", rescales)
	}
	e.checkExact("rescaled three times", e.lines("out/windows/"), e.lines("out/seq/"), wantW, wantS)
	if s := e.staged("out/"); len(s) > 0 {
		t.Errorf("staged objects left: %v", s)
	}
	// The stored spec has the last parallelism, for a coordinator that
	// takes over.
	raw, err := e.bucket.Get(e.ctx, layout.SpecKey(id))
	if err != nil || !strings.Contains(string(raw), `"parallelism": 1`) {
		t.Errorf("stored spec after the rescales: %v\n%s", err, raw)
	}
}

// TestRescaleRefused: names that are not in the job, sources, a
// parallelism out of range and a job that has ended are refused, and
// nothing changes.
func TestRescaleRefused(t *testing.T) {
	e := newEnv(t)
	e.startWorker("w1", 8, workerOpts{})
	id := e.submitSpec(eoSpec("out", 1500), coordinator.SubmitOptions{})
	e.waitRunning(id)
	for _, tc := range []struct {
		to   map[string]int
		want string
	}{
		{map[string]int{}, "name at least one"},
		{map[string]int{"nope": 2}, "nope: no vertex, operator or sink of that name (vertices: "},
		// A datagen source is made of splits (120 by default) and rescales,
		// up to one subtask a split.
		{map[string]int{"rides": 121}, "sources[rides].splits: 120 (the default) is below the parallelism 121"},
		{map[string]int{"tumbling": 0}, "tumbling=0: a parallelism is at least 1"},
		{map[string]int{"tumbling": 1000}, "tumbling=1000: the job has 128 key groups (maxParallelism), so at most 128 subtasks"},
	} {
		_, err := e.c.Scale(e.ctx, id, tc.to)
		if !errors.Is(err, coordinator.ErrScaleRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Scale(%v) = %v, want ErrScaleRefused saying %q", tc.to, err, tc.want)
		}
	}
	st, _ := e.c.Status(id)
	if st.Attempt != 1 || st.State != coordinator.JobRunning {
		t.Errorf("after refused rescales: attempt %d, %s", st.Attempt, st.State)
	}
	if err := e.c.Cancel(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	e.wait(id, 20*time.Second)
	if _, err := e.c.Scale(e.ctx, id, map[string]int{"tumbling": 2}); !errors.Is(err, coordinator.ErrEnded) {
		t.Errorf("rescale of an ended job: %v, want ErrEnded", err)
	}
}

// TestRescaleWhileRestarting: a job restarting for want of a worker
// refuses a rescale, a savepoint and a stop for its state now
// (ErrNotRunning; the API answers 409 with retryLater and Retry-After),
// and the same rescale goes through once a worker is back and it runs.
func TestRescaleWhileRestarting(t *testing.T) {
	e := newEnv(t)
	stop := e.startWorker("w1", 8, workerOpts{})
	id := e.submitSpec(eoSpec("out", 1500), coordinator.SubmitOptions{})
	e.waitRunning(id)
	stop()
	e.waitFor(id, "job "+id+" RESTARTING", func(st coordinator.JobStatus) bool { return st.State == coordinator.JobRestarting })

	_, err := e.c.Scale(e.ctx, id, map[string]int{"tumbling": 2})
	if !errors.Is(err, coordinator.ErrNotRunning) || !errors.Is(err, coordinator.ErrScaleRefused) || !strings.Contains(err.Error(), "try again when it runs") {
		t.Errorf("rescale of a restarting job: %v, want ErrNotRunning and ErrScaleRefused", err)
	}
	if _, err := e.c.Savepoint(e.ctx, id); !errors.Is(err, coordinator.ErrNotRunning) {
		t.Errorf("savepoint of a restarting job: %v, want ErrNotRunning", err)
	}
	if err := e.c.Stop(e.ctx, id); !errors.Is(err, coordinator.ErrNotRunning) {
		t.Errorf("stop of a restarting job: %v, want ErrNotRunning", err)
	}
	srv := httptest.NewServer(e.c.Handler(prometheus.NewRegistry()))
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL+"/api/v1/jobs/"+id+"/scale", "application/json", strings.NewReader(`{"tumbling": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	var ae coordinator.APIError
	derr := json.NewDecoder(resp.Body).Decode(&ae)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || derr != nil || !ae.RetryLater || resp.Header.Get("Retry-After") == "" {
		t.Errorf("POST scale of a restarting job: %s, Retry-After %q, %+v (%v); want 409 with retryLater", resp.Status, resp.Header.Get("Retry-After"), ae, derr)
	}
	// A refusal that waiting does not change says so too.
	_, err = e.c.Scale(e.ctx, id, map[string]int{"nope": 2})
	if errors.Is(err, coordinator.ErrNotRunning) {
		t.Errorf("a rescale of an unknown name: %v, not ErrNotRunning", err)
	}

	e.startWorker("w2", 8, workerOpts{})
	e.waitRunning(id)
	sr, err := e.c.Scale(e.ctx, id, map[string]int{"tumbling": 2})
	if err != nil || sr.After["tumbling"] != 2 {
		t.Fatalf("rescale once the job runs again: %+v, %v", sr, err)
	}
	if err := e.c.Cancel(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	e.wait(id, 20*time.Second)
}

// mixedSpec is eoSpec with a second, bounded branch that ends long
// before the first: a files source of three objects (a.jsonl and
// c.jsonl, 300 rows each, on subtask 0; b.jsonl, 3,000 rows, on subtask
// 1) into a keyed tumbling window.
func mixedSpec(path string, archiveRate, ridesRate int) string {
	src := eoSpec(path, ridesRate)
	src = strings.Replace(src, "job: eo\n", "job: mixed\n", 1)
	src = strings.Replace(src, "sources:\n", fmt.Sprintf(`sources:
  - name: archive
    type: files
    path: in/archive/
    format: jsonl
    rate: %d
    schema: {id: int64, zone: string, ts: timestamp_ms}
    eventTime: {column: ts, maxOutOfOrderness: 1s}
`, archiveRate), 1)
	src = strings.Replace(src, "operators:\n", `operators:
  - name: zones
    input: archive
    keyBy: [zone]
    window: {type: tumbling, size: 10s}
    aggregate: {n: count(), lo: min(id), hi: max(id)}
`, 1)
	return strings.Replace(src, "sinks:\n", fmt.Sprintf("sinks:\n  - {name: zones-out, input: zones, type: files, path: %s/zones, format: jsonl}\n", path), 1)
}

// TestRescaleAfterSubtasksFinished: once a subtask has finished its
// input (here the files source's subtask 0, and soon its whole branch),
// checkpoints go on without it, and the job rescales in place from them:
// the files source 2 -> 4 while its subtask 1 is halfway through its
// object, then everything to 1. The finished subtask's position (its
// objects read to the end) travels in the checkpoints, so no object is
// read twice at the new parallelism; the output equals a run without
// rescales.
func TestRescaleAfterSubtasksFinished(t *testing.T) {
	e := newEnv(t)
	e.startWorker("w1", 8, workerOpts{})
	e.startWorker("w2", 8, workerOpts{})
	id := 0
	for _, o := range []struct {
		key  string
		rows int
	}{{"in/archive/a.jsonl", 300}, {"in/archive/b.jsonl", 3000}, {"in/archive/c.jsonl", 300}} {
		var b strings.Builder
		for range o.rows {
			fmt.Fprintf(&b, `{"id": %d, "zone": "z%d", "ts": %d}`+"\n", id, id%7, 1_700_000_000_000+int64(id)*37)
			id++
		}
		if err := e.bucket.Put(e.ctx, o.key, []byte(b.String())); err != nil {
			t.Fatal(err)
		}
	}
	ref := e.submitSpec(mixedSpec("ref", 0, 0), coordinator.SubmitOptions{})
	if st := e.wait(ref, 30*time.Second); st.State != coordinator.JobFinished {
		t.Fatalf("reference run: %s %s", st.State, st.Error)
	}
	wantZ, wantW, wantS := e.lines("ref/zones/"), e.lines("ref/windows/"), e.lines("ref/seq/")
	if len(wantZ) == 0 || len(wantS) != 12000 {
		t.Fatalf("reference run: %d zone windows, %d sequence rows", len(wantZ), len(wantS))
	}

	// 500 rows/s per files subtask: subtask 0 ends after ~1.2 s, subtask
	// 1 after ~6 s; the datagen branch runs ~12 s.
	job := e.submitSpec(mixedSpec("out", 1000, 1000), coordinator.SubmitOptions{})
	t0 := time.Now()
	taskState := func(st coordinator.JobStatus, vertex string, subtask int) string {
		for _, v := range st.Vertices {
			if v.Name == vertex && subtask < len(v.Tasks) {
				return v.Tasks[subtask].State
			}
		}
		return ""
	}
	st := e.waitFor(job, "archive[0] finished while archive[1] reads", func(st coordinator.JobStatus) bool {
		return st.State == coordinator.JobRunning && taskState(st, "archive", 0) == coordinator.JobFinished
	})
	if s := taskState(st, "archive", 1); s != coordinator.JobRunning {
		t.Fatalf("archive[1] is %s when archive[0] finished; the test needs it still reading", s)
	}
	after := int64(0)
	if st.Checkpoints != nil {
		after = st.Checkpoints.Latest
	}
	// Two checkpoints complete without the finished subtask (before,
	// each waited for its acknowledgement until it timed out).
	e.waitFor(job, "two checkpoints after archive[0] finished", func(st coordinator.JobStatus) bool {
		return st.Checkpoints != nil && st.Checkpoints.Latest >= after+2
	})
	t.Logf("%v: archive[0] finished, checkpoint %d completed after it", time.Since(t0).Round(time.Millisecond), after+2)
	resp, err := e.c.Scale(e.ctx, job, map[string]int{"archive": 4, "zones": 4, "seqcheck": 3})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Before["archive"] != 2 || resp.After["archive"] != 4 {
		t.Fatalf("scale archive=4: %+v", resp)
	}
	st = e.waitFor(job, "a checkpoint of the rescaled attempt", func(st coordinator.JobStatus) bool {
		n := len(st.Recoveries)
		return st.State == coordinator.JobRunning && st.Attempt == resp.Attempt && n > 0 &&
			st.Checkpoints != nil && st.Checkpoints.Latest > st.Recoveries[n-1].RestoredFrom
	})
	t.Logf("%v: rescaled to archive=4, checkpoint %d of attempt %d", time.Since(t0).Round(time.Millisecond), st.Checkpoints.Latest, st.Attempt)
	if _, err := e.c.Scale(e.ctx, job, map[string]int{"archive": 1, "zones": 1, "rides": 1, "tumbling": 1, "seqcheck": 1}); err != nil {
		t.Fatal(err)
	}
	st = e.wait(job, time.Minute)
	if st.State != coordinator.JobFinished {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	rescales := 0
	for _, r := range st.Recoveries {
		t.Logf("attempt %d from checkpoint %d in %.2fs: %s", r.Attempt, r.RestoredFrom, r.Seconds, r.Reason)
		if strings.HasPrefix(r.Reason, "rescale: ") {
			rescales++
		}
	}
	if rescales != 2 || st.Restarts != 0 {
		t.Errorf("%d rescales and %d restarts, want 2 and none", rescales, st.Restarts)
	}
	if got := e.lines("out/zones/"); !slices.Equal(got, wantZ) {
		t.Errorf("files branch: %d window rows differ from the %d of the run without rescales", len(got), len(wantZ))
	}
	e.checkExact("rescaled after a subtask finished", e.lines("out/windows/"), e.lines("out/seq/"), wantW, wantS)
	if s := e.staged("out/"); len(s) > 0 {
		t.Errorf("staged objects left: %v", s)
	}
}

// TestPebbleStateExactlyOnce runs eoSpec with the sequence checker's
// state in pebble stores (state: {backend: pebble}, 4 MiB each): a worker
// stops mid-run (the job restores on the other), the checker rescales
// 2 -> 3 and back to 1, and the output equals the in-memory reference.
// Every store's directory is gone once the job ended, and the process's
// directory once its workers stopped.
func TestPebbleStateExactlyOnce(t *testing.T) {
	e := newEnv(t)
	base := t.TempDir()
	stop1 := e.startWorker("w1", 8, workerOpts{stateDir: base})
	stop2 := e.startWorker("w2", 8, workerOpts{stateDir: base})
	dir := filepath.Join(base, "weir-state-"+strconv.Itoa(os.Getpid())) // this process's stores
	wantW, wantS := e.reference()
	id := e.submitSpec(eoSpec("out", 1500)+"state: {backend: pebble, memory: 4MiB}\n", coordinator.SubmitOptions{})
	e.waitFor(id, "a checkpoint", func(st coordinator.JobStatus) bool {
		return st.State == coordinator.JobRunning && st.Checkpoints != nil && st.Checkpoints.Latest > 0
	})
	if ents, _ := os.ReadDir(dir); len(ents) == 0 {
		t.Fatalf("no pebble store under the workers' state directory %s", dir)
	}
	stop1()
	e.waitFor(id, "a restart after the worker stopped", func(st coordinator.JobStatus) bool {
		n := len(st.Recoveries)
		return st.Restarts == 1 && st.State == coordinator.JobRunning && n > 0 && st.Checkpoints != nil && st.Checkpoints.Latest > st.Recoveries[n-1].RestoredFrom
	})
	stop3 := e.startWorker("w3", 8, workerOpts{stateDir: base})
	if _, err := e.c.Scale(e.ctx, id, map[string]int{"seqcheck": 3}); err != nil {
		t.Fatal(err)
	}
	var first int64
	e.waitFor(id, "a checkpoint of the rescaled job", func(st coordinator.JobStatus) bool {
		n := len(st.Recoveries)
		if st.State == coordinator.JobRunning && n > 1 && st.Checkpoints != nil && st.Checkpoints.Latest > st.Recoveries[n-1].RestoredFrom {
			first = st.Checkpoints.Latest
			return true
		}
		return false
	})
	// The checker's tables are checkpointed as its stores' files (zstd
	// in the bucket), and a checkpoint lists the sstables an earlier one
	// uploaded under the keys they were uploaded to (pebble's compactions replace files now
	// and then, so look at a few checkpoints).
	manifestOf := func(checkpoint int64) *manifest.Manifest {
		raw, err := e.bucket.Get(e.ctx, layout.ManifestKey(id, checkpoint))
		if err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	reused := func(checkpoint int64) bool {
		m := manifestOf(checkpoint)
		found := false
		for _, v := range m.Vertices {
			for _, st := range v.Subtasks {
				ssts := 0
				for _, f := range st.State {
					if f.Kind != manifest.KindStore || f.Operator != "seqcheck" || !strings.HasSuffix(f.Name, ".sst") {
						continue
					}
					ssts++
					if f.Compression != manifest.CompressZstd {
						t.Errorf("checkpoint %d: %s is not compressed (the job's checkpoints are zstd)", checkpoint, f.Key)
					}
					if n, ok := layout.StateFileCheckpoint(f.Key); ok && n < checkpoint {
						found = true
					}
				}
				if v.Name == "seqcheck" && ssts == 0 {
					t.Fatalf("checkpoint %d: seqcheck[%d] lists no sstable of its store: %+v", checkpoint, st.Index, st.State)
				}
			}
		}
		return found
	}
	// At the rescale, a new subtask opened the store of the old subtask
	// it shares the most key groups with: its first checkpoint lists
	// the sstables it kept under the keys the old one uploaded them to.
	kept := 0
	for _, v := range manifestOf(first).Vertices {
		for _, st := range v.Subtasks {
			own := layout.OperatorStatePrefix(id, "seqcheck") + fmt.Sprintf("%d-%d/", st.KeyGroupStart, st.KeyGroupEnd)
			for _, f := range st.State {
				if f.Kind == manifest.KindStore && f.Operator == "seqcheck" && strings.HasSuffix(f.Name, ".sst") && !strings.HasPrefix(f.Key, own) {
					kept++
				}
			}
		}
	}
	if kept == 0 {
		t.Errorf("checkpoint %d, the first after the rescale, lists no sstable a subtask over other key groups uploaded", first)
	}
	t.Logf("checkpoint %d, the first after the rescale: %d sstables kept from the stores of parallelism 2", first, kept)
	for n := first; !reused(n); {
		st := e.waitFor(id, "a later checkpoint", func(st coordinator.JobStatus) bool {
			return st.Checkpoints != nil && st.Checkpoints.Latest > n || st.State != coordinator.JobRunning
		})
		if st.State != coordinator.JobRunning || st.Checkpoints.Latest > first+5 {
			t.Fatalf("no checkpoint from %d to %d lists a store file an earlier one uploaded", first, n)
		}
		n = st.Checkpoints.Latest
	}
	if _, err := e.c.Scale(e.ctx, id, map[string]int{"seqcheck": 1}); err != nil {
		t.Fatal(err)
	}
	st := e.wait(id, time.Minute)
	if st.State != coordinator.JobFinished {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	for _, r := range st.Recoveries {
		t.Logf("attempt %d from checkpoint %d in %.2fs: %s", r.Attempt, r.RestoredFrom, r.Seconds, r.Reason)
	}
	e.checkExact("pebble state, a worker stopped and two rescales", e.lines("out/windows/"), e.lines("out/seq/"), wantW, wantS)
	poll.UntilNil(t, 10*time.Second, "every pebble store deleted", func() error {
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) > 0 {
			return fmt.Errorf("%d entries left in %s: %v", len(ents), dir, err)
		}
		return nil
	})
	stop2()
	stop3()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the process's state directory %s is still there after its workers stopped: %v", dir, err)
	}
}
