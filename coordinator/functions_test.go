package coordinator_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm/registry"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// storeVersion writes a function version into the bucket as Deploy
// would, without a module wasm.Check accepts: for tests of what reads
// versions.
func storeVersion(t *testing.T, b blob.Bucket, name string, version int, module string) registry.Version {
	t.Helper()
	sum := sha256.Sum256([]byte(module))
	v := registry.Version{Name: name, Version: version, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(module)), ABI: 1,
		Memory: 64 << 20, Timeout: spec.Duration(5 * time.Second), Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Describe: registry.Description{Input: []spec.ModuleColumn{{Name: "id", Type: "int64"}}, Output: []spec.ModuleColumn{{Name: "id", Type: "int64"}}}}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Put(ctx, layout.ModuleKey(name, v.SHA256), []byte(module)); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, layout.VersionKey(name, version), raw); err != nil {
		t.Fatal(err)
	}
	return v
}

// wasmJob names a function that is neither a Go function nor deployed.
const wasmJob = `job: wasmy
sources:
  - name: nums
    type: datagen
    count: 10
    schema: {id: int64, ts: timestamp_ms}
    eventTime: {column: ts}
operators:
  - name: f
    input: nums
    keyBy: [id]
    function: no-such-function
sinks:
  - {name: out, input: f, type: stdout}
`

func TestFunctionsAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := httptest.NewServer(e.c.Handler(nil))
	t.Cleanup(srv.Close)
	api := apiClient{t: t, url: srv.URL}

	var fs []registry.Function
	api.call("GET", "/api/v1/functions", "", http.StatusOK, &fs)
	if fs == nil || len(fs) != 0 {
		t.Fatalf("functions of an empty bucket = %#v, want []", fs)
	}

	// A file that is not WebAssembly: 400 with the check's error, and
	// nothing stored.
	var apiErr coordinator.APIError
	api.call("POST", "/api/v1/functions/zone-stats", "hello, I am text", http.StatusBadRequest, &apiErr)
	if apiErr.Error == "" {
		t.Fatal("400 without an error message")
	}
	for _, tc := range []struct{ path, want string }{
		{"/api/v1/functions/Zone", `function name "Zone": want a lower-case letter`},
		{"/api/v1/functions/zone-stats?memory=64MB", `memory: size "64MB": want a whole number of bytes`},
		{"/api/v1/functions/zone-stats?memory=1KiB", `memory 1KiB: want between 64KiB and 4GiB`},
		{"/api/v1/functions/zone-stats?timeout=soon", `timeout: invalid duration "soon"`},
		{"/api/v1/functions/zone-stats", "module: empty file"},
	} {
		body := "\x00asm"
		if tc.want == "module: empty file" {
			body = ""
		}
		apiErr = coordinator.APIError{}
		api.call("POST", tc.path, body, http.StatusBadRequest, &apiErr)
		if !strings.Contains(apiErr.Error, tc.want) {
			t.Errorf("POST %s: %q, want %q", tc.path, apiErr.Error, tc.want)
		}
	}
	if objs, _ := e.bucket.List(e.ctx, layout.FunctionsPrefix); len(objs) != 0 {
		t.Fatalf("refused deploys stored %v", objs)
	}

	apiErr = coordinator.APIError{}
	api.call("GET", "/api/v1/functions/zone-stats", "", http.StatusNotFound, &apiErr)
	if !strings.Contains(apiErr.Error, `function "zone-stats" is not deployed (deployed: none)`) {
		t.Errorf("GET of an unknown function: %q", apiErr.Error)
	}
	api.call("DELETE", "/api/v1/functions/zone-stats", "", http.StatusNotFound, nil)

	storeVersion(t, e.bucket, "zone-stats", 1, "one")
	storeVersion(t, e.bucket, "zone-stats", 2, "two")
	api.call("GET", "/api/v1/functions", "", http.StatusOK, &fs)
	if len(fs) != 1 || fs[0].Name != "zone-stats" || fs[0].Versions != 2 || fs[0].Latest.Version != 2 {
		t.Fatalf("functions = %+v", fs)
	}
	var d coordinator.FunctionDetail
	api.call("GET", "/api/v1/functions/zone-stats", "", http.StatusOK, &d)
	if d.Name != "zone-stats" || len(d.Versions) != 2 || d.Versions[0].Version != 1 || d.Jobs == nil || len(d.Jobs) != 0 {
		t.Fatalf("detail = %+v", d)
	}
	api.call("DELETE", "/api/v1/functions/zone-stats?force=maybe", "", http.StatusBadRequest, nil)
	d = coordinator.FunctionDetail{}
	api.call("DELETE", "/api/v1/functions/zone-stats", "", http.StatusOK, &d)
	if d.Name != "zone-stats" || len(d.Versions) != 2 {
		t.Errorf("DELETE returned %+v", d)
	}
	api.call("GET", "/api/v1/functions/zone-stats", "", http.StatusNotFound, nil)
}

func TestSubmitNamesAnUnknownFunction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	storeVersion(t, e.bucket, "zone-stats", 1, "one")
	srv := httptest.NewServer(e.c.Handler(nil))
	t.Cleanup(srv.Close)
	api := apiClient{t: t, url: srv.URL}
	var apiErr coordinator.APIError
	api.call("POST", "/api/v1/jobs?file=wasm.yaml", wasmJob, http.StatusBadRequest, &apiErr)
	if len(apiErr.Problems) != 1 {
		t.Fatalf("problems = %+v (%s)", apiErr.Problems, apiErr.Error)
	}
	p := apiErr.Problems[0]
	if p.Field != "operators[f].function" || p.File != "wasm.yaml" || p.Line != 12 ||
		!strings.Contains(p.Msg, `"no-such-function" is neither a Go function registered in this binary (registered: `) ||
		!strings.Contains(p.Msg, "nor a deployed Wasm function (deployed: zone-stats)") {
		t.Errorf("problem = %+v", p)
	}
	if objs, _ := e.bucket.List(e.ctx, layout.JobsPrefix); len(objs) != 0 {
		t.Errorf("a refused job stored %v", objs)
	}
}

func TestStoredFunctionJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pin := func(name string, v int) *spec.Module { return &spec.Module{Name: name, Version: v} }
	store := func(id string, status *coordinator.JobStatus, mods ...*spec.Module) {
		js := spec.Job{Name: "j"}
		for i, m := range mods {
			js.Operators = append(js.Operators, spec.Operator{Name: string(rune('a' + i)), Function: m.Name, Module: m})
		}
		raw, _ := json.Marshal(js)
		if err := b.Put(ctx, layout.SpecKey(id), raw); err != nil {
			t.Fatal(err)
		}
		if status != nil {
			raw, _ := json.Marshal(status)
			if err := b.Put(ctx, layout.StatusKey(id), raw); err != nil {
				t.Fatal(err)
			}
		}
	}
	store("running-00000001", &coordinator.JobStatus{State: coordinator.JobRunning}, pin("f", 1), pin("f", 2), pin("g", 1))
	store("nostatus-00000002", nil, pin("f", 2))
	store("finished-00000003", &coordinator.JobStatus{State: coordinator.JobFinished}, pin("f", 1))
	store("failed-00000004", &coordinator.JobStatus{State: coordinator.JobFailed, Error: "boom"}, pin("f", 1))
	store("interrupted-00000005", &coordinator.JobStatus{State: coordinator.JobFailed, Error: "coordinator restarted while the job ran"}, pin("f", 3))
	store("other-00000006", &coordinator.JobStatus{State: coordinator.JobRunning}, pin("g", 1))
	if err := b.Put(ctx, layout.SpecKey("junk-00000007"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	got, err := coordinator.StoredFunctionJobs(ctx, b, "f")
	if err != nil {
		t.Fatal(err)
	}
	want := []coordinator.FunctionJob{{ID: "interrupted-00000005", Versions: []int{3}}, {ID: "nostatus-00000002", Versions: []int{2}}, {ID: "running-00000001", Versions: []int{1, 2}}}
	if !slices.EqualFunc(got, want, func(a, b coordinator.FunctionJob) bool { return a.ID == b.ID && slices.Equal(a.Versions, b.Versions) }) {
		t.Errorf("StoredFunctionJobs = %+v\nwant %+v", got, want)
	}
	if got, err := coordinator.StoredFunctionJobs(ctx, b, "h"); err != nil || got == nil || len(got) != 0 {
		t.Errorf("StoredFunctionJobs(h) = %#v, %v; want []", got, err)
	}
}

// buildPassthrough builds the passthrough test guest of package wasm: it
// emits its input (k string, v int64) unchanged.
func buildPassthrough(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "passthrough.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./testdata/guests/passthrough")
	cmd.Dir = "../functions/wasm"
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the passthrough guest: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// slowPass runs the function pass for about a minute: long enough to
// find it running.
const slowPass = `job: slow
sources:
  - name: gen
    type: datagen
    rate: 200
    count: 12000
    schema: {k: string, v: int64}
operators:
  - {name: p, input: gen, keyBy: [k], function: pass}
sinks:
  - {name: out, input: p, type: files, path: out/slow/, format: jsonl}
`

func TestFunctionsPinnedByARunningJob(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest")
	}
	t.Parallel()
	mod := buildPassthrough(t)
	e := newEnv(t)
	e.startWorker("w1", 2, workerOpts{})
	srv := httptest.NewServer(e.c.Handler(nil))
	t.Cleanup(srv.Close)
	api := apiClient{t: t, url: srv.URL}

	var v registry.Version
	api.call("POST", "/api/v1/functions/pass?memory=32MiB&timeout=3s", string(mod), http.StatusOK, &v)
	if v.Name != "pass" || v.Version != 1 || v.Memory != 32<<20 || v.Timeout != spec.Duration(3*time.Second) || len(v.Describe.Input) != 1 {
		t.Fatalf("deploy = %+v", v)
	}
	var sub coordinator.SubmitResponse
	api.call("POST", "/api/v1/jobs", slowPass, http.StatusCreated, &sub)
	e.waitFor(sub.ID, "rows through the function", func(st coordinator.JobStatus) bool { return st.Totals.SinkIn > 0 })

	// The stored spec pins version 1; a new version changes nothing for
	// the job.
	raw, err := e.bucket.Get(e.ctx, layout.SpecKey(sub.ID))
	if err != nil {
		t.Fatal(err)
	}
	var stored spec.Job
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	if m := stored.Operators[0].Module; m == nil || m.Version != 1 || m.SHA256 != v.SHA256 || stored.Operators[0].Function != "pass" {
		t.Fatalf("stored spec pins %+v", stored.Operators[0].Module)
	}
	api.call("POST", "/api/v1/functions/pass?memory=16MiB", string(mod), http.StatusOK, &v)
	if v.Version != 2 {
		t.Fatalf("second deploy = version %d", v.Version)
	}
	var d coordinator.FunctionDetail
	api.call("GET", "/api/v1/functions/pass", "", http.StatusOK, &d)
	if len(d.Versions) != 2 || len(d.Jobs) != 1 || d.Jobs[0].ID != sub.ID || !slices.Equal(d.Jobs[0].Versions, []int{1}) {
		t.Fatalf("detail = %+v", d)
	}
	var apiErr coordinator.APIError
	api.call("DELETE", "/api/v1/functions/pass", "", http.StatusConflict, &apiErr)
	if !strings.Contains(apiErr.Error, "jobs that have not ended use it: "+sub.ID) {
		t.Errorf("409 body = %+v", apiErr)
	}
	api.call("GET", "/api/v1/functions/pass", "", http.StatusOK, nil)

	// Ended, the job no longer holds the function.
	api.call("POST", "/api/v1/jobs/"+sub.ID+"/cancel", "", http.StatusAccepted, nil)
	api.waitState(sub.ID, coordinator.JobCanceled)
	api.call("GET", "/api/v1/functions/pass", "", http.StatusOK, &d)
	if len(d.Jobs) != 0 {
		t.Errorf("jobs after the cancel: %+v", d.Jobs)
	}

	// Force deletes under a running job.
	api.call("POST", "/api/v1/jobs", slowPass, http.StatusCreated, &sub)
	e.waitRunning(sub.ID)
	api.call("DELETE", "/api/v1/functions/pass?force=true", "", http.StatusOK, &d)
	if len(d.Jobs) != 1 || d.Jobs[0].ID != sub.ID || !slices.Equal(d.Jobs[0].Versions, []int{2}) {
		t.Errorf("forced delete returned %+v", d)
	}
	api.call("GET", "/api/v1/functions/pass", "", http.StatusNotFound, nil)
	api.call("POST", "/api/v1/jobs/"+sub.ID+"/cancel", "", http.StatusAccepted, nil)
	api.waitState(sub.ID, coordinator.JobCanceled)
}
