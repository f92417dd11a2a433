package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// pebbleRun is a run of the sequence checker with its state in pebble on
// a real cluster (worker processes, Redis, MinIO), under a kill -9 of a
// worker and a rescale of the checker 2 -> 3.
type pebbleRun struct {
	keys, perKey int    // events: keys * perKey, each key's perKey events keys apart
	rate         int    // events a second (0: as fast as it goes)
	memory       string // state.memory: a pebble store's memory
	interval     string // checkpoint.interval
	timeout      time.Duration
	// killAfter: the worker is killed once the checker has read this
	// many events and a checkpoint completed after that (0: after the
	// second checkpoint), so that the state is large by then.
	killAfter int64
	// lastOnly keeps only each key's last row and the rows out of
	// sequence (a filter after the checker), for runs whose every row is
	// too much to read back: a lost or repeated event still shows, as a
	// row out of sequence or a last row missing or twice.
	lastOnly bool
	// s3Delay delays what passes between the weir processes and MinIO
	// by this much each way (testenv.Link.SetDelay), as S3's latency.
	s3Delay time.Duration
}

// pebbleResult is what a pebbleRun measured.
type pebbleResult struct {
	seconds    float64 // deploy to finish
	stateBytes int64   // the checker's state in the largest manifest read
	storeBytes int64   // the largest the pebble directories grew to
	workerHWM  int64   // the largest peak RSS of a worker that was not killed
	recoveries []coordinator.Recovery
	// restores: the longest a checker subtask took to restore its state
	// after the kill and after the rescale, in seconds.
	restores []float64
	// checkpointMedian and checkpointMax: trigger to completion of the
	// completed checkpoints the coordinator still lists, in seconds.
	checkpointMedian, checkpointMax float64
}

// TestPebbleStateUnderKills runs the sequence checker over 16,000 keys
// with its state in pebble stores of 4 MiB (state: {backend: pebble}),
// checkpointed as the stores' files, on a real cluster (worker
// processes, Redis, MinIO): a worker running tasks is killed -9 (the job
// restores by opening the stores from their files), the checker is
// rescaled 2 -> 3 (a subtask opens the store it shares the most key
// groups with and ingests the rest from the other), and every key's
// counter still takes each value once (0 lost, 0 duplicated). The killed
// worker's store directory is deleted by the next worker that starts,
// and none is left once the job ended.
func TestPebbleStateUnderKills(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	// 2,000 events a second: about what the checker on pebble takes
	// under -race beside the other tests. At 6,000 its input backed up,
	// so checkpoints waited ~17 s for their barriers, and the job could
	// end while the rescale's savepoint waited.
	runPebbleKills(t, pebbleRun{keys: 16_000, perKey: 4, rate: 2000, memory: "4MiB", interval: "1s", timeout: 3 * time.Minute})
}

// BenchmarkPebbleLargeState is the run of issue 14: state several times
// the memory pebble is given (10M keys by default, PEBBLE_LARGE_KEYS;
// stores of 32 MiB, PEBBLE_LARGE_MEMORY), under kill -9
// and a rescale 2 -> 3, exact. `make bench-pebble-large`; it reports the
// state's size in checkpoints and on disk, the workers' peak RSS, the
// recoveries, and how long the checker's subtasks took to restore after
// the kill and after the rescale.
func BenchmarkPebbleLargeState(b *testing.B) {
	run := pebbleRun{keys: 10_000_000, perKey: 2, rate: 50_000, memory: "32MiB", interval: "5s", timeout: 60 * time.Minute, lastOnly: true}
	if s := os.Getenv("PEBBLE_LARGE_KEYS"); s != "" {
		if _, err := fmt.Sscan(s, &run.keys); err != nil {
			b.Fatalf("PEBBLE_LARGE_KEYS=%s: %v", s, err)
		}
	}
	if s := os.Getenv("PEBBLE_LARGE_MEMORY"); s != "" {
		run.memory = s
	}
	if s := os.Getenv("PEBBLE_LARGE_S3_DELAY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("PEBBLE_LARGE_S3_DELAY=%s: %v", s, err)
		}
		run.s3Delay = d
	}
	// Killed once every key is in the state and checkpointed.
	run.killAfter = int64(run.keys)
	for range b.N {
		res := runPebbleKills(b, run)
		b.ReportMetric(float64(run.keys*run.perKey)/res.seconds, "events/s")
		b.ReportMetric(float64(res.stateBytes)/(1<<20), "state-MiB")
		b.ReportMetric(float64(res.storeBytes)/(1<<20), "pebble-dirs-MiB")
		b.ReportMetric(float64(res.workerHWM)/(1<<20), "worker-peak-rss-MiB")
		for i, r := range res.recoveries {
			b.ReportMetric(r.Seconds, fmt.Sprintf("recovery%d-s", i+1))
		}
		for i, s := range res.restores {
			b.ReportMetric(s, fmt.Sprintf("restore%d-s", i+1))
		}
		b.ReportMetric(res.checkpointMedian, "checkpoint-median-s")
		b.ReportMetric(res.checkpointMax, "checkpoint-max-s")
	}
}

func runPebbleKills(t testing.TB, run pebbleRun) pebbleResult {
	var res pebbleResult
	c, port := newCluster(t, nil, "")
	t.Cleanup(c.stopAll)
	if run.s3Delay > 0 {
		link := testenv.NewLink(t, nil, nil, strings.TrimPrefix(c.minio.Endpoint, "http://"))
		link.SetDelay(run.s3Delay)
		for i, e := range c.env {
			if strings.HasPrefix(e, "WEIR_S3_ENDPOINT=") {
				c.env[i] = "WEIR_S3_ENDPOINT=http://" + link.Addr()
			}
		}
		t.Logf("the weir processes reach MinIO %v later each way", run.s3Delay)
	}
	stateDir := t.TempDir()
	c.env = append(c.env, "WEIR_STATE_DIR="+stateDir)
	c.start("coordinator", "coordinator", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--id", "coordinator")
	for range 3 {
		c.addWorker(4)
	}
	c.waitWorkers(t, 3)
	events := run.keys * run.perKey
	rate, out, sink := "", "check", ""
	if run.rate > 0 {
		rate = fmt.Sprintf(", rate: %d", run.rate)
	}
	if run.lastOnly {
		out = "last"
		sink = fmt.Sprintf("  - {name: last, input: check, filter: \"n == %d || !ok\"}\n", run.perKey)
	}
	specPath := writeSpec(t, fmt.Sprintf(`
job: pebblekill
parallelism: 2
checkpoint: {interval: %s, timeout: 20m, retain: 3}
restart: {attempts: 50, backoff: 200ms, maxBackoff: 2s}
state: {backend: pebble, memory: %s}
sources:
  - {name: rides, type: datagen, parallelism: 1, count: %d%s, schema: {ride_id: int64}}
operators:
  - {name: keyed, input: rides, parallelism: 1, select: {k: "ride_id %% %d", seq: ride_id}}
  - {name: check, input: keyed, keyBy: [k], function: sequence-check, config: {stride: %d}}
%ssinks:
  - {name: out, input: %s, type: files, path: pebblekill/, format: jsonl}
`, run.interval, run.memory, events, rate, run.keys, run.keys, sink, out))
	start := time.Now()
	id := c.deploy(specPath)
	c.waitState(id, coordinator.JobRunning, time.Minute)
	stores := func() []string {
		m, _ := filepath.Glob(filepath.Join(stateDir, "weir-state-*", "pebble-*"))
		return m
	}
	stopDu := sampleDirBytes(stateDir, &res.storeBytes)
	defer stopDu()
	after := int64(1) // the checkpoint to wait beyond
	if run.killAfter > 0 {
		st := waitStatusWithin(t, c, id, fmt.Sprintf("%d events read by the checker", run.killAfter), run.timeout, func(st coordinator.JobStatus) error {
			for _, v := range st.Vertices {
				if v.Name == "check" && v.Totals.RecordsIn >= run.killAfter {
					return nil
				}
			}
			return fmt.Errorf("checker behind")
		})
		if st.Checkpoints != nil {
			after = st.Checkpoints.Latest
		}
	}
	waitStatusWithin(t, c, id, "a checkpoint with state in pebble", run.timeout, func(st coordinator.JobStatus) error {
		if st.Checkpoints == nil || st.Checkpoints.Latest <= after || len(stores()) == 0 {
			return fmt.Errorf("checkpoints %+v, %d stores", st.Checkpoints, len(stores()))
		}
		return nil
	})
	before, _ := filepath.Glob(filepath.Join(stateDir, "weir-state-*"))
	t.Logf("%d stores open in %d worker directories", len(stores()), len(before))
	victim, pid := c.killOneOf(id, 4)
	if victim == "" {
		t.Fatal("no worker runs the job's tasks")
	}
	left := filepath.Join(stateDir, fmt.Sprintf("weir-state-%d", pid))
	if !slices.Contains(before, left) {
		t.Errorf("the killed worker had no store directory %s (of %v)", left, before)
	}
	poll.UntilNil(t, 30*time.Second, "the killed worker's stores deleted by the new worker", func() error {
		if _, err := os.Stat(left); err == nil {
			return fmt.Errorf("%s is still there", left)
		}
		return nil
	})
	waitStatusWithin(t, c, id, "a checkpoint after the recovery", run.timeout, func(st coordinator.JobStatus) error {
		n := len(st.Recoveries)
		if st.State != coordinator.JobRunning || n == 0 || st.Checkpoints == nil || st.Checkpoints.Latest <= st.Recoveries[n-1].RestoredFrom {
			return fmt.Errorf("%d recoveries, checkpoints %+v", n, st.Checkpoints)
		}
		return nil
	})
	res.restores = append(res.restores, checkerRestores(t, c, id, 2, "after the kill"))
	scaleLogged(t, context.Background(), c, id, "check=3")
	res.restores = append(res.restores, checkerRestores(t, c, id, 3, "after the rescale"))
	st := c.waitState(id, coordinator.JobFinished, run.timeout)
	res.seconds = time.Since(start).Seconds()
	res.recoveries = st.Recoveries
	for _, r := range st.Recoveries {
		t.Logf("attempt %d from checkpoint %d: %.2fs (%s)", r.Attempt, r.RestoredFrom, r.Seconds, r.Reason)
	}
	res.checkpointMedian, res.checkpointMax = checkpointDurations(t, c, id)
	res.workerHWM = c.workersPeakRSS(t)
	stopDu()
	res.stateBytes = checkStores(t, c, id)
	t.Logf("%d events in %.1fs; pebble directories up to %d MiB; a worker's peak RSS %d MiB", events, res.seconds, res.storeBytes>>20, res.workerHWM>>20)
	checkSequences(t, c, run, events)
	poll.UntilNil(t, 10*time.Second, "no store left", func() error {
		if s := stores(); len(s) > 0 {
			return fmt.Errorf("stores left: %v", s)
		}
		return nil
	})
	return res
}

// checkStores reads the newest retained checkpoint that holds state (the
// job has ended: the newest is the final one, which holds none) and checks
// that every subtask of the checker lists its store's files, sstables
// among them. It returns the size of the checkpoint's state.
func checkStores(t testing.TB, c *cluster, id string) int64 {
	t.Helper()
	m := newestStateManifest(t, c, id)
	var stateBytes, storeBytes, earlierBytes int64
	files, storeFiles, ssts, earlier := 0, 0, 0, 0
	for _, v := range m.Vertices {
		for _, s := range v.Subtasks {
			subtaskSSTs := 0
			for _, f := range s.State {
				files++
				stateBytes += f.Size
				if f.Kind != manifest.KindStore {
					continue
				}
				storeFiles++
				storeBytes += f.Size
				if strings.HasSuffix(f.Name, ".sst") {
					ssts++
					subtaskSSTs++
				}
				if n, _ := layout.StateFileCheckpoint(f.Key); n < m.Checkpoint {
					earlier++
					earlierBytes += f.Size
				}
			}
			if v.Name == "check" && subtaskSSTs == 0 {
				t.Errorf("checkpoint %d: check[%d] lists no sstable of its store", m.Checkpoint, s.Index)
			}
		}
	}
	t.Logf("checkpoint %d: %d state files (%d bytes); %d of them its stores' (%d bytes), %d sstables; %d (%d bytes) uploaded by earlier checkpoints", m.Checkpoint, files, stateBytes, storeFiles, storeBytes, ssts, earlier, earlierBytes)
	return stateBytes
}

// newestStateManifest returns the newest retained checkpoint of job id
// that holds state: once the job has ended, the newest is the final one,
// which holds none.
func newestStateManifest(t testing.TB, c *cluster, id string) *manifest.Manifest {
	t.Helper()
	ctx := context.Background()
	objs, err := c.bucket.List(ctx, layout.CheckpointsPrefix(id))
	if err != nil {
		t.Fatal(err)
	}
	var m *manifest.Manifest
	for _, o := range objs {
		if _, n, ok := layout.ParseManifestKey(o.Key); !ok || m != nil && n < m.Checkpoint {
			continue
		}
		raw, err := c.bucket.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		mm, err := manifest.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !mm.Final && len(mm.Files()) > 0 {
			m = mm
		}
	}
	if m == nil {
		t.Fatalf("no retained checkpoint of job %s holds state", id)
	}
	return m
}

// checkSequences reads the checker's output and checks that every key's
// counter took each value once: every (k, n) once with ok (lastOnly: only
// n = perKey), nothing out of sequence. It reads line by line, so a run of
// millions of keys fits.
func checkSequences(t testing.TB, c *cluster, run pebbleRun, events int) {
	t.Helper()
	ctx := context.Background()
	objs, err := c.bucket.List(ctx, "pebblekill/")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[[2]int64]uint8, events)
	rows, bad, dups := 0, 0, 0
	for _, o := range objs {
		if strings.Contains(o.Key, "/_staging/") {
			continue
		}
		data, err := c.bucket.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			var r struct {
				K, N int64
				OK   bool
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %q: %v", o.Key, sc.Text(), err)
			}
			rows++
			if !r.OK {
				bad++
			}
			k := [2]int64{r.K, r.N}
			if seen[k]++; seen[k] == 2 {
				dups++
			}
		}
	}
	first, want := int64(1), events
	if run.lastOnly {
		first, want = int64(run.perKey), run.keys
	}
	missing := 0
	for k := range int64(run.keys) {
		for n := first; n <= int64(run.perKey); n++ {
			if seen[[2]int64{k, n}] == 0 {
				missing++
			}
		}
	}
	t.Logf("%d rows over %d keys: %d out of sequence, %d duplicated, %d missing", rows, run.keys, bad, dups, missing)
	if rows != want || bad+dups+missing > 0 {
		t.Errorf("%d rows, want %d: %d out of sequence, %d duplicated, %d missing", rows, want, bad, dups, missing)
	}
}

// workersPeakRSS returns the largest peak resident memory (VmHWM) of the
// worker processes still running.
func (c *cluster) workersPeakRSS(t testing.TB) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var peak int64
	for name, p := range c.procs {
		if !strings.HasPrefix(name, "worker-") {
			continue
		}
		select {
		case <-p.done:
			continue
		default:
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		if err != nil {
			t.Logf("%s: %v", name, err)
			continue
		}
		for line := range strings.Lines(string(data)) {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					peak = max(peak, kb<<10)
				}
			}
		}
	}
	return peak
}

// sampleDirBytes sums the sizes of the files under dir every second into
// *peak (the largest sum) until stop, which is safe to call twice and
// waits for the sampler to end.
func sampleDirBytes(dir string, peak *int64) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			var n int64
			_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if info, err := d.Info(); err == nil {
						n += info.Size()
					}
				}
				return nil
			})
			*peak = max(*peak, n) // read after stop
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-ended
	}
}

// checkpointDurations returns the median and the longest duration of the
// completed checkpoints of job id the coordinator lists, in seconds.
func checkpointDurations(t testing.TB, c *cluster, id string) (median, longest float64) {
	t.Helper()
	var cps []coordinator.CheckpointInfo
	if err := getJSON(c.api+"/api/v1/jobs/"+id+"/checkpoints", &cps); err != nil {
		t.Fatal(err)
	}
	var took []float64
	for _, cp := range cps {
		if cp.Status == coordinator.CheckpointCompleted && cp.Duration > 0 {
			took = append(took, cp.Duration)
		}
	}
	if len(took) == 0 {
		t.Fatalf("job %s lists no completed checkpoint", id)
	}
	slices.Sort(took)
	median, longest = took[len(took)/2], took[len(took)-1]
	t.Logf("%d completed checkpoints listed: median %.2fs, longest %.2fs", len(took), median, longest)
	return median, longest
}

// checkerRestores waits until each of the n subtasks of the checker
// reports how long it took to restore its state, logs that and what it
// read, and returns the longest (seconds).
func checkerRestores(t testing.TB, c *cluster, id string, n int, when string) float64 {
	t.Helper()
	var longest float64
	var took []string
	poll.UntilNil(t, 2*time.Minute, "the checker's subtasks restored", func() error {
		st, err := c.status(id)
		if err != nil {
			return err
		}
		longest, took = 0, nil
		for _, v := range st.Vertices {
			if v.Name != "check" {
				continue
			}
			for _, task := range v.Tasks {
				if task.Stats.RestoreSeconds <= 0 {
					return fmt.Errorf("check[%d] has not restored", task.Subtask)
				}
				longest = max(longest, task.Stats.RestoreSeconds)
				took = append(took, fmt.Sprintf("check[%d] %.2fs, %d MiB read", task.Subtask, task.Stats.RestoreSeconds, task.Stats.RestoreRead>>20))
			}
		}
		if len(took) != n {
			return fmt.Errorf("%d of %d checker subtasks report", len(took), n)
		}
		return nil
	})
	t.Logf("restored %s: %s", when, strings.Join(took, "; "))
	return longest
}
