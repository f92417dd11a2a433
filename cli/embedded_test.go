package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/integration/testenv"
)

// boundedSpec ends by itself: 300 events into a files sink.
const boundedSpec = `job: bounded
sources: [{name: gen, type: datagen, count: 300, schema: {k: string, v: int64}}]
sinks: [{name: out, input: gen, type: files, path: out/, format: jsonl}]
`

// TestRunIgnoresClusterEnv runs a job with WEIR_REDIS_ADDR pointing at
// nothing, and at a real Redis that must stay empty: weir run is embedded,
// whatever the environment says.
func TestRunIgnoresClusterEnv(t *testing.T) {
	r := testenv.StartRedis(t)
	for _, addr := range []string{"127.0.0.1:1", r.Addr} {
		dir := inConfigDir(t)
		t.Setenv("WEIR_REDIS_ADDR", addr)
		// A config file saying the same is ignored as well.
		writeFile(t, "weir.yaml", "redis-addr: "+addr+"\n")
		writeFile(t, "job.yaml", boundedSpec)
		store := filepath.Join(dir, "store")
		stdout, _ := weir(t, "run", "job.yaml", "--store", "file://"+store)
		if !strings.Contains(stdout, "FINISHED") || !strings.Contains(stdout, "300 rows to sinks") {
			t.Fatalf("WEIR_REDIS_ADDR=%s: run printed %q", addr, stdout)
		}
		if rows := jsonlRows(t, filepath.Join(store, "out")); rows != 300 {
			t.Errorf("WEIR_REDIS_ADDR=%s: the run wrote %d rows, want 300", addr, rows)
		}
	}
	if n, err := r.Do("DBSIZE"); err != nil || n != "0" {
		t.Errorf("the cluster's Redis holds %s keys (%v) after an embedded run, want 0", n, err)
	}
}

// TestEmbeddedRefusesRedisAddr checks that --redis-addr on weir run or
// weir demo is refused and points at weir deploy.
func TestEmbeddedRefusesRedisAddr(t *testing.T) {
	dir := inConfigDir(t)
	writeFile(t, "job.yaml", boundedSpec)
	for _, args := range [][]string{
		{"run", "--redis-addr", "127.0.0.1:1", "job.yaml"},
		{"demo", "--redis-addr", "127.0.0.1:1", "--duration", "1s"},
	} {
		_, stderr, code := execWeir(args...)
		if code != 2 || !strings.Contains(stderr, "weir "+args[0]+" runs embedded") || !strings.Contains(stderr, "weir deploy runs a job on a cluster") {
			t.Errorf("weir %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "weir-data")); err == nil {
		t.Error("a refused run opened a store")
	}
}

// jsonlRows counts the rows in the .jsonl files of a files sink's directory.
func jsonlRows(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no output in %s (%v)", dir, err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(b), "\n")
	}
	return n
}
