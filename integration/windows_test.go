package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

const windowsSpec = "testdata/windows.yaml"

func loadSpec(t *testing.T, path string) *spec.Job {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	js, err := spec.Parse(data, path)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// checkWindowsOutput compares the three window outputs of windows.yaml
// with the batch recomputation.
func checkWindowsOutput(t *testing.T, b blob.BucketReader) {
	t.Helper()
	js := loadSpec(t, windowsSpec)
	input := genInput(t, js, "rides")
	for _, op := range js.Operators {
		want := recomputeWindows(t, &op, "ts", input)
		got := readOutput(t, b, "out/"+op.Name+"/")
		compareRows(t, op.Name, got, want)
	}
}

// TestDistributedWindows runs the windows job on `weir coordinator` and
// three `weir worker` processes over real Redis and MinIO, its entries
// LZ4-compressed (exchange.compression) and plain (exchange.encoding:
// every other distributed test runs the default, compact), so that
// compressed Arrow crosses real processes and the plain encoding stays
// covered.
func TestDistributedWindows(t *testing.T) {
	c := startCluster(t, 3, 4)
	text, err := os.ReadFile(windowsSpec)
	if err != nil {
		t.Fatal(err)
	}
	compressed := filepath.Join(t.TempDir(), "windows.yaml")
	if err := os.WriteFile(compressed, append(text, "\nexchange: {compression: lz4, encoding: plain}\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	id := c.deploy(compressed)
	st := c.waitState(id, coordinator.JobFinished, 3*time.Minute)
	if st.Totals.RecordsIn != 12000 {
		t.Errorf("events in = %d, want 12000", st.Totals.RecordsIn)
	}
	if st.Totals.LateDropped+st.Totals.LateSide != 0 {
		t.Errorf("%d late records; the input's disorder is within the watermark bound", st.Totals.LateDropped+st.Totals.LateSide)
	}
	workers := map[string]bool{}
	for _, v := range st.Vertices {
		for _, tk := range v.Tasks {
			workers[tk.Worker] = true
		}
	}
	if len(workers) != 3 {
		t.Errorf("tasks ran on %d workers, want all 3: %v", len(workers), workers)
	}
	// The spec is stored, and the attempt's channels are gone from Redis.
	if _, err := c.bucket.Stat(t.Context(), layout.SpecKey(id)); err != nil {
		t.Errorf("spec not stored: %v", err)
	}
	keys, err := c.redis.Do("KEYS", "weir:{*")
	if err != nil || keys != "" {
		t.Errorf("channel keys left in Redis after the job: %q %v", keys, err)
	}
	checkWindowsOutput(t, c.bucket)
}

// TestEmbeddedWindows runs the same job with `weir run` in one process,
// on the in-process exchange and a local directory store.
func TestEmbeddedWindows(t *testing.T) {
	dir := t.TempDir()
	out, err := runWeir(os.Environ(), "run", windowsSpec, "--store", "file://"+dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Log(out)
	b, err := blob.NewDir(filepath.Clean(dir))
	if err != nil {
		t.Fatal(err)
	}
	checkWindowsOutput(t, b)
}
