package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/weirstream/weir/functions/wasm/wasmtest"
	"github.com/weirstream/weir/integration/testenv"
)

// TestRunExitStatus: `weir run` tells FINISHED (0, see TestEmbeddedWindows)
// from FAILED (1) and from a spec it refuses (2).
func TestRunExitStatus(t *testing.T) {
	dir := t.TempDir()
	port := testenv.FreePort(t) // nothing listens there
	failing := writeSpec(t, `
job: fails
sources:
  - {name: in, type: redis, addr: "127.0.0.1:`+strconv.Itoa(port)+`", stream: s, schema: {id: int64}}
sinks:
  - {name: out, input: in, type: stdout}
`)
	_, err := runWeir(os.Environ(), "run", failing, "--store", "file://"+dir)
	if code := exitCode(err); code != 1 {
		t.Errorf("a failing job: exit %d, want 1 (%v)", code, err)
	}
	if err == nil || !strings.Contains(err.Error(), "failed") || !strings.Contains(err.Error(), "in[0]") {
		t.Errorf("the failure should name the job state and the failing subtask: %v", err)
	}
	_, err = runWeir(os.Environ(), "run", "testdata/bad/wrong-type.yaml", "--store", "file://"+dir)
	if code := exitCode(err); code != 2 {
		t.Errorf("a refused spec: exit %d, want 2 (%v)", code, err)
	}
	if err == nil || !strings.Contains(err.Error(), "wrong-type.yaml:") {
		t.Errorf("the refusal should name the file and line: %v", err)
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestRunBesideACluster: with a cluster running and its environment in
// force (WEIR_REDIS_ADDR, WEIR_STORE of the cluster), `weir run` of a job
// whose Wasm function only the local store has runs embedded and
// FINISHES; the cluster's coordinator never lists the job, its workers
// never log it and its Redis holds no key of it.
func TestRunBesideACluster(t *testing.T) {
	c := startCluster(t, 2, 3)
	dir := t.TempDir()
	mod := filepath.Join(dir, "running-total.wasm")
	build := exec.Command("go", "build", "-trimpath", "-buildmode=c-shared", "-o", mod, "./examples/wasm/running-total")
	build.Dir = ".."
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build running-total: %v\n%s", err, out)
	}
	wasmtest.Precompile(t, mod)
	store := "file://" + filepath.Join(dir, "store")
	if out, err := runWeir(c.env, "functions", "deploy", "running-total", mod, "--store", store); err != nil {
		t.Fatalf("deploy to the local store: %v\n%s", err, out)
	}
	out, err := runWeir(c.env, "run", "../examples/wasm/running-total/job.yaml", "--store", store)
	if err != nil || !strings.Contains(out, "FINISHED") {
		t.Fatalf("weir run with the cluster's environment: %v\n%s", err, out)
	}
	list, err := c.weir("jobs", "list")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(list, "running-totals") {
		t.Errorf("the cluster lists the embedded job:\n%s", list)
	}
	logs, _ := filepath.Glob(filepath.Join(c.logDir, "*.log"))
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil && strings.Contains(string(b), "running-totals") {
			t.Errorf("%s mentions the embedded job", filepath.Base(l))
		}
	}
	if keys, err := c.redis.Do("KEYS", "*running-totals*"); err != nil || keys != "" {
		t.Errorf("the cluster's Redis holds keys of the embedded job: %q %v", keys, err)
	}
	t.Logf("weir run beside a cluster, with its environment: %s", strings.TrimSpace(out))
}
