package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm/registry"
	"github.com/weirstream/weir/functions/wasm/registry/registrytest"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// putVersion writes a function version into a directory store
// (registrytest.Store).
func putVersion(t *testing.T, store, name string, version int, module, doc string) registry.Version {
	t.Helper()
	b, err := blob.NewDir(store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	return registrytest.Store(t, b, name, version, module, registry.Description{
		Input:  []spec.ModuleColumn{{Name: "zone", Type: "string"}},
		Output: []spec.ModuleColumn{{Name: "zone", Type: "string"}, {Name: "n", Type: "int64"}}, Doc: doc})
}

// putJob stores a job spec pinning the given versions of function name,
// with a status in that state ("" for none).
func putJob(t *testing.T, store, id, state, name string, versions ...int) {
	t.Helper()
	b, err := blob.NewDir(store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	js := spec.Job{Name: "j"}
	for i, v := range versions {
		js.Operators = append(js.Operators, spec.Operator{Name: "op" + string(rune('a'+i)), Function: name, Module: &spec.Module{Name: name, Version: v}})
	}
	raw, _ := json.Marshal(js)
	ctx := context.Background()
	if err := b.Put(ctx, layout.SpecKey(id), raw); err != nil {
		t.Fatal(err)
	}
	if state != "" {
		raw, _ := json.Marshal(coordinator.JobStatus{ID: id, State: state})
		if err := b.Put(ctx, layout.StatusKey(id), raw); err != nil {
			t.Fatal(err)
		}
	}
}

func functionObjects(t *testing.T, store string) []string {
	t.Helper()
	var keys []string
	root := filepath.Join(store, "functions")
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(store, p)
			keys = append(keys, filepath.ToSlash(rel))
		}
		return nil
	})
	return keys
}

func TestFunctionsDeployRefusesNonWasm(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	file := filepath.Join(dir, "notes.wasm")
	if err := os.WriteFile(file, []byte("these are my notes, not a module\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr := weirFails(t, "functions", "deploy", "zone-stats", file, "--store", "file://"+store)
	if !strings.Contains(stderr, "deploy zone-stats from "+file+": ") {
		t.Errorf("stderr does not name the function and file:\n%s", stderr)
	}
	if objs := functionObjects(t, store); len(objs) != 0 {
		t.Errorf("a refused deploy stored %v", objs)
	}
	// The same through a coordinator.
	srv := newFunctionsCoordinator(t, store)
	stderr = weirFails(t, "functions", "deploy", "zone-stats", file, "--coordinator", srv.URL)
	if !strings.Contains(stderr, "deploy zone-stats from "+file+": ") {
		t.Errorf("stderr does not name the function and file:\n%s", stderr)
	}
	if objs := functionObjects(t, store); len(objs) != 0 {
		t.Errorf("a refused deploy stored %v", objs)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"functions", "deploy", "zone-stats", filepath.Join(dir, "missing.wasm"), "--store", "file://" + store}, "no such file"},
		{[]string{"functions", "deploy", "zone-stats", file, "--memory", "64MB", "--store", "file://" + store}, `--memory: size "64MB": want a whole number of bytes, or one with KiB, MiB or GiB`},
		{[]string{"functions", "deploy", "zone-stats", file, "--timeout", "0s", "--store", "file://" + store}, "--timeout 0s: want a positive duration"},
		{[]string{"functions", "deploy", "Zone", file, "--store", "file://" + store}, `function name "Zone": want a lower-case letter`},
		{[]string{"functions", "deploy", "surge-multiplier", file, "--store", "file://" + store}, `a Go function of that name is registered in this binary`},
		{[]string{"functions", "deploy", "zone-stats", file, "--memory", "16KiB", "--store", "file://" + store}, "memory 16KiB: want between 64KiB and 4GiB"},
	} {
		if stderr := weirFails(t, tc.args...); !strings.Contains(stderr, tc.want) {
			t.Errorf("weir %s: stderr %q, want %q", strings.Join(tc.args, " "), stderr, tc.want)
		}
	}
	if objs := functionObjects(t, store); len(objs) != 0 {
		t.Errorf("refused deploys stored %v", objs)
	}
}

// newFunctionsCoordinator serves a coordinator's API over the directory
// store (no Run: the functions API needs none).
func newFunctionsCoordinator(t *testing.T, store string) *httptest.Server {
	t.Helper()
	b, err := blob.NewDir(store)
	if err != nil {
		t.Fatal(err)
	}
	plane, xch := control.NewLocal(), exchange.NewLocal()
	c := coordinator.New(coordinator.Config{Plane: plane, Bucket: b, Transport: xch})
	srv := httptest.NewServer(c.Handler(nil))
	t.Cleanup(func() {
		srv.Close()
		_ = c.Close()
		_ = xch.Close()
		_ = plane.Close()
		_ = b.Close()
	})
	return srv
}

func TestFunctionsListDescribeDelete(t *testing.T) {
	for _, mode := range []string{"store", "coordinator"} {
		t.Run(mode, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "store")
			var where []string
			if mode == "store" {
				where = []string{"--store", "file://" + store}
			} else {
				where = []string{"--coordinator", newFunctionsCoordinator(t, store).URL}
			}
			args := func(a ...string) []string { return append(a, where...) }
			if mode == "store" {
				// Listing a store that does not exist does not create it.
				stderr := weirFails(t, args("functions", "list")...)
				if !strings.Contains(stderr, "no such file") {
					t.Errorf("list of a missing store: %s", stderr)
				}
				if _, err := os.Stat(store); err == nil {
					t.Error("list created the store")
				}
			}
			if err := os.MkdirAll(store, 0o755); err != nil {
				t.Fatal(err)
			}
			if out, _ := weir(t, args("functions", "list", "-o", "json")...); strings.TrimSpace(out) != "[]" {
				t.Errorf("list -o json of no functions = %q, want []", out)
			}
			putVersion(t, store, "zone-stats", 1, "one", "")
			v2 := putVersion(t, store, "zone-stats", 2, "two", "counts rides\nper zone")
			putVersion(t, store, "other", 1, "x", "")

			out, _ := weir(t, args("functions", "list")...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "other ") ||
				!strings.HasPrefix(lines[2], "zone-stats ") || !strings.Contains(lines[2], "counts rides per zone") || !strings.Contains(lines[2], "64MiB") {
				t.Errorf("list:\n%s", out)
			}
			var fs []registry.Function
			out, _ = weir(t, args("functions", "list", "-o", "json")...)
			if err := json.Unmarshal([]byte(out), &fs); err != nil || len(fs) != 2 || fs[1].Versions != 2 || fs[1].Latest.SHA256 != v2.SHA256 {
				t.Errorf("list -o json: %v %+v", err, fs)
			}

			// Jobs that pin it: running, without a status, ended.
			putJob(t, store, "live-00000001", coordinator.JobRunning, "zone-stats", 1, 2)
			putJob(t, store, "done-00000002", coordinator.JobFinished, "zone-stats", 2)
			if mode == "coordinator" {
				// The coordinator knows only the jobs it loaded: none.
				out, _ = weir(t, args("functions", "describe", "zone-stats")...)
				if !strings.Contains(out, "JOBS") || strings.Contains(out, "live-00000001") {
					t.Errorf("describe:\n%s", out)
				}
			} else {
				out, _ = weir(t, args("functions", "describe", "zone-stats")...)
				for _, want := range []string{"function zone-stats: 2 version(s), latest 2", "doc:     counts rides per zone",
					"input:   zone string", "output:  zone string, n int64", v2.SHA256[:12], "live-00000001"} {
					if !strings.Contains(out, want) {
						t.Errorf("describe lacks %q:\n%s", want, out)
					}
				}
				if strings.Contains(out, "done-00000002") {
					t.Errorf("describe names an ended job:\n%s", out)
				}
				var d coordinator.FunctionDetail
				out, _ = weir(t, args("functions", "describe", "zone-stats", "-o", "json")...)
				if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Versions) != 2 || len(d.Jobs) != 1 || d.Jobs[0].ID != "live-00000001" || len(d.Jobs[0].Versions) != 2 {
					t.Errorf("describe -o json: %v %+v", err, d)
				}
				stderr := weirFails(t, args("functions", "delete", "zone-stats")...)
				if !strings.Contains(stderr, "jobs that have not ended use it: live-00000001") {
					t.Errorf("delete of a function in use: %s", stderr)
				}
				if objs := functionObjects(t, store); len(objs) != 6 {
					t.Errorf("a refused delete removed objects: %v", objs)
				}
			}
			stderr := weirFails(t, args("functions", "describe", "nope")...)
			if !strings.Contains(stderr, `function "nope" is not deployed (deployed: other, zone-stats)`) {
				t.Errorf("describe of an unknown function: %s", stderr)
			}

			deleteArgs := args("functions", "delete", "zone-stats")
			if mode == "store" {
				deleteArgs = append(deleteArgs, "--force")
			}
			out, _ = weir(t, deleteArgs...)
			if strings.TrimSpace(out) != "zone-stats deleted (2 version(s))" {
				t.Errorf("delete: %q", out)
			}
			for _, o := range functionObjects(t, store) {
				if strings.HasPrefix(o, "functions/zone-stats/") && o != layout.FunctionDeletedKey("zone-stats") {
					t.Errorf("delete left %s", o)
				}
			}
			stderr = weirFails(t, args("functions", "delete", "zone-stats")...)
			if !strings.Contains(stderr, `not deployed (deployed: other)`) {
				t.Errorf("second delete: %s", stderr)
			}
		})
	}
}

// specNaming is a job whose operator names a function that is neither a
// Go function of this binary nor deployed.
const specNaming = `job: wasm
sources:
  - name: rides
    type: datagen
    count: 10
    schema: {zone: string, ts: timestamp_ms}
    eventTime: {column: ts}
operators:
  - name: stats
    input: rides
    keyBy: [zone]
    function: zone-stats
sinks:
  - {name: out, input: stats, type: stdout}
`

func TestRunNamesAnUndeployedFunction(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	putVersion(t, store, "other", 1, "x", "")
	file := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(file, []byte(specNaming), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := execWeir("run", file, "--store", "file://"+store)
	if code != 2 || !strings.Contains(stderr, file+":12: operators[stats].function: \"zone-stats\" is neither a Go function registered in this binary (registered: ") ||
		!strings.Contains(stderr, "nor a deployed Wasm function (deployed: other)") {
		t.Errorf("run: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(store, "jobs")); err == nil {
		t.Error("a refused run stored a job")
	}
	// weir deploy leaves deployed functions to the coordinator, which
	// refuses the same way.
	srv := newFunctionsCoordinator(t, store)
	stderr = weirFails(t, "deploy", file, "--coordinator", srv.URL)
	if !strings.Contains(stderr, file+":12: operators[stats].function: \"zone-stats\" is neither") {
		t.Errorf("deploy: %s", stderr)
	}
}

const passSpec = `job: pass
sources:
  - name: gen
    type: datagen
    count: 500
    schema: {k: string, v: int64}
    datagen: {fields: {k: {cardinality: 7}}}
operators:
  - name: p
    input: gen
    keyBy: [k]
    function: FUNCTION
sinks:
  - {name: out, input: p, type: files, path: out/OUT/, format: jsonl}
`

// TestFunctionsDeployAndRun deploys a module into a store, runs a job
// naming it in the embedded mode on that store, and checks the output and
// the pin the stored spec carries.
func TestFunctionsDeployAndRun(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: builds a guest")
	}
	mod := registrytest.Guest(t, "passthrough")
	raw, err := os.ReadFile(mod)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	hexSum := hex.EncodeToString(sum[:])
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	at := []string{"--store", "file://" + store}

	out, _ := weir(t, append([]string{"functions", "deploy", "pass", mod}, at...)...)
	if want := "pass version 1 sha256 " + hexSum + "\n"; out != want {
		t.Errorf("deploy printed %q, want %q", out, want)
	}
	var v registry.Version
	out, _ = weir(t, append([]string{"functions", "deploy", "pass", mod, "-o", "json"}, at...)...)
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Version != 1 || v.SHA256 != hexSum || len(v.Describe.Output) != 2 {
		t.Errorf("deploy of the same module again: %v %+v; want version 1", err, v)
	}
	out, _ = weir(t, append([]string{"functions", "deploy", "pass", mod, "--memory", "16MiB", "--timeout", "2s"}, at...)...)
	if !strings.HasPrefix(out, "pass version 2 ") {
		t.Errorf("deploy with other limits printed %q, want version 2", out)
	}

	run := func(function, outDir string) *spec.Job {
		t.Helper()
		file := filepath.Join(dir, outDir+".yaml")
		src := strings.NewReplacer("FUNCTION", function, "OUT", outDir).Replace(passSpec)
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, _ := weir(t, append([]string{"run", file}, at...)...)
		if !strings.Contains(stdout, "FINISHED") || !strings.Contains(stdout, "500 rows to sinks") {
			t.Fatalf("run %s: %s", function, stdout)
		}
		var rows int
		files, _ := filepath.Glob(filepath.Join(store, "out", outDir, "*.jsonl"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			rows += strings.Count(string(b), "\n")
		}
		if rows != 500 {
			t.Errorf("run %s wrote %d rows, want 500", function, rows)
		}
		specs, _ := filepath.Glob(filepath.Join(store, "jobs", "*", "spec.json"))
		for _, f := range specs {
			b, _ := os.ReadFile(f)
			var js spec.Job
			if err := json.Unmarshal(b, &js); err != nil {
				t.Fatal(err)
			}
			if js.Sinks[0].Path == "out/"+outDir+"/" {
				return &js
			}
		}
		t.Fatalf("no stored spec of the run of %s", function)
		return nil
	}
	latest := run("pass", "latest")
	if m := latest.Operators[0].Module; m == nil || m.Name != "pass" || m.Version != 2 || m.SHA256 != hexSum || m.MemoryBytes != 16<<20 || m.Timeout != spec.Duration(2*time.Second) {
		t.Errorf("the stored spec pins %+v, want pass version 2", m)
	}
	if first := run("pass@1", "first"); first.Operators[0].Module.Version != 1 || first.Operators[0].Function != "pass@1" {
		t.Errorf("pass@1 pinned %+v", first.Operators[0].Module)
	}

	// Deleted (the jobs that pinned it have ended), it is gone for a new
	// run too.
	weir(t, append([]string{"functions", "delete", "pass"}, at...)...)
	stderr := weirFails(t, append([]string{"run", filepath.Join(dir, "latest.yaml")}, at...)...)
	if !strings.Contains(stderr, `"pass" is neither a Go function`) {
		t.Errorf("run after delete: %s", stderr)
	}
}

// TestDemoWasm deploys the module into the demo's store under
// surge-multiplier-wasm and plans the demo with it: the passthrough guest
// does not read the surge operator's input, which the planner says.
func TestDemoWasm(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: builds a guest")
	}
	mod := registrytest.Guest(t, "passthrough")
	dir := filepath.Join(t.TempDir(), "demo")
	stdout, stderr, code := execWeir("demo", "--wasm", mod, "--dir", dir, "--duration", "1s")
	if code == 0 || !strings.Contains(stdout, "is surge-multiplier-wasm version 1") ||
		!strings.Contains(stderr, `examples/surge-pricing.yaml:27: operators[surge].function: surge-multiplier-wasm (version 1) reads column "k"`) {
		t.Errorf("demo --wasm: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "functions", wasmSurge, "versions", "000001.json")); err != nil {
		t.Errorf("the demo's store lacks the deployed module: %v", err)
	}
	stderr = weirFails(t, "demo", "--wasm", filepath.Join(dir, "missing.wasm"), "--dir", dir)
	if !strings.Contains(stderr, "missing.wasm: no such file") {
		t.Errorf("demo --wasm of a missing file: %s", stderr)
	}
}

func TestJobsUpgrade(t *testing.T) {
	var got atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/jobs/{id}/upgrade", func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.PathValue("id") + " " + r.URL.Query().Get("function"))
		if r.PathValue("id") != "up-00000001" {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(coordinator.APIError{Error: "upgrade x: refused"})
			return
		}
		_ = json.NewEncoder(w).Encode(coordinator.UpgradeResponse{Job: "up-00000002", Savepoint: "jobs/up-00000001/savepoints/sp-1/manifest.json",
			Function: "pass", Version: 3, Operators: []string{"p"}})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	out, _ := weir(t, "jobs", "upgrade", "up-00000001", "--function", "pass@3", "--coordinator", srv.URL)
	if want := "upgraded up-00000001: up-00000002 runs pass@3 from savepoint jobs/up-00000001/savepoints/sp-1/manifest.json\n"; out != want {
		t.Errorf("upgrade printed %q, want %q", out, want)
	}
	if got.Load() != "up-00000001 pass@3" {
		t.Errorf("the coordinator got %v", got.Load())
	}
	var resp coordinator.UpgradeResponse
	out, _ = weir(t, "jobs", "upgrade", "up-00000001", "--function", "pass@3", "--coordinator", srv.URL, "-o", "json")
	if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Job != "up-00000002" {
		t.Errorf("-o json: %v %+v", err, resp)
	}
	if stderr := weirFails(t, "jobs", "upgrade", "other-00000001", "--function", "pass@3", "--coordinator", srv.URL); !strings.Contains(stderr, "upgrade x: refused") {
		t.Errorf("refused upgrade: %s", stderr)
	}
	if stderr := weirFails(t, "jobs", "upgrade", "up-00000001", "--coordinator", srv.URL); !strings.Contains(stderr, "--function: missing") {
		t.Errorf("upgrade without --function: %s", stderr)
	}
}
