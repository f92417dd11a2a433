package coordinator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm"
	"github.com/weirstream/weir/functions/wasm/registry"
	"github.com/weirstream/weir/functions/wasm/registry/registrytest"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

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

	registrytest.Store(t, e.bucket, "zone-stats", 1, "one", registry.Description{})
	registrytest.Store(t, e.bucket, "zone-stats", 2, "two", registry.Description{})
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
	registrytest.Store(t, e.bucket, "zone-stats", 1, "one", registry.Description{})
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

// wasmStartWithin bounds the wait for a Wasm job's first rows or
// checkpoint: its subtasks open once the worker has compiled the guest,
// which takes wazero tens of seconds under -race on a busy 2-core machine
// (one CI run needed more than 20 s).
const wasmStartWithin = 2 * time.Minute

// functionsEnv is a coordinator with a worker and its API, and the
// passthrough test guest of package wasm, which emits its input (k string,
// v int64) unchanged.
func functionsEnv(t *testing.T) (*env, apiClient, []byte) {
	t.Helper()
	mod, err := os.ReadFile(registrytest.Guest(t, "passthrough"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWithin(t, 4*time.Minute)
	e.startWorker("w1", 4, workerOpts{})
	srv := httptest.NewServer(e.c.Handler(nil))
	t.Cleanup(srv.Close)
	return e, apiClient{t: t, url: srv.URL}, mod
}

// deploy posts a module to the API with a timeout that leaves room for
// wasm.Check compiling it on a busy machine (under -race).
func (c apiClient) deploy(query string, module []byte) registry.Version {
	c.t.Helper()
	client := &http.Client{Timeout: 3 * time.Minute}
	resp, err := client.Post(c.url+"/api/v1/functions/pass"+query, "application/wasm", bytes.NewReader(module))
	if err != nil {
		c.t.Fatalf("deploy: %v", err)
	}
	defer resp.Body.Close()
	var v registry.Version
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("deploy: %s, %v", resp.Status, err)
	}
	return v
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
		t.Skip("short mode: builds a guest")
	}
	t.Parallel()
	e, api, mod := functionsEnv(t)

	v := api.deploy("?memory=32MiB&timeout=3s", mod)
	if v.Name != "pass" || v.Version != 1 || v.Memory != 32<<20 || v.Timeout != spec.Duration(3*time.Second) || len(v.Describe.Input) != 1 {
		t.Fatalf("deploy = %+v", v)
	}
	var sub coordinator.SubmitResponse
	api.call("POST", "/api/v1/jobs", slowPass, http.StatusCreated, &sub)
	e.waitForWithin(sub.ID, "rows through the function", wasmStartWithin, func(st coordinator.JobStatus) bool { return st.Totals.SinkIn > 0 })

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
	if v = api.deploy("?memory=16MiB", mod); v.Version != 2 {
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

	// Force deletes under a running job (which fails if it loads the
	// module again: a restart, a recovery or a subtask opening late).
	api.call("POST", "/api/v1/jobs", slowPass, http.StatusCreated, &sub)
	e.waitForWithin(sub.ID, "rows through the function", wasmStartWithin, func(st coordinator.JobStatus) bool { return st.Totals.SinkIn > 0 })
	api.call("DELETE", "/api/v1/functions/pass?force=true", "", http.StatusOK, &d)
	if len(d.Jobs) != 1 || d.Jobs[0].ID != sub.ID || !slices.Equal(d.Jobs[0].Versions, []int{2}) {
		t.Errorf("forced delete returned %+v", d)
	}
	api.call("GET", "/api/v1/functions/pass", "", http.StatusNotFound, nil)
	if code, body := api.do("POST", "/api/v1/jobs/"+sub.ID+"/cancel", ""); code != http.StatusAccepted && code != http.StatusConflict {
		t.Fatalf("cancel = %d: %s", code, body)
	}
	e.wait(sub.ID, 20*time.Second)
}

// upgradable checkpoints, so that it can move to another version of pass
// through a savepoint.
const upgradable = `job: up
parallelism: 2
checkpoint: {interval: 200ms}
sources:
  - name: gen
    type: datagen
    rate: 500
    count: 6000
    schema: {k: string, v: int64}
    datagen: {fields: {k: {cardinality: 16}}}
operators:
  - {name: p, input: gen, keyBy: [k], function: pass@1}
sinks:
  - {name: out, input: p, type: files, path: out/up/, format: jsonl}
`

func TestUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: builds a guest")
	}
	t.Parallel()
	e, api, mod := functionsEnv(t)

	// Version 1, a version 2 of other output, and version 3 (the same
	// module with another memory limit) are deployed before the job (which
	// names pass@1) starts, so that no slow compile under -race happens
	// while the job runs towards its end.
	api.deploy("", mod)
	registrytest.Store(t, e.bucket, "pass", 2, "other output", registry.Description{Output: []spec.ModuleColumn{{Name: "id", Type: "int64"}}})
	api.deploy("?memory=16MiB", mod)
	var sub coordinator.SubmitResponse
	api.call("POST", "/api/v1/jobs", upgradable, http.StatusCreated, &sub)
	e.waitForWithin(sub.ID, "a checkpoint and rows out", wasmStartWithin, func(st coordinator.JobStatus) bool {
		return st.Checkpoints != nil && st.Checkpoints.Completed > 0 && st.Totals.SinkIn > 0
	})

	// Refused before anything stops.
	var apiErr coordinator.APIError
	api.call("POST", "/api/v1/jobs/"+sub.ID+"/upgrade?function=pass@2", "", http.StatusConflict, &apiErr)
	if !strings.Contains(apiErr.Error, "pass@2 emits (id int64), but operators[p] runs pass@1, which emits (k string, v int64)") {
		t.Errorf("upgrade to other output: %q", apiErr.Error)
	}
	api.call("POST", "/api/v1/jobs/"+sub.ID+"/upgrade?function=pass@1", "", http.StatusConflict, &apiErr)
	if !strings.Contains(apiErr.Error, "its operators already run pass@1") {
		t.Errorf("upgrade to the running version: %q", apiErr.Error)
	}
	api.call("POST", "/api/v1/jobs/"+sub.ID+"/upgrade?function=pass@9", "", http.StatusNotFound, &apiErr)
	if !strings.Contains(apiErr.Error, `function "pass" has no version 9 (versions: 1, 2, 3)`) {
		t.Errorf("upgrade to a missing version: %q", apiErr.Error)
	}
	api.call("POST", "/api/v1/jobs/"+sub.ID+"/upgrade", "", http.StatusBadRequest, nil)
	api.call("POST", "/api/v1/jobs/no-such-00000000/upgrade?function=pass@1", "", http.StatusNotFound, nil)
	if st := api.status(sub.ID); st.State != coordinator.JobRunning {
		t.Fatalf("a refused upgrade left the job %s", st.State)
	}

	var up coordinator.UpgradeResponse
	api.call("POST", "/api/v1/jobs/"+sub.ID+"/upgrade?function=pass@3", "", http.StatusOK, &up)
	if up.Job == "" || up.Job == sub.ID || up.Savepoint == "" || up.Function != "pass" || up.Version != 3 || !slices.Equal(up.Operators, []string{"p"}) {
		t.Fatalf("upgrade = %+v", up)
	}
	if st := api.status(sub.ID); st.State != coordinator.JobFinished || st.Message != "stopped with savepoint "+up.Savepoint {
		t.Errorf("the old job is %s (%q), want FINISHED, stopped with savepoint %s", st.State, st.Message, up.Savepoint)
	}
	raw, err := e.bucket.Get(e.ctx, layout.SpecKey(up.Job))
	if err != nil {
		t.Fatal(err)
	}
	var stored spec.Job
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	if m := stored.Operators[0].Module; m == nil || m.Version != 3 || m.MemoryBytes != 16<<20 || stored.Operators[0].Function != "pass@3" {
		t.Errorf("the new job pins %+v (function %q)", m, stored.Operators[0].Function)
	}
	if origin, err := e.bucket.Get(e.ctx, layout.OriginKey(up.Job)); err != nil || strings.TrimSpace(string(origin)) != up.Savepoint {
		t.Errorf("the new job's origin = %q, %v; want %s", origin, err, up.Savepoint)
	}
	st := e.wait(up.Job, 60*time.Second)
	if st.State != coordinator.JobFinished {
		t.Fatalf("the upgraded job ended %s: %s", st.State, st.Error)
	}
	// Across the two jobs every input row came out once.
	seen := map[int64]int{}
	for _, r := range e.readJSONL("out/up/") {
		n, err := r["v"].(json.Number).Int64()
		if err != nil {
			t.Fatalf("row %v: %v", r, err)
		}
		seen[n]++
	}
	for i := int64(0); i < 6000; i++ {
		if seen[i] != 1 {
			t.Fatalf("row v=%d came out %d times (%d distinct rows in all)", i, seen[i], len(seen))
		}
	}
	if len(seen) != 6000 {
		t.Errorf("%d distinct rows, want 6000", len(seen))
	}
	api.call("POST", "/api/v1/jobs/"+sub.ID+"/upgrade?function=pass@3", "", http.StatusConflict, nil)
}

// TestSubmitChecksFunctionConfig: a Wasm function that refuses its config
// in weir_open makes the submit fail with its message, and nothing is
// stored.
func TestSubmitChecksFunctionConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: builds a guest")
	}
	t.Parallel()
	e, api, mod := functionsEnv(t)
	api.deploy("", mod)
	refusing := strings.Replace(slowPass, "function: pass}", "function: pass, config: {refuse: true}}", 1)
	var apiErr coordinator.APIError
	api.call("POST", "/api/v1/jobs", refusing, http.StatusBadRequest, &apiErr)
	if !strings.Contains(apiErr.Error, "operators[p].config") || !strings.Contains(apiErr.Error, "passthrough: config refuse: this guest refuses it") {
		t.Fatalf("submit error %q", apiErr.Error)
	}
	if specs, err := e.bucket.List(context.Background(), "jobs/"); err != nil || len(specs) != 0 {
		t.Fatalf("a refused submit stored %d objects (%v)", len(specs), err)
	}
}

// echoSpec runs the echo test guest (functions/wasm/testdata/guests/echo)
// over count rows of 20 keys: every row comes out with seen, the number
// of rows its key has had, kept in the guest's ValueState.
func echoSpec(path string, count int, function string) string {
	src := fmt.Sprintf(`  - name: gen
    type: datagen
    rate: 800
    count: %d
    schema: {k: string, v: int64, ts: timestamp_ms}
    datagen: {seed: 5, fields: {k: {cardinality: 20}}}`, count)
	return fmt.Sprintf(`job: echo
parallelism: 2
checkpoint: {interval: 300ms}
sources:
%s
operators:
  - {name: e, input: gen, keyBy: [k], function: %s}
sinks:
  - {name: out, input: e, type: files, path: %s/, format: jsonl}
`, src, function, path)
}

// TestWasmStateRescales stops a job of the echo guest with a savepoint and
// resumes it at parallelism 3 and 1: the guest's keyed state moves with
// its key groups, so every key's seen counter goes on from where it was,
// each value exactly once across the jobs.
func TestWasmStateRescales(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: builds a guest")
	}
	t.Parallel()
	// The guest first: e's time budget is for the job, not the build.
	mod, err := os.ReadFile(registrytest.Guest(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	e, _, _ := functionsEnv(t)
	// Through the coordinator, whose engine then has the module compiled
	// when the job is submitted (registry.Deploy alone compiles it anew).
	if _, err := e.c.DeployFunction(e.ctx, "echo", mod, wasm.Limits{}); err != nil {
		t.Fatal(err)
	}
	id := e.submitSpec(echoSpec("first", 6000, "echo"), coordinator.SubmitOptions{})
	e.waitForWithin(id, "a checkpoint", wasmStartWithin, func(st coordinator.JobStatus) bool {
		return st.Checkpoints != nil && st.Checkpoints.Completed >= 2
	})
	key, err := e.c.StopWithSavepoint(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st := e.wait(id, 20*time.Second); st.State != coordinator.JobFinished || st.Message != "stopped with savepoint "+key {
		t.Fatalf("stopped job is %s (%q), want FINISHED, stopped with savepoint %s", st.State, st.Message, key)
	}
	first := e.readJSONL("first/")
	if len(first) == 0 || len(first) >= 6000 {
		t.Fatalf("%d rows before the savepoint", len(first))
	}
	for _, p := range []int{3, 1} {
		path := fmt.Sprintf("p%d", p)
		rid := e.submitSpec(echoSpec(path, 6000, "echo"), coordinator.SubmitOptions{FromSavepoint: key, Parallelism: p})
		if st := e.wait(rid, time.Minute); st.State != coordinator.JobFinished {
			t.Fatalf("restore at parallelism %d: %s %s", p, st.State, st.Error)
		}
		seenOnce(t, fmt.Sprintf("savepoint after %d rows, resumed at parallelism %d", len(first), p), append(slices.Clone(first), e.readJSONL(path+"/")...), 6000)
	}
}

// seenOnce checks the echo guest's output rows: every key's seen counter
// takes each value 1..n exactly once, over want rows in all.
func seenOnce(t *testing.T, what string, rows []map[string]any, want int) {
	t.Helper()
	seen := map[string][]int64{}
	n := 0
	for _, r := range rows {
		if v, _ := r["v"].(json.Number); v == "-1" {
			continue // a timer's row
		}
		k, _ := r["k"].(string)
		c, err := r["seen"].(json.Number).Int64()
		if err != nil {
			t.Fatalf("%s: row %v: seen: %v", what, r, err)
		}
		seen[k] = append(seen[k], c)
		n++
	}
	if n != want {
		t.Errorf("%s: %d rows, want %d", what, n, want)
	}
	for k, cs := range seen {
		slices.Sort(cs)
		for i, c := range cs {
			if c != int64(i+1) {
				t.Fatalf("%s: key %s: seen values %v... are not 1..%d once each", what, k, cs[max(0, i-3):min(len(cs), i+3)], len(cs))
			}
		}
	}
	t.Logf("%s: %d keys, each counted 1..n exactly once", what, len(seen))
}

// TestWasmUpgradeKeepsState upgrades a running job of the echo guest to
// another version of it: the new job starts from the old one's savepoint
// with the new pin, and every key's counter goes on where it was.
func TestWasmUpgradeKeepsState(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: builds a guest")
	}
	t.Parallel()
	// The guest first: e's time budget is for the job, not the build.
	mod, err := os.ReadFile(registrytest.Guest(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	e, _, _ := functionsEnv(t)
	// Through the coordinator, whose engine then has the module compiled
	// when the job is submitted (registry.Deploy alone compiles it anew).
	if _, err := e.c.DeployFunction(e.ctx, "echo", mod, wasm.Limits{}); err != nil {
		t.Fatal(err)
	}
	// Version 2: the same code with a larger memory limit, deployed before
	// the job (on echo@1) starts, so no compile delays the upgrade.
	v2, err := e.c.DeployFunction(e.ctx, "echo", mod, wasm.Limits{Memory: 128 << 20})
	if err != nil || v2.Version != 2 {
		t.Fatalf("deploy version 2: %+v %v", v2, err)
	}
	id := e.submitSpec(echoSpec("old", 6000, "echo@1"), coordinator.SubmitOptions{})
	e.waitForWithin(id, "checkpoints", wasmStartWithin, func(st coordinator.JobStatus) bool {
		return st.Checkpoints != nil && st.Checkpoints.Completed >= 2
	})
	up, err := e.c.Upgrade(e.ctx, id, "echo@2")
	if err != nil {
		t.Fatal(err)
	}
	st := e.wait(up.Job, wasmStartWithin)
	if st.State != coordinator.JobFinished {
		t.Fatalf("upgraded job: %s %s", st.State, st.Error)
	}
	stored, err := e.bucket.Get(e.ctx, layout.SpecKey(up.Job))
	if err != nil || !strings.Contains(string(stored), `"version": 2`) {
		t.Fatalf("the upgraded job's spec does not pin version 2 (%v): %s", err, stored)
	}
	// One sink path: the new job's rows land beside the old job's.
	seenOnce(t, "old and upgraded job", e.readJSONL("old/"), 6000)
}
