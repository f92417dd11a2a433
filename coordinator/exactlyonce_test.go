package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"

	_ "github.com/weirstream/weir/examples/seqcheck" // sequence-check
)

// eoSpec is a checkpointing job whose output is deterministic (counts and
// integer extremes only), so that runs compare line for line: a keyed
// tumbling window and the sequence checker, from a throttled datagen.
func eoSpec(path string, rate int) string {
	return fmt.Sprintf(`
job: eo
parallelism: 2
checkpoint: {interval: 150ms, timeout: 10s, retain: 2}
restart: {attempts: 20, backoff: 50ms, maxBackoff: 200ms}
sources:
  - name: rides
    type: datagen
    count: 12000
    rate: %d
    schema: {ride_id: int64, zone: string, ts: timestamp_ms}
    eventTime: {column: ts, maxOutOfOrderness: 2s}
    datagen:
      seed: 3
      eventsPerSecond: 50
      outOfOrderness: 2s
      fields:
        zone: {values: [a, b, c, d, e, f, g]}
operators:
  - name: tumbling
    input: rides
    keyBy: [zone]
    window: {type: tumbling, size: 10s}
    aggregate: {n: count(), lo: min(ride_id), hi: max(ride_id)}
  - name: keyed
    input: rides
    select: {k: "ride_id %% 20", seq: ride_id}
  - name: seqcheck
    input: keyed
    keyBy: [k]
    function: sequence-check
    config: {stride: 20}
sinks:
  - {name: windows-out, input: tumbling, type: files, path: %s/windows, format: jsonl}
  - {name: seq-out, input: seqcheck, type: files, path: %s/seq, format: jsonl}
`, rate, path, path)
}

// lines returns every output line under prefix as a sorted list of
// canonical JSON strings.
func (e *env) lines(prefix string) []string {
	e.t.Helper()
	var out []string
	for _, r := range e.readJSONL(prefix) {
		b, _ := json.Marshal(r)
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

// staged lists what is left under _staging/ prefixes below prefix.
func (e *env) staged(prefix string) []string {
	e.t.Helper()
	objs, err := e.bucket.List(e.ctx, prefix)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		if strings.Contains(o.Key, "/_staging/") {
			out = append(out, o.Key)
		}
	}
	return out
}

// reference runs eoSpec without failures once per test and returns its
// output lines (windows then sequence).
func (e *env) reference() (windows, seq []string) {
	e.t.Helper()
	id := e.submitSpec(eoSpec("ref", 0), coordinator.SubmitOptions{})
	if st := e.wait(id, 30*time.Second); st.State != coordinator.JobFinished {
		e.t.Fatalf("reference run: %s %s", st.State, st.Error)
	}
	windows, seq = e.lines("ref/windows/"), e.lines("ref/seq/")
	if len(seq) != 12000 {
		e.t.Fatalf("reference run: %d sequence rows, want 12000", len(seq))
	}
	return windows, seq
}

func (e *env) submitSpec(src string, opts coordinator.SubmitOptions) string {
	e.t.Helper()
	js, err := spec.Parse([]byte(src), "job.yaml")
	if err != nil {
		e.t.Fatalf("Parse: %v", err)
	}
	id, err := e.c.SubmitWith(e.ctx, js, opts)
	if err != nil {
		e.t.Fatalf("Submit: %v", err)
	}
	return id
}

// checkExact compares the output under prefix with the reference.
func (e *env) checkExact(what string, gotW, gotS, wantW, wantS []string) {
	e.t.Helper()
	for _, l := range gotS {
		if !strings.Contains(l, `"ok":true`) {
			e.t.Errorf("%s: sequence violation %s", what, l)
			break
		}
	}
	if !slices.Equal(gotW, wantW) {
		e.t.Errorf("%s: %d window rows differ from the %d of the run without failures", what, len(gotW), len(wantW))
	}
	if !slices.Equal(gotS, wantS) {
		e.t.Errorf("%s: %d sequence rows differ from the %d of the run without failures", what, len(gotS), len(wantS))
	}
}

// TestRestartExactlyOnce stops a worker while the job runs: the job
// restarts from its latest checkpoint on the other worker and its
// committed output equals a run without failures.
func TestRestartExactlyOnce(t *testing.T) {
	e := newEnv(t)
	stop1 := e.startWorker("w1", 4, workerOpts{})
	e.startWorker("w2", 4, workerOpts{})
	wantW, wantS := e.reference()

	id := e.submitSpec(eoSpec("out", 4000), coordinator.SubmitOptions{})
	e.waitFor(id, "two checkpoints", func(st coordinator.JobStatus) bool {
		return st.Checkpoints != nil && st.Checkpoints.Completed >= 2
	})
	stop1()
	e.startWorker("w3", 4, workerOpts{})
	st := e.wait(id, 40*time.Second)
	if st.State != coordinator.JobFinished {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	if len(st.Recoveries) == 0 {
		t.Fatal("no recovery recorded")
	}
	for _, r := range st.Recoveries {
		t.Logf("recovery to attempt %d from checkpoint %d in %.2fs: %s", r.Attempt, r.RestoredFrom, r.Seconds, r.Reason)
	}
	e.checkExact("after a restart", e.lines("out/windows/"), e.lines("out/seq/"), wantW, wantS)
	if s := e.staged("out/"); len(s) > 0 {
		t.Errorf("staged objects left: %v", s)
	}
	// The checkpoints retained before the restart are dropped like any
	// other once newer ones complete: besides the final manifest, no
	// more than retain (2) are left.
	poll.UntilNil(t, 10*time.Second, "at most 2 manifests and the final left", func() error {
		objs, err := e.bucket.List(e.ctx, layout.CheckpointsPrefix(id))
		if err != nil {
			return err
		}
		var ids []int64
		for _, o := range objs {
			if _, n, ok := layout.ParseManifestKey(o.Key); ok {
				ids = append(ids, n)
			}
		}
		if len(ids) > 3 {
			return fmt.Errorf("manifests of checkpoints %v left", ids)
		}
		return nil
	})
}

// TestCommitCrashPoints kills the coordinator at each point of the commit
// protocol and starts a new one over the same bucket: it resumes the job
// from its latest checkpoint, commits that checkpoint's transactions
// again (a no-op where done), the janitor aborts every other staged
// transaction, and the visible output is exact.
func TestCommitCrashPoints(t *testing.T) {
	for _, point := range []string{"precommitted", "manifest-written", "txn-committed"} {
		t.Run(point, func(t *testing.T) {
			e := newEnv(t)
			e.startWorker("w1", 4, workerOpts{})
			wantW, wantS := e.reference()

			var armed, fired atomic.Bool
			cfg := coordinator.Config{Plane: e.plane, Bucket: e.bucket, Transport: e.xch, CancelTimeout: 5 * time.Second,
				Crash: func(p string) bool { return p == point && armed.Load() && fired.CompareAndSwap(false, true) }}
			c1 := coordinator.New(cfg)
			ctx1, stop1 := context.WithCancel(context.Background())
			done1 := make(chan error, 1)
			go func() { done1 <- c1.Run(ctx1) }()
			defer stop1()
			// The env's coordinator stops reading events: c1 takes over.
			e.stopCoordinator()
			e.c = c1
			id := e.submitSpec(eoSpec("out", 3000), coordinator.SubmitOptions{})
			e.waitFor(id, "a checkpoint", func(st coordinator.JobStatus) bool {
				return st.Checkpoints != nil && st.Checkpoints.Completed >= 1
			})
			armed.Store(true)
			select {
			case err := <-done1:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("the coordinator did not crash at %s", point)
			}
			c2 := e.startCoordinator(coordinator.Config{Plane: e.plane, Bucket: e.bucket, Transport: e.xch, CancelTimeout: 5 * time.Second})
			st := e.wait(id, 40*time.Second)
			if st.State != coordinator.JobFinished {
				t.Fatalf("job ended %s: %s", st.State, st.Error)
			}
			_ = c2
			e.checkExact("crash at "+point, e.lines("out/windows/"), e.lines("out/seq/"), wantW, wantS)
			if s := e.staged("out/"); len(s) > 0 {
				t.Errorf("staged objects left after the janitor: %v", s)
			}
		})
	}
}

// TestSavepointRescale stops a job with a savepoint at parallelism 2 and
// resumes it at 4 and at 1, its datagen source too (it is made of
// splits): the output before the savepoint plus the output after it
// equals a run without interruption. (The sequence checker needs each of
// its keys, ride_id % 20, made by one source subtask: the parallelism
// divides 20 and the source's 120 splits.)
func TestSavepointRescale(t *testing.T) {
	e := newEnv(t)
	e.startWorker("w1", 4, workerOpts{})
	wantW, wantS := e.reference()

	id := e.submitSpec(eoSpec("first", 3000), coordinator.SubmitOptions{})
	e.waitFor(id, "a checkpoint", func(st coordinator.JobStatus) bool {
		return st.Checkpoints != nil && st.Checkpoints.Completed >= 1
	})
	key, err := e.c.StopWithSavepoint(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("savepoint %s", key)
	if st := e.wait(id, 20*time.Second); st.State != coordinator.JobFinished || st.Message != "stopped with savepoint "+key {
		t.Fatalf("stopped job is %s (%q), want FINISHED, stopped with savepoint %s", st.State, st.Message, key)
	}
	firstW, firstS := e.lines("first/windows/"), e.lines("first/seq/")
	// Savepoints outlive their job.
	if err := e.c.Delete(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	if left, _ := e.bucket.List(e.ctx, layout.CheckpointsPrefix(id)); len(left) > 0 {
		t.Errorf("deleting the job left %d checkpoint objects", len(left))
	}
	if len(firstS) == 0 || len(firstS) >= 12000 {
		t.Fatalf("%d rows before the savepoint: the stop came too early or too late", len(firstS))
	}
	for _, p := range []int{4, 1} {
		path := fmt.Sprintf("p%d", p)
		rid := e.submitSpec(eoSpec(path, 0), coordinator.SubmitOptions{FromSavepoint: key, Parallelism: p})
		st := e.wait(rid, 30*time.Second)
		if st.State != coordinator.JobFinished {
			t.Fatalf("restore at parallelism %d: %s %s", p, st.State, st.Error)
		}
		if st.Totals.RestoreTotal == 0 || st.Totals.RestoreSeconds <= 0 {
			t.Errorf("restore at parallelism %d: %d bytes of state restored in %gs, want its time reported", p, st.Totals.RestoreTotal, st.Totals.RestoreSeconds)
		}
		gotW := append(slices.Clone(firstW), e.lines(path+"/windows/")...)
		gotS := append(slices.Clone(firstS), e.lines(path+"/seq/")...)
		slices.Sort(gotW)
		slices.Sort(gotS)
		e.checkExact(fmt.Sprintf("savepoint at 2, resumed at %d", p), gotW, gotS, wantW, wantS)
	}
	if s := e.staged("first/"); len(s) > 0 {
		t.Errorf("staged objects left: %v", s)
	}
}

// TestCorruptCheckpointFallsBack damages the newest checkpoint (its
// manifest, or one of its state files) while the coordinator is down:
// restore refuses it with an error naming what is wrong and falls back
// to the previous checkpoint, and the output stays exact.
func TestCorruptCheckpointFallsBack(t *testing.T) {
	for _, what := range []string{"manifest", "state-file"} {
		t.Run(what, func(t *testing.T) {
			e := newEnv(t)
			e.startWorker("w1", 4, workerOpts{})
			wantW, wantS := e.reference()

			var armed, fired atomic.Bool
			c1 := coordinator.New(coordinator.Config{Plane: e.plane, Bucket: e.bucket, Transport: e.xch, CancelTimeout: 5 * time.Second,
				Crash: func(p string) bool {
					return p == "manifest-written" && armed.Load() && fired.CompareAndSwap(false, true)
				}})
			ctx1, stop1 := context.WithCancel(context.Background())
			defer stop1()
			done1 := make(chan error, 1)
			go func() { done1 <- c1.Run(ctx1) }()
			e.stopCoordinator()
			e.c = c1
			id := e.submitSpec(strings.Replace(eoSpec("out", 3000), "retain: 2", "retain: 3", 1), coordinator.SubmitOptions{})
			e.waitFor(id, "three checkpoints", func(st coordinator.JobStatus) bool {
				return st.Checkpoints != nil && st.Checkpoints.Completed >= 3
			})
			armed.Store(true)
			select {
			case <-done1:
			case <-time.After(20 * time.Second):
				t.Fatal("the coordinator did not crash")
			}
			// The newest manifest is the one written at the crash.
			objs, err := e.bucket.List(e.ctx, layout.CheckpointsPrefix(id))
			if err != nil {
				t.Fatal(err)
			}
			var newest int64
			var key string
			for _, o := range objs {
				if _, n, ok := layout.ParseManifestKey(o.Key); ok && n > newest {
					newest, key = n, o.Key
				}
			}
			raw, err := e.bucket.Get(e.ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			switch what {
			case "manifest":
				if err := e.bucket.Put(e.ctx, key, raw[:len(raw)/2]); err != nil {
					t.Fatal(err)
				}
			case "state-file":
				m, err := manifest.Decode(raw)
				if err != nil {
					t.Fatal(err)
				}
				damaged := ""
				for _, f := range m.Files() {
					if strings.Contains(f, fmt.Sprintf("/%d-a", newest)) {
						damaged = f
						break
					}
				}
				if damaged == "" {
					t.Fatalf("checkpoint %d wrote no state file of its own", newest)
				}
				data, err := e.bucket.Get(e.ctx, damaged)
				if err != nil {
					t.Fatal(err)
				}
				data[len(data)/2] ^= 0xff
				if err := e.bucket.Put(e.ctx, damaged, data); err != nil {
					t.Fatal(err)
				}
				t.Logf("damaged %s", damaged)
			}
			e.startCoordinator(coordinator.Config{Plane: e.plane, Bucket: e.bucket, Transport: e.xch, CancelTimeout: 5 * time.Second})
			st := e.wait(id, 40*time.Second)
			if st.State != coordinator.JobFinished {
				t.Fatalf("job ended %s: %s", st.State, st.Error)
			}
			restored := int64(-1)
			for _, r := range st.Recoveries {
				t.Logf("recovery to attempt %d from checkpoint %d: %s", r.Attempt, r.RestoredFrom, r.Reason)
				if r.RestoredFrom > 0 {
					restored = r.RestoredFrom
				}
			}
			if restored != newest-1 {
				t.Errorf("the job last restored from checkpoint %d, want %d (the one before the damaged %d)", restored, newest-1, newest)
			}
			if what == "state-file" && !slices.ContainsFunc(st.Recoveries, func(r coordinator.Recovery) bool { return strings.Contains(r.Reason, "SHA-256") }) {
				t.Errorf("no recovery names the SHA-256 mismatch: %+v", st.Recoveries)
			}
			e.checkExact("after falling back", e.lines("out/windows/"), e.lines("out/seq/"), wantW, wantS)
			if s := e.staged("out/"); len(s) > 0 {
				t.Errorf("staged objects left: %v", s)
			}
		})
	}
}

// savepointAfterCheckpoint runs the job of spec src until it has
// completed a checkpoint, stops it with a savepoint, and returns the
// savepoint's key.
func (e *env) savepointAfterCheckpoint(src string) string {
	e.t.Helper()
	id := e.submitSpec(src, coordinator.SubmitOptions{})
	e.waitFor(id, "a checkpoint", func(st coordinator.JobStatus) bool {
		return st.Checkpoints != nil && st.Checkpoints.Completed >= 1
	})
	key, err := e.c.StopWithSavepoint(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if st := e.wait(id, 20*time.Second); st.State != coordinator.JobFinished {
		e.t.Fatalf("stopped job is %s (%q)", st.State, st.Message)
	}
	return key
}

// TestSavepointAcrossBackends stops a job with a savepoint and resumes it
// with its keyed state (the window's and the function's) on the other
// backend: a savepoint of state in pebble (its stores' files) restored on
// the heap, and one of state on the heap (rows) restored into pebble, at
// another parallelism each. The
// output before the savepoint plus the output after it equals a run
// without interruption.
func TestSavepointAcrossBackends(t *testing.T) {
	const pebble = "state: {backend: pebble, memory: 4MiB}\n"
	for _, c := range []struct {
		name     string
		from, to string
		p        int
	}{
		{"pebble-to-memory", pebble, "", 1},
		{"memory-to-pebble", "", pebble, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.startWorker("w1", 4, workerOpts{})
			wantW, wantS := e.reference()
			key := e.savepointAfterCheckpoint(eoSpec("first", 3000) + c.from)
			raw, err := e.bucket.Get(e.ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			m, err := manifest.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			stores := false
			for _, v := range m.Vertices {
				for _, s := range v.Subtasks {
					for _, f := range s.State {
						stores = stores || f.Kind == manifest.KindStore
					}
				}
			}
			if stores != (c.from == pebble) {
				t.Fatalf("the savepoint lists store files: %v", stores)
			}
			firstW, firstS := e.lines("first/windows/"), e.lines("first/seq/")
			if len(firstS) == 0 || len(firstS) >= 12000 {
				t.Fatalf("%d rows before the savepoint: the stop came too early or too late", len(firstS))
			}
			rid := e.submitSpec(eoSpec("second", 0)+c.to, coordinator.SubmitOptions{FromSavepoint: key, Parallelism: c.p})
			if st := e.wait(rid, 30*time.Second); st.State != coordinator.JobFinished {
				t.Fatalf("restore: %s %s", st.State, st.Error)
			}
			gotW := append(slices.Clone(firstW), e.lines("second/windows/")...)
			gotS := append(slices.Clone(firstS), e.lines("second/seq/")...)
			slices.Sort(gotW)
			slices.Sort(gotS)
			e.checkExact(c.name, gotW, gotS, wantW, wantS)
		})
	}
}

// xbSpec is eoSpec with a window whose keys each live in one window
// only (every ride its own key), writing to path/perride: a key's
// windows all fire and are dropped within seconds; and an interval join
// of each even ride with the next one, writing to path/near, whose rows
// are forgotten within seconds too.
func xbSpec(path string, rate int) string {
	s := eoSpec(path, rate)
	s = strings.Replace(s, "operators:\n", `operators:
  - {name: perride, input: rides, keyBy: [ride_id], window: {type: tumbling, size: 2s}, aggregate: {n: count()}}
  - {name: evens, input: rides, filter: "ride_id % 2 == 0"}
  - {name: odds, input: rides, filter: "ride_id % 2 == 1"}
  - {name: oddkeys, input: odds, select: {k: "ride_id - 1", ride_id: ride_id, ts: ts}}
  - name: near
    join:
      type: interval
      left: {input: evens, keyBy: [ride_id]}
      right: {input: oddkeys, keyBy: [k]}
      lower: -1s
      upper: 1s
      columns: {a: left.ride_id, b: right.ride_id}
`, 1)
	return strings.Replace(s, "sinks:\n", "sinks:\n  - {name: perride-out, input: perride, type: files, path: "+path+"/perride, format: jsonl}\n  - {name: near-out, input: near, type: files, path: "+path+"/near, format: jsonl}\n", 1)
}

// TestSavepointAcrossBackendsThenFailure resumes a job's savepoint on
// the other backend at the same parallelism, and stops its worker once
// the resumed job has checkpointed (another takes over). From pebble to
// the heap, the heap's chain of state files goes on from the stores'
// files (their rows are its first state): the restore then must not
// bring back windows from the stores that fired and were dropped after
// the savepoint, nor a join's rows forgotten since. From the heap to
// pebble, the stores take the heap's rows before their first capture.
// The output equals a run without faults.
func TestSavepointAcrossBackendsThenFailure(t *testing.T) {
	const pebble = "state: {backend: pebble, memory: 4MiB}\n"
	for _, c := range []struct{ name, from, to string }{
		{"pebble-to-memory", pebble, ""},
		{"memory-to-pebble", "", pebble},
	} {
		t.Run(c.name, func(t *testing.T) { savepointAcrossBackendsThenFailure(t, c.from, c.to) })
	}
}

func savepointAcrossBackendsThenFailure(t *testing.T, from, to string) {
	e := newEnv(t)
	stop1 := e.startWorker("w1", 8, workerOpts{}) // runs every task until it stops
	ref := e.submitSpec(xbSpec("ref", 0), coordinator.SubmitOptions{})
	if st := e.wait(ref, 30*time.Second); st.State != coordinator.JobFinished {
		t.Fatalf("reference run: %s %s", st.State, st.Error)
	}
	want, wantNear := e.lines("ref/perride/"), e.lines("ref/near/")

	key := e.savepointAfterCheckpoint(xbSpec("first", 3000) + from)
	first, firstNear := e.lines("first/perride/"), e.lines("first/near/")
	// 750 rows a second: the resumed job must outlast its first 8
	// checkpoints and a worker's start. At 1,500, beside the other
	// packages' tests, it once finished before the stop, with no
	// recovery to test.
	rid := e.submitSpec(xbSpec("second", 750)+to, coordinator.SubmitOptions{FromSavepoint: key, Parallelism: 2})
	e.waitFor(rid, "checkpoints after the resume", func(st coordinator.JobStatus) bool {
		return st.Checkpoints != nil && st.Checkpoints.Completed >= 8
	})
	e.startWorker("w2", 8, workerOpts{})
	stop1()
	st := e.wait(rid, 60*time.Second)
	if st.State != coordinator.JobFinished {
		t.Fatalf("resumed job: %s %s", st.State, st.Error)
	}
	if len(st.Recoveries) == 0 {
		t.Fatalf("the stopped worker caused no recovery")
	}
	got := append(slices.Clone(first), e.lines("second/perride/")...)
	slices.Sort(got)
	if len(first) == 0 || len(want) < 1000 {
		t.Fatalf("%d rows before the savepoint, %d in all: the test proves nothing", len(first), len(want))
	}
	if !slices.Equal(got, want) {
		seen := map[string]int{}
		dups := 0
		for _, l := range got {
			if seen[l]++; seen[l] == 2 {
				dups++
			}
		}
		t.Fatalf("%d rows, want %d (%d duplicated)", len(got), len(want), dups)
	}
	gotNear := append(slices.Clone(firstNear), e.lines("second/near/")...)
	slices.Sort(gotNear)
	if len(firstNear) == 0 || len(wantNear) < 1000 || !slices.Equal(gotNear, wantNear) {
		t.Fatalf("the join: %d rows (%d before the savepoint), want %d", len(gotNear), len(firstNear), len(wantNear))
	}
	t.Logf("%d rows before the savepoint, %d after; the join's %d and %d; %d recoveries", len(first), len(got)-len(first), len(firstNear), len(gotNear)-len(firstNear), len(st.Recoveries))
}
