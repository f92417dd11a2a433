package coordinator_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/layout"
)

type apiClient struct {
	t   *testing.T
	url string
}

func (c apiClient) do(method, path, body string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	// Generous: a submit opens each Wasm function once (compiling the
	// guest), which under -race on a busy machine took over 10 s in CI.
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(path, "/api/") && ct != "application/json" {
		c.t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return resp.StatusCode, b
}

// call fails the test unless the response has the wanted code, and
// decodes its body into v.
func (c apiClient) call(method, path, body string, wantCode int, v any) {
	c.t.Helper()
	code, b := c.do(method, path, body)
	if code != wantCode {
		c.t.Fatalf("%s %s = %d, want %d: %s", method, path, code, wantCode, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

func (c apiClient) status(id string) coordinator.JobStatus {
	c.t.Helper()
	var st coordinator.JobStatus
	c.call("GET", "/api/v1/jobs/"+id, "", http.StatusOK, &st)
	return st
}

func (c apiClient) waitState(id, state string) coordinator.JobStatus {
	c.t.Helper()
	var st coordinator.JobStatus
	poll.UntilNil(c.t, 20*time.Second, "job "+id+" "+state, func() error {
		st = c.status(id)
		if st.State != state {
			return fmt.Errorf("state %s (%s)", st.State, st.Error)
		}
		return nil
	})
	return st
}

func TestHTTPAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("w1", 2, workerOpts{})
	srv := httptest.NewServer(e.c.Handler(prometheus.NewRegistry()))
	t.Cleanup(srv.Close)
	api := apiClient{t: t, url: srv.URL}

	// A YAML spec runs to the end.
	var sub coordinator.SubmitResponse
	api.call("POST", "/api/v1/jobs", evens, http.StatusCreated, &sub)
	if !strings.HasPrefix(sub.ID, "evens-") {
		t.Fatalf("submit id = %q", sub.ID)
	}
	st := api.waitState(sub.ID, coordinator.JobFinished)
	if len(st.Vertices) != 2 || st.Vertices[0].Name != "nums" || len(st.Vertices[0].Tasks) != 2 || st.Totals.SinkRows != 500 {
		t.Errorf("status = %+v", st)
	}
	if rows := e.readJSONL("out/evens/"); len(rows) != 500 {
		t.Errorf("job wrote %d rows, want 500", len(rows))
	}

	var list []coordinator.JobStatus
	api.call("GET", "/api/v1/jobs", "", http.StatusOK, &list)
	if len(list) != 1 || list[0].ID != sub.ID || list[0].State != coordinator.JobFinished || list[0].Vertices != nil {
		t.Errorf("list = %+v", list)
	}

	// Errors: unknown job, ended job.
	var apiErr coordinator.APIError
	api.call("GET", "/api/v1/jobs/no-such-job", "", http.StatusNotFound, &apiErr)
	if !strings.Contains(apiErr.Error, "not found") {
		t.Errorf("404 body = %+v", apiErr)
	}
	api.call("POST", "/api/v1/jobs/no-such-job/cancel", "", http.StatusNotFound, nil)
	api.call("POST", "/api/v1/jobs/no-such-job/stop", "", http.StatusNotFound, nil)
	apiErr = coordinator.APIError{}
	api.call("POST", "/api/v1/jobs/"+sub.ID+"/cancel", "", http.StatusConflict, &apiErr)
	if !strings.Contains(apiErr.Error, "already ended") {
		t.Errorf("409 body = %+v", apiErr)
	}
	api.call("POST", "/api/v1/jobs/"+sub.ID+"/stop", "", http.StatusConflict, nil)

	// Invalid specs: 400 with every problem, file and line; nothing
	// stored.
	before, _ := e.bucket.List(e.ctx, layout.JobsPrefix)
	apiErr = coordinator.APIError{}
	api.call("POST", "/api/v1/jobs?file=my.yaml", strings.Replace(evens, "job: evens\n", "job: evens\nparallelizm: 2\nexchang: {}\n", 1), http.StatusBadRequest, &apiErr)
	if len(apiErr.Problems) != 2 {
		t.Fatalf("problems = %+v, want 2", apiErr.Problems)
	}
	if p := apiErr.Problems[0]; p.File != "my.yaml" || p.Line != 2 || p.Field != "parallelizm" || !strings.Contains(p.Msg, `did you mean "parallelism"`) {
		t.Errorf("problem = %+v", p)
	}
	if !strings.Contains(apiErr.Error, "my.yaml:3: exchang") {
		t.Errorf("error = %q", apiErr.Error)
	}
	// A type error found by the planner gets its line too.
	apiErr = coordinator.APIError{}
	bad := strings.Replace(evens, "id % 2 == 0", "id + 1", 1)
	api.call("POST", "/api/v1/jobs", bad, http.StatusBadRequest, &apiErr)
	if len(apiErr.Problems) != 1 {
		t.Fatalf("problems = %+v", apiErr.Problems)
	}
	if p := apiErr.Problems[0]; p.Field != "operators[even].filter" || p.File != "spec" || p.Line != 10 || !strings.Contains(p.Msg, "boolean") {
		t.Errorf("problem = %+v, want operators[even].filter at spec:10", p)
	}
	// The field is said once, not again inside the message.
	if want := `invalid job spec: spec:10: operators[even].filter: expression "id + 1": filter must be a boolean expression, got int`; apiErr.Error != want {
		t.Errorf("error = %q\nwant    %q", apiErr.Error, want)
	}
	// A YAML type error names its field and value.
	apiErr = coordinator.APIError{}
	api.call("POST", "/api/v1/jobs?file=bad.yaml", strings.Replace(evens, "    count: 1000\n", "    count: lots\n", 1), http.StatusBadRequest, &apiErr)
	if want := `invalid job spec: bad.yaml:6: sources[nums].count: "lots" is not an integer`; apiErr.Error != want {
		t.Errorf("error = %q\nwant    %q", apiErr.Error, want)
	}
	api.call("POST", "/api/v1/jobs", "job: [unclosed\n", http.StatusBadRequest, nil)
	api.call("POST", "/api/v1/jobs", "", http.StatusBadRequest, nil)
	after, _ := e.bucket.List(e.ctx, layout.JobsPrefix)
	if len(after) != len(before) {
		t.Errorf("invalid submissions stored objects: %d before, %d after", len(before), len(after))
	}

	// A JSON spec is accepted too; cancel it over HTTP while it runs.
	js, err := yamlJSON(forever)
	if err != nil {
		t.Fatal(err)
	}
	api.call("POST", "/api/v1/jobs", js, http.StatusCreated, &sub)
	e.waitFor(sub.ID, "ticks flowing", func(st coordinator.JobStatus) bool { return st.Totals.RecordsIn > 0 })
	code, metrics := api.do("GET", "/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`weir_jobs{state="FINISHED"} 1`,
		`weir_jobs{state="RUNNING"} 1`,
		`weir_jobs{state="FAILED"} 0`,
		`weir_vertex_records_in_total{job="` + sub.ID + `",vertex="ticks"}`,
		`weir_vertex_records_out_total{job="` + sub.ID + `",vertex="ticks"}`,
		`weir_vertex_backpressured_seconds_total{job="` + sub.ID + `",vertex="ticks"}`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepWeir(metrics))
		}
	}
	var cst coordinator.JobStatus
	api.call("POST", "/api/v1/jobs/"+sub.ID+"/cancel", "", http.StatusAccepted, &cst)
	if cst.ID != sub.ID || (cst.State != coordinator.JobCanceling && cst.State != coordinator.JobCanceled) {
		t.Errorf("cancel returned %s %s", cst.ID, cst.State)
	}
	api.waitState(sub.ID, coordinator.JobCanceled)
	_, metrics = api.do("GET", "/metrics", "")
	if !strings.Contains(string(metrics), `weir_jobs{state="CANCELED"} 1`) || strings.Contains(string(metrics), `vertex="ticks"`) {
		t.Errorf("/metrics after the cancel:\n%s", grepWeir(metrics))
	}

	var workers []control.WorkerInfo
	api.call("GET", "/api/v1/workers", "", http.StatusOK, &workers)
	if len(workers) != 1 || workers[0].ID != "w1" || workers[0].Slots != 2 {
		t.Errorf("workers = %+v", workers)
	}
	if code, b := api.do("GET", "/healthz", ""); code != http.StatusOK || strings.TrimSpace(string(b)) != "ok" {
		t.Errorf("/healthz = %d %q", code, b)
	}
}

func grepWeir(metrics []byte) string {
	var out []string
	for _, l := range strings.Split(string(metrics), "\n") {
		if strings.HasPrefix(l, "weir_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// yamlJSON turns a YAML spec into the JSON a client could send instead.
func yamlJSON(src string) (string, error) {
	j, err := spec.Parse([]byte(src), "job.yaml")
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(j)
	return string(b), err
}
