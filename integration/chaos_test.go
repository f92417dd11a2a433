package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

const chaosSpec = "testdata/chaos.yaml"

// kill sends SIGKILL to a named process of the cluster and waits for it.
func (c *cluster) kill(name string) {
	c.t.Helper()
	c.mu.Lock()
	p := c.procs[name]
	delete(c.procs, name)
	c.mu.Unlock()
	if p == nil {
		c.t.Fatalf("no process %s", name)
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// killOneOf kills -9 a worker process running tasks of the job (the last
// by name) and starts a replacement of slots slots; it returns the
// victim's name and pid ("" and 0 when no worker process runs any).
func (c *cluster) killOneOf(id string, slots int) (string, int) {
	c.t.Helper()
	victim, pid := "", 0
	c.mu.Lock()
	for _, w := range c.workersWithTasks(id) {
		if p := c.procs[w]; p != nil {
			victim, pid = w, p.cmd.Process.Pid
		}
	}
	c.mu.Unlock()
	if victim == "" {
		return "", 0
	}
	c.t.Logf("kill -9 %s (pid %d)", victim, pid)
	c.kill(victim)
	c.addWorker(slots)
	return victim, pid
}

// killRandomWorker kills -9 a worker process running tasks of the job,
// picked by rng, and starts a replacement of slots slots; it reports
// whether there was one to kill.
func (c *cluster) killRandomWorker(id string, rng *rand.Rand, slots int) bool {
	c.t.Helper()
	var ws []string
	c.mu.Lock()
	for _, w := range c.workersWithTasks(id) {
		if c.procs[w] != nil {
			ws = append(ws, w)
		}
	}
	c.mu.Unlock()
	if len(ws) == 0 {
		return false
	}
	victim := ws[rng.IntN(len(ws))]
	c.t.Logf("kill -9 %s", victim)
	c.kill(victim)
	c.addWorker(slots)
	return true
}

// workersWithTasks returns the workers running tasks of the job.
func (c *cluster) workersWithTasks(id string) []string {
	st, err := c.status(id)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	for _, v := range st.Vertices {
		for _, tk := range v.Tasks {
			if tk.Worker != "" && tk.State == "RUNNING" {
				seen[tk.Worker] = true
			}
		}
	}
	var out []string
	for w := range seen {
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

// chaosRun deploys chaos.yaml, runs fault while the job runs, waits for
// FINISHED and checks that the committed output is exactly the output of
// a run without failures.
func chaosRun(t *testing.T, c *cluster, fault func(ctx context.Context, id string)) coordinator.JobStatus {
	t.Helper()
	return chaosRunSpec(t, c, chaosSpec, fault)
}

// chaosRunSpec is chaosRun of another spec with chaos.yaml's operators and
// sinks.
func chaosRunSpec(t *testing.T, c *cluster, specPath string, fault func(ctx context.Context, id string)) coordinator.JobStatus {
	t.Helper()
	id := c.deploy(specPath)
	c.waitState(id, coordinator.JobRunning, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	faultDone := make(chan struct{})
	go func() {
		defer close(faultDone)
		fault(ctx, id)
	}()
	st := c.waitState(id, coordinator.JobFinished, 5*time.Minute)
	cancel()
	<-faultDone
	checkChaosOutput(t, c.bucket, specPath, st)
	checkStatePacked(t, c.bucket, id)
	for _, r := range st.Recoveries {
		t.Logf("recovery to attempt %d from checkpoint %d: %.2fs (%s)", r.Attempt, r.RestoredFrom, r.Seconds, r.Reason)
	}
	if st.Checkpoints != nil {
		t.Logf("checkpoints: %d completed, %d failed", st.Checkpoints.Completed, st.Checkpoints.Failed)
	}
	keys, err := c.channelKeys()
	if err != nil || keys != "" {
		t.Errorf("channel keys left in Redis after the job: %q %v", keys, err)
	}
	return st
}

// checkStatePacked checks that the retained checkpoints' state files are
// packed, a worker's of a checkpoint into one object (the chaos job's are
// all small), except the parts of a capture in parts (a file of fewer key
// groups than its subtask's) and a pebble store's files, which are
// objects of their own (but for a store's MANIFEST and OPTIONS), and logs
// how many objects each checkpoint wrote.
func checkStatePacked(t *testing.T, b blob.BucketReader, id string) {
	t.Helper()
	ctx := context.Background()
	objs, err := b.List(ctx, layout.CheckpointsPrefix(id))
	if err != nil {
		t.Fatal(err)
	}
	manifests := 0
	for _, o := range objs {
		if _, _, ok := layout.ParseManifestKey(o.Key); !ok {
			continue
		}
		manifests++
		raw, err := b.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		files, written := 0, map[string]bool{}
		for _, v := range m.Vertices {
			for _, s := range v.Subtasks {
				for _, f := range s.State {
					part := f.KeyGroupStart != s.KeyGroupStart || f.KeyGroupEnd != s.KeyGroupEnd
					if !f.Packed && !part && f.Kind != manifest.KindStore {
						t.Errorf("checkpoint %d: %s[%d]'s state file %s is not packed", m.Checkpoint, v.Name, s.Index, f.Key)
					}
					if n, _ := layout.StateFileCheckpoint(f.Key); n == m.Checkpoint {
						files++
						written[f.Key] = true
					}
				}
			}
		}
		t.Logf("checkpoint %d wrote %d state files in %d objects", m.Checkpoint, files, len(written))
	}
	t.Logf("%d manifests left in the bucket", manifests)
}

// checkChaosOutput compares the committed output of chaos.yaml with the
// batch recomputation and checks the sequence checker's rows: every key's
// counter advanced by exactly one per input row, each (key, n) once.
func checkChaosOutput(t *testing.T, b blob.BucketReader, specPath string, st coordinator.JobStatus) {
	t.Helper()
	staged, err := b.List(context.Background(), "chaos/")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range staged {
		if strings.Contains(o.Key, "/_staging/") {
			t.Errorf("staged object left after the job: %s", o.Key)
		}
	}
	js := loadSpec(t, specPath)
	input := genInput(t, js, "rides")
	// The inputs of the windows: the rides, or the filter "sample".
	inputs := map[string][]row{"rides": input}
	for _, r := range input {
		if r["ride_id"].(int64)%12 == 0 {
			inputs["sample"] = append(inputs["sample"], r)
		}
	}
	for _, op := range js.Operators {
		if op.Window != nil {
			in, ok := inputs[op.Input]
			if !ok {
				t.Fatalf("window %s reads %s: the check knows no recomputation of it", op.Name, op.Input)
			}
			compareRows(t, op.Name, readOutput(t, b, "chaos/"+op.Name+"/"), recomputeWindows(t, &op, "ts", in))
		}
	}
	for _, op := range js.Operators {
		if op.Join != nil {
			compareRows(t, op.Name, readOutput(t, b, "chaos/"+op.Name+"/"), recomputePairs(op.Name, input))
		}
	}
	rows := readOutput(t, b, "chaos/seqcheck/")
	const stride = 50
	seen := map[[2]int64]int{}
	violations, dups := 0, 0
	for _, r := range rows {
		k, _ := r["k"].(int64)
		n, _ := r["n"].(int64)
		if ok, _ := r["ok"].(bool); !ok {
			violations++
			if violations <= 5 {
				t.Errorf("sequence violation: %v", r)
			}
		}
		seen[[2]int64{k, n}]++
		if seen[[2]int64{k, n}] == 2 {
			dups++
		}
	}
	missing := 0
	perKey := int64(len(input) / stride)
	for k := int64(0); k < stride; k++ {
		for n := int64(1); n <= perKey; n++ {
			if seen[[2]int64{k, n}] == 0 {
				missing++
			}
		}
	}
	t.Logf("sequence checker: %d rows, %d violations, %d duplicated, %d missing", len(rows), violations, dups, missing)
	if violations+dups+missing > 0 || len(rows) != len(input) {
		t.Errorf("sequence checker: %d rows for %d inputs, %d violations, %d duplicated, %d missing", len(rows), len(input), violations, dups, missing)
	}
}

// recomputePairs computes the output of chaos.yaml's joins of each even
// ride with the next one: "pairs" (a regular join) has every pair, "near"
// (an interval join, lower -1s, upper 1s) the pairs whose event times are
// at most a second apart.
func recomputePairs(join string, input []row) []row {
	var out []row
	for i := 0; i+1 < len(input); i += 2 {
		l, r := input[i], input[i+1]
		lt, rt := l["ts"].(int64), r["ts"].(int64)
		switch join {
		case "pairs":
			out = append(out, row{"a": l["ride_id"], "b": r["ride_id"], "ts": lt})
		case "near":
			if rt-1000 <= lt && lt <= rt+1000 {
				out = append(out, row{"a": l["ride_id"], "b": r["ride_id"], "ts": lt, "ts_b": rt})
			}
		}
	}
	return out
}

// TestChaosWorkerKills kills a worker running tasks with SIGKILL every few
// seconds and starts a replacement, while the job runs: the output is
// still exactly the failure-free output.
//
// Its state files are zstd-compressed (checkpoint.compression; the other
// chaos tests run on the default, LZ4), so that every restore after a
// kill reads zstd state, in parts of 64 KiB
// (checkpoint.partSize), so that the windows' captures come in parts
// and restores read them: the test fails if none of the perride
// window's did.
func TestChaosWorkerKills(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	c := startCluster(t, 3, 3)
	text, err := os.ReadFile(chaosSpec)
	if err != nil {
		t.Fatal(err)
	}
	const ck = "checkpoint: {interval: 1s, timeout: 20s, retain: 2}"
	if !strings.Contains(string(text), ck) {
		t.Fatalf("%s has no %q", chaosSpec, ck)
	}
	zstdSpec := filepath.Join(t.TempDir(), filepath.Base(chaosSpec))
	text = []byte(strings.Replace(string(text), ck, strings.TrimSuffix(ck, "}")+", compression: zstd, partSize: 64KiB}", 1))
	if err := os.WriteFile(zstdSpec, text, 0o644); err != nil {
		t.Fatal(err)
	}
	kills := 0
	var jobID string
	windowParts := 0 // the most part files of perride's seen at once
	st := chaosRunSpec(t, c, zstdSpec, func(ctx context.Context, id string) {
		jobID = id
		rng := rand.New(rand.NewPCG(1, 2))
		// wait waits d, looking for perride's parts in the bucket every
		// 250 ms (a part file lives from its checkpoint to the next
		// base), and reports whether the job still runs.
		wait := func(d time.Duration) bool {
			for end := time.Now().Add(d); time.Now().Before(end); {
				select {
				case <-ctx.Done():
					return false
				case <-time.After(250 * time.Millisecond):
				}
				windowParts = max(windowParts, countParts(t, c.bucket, id, "perride", 3))
			}
			return true
		}
		defer func() {
			for wait(time.Second) { // until the job ends
			}
		}()
		for kills < 6 {
			if !wait(time.Duration(3000+rng.IntN(2000)) * time.Millisecond) {
				return
			}
			if c.killRandomWorker(id, rng, 3) {
				kills++
			}
		}
	})
	if kills < 3 {
		t.Errorf("only %d kills happened while the job ran", kills)
	}
	if windowParts == 0 {
		t.Error("no capture of the perride window came in parts")
	}
	t.Logf("up to %d part files of perride's at once", windowParts)
	if len(st.Recoveries) < kills {
		t.Errorf("%d recoveries for %d kills", len(st.Recoveries), kills)
	}
	checkStateCodec(t, c.bucket, jobID, []byte{0x28, 0xb5, 0x2f, 0xfd}) // a zstd frame
}

// countParts returns how many state files of operator, at parallelism
// parallelism, cover fewer key groups than a subtask owns: the parts of
// captures in parts (a whole capture is one file of the subtask's range,
// or packed into a worker's object).
func countParts(t *testing.T, b blob.BucketReader, id, operator string, parallelism int) int {
	t.Helper()
	objs, err := b.List(context.Background(), layout.OperatorStatePrefix(id, operator))
	if err != nil {
		return 0 // MinIO busy: the next look counts
	}
	whole := map[string]bool{}
	for i := range parallelism {
		start, end := arrowfmt.KeyGroupRange(i, arrowfmt.DefaultMaxParallelism, parallelism)
		whole[fmt.Sprintf("%d-%d", start, end)] = true
	}
	n := 0
	for _, o := range objs {
		rng, _, _ := strings.Cut(strings.TrimPrefix(o.Key, layout.OperatorStatePrefix(id, operator)), "/")
		if !whole[rng] {
			n++
		}
	}
	return n
}

// checkStateCodec checks that the job's state objects hold frames of its
// state files' codec (magic, a frame's first bytes).
func checkStateCodec(t *testing.T, b blob.BucketReader, id string, magic []byte) {
	t.Helper()
	ctx := context.Background()
	objs, err := b.List(ctx, layout.StatePrefix(id))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, o := range objs {
		data, err := b.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, magic) {
			found++
		}
	}
	if found == 0 {
		t.Errorf("none of the %d state objects left holds a frame (% x) of the job's codec", len(objs), magic)
	}
	t.Logf("%d of %d state objects hold frames % x", found, len(objs), magic)
}

// TestChaosCoordinatorRestart kills the coordinator mid-run and starts it
// again: it finds the job in the bucket and resumes it from its latest
// checkpoint. Its job names no codec: its state files are LZ4, the
// default.
func TestChaosCoordinatorRestart(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	c := startCluster(t, 3, 3)
	var jobID string
	chaosRun(t, c, func(ctx context.Context, id string) {
		jobID = id
		select {
		case <-ctx.Done():
			return
		case <-time.After(8 * time.Second):
		}
		t.Log("kill -9 coordinator")
		c.kill("coordinator")
		time.Sleep(2 * time.Second)
		c.start("coordinator", "coordinator", "--listen", strings.TrimPrefix(c.api, "http://"))
	})
	checkStateCodec(t, c.bucket, jobID, []byte{0x04, 0x22, 0x4d, 0x18}) // an LZ4 frame
}

// TestChaosRedisRestart restarts Redis empty mid-run: the lost channels
// are detected, the job rolls back to its latest checkpoint.
func TestChaosRedisRestart(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	c := startCluster(t, 3, 3)
	st := chaosRun(t, c, func(ctx context.Context, id string) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(8 * time.Second):
		}
		t.Log("restart redis empty")
		c.redis.Restart()
	})
	if len(st.Recoveries) == 0 {
		t.Error("no recovery after Redis lost its data")
	}
}

// TestChaosMinIOOutage stops MinIO for a while mid-run: checkpoints fail
// (none counts as complete without its manifest) and the job goes on or
// recovers once MinIO is back.
func TestChaosMinIOOutage(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	c := startCluster(t, 3, 3)
	st := chaosRun(t, c, func(ctx context.Context, id string) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(8 * time.Second):
		}
		t.Log("stop minio")
		c.minio.Stop()
		time.Sleep(6 * time.Second)
		c.minio.Start()
		t.Log("minio back")
	})
	if st.Checkpoints == nil || st.Checkpoints.Failed == 0 {
		t.Logf("no checkpoint failed during the outage: %+v", st.Checkpoints)
	}
	// Every completed checkpoint left in the bucket has its manifest.
	objs, err := c.bucket.List(context.Background(), layout.CheckpointsPrefix(st.ID))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, "/manifest.json") {
			t.Errorf("unexpected object %s", o.Key)
		}
	}
}

// TestWorkerCrashDetection kills a worker running tasks with SIGKILL ten
// times, each once the job has run again for 2.5 s (crash.yaml's stable
// period is 2 s, so every restart is immediate), and measures from the
// kill to the coordinator noticing (its recovery's Detected) and to every
// task running again. A dead worker's named Redis connection closes at
// once, so detection does not wait for the heartbeat timeout (30 s).
func TestWorkerCrashDetection(t *testing.T) {
	c := startCluster(t, 3, 3)
	var detect, running []time.Duration
	st := chaosRunSpec(t, c, "testdata/crash.yaml", func(ctx context.Context, id string) {
		for len(detect) < 10 {
			// Wait until the job runs with every task placed.
			var ws []string
			for len(ws) == 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(300 * time.Millisecond):
				}
				st, err := c.status(id)
				if err != nil || st.State != coordinator.JobRunning || len(st.Recoveries) != len(detect) ||
					len(st.Recoveries) > 0 && (st.Recoveries[len(st.Recoveries)-1].Running.IsZero() ||
						time.Since(st.Recoveries[len(st.Recoveries)-1].Running) < 2500*time.Millisecond) {
					continue
				}
				c.mu.Lock()
				for _, w := range c.workersWithTasks(id) {
					if c.procs[w] != nil {
						ws = append(ws, w)
					}
				}
				c.mu.Unlock()
			}
			killed := time.Now()
			c.kill(ws[0])
			c.addWorker(3)
			// Wait for the recovery this kill caused to run.
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
				st, err := c.status(id)
				if err != nil || len(st.Recoveries) <= len(detect) {
					continue
				}
				r := st.Recoveries[len(detect)]
				if r.Running.IsZero() {
					continue
				}
				detect = append(detect, r.Detected.Sub(killed))
				running = append(running, r.Running.Sub(killed))
				t.Logf("kill -9 %s: detected after %v, running again after %v (%s)", ws[0], detect[len(detect)-1].Round(time.Millisecond), running[len(running)-1].Round(time.Millisecond), r.Reason)
				break
			}
		}
	})
	if len(detect) < 5 {
		t.Fatalf("only %d kills measured while the job ran", len(detect))
	}
	p50 := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	t.Logf("%d kills: detection p50 %v max %v; running again p50 %v max %v; %d recoveries in all",
		len(detect), p50(detect).Round(time.Millisecond), slices.Max(detect).Round(time.Millisecond),
		p50(running).Round(time.Millisecond), slices.Max(running).Round(time.Millisecond), len(st.Recoveries))
	if m := slices.Max(detect); m > 2*time.Second {
		t.Errorf("a crash was noticed only after %v: the dead worker's connection should have told at once", m)
	}
}

// TestClustersShareARedis runs two clusters (a coordinator and two workers
// each, their own MinIO) on one Redis, each with the chaos job at once:
// with distinct cluster ids they share nothing, and both outputs are exact.
func TestClustersShareARedis(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	r := testenv.StartRedis(t)
	blue, green := startClusterOn(t, 2, 3, r, "blue"), startClusterOn(t, 2, 3, r, "green")
	ids := []string{blue.deploy(chaosSpec), green.deploy(chaosSpec)}
	for i, c := range []*cluster{blue, green} {
		st := c.waitState(ids[i], coordinator.JobFinished, 5*time.Minute)
		checkChaosOutput(t, c.bucket, chaosSpec, st)
		if len(st.Recoveries) > 0 {
			t.Errorf("job %s restarted: %s", ids[i], st.Recoveries[0].Reason)
		}
	}
	var ws []json.RawMessage
	if err := getJSON(blue.api+"/api/v1/workers", &ws); err != nil || len(ws) != 2 {
		t.Errorf("blue's coordinator lists %d workers (%v), want its own 2", len(ws), err)
	}
}
