package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions/wasm/wasmtest"
)

// testGuest builds a test guest of the Wasm host
// (functions/wasm/testdata/guests/NAME) into dir.
func testGuest(t *testing.T, dir, name string) string {
	t.Helper()
	out := filepath.Join(dir, name+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./functions/wasm/testdata/guests/"+name)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build guest %s: %v\n%s", name, err, msg)
	}
	return out
}

// badGuestSpec runs operator f (function fn, keyed by k; or a filter if fn
// is "") over a small datagen stream, failing for good after one restart.
func badGuestSpec(t *testing.T, dir, fn string) string {
	t.Helper()
	op := "function: " + fn + ", keyBy: [k]"
	if fn == "" {
		fn, op = "none", `filter: "k != ''"`
	}
	path := filepath.Join(dir, fn+".yaml")
	spec := fmt.Sprintf(`job: bad-%[1]s
parallelism: 1
restart: {attempts: 1, backoff: 100ms}
sources:
  - name: in
    type: datagen
    count: 1000
    schema: {k: string, ts: timestamp_ms}
    datagen: {seed: 1, fields: {k: {cardinality: 10}}}
operators:
  - {name: f, input: in, %[2]s}
sinks:
  - {name: out, input: f, type: blackhole}
`, fn, op)
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWasmBadModules: modules that do not fit the ABI are refused by
// `weir functions deploy` with the problem named and nothing stored;
// guests that loop, run out of memory or trap fail their job with an error
// naming the function, while the workers stay up and run the next job.
func TestWasmBadModules(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	dir := t.TempDir()
	c := startCluster(t, 2, 2)

	notWasm := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notWasm, []byte("not a module\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ name, file, want string }{
		{"not-wasm", notWasm, "not a WebAssembly module"},
		{"missing-export", testGuest(t, dir, "noexport"), "missing export weir_process"},
		{"unknown-import", testGuest(t, dir, "badimport"), "imports weir.no_such_function, which the host does not have"},
		{"wrong-abi", testGuest(t, dir, "badversion"), "built for ABI version 2; this weir supports version 1"},
	} {
		out, err := c.weir("functions", "deploy", bad.name, bad.file)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("deploy %s: err = %v (stdout %q), want it to say %q", bad.name, err, out, bad.want)
		} else {
			t.Logf("deploy %s refused: %v", bad.name, strings.TrimSpace(err.Error()))
		}
	}
	stored, err := c.bucket.List(context.Background(), "functions/")
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) > 0 {
		t.Errorf("refused deploys stored %d objects, e.g. %s", len(stored), stored[0].Key)
	}

	guests := []struct {
		guest string
		flags []string
		want  string
	}{
		{"loop", []string{"--timeout", "1s"}, "ran longer than its timeout 1s"},
		{"oom", []string{"--memory", "32MiB"}, "memory at the limit of 32 MiB"},
		{"trap", nil, "out of bounds memory access"},
	}
	// These modules are sound until they run: compiled into the shared
	// cache first, as the other Wasm tests' are, so that the deploy's
	// check and the worker load them from there. The coordinator, built
	// with -race, took over 2 minutes (the CLI's limit) to compile one
	// beside the other tests.
	mods := make([]string, len(guests))
	for i, g := range guests {
		mods[i] = testGuest(t, dir, g.guest)
	}
	wasmtest.Precompile(t, mods...)
	for i, g := range guests {
		if _, err := c.deployFunction(g.guest, mods[i], g.flags...); err != nil {
			t.Fatal(err)
		}
		id := c.deploy(badGuestSpec(t, dir, g.guest))
		st := c.waitState(id, coordinator.JobFailed, 2*time.Minute)
		wantFn := fmt.Sprintf("function %s version 1 (operator f, subtask 0)", g.guest)
		if !strings.Contains(st.Error, wantFn) || !strings.Contains(st.Error, g.want) {
			t.Errorf("%s: job error %q, want it to name %q and say %q", g.guest, st.Error, wantFn, g.want)
		} else {
			t.Logf("%s: FAILED at attempt %d: %s", g.guest, st.Attempt, st.Error)
		}
	}

	c.mu.Lock()
	for name, p := range c.procs {
		select {
		case <-p.done:
			t.Errorf("%s exited while the bad guests ran", name)
		default:
		}
	}
	c.mu.Unlock()
	id := c.deploy(badGuestSpec(t, dir, ""))
	if st := c.waitState(id, coordinator.JobFinished, time.Minute); st.Totals.RecordsIn != 1000 {
		t.Errorf("the job after the bad guests read %d records, want 1000", st.Totals.RecordsIn)
	}
}
