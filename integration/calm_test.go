package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// soakSeconds is how long the load tests run: 20 s in `make test`,
// WEIR_SOAK_SECONDS (180 in `make chaos`) otherwise.
func soakSeconds(t *testing.T) int {
	if s := os.Getenv("WEIR_SOAK_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("WEIR_SOAK_SECONDS=%q: want a whole number of seconds", s)
		}
		return n
	}
	return 20
}

// burnCPU starts n processes that spin until the test ends (or at most
// limit), each a busy shell loop.
func burnCPU(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		cmd := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cancel()
			_ = cmd.Wait()
		})
	}
}

// calmSpec is the checkpointed job of the load tests: a throttled datagen
// source into a keyed 5 s tumbling window, written to path.
func calmSpec(name string, parallelism, rate, count, seed int, path string) string {
	return fmt.Sprintf(`job: %s
parallelism: %d
checkpoint: {interval: 1s}
sources:
  - name: rides
    type: datagen
    rate: %d
    count: %d
    schema: {ride_id: int64, zone: string, fare: float64, ts: timestamp_ms}
    eventTime: {column: ts, maxOutOfOrderness: 2s}
    datagen: {seed: %d, fields: {zone: {cardinality: 50}, fare: {min: 1, max: 50}}}
operators:
  - name: w
    input: rides
    keyBy: [zone]
    window: {type: tumbling, size: 5s}
    aggregate: {n: count(), total: sum(fare)}
sinks:
  - {name: out, input: w, type: files, path: %s, format: jsonl}
`, name, parallelism, rate, count, seed, path)
}

// TestCalmUnderLoad runs 8 checkpointed jobs on 3 workers beside 2
// processes burning the CPU: however slow the machine gets, no worker is
// declared lost and no job restarts.
func TestCalmUnderLoad(t *testing.T) {
	secs := soakSeconds(t)
	c := startCluster(t, 3, 3)
	burnCPU(t, 2, time.Duration(secs+120)*time.Second)
	dir := t.TempDir()
	var ids []string
	for i := range 8 {
		path := filepath.Join(dir, fmt.Sprintf("calm-%d.yaml", i))
		spec := calmSpec(fmt.Sprintf("calm-%d", i), 1, 500, 500*secs, i+1, fmt.Sprintf("calm/%d/", i))
		if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.deploy(path))
	}
	for _, id := range ids {
		st := c.waitState(id, coordinator.JobFinished, time.Duration(secs)*4*time.Second+2*time.Minute)
		if len(st.Recoveries) > 0 {
			t.Errorf("job %s restarted %d times under load: first because %s", id, len(st.Recoveries), st.Recoveries[0].Reason)
		}
		if st.Totals.RecordsIn != int64(500*secs) {
			t.Errorf("job %s read %d records, want %d", id, st.Totals.RecordsIn, 500*secs)
		}
	}
	t.Logf("8 jobs of %d s beside 2 CPU burners on 2 cores: every job FINISHED without a restart", secs)
}

// TestCalmUnderLoadEmbedded runs a checkpointed job with `weir run` beside
// 2 processes burning the CPU: the embedded worker, in the same process
// as its coordinator, is never declared lost, and the job finishes
// without a restart.
func TestCalmUnderLoadEmbedded(t *testing.T) {
	secs := soakSeconds(t)
	burnCPU(t, 2, time.Duration(secs+120)*time.Second)
	store := t.TempDir()
	spec := writeSpec(t, calmSpec("calm-embedded", 2, 1000, 1000*secs, 3, "out/"))
	out, err := runWeir(os.Environ(), "run", spec, "--store", "file://"+store)
	if err != nil {
		t.Fatalf("weir run beside 2 CPU burners: %v\n%s", err, out)
	}
	b, err := blob.NewDir(store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	objs, err := b.List(context.Background(), layout.JobsPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, o := range objs {
		job, ok := layout.ParseSpecKey(o.Key)
		if !ok {
			continue
		}
		raw, err := b.Get(context.Background(), layout.StatusKey(job))
		if err != nil {
			t.Fatal(err)
		}
		var st coordinator.JobStatus
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatal(err)
		}
		found = true
		if st.State != coordinator.JobFinished || st.Restarts != 0 || len(st.Exceptions) != 0 {
			t.Errorf("embedded job %s: %s after %d restarts, exceptions %+v", job, st.State, st.Restarts, st.Exceptions)
		}
		if st.Totals.RecordsIn != int64(1000*secs) {
			t.Errorf("embedded job %s read %d records, want %d", job, st.Totals.RecordsIn, 1000*secs)
		}
	}
	if !found {
		t.Fatal("no job in the store")
	}
	t.Logf("an embedded job of %d s beside 2 CPU burners on 2 cores: FINISHED without a restart", secs)
}
