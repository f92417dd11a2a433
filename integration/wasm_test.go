package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions/wasm/wasmtest"
	"github.com/weirstream/weir/integration/poll"
)

// The Wasm examples, built once per test binary by their build scripts
// (examples/wasm/build-*.sh, what `make wasm-examples` runs).
var wasmBuilt struct {
	sync.Mutex
	dir string
	err error
}

// wasmExample returns the path of a built example module, e.g.
// "zone-stats-go".
func wasmExample(t testing.TB, name string) string {
	t.Helper()
	wasmBuilt.Lock()
	defer wasmBuilt.Unlock()
	if wasmBuilt.dir == "" && wasmBuilt.err == nil {
		dir, err := os.MkdirTemp("", "weir-wasm-")
		if err == nil {
			root, _ := filepath.Abs("..")
			for _, script := range []string{"build-go.sh", "build-c.sh"} {
				cmd := exec.Command("bash", filepath.Join(root, "examples/wasm", script), dir)
				cmd.Dir = root
				if out, err := cmd.CombinedOutput(); err != nil {
					wasmBuilt.err = fmt.Errorf("%s: %v\n%s", script, err, out)
					break
				}
			}
		}
		wasmBuilt.dir = dir
		if err != nil {
			wasmBuilt.err = err
		}
		if wasmBuilt.err == nil {
			// Compiled into the cache the weir processes use by default.
			mods, _ := filepath.Glob(filepath.Join(dir, "*.wasm"))
			wasmtest.Precompile(t, mods...)
		}
	}
	if wasmBuilt.err != nil {
		t.Fatalf("build the wasm examples: %v", wasmBuilt.err)
	}
	return filepath.Join(wasmBuilt.dir, name+".wasm")
}

// deployFunction runs `weir functions deploy` and returns its JSON.
func (c *cluster) deployFunction(name, path string, extra ...string) (map[string]any, error) {
	out, err := c.weir(append([]string{"functions", "deploy", name, path, "-o", "json"}, extra...)...)
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return nil, fmt.Errorf("decode %q: %w", out, err)
	}
	return v, nil
}

// TestWasmZoneStatsUnderKills deploys zone-stats built in Go and in C to a
// cluster whose workers were started before, runs both beside the built-in
// tumbling window on out-of-order input while a worker running tasks is
// killed twice, and checks that all three outputs equal the batch
// recomputation of the window (so each other).
func TestWasmZoneStatsUnderKills(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	goMod, cMod := wasmExample(t, "zone-stats-go"), wasmExample(t, "zone-stats-c")
	c := startCluster(t, 3, 2)
	for name, path := range map[string]string{"zone-stats-go": goMod, "zone-stats-c": cMod} {
		v, err := c.deployFunction(name, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("deployed %s: version %v, sha256 %v", name, v["version"], v["sha256"])
	}
	const specPath = "testdata/wasm-zones.yaml"
	id := c.deploy(specPath)
	c.waitState(id, coordinator.JobRunning, time.Minute)
	// The functions' counters reach the status and the metrics.
	// (Each worker compiles the modules first: under -race beside the other
	// tests that takes a while.)
	poll.UntilNil(t, 2*time.Minute, "function counters in the metrics", func() error {
		resp, err := httpClient.Get(c.api + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		for _, op := range []string{"wasm-go", "wasm-c"} {
			for _, family := range []string{"weir_function_invocations_total", "weir_function_rows_in_total", "weir_function_rows_out_total", "weir_function_guest_seconds_total", "weir_function_host_calls_total", "weir_function_memory_bytes"} {
				m := regexp.MustCompile(family + `\{[^}]*operator="` + op + `"[^}]*\} (\S+)`).FindSubmatch(body)
				if m == nil {
					return fmt.Errorf("no %s for operator %s yet", family, op)
				}
				if v, err := strconv.ParseFloat(string(m[1]), 64); err != nil || v <= 0 {
					return fmt.Errorf("%s of operator %s is %s", family, op, m[1])
				}
			}
		}
		return nil
	})
	if st, err := c.status(id); err == nil {
		for _, v := range st.Vertices {
			for _, f := range v.Totals.Functions {
				t.Logf("%s (%s): %d calls, %d rows in, %d out, %.2f s in the guest, %d host calls, %d bytes of memory",
					f.Operator, f.Function, f.Calls, f.RowsIn, f.RowsOut, f.GuestSeconds, f.HostCalls, f.MemoryBytes)
			}
		}
	}
	for kill := 0; kill < 2; kill++ {
		time.Sleep(6 * time.Second)
		ws := c.workersWithTasks(id)
		if len(ws) == 0 {
			t.Fatalf("kill %d: no worker runs tasks of %s", kill+1, id)
		}
		t.Logf("kill -9 %s", ws[0])
		c.kill(ws[0])
		c.addWorker(2)
	}
	st := c.waitState(id, coordinator.JobFinished, 4*time.Minute)
	if len(st.Recoveries) < 2 {
		t.Errorf("%d recoveries for 2 kills", len(st.Recoveries))
	}
	js := loadSpec(t, specPath)
	want := recomputeWindows(t, &js.Operators[0], "ts", genInput(t, js, "rides"))
	for _, out := range []string{"builtin", "go", "c"} {
		compareRows(t, "zone-stats "+out, readOutput(t, c.bucket, "wasm/"+out+"/"), want)
	}
	stored, err := c.bucket.Get(context.Background(), "jobs/"+id+"/spec.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(stored), `"sha256"`) {
		t.Errorf("the stored spec pins no module: %s", stored)
	}
}
