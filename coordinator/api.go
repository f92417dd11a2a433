package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/coordinator/ui"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm/registry"
)

// APIError is the body of every error response.
type APIError struct {
	Error    string         `json:"error"`
	Problems []spec.Problem `json:"problems,omitempty"`
	// RetryLater: the request was refused only for the job's state now
	// (it is starting or restarting); the same request may succeed once
	// the job runs again (ErrNotRunning).
	RetryLater bool `json:"retryLater,omitempty"`
}

// SubmitResponse is the body of a successful POST /api/v1/jobs.
type SubmitResponse struct {
	ID string `json:"id"`
}

// SavepointResponse names a savepoint's manifest.
type SavepointResponse struct {
	Savepoint string `json:"savepoint"`
}

// Handler serves the coordinator's JSON API:
//
//	POST /api/v1/jobs              submit a spec (YAML or JSON body) -> {"id"}
//	GET  /api/v1/jobs              list jobs
//	GET  /api/v1/jobs/{id}         one job, with vertices and tasks
//	POST /api/v1/jobs/{id}/cancel  cancel a job at once
//	POST /api/v1/jobs/{id}/stop    drain a job: sources end early, windows fire, sinks flush
//	GET  /api/v1/workers           live workers
//	GET  /api/v1/cluster           slots wanted and available (clusterRoutes in wanted.go)
//	/api/v1/functions...           deployed Wasm functions (functionRoutes in functions.go)
//	GET  /healthz, GET /metrics
func (c *Coordinator) Handler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	console := ui.Handler()
	mux.Handle("GET /{$}", console)
	mux.Handle("GET /ui/", console)
	mux.HandleFunc("POST /api/v1/jobs", c.handleSubmit)
	mux.HandleFunc("GET /api/v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, c.List())
	})
	mux.HandleFunc("GET /api/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		st, err := c.Status(r.PathValue("id"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("DELETE /api/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := c.Delete(r.Context(), r.PathValue("id")); err != nil {
			writeErr(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /api/v1/jobs/{id}/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		cps, err := c.Checkpoints(r.PathValue("id"))
		if err != nil {
			writeErr(w, err)
			return
		}
		if cps == nil {
			cps = []CheckpointInfo{}
		}
		writeJSON(w, http.StatusOK, cps)
	})
	mux.HandleFunc("GET /api/v1/jobs/{id}/checkpoints/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
		if err != nil || n <= 0 {
			writeJSON(w, http.StatusBadRequest, APIError{Error: fmt.Sprintf("checkpoint %q: want a checkpoint id (a positive number)", r.PathValue("n"))})
			return
		}
		d, err := c.CheckpointDetail(r.PathValue("id"), n)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc("POST /api/v1/jobs/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		if err := c.Cancel(r.Context(), r.PathValue("id")); err != nil {
			writeErr(w, err)
			return
		}
		st, _ := c.Status(r.PathValue("id"))
		writeJSON(w, http.StatusAccepted, st)
	})
	mux.HandleFunc("POST /api/v1/jobs/{id}/savepoint", func(w http.ResponseWriter, r *http.Request) {
		key, err := c.Savepoint(r.Context(), r.PathValue("id"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, SavepointResponse{Savepoint: key})
	})
	mux.HandleFunc("POST /api/v1/jobs/{id}/scale", func(w http.ResponseWriter, r *http.Request) {
		var to map[string]int
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		if err := dec.Decode(&to); err != nil {
			writeJSON(w, http.StatusBadRequest, APIError{Error: fmt.Sprintf(`scale: the body is not a JSON object of parallelisms, {"window": 4}: %v`, err)})
			return
		}
		resp, err := c.Scale(r.Context(), r.PathValue("id"), to)
		if err != nil {
			if ps, ok := spec.AsProblems(err); ok {
				writeJSON(w, http.StatusBadRequest, APIError{Error: err.Error(), Problems: ps})
				return
			}
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("GET /api/v1/jobs/{id}/savepoints", func(w http.ResponseWriter, r *http.Request) {
		if _, err := c.Status(r.PathValue("id")); err != nil {
			writeErr(w, err)
			return
		}
		list, err := ListSavepoints(r.Context(), c.cfg.Bucket, r.PathValue("id"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, list)
	})
	mux.HandleFunc("GET /api/v1/jobs/{id}/deadletters", func(w http.ResponseWriter, r *http.Request) {
		n := 5
		if v := r.URL.Query().Get("samples"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 0 || n > 100 {
				writeJSON(w, http.StatusBadRequest, APIError{Error: fmt.Sprintf("samples: %q is not a number from 0 to 100", v)})
				return
			}
		}
		list, err := c.DeadLetters(r.Context(), r.PathValue("id"), n)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, list)
	})
	mux.HandleFunc("POST /api/v1/jobs/{id}/stop", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("savepoint") == "true" {
			key, err := c.StopWithSavepoint(r.Context(), r.PathValue("id"))
			if err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, http.StatusOK, SavepointResponse{Savepoint: key})
			return
		}
		if err := c.Stop(r.Context(), r.PathValue("id")); err != nil {
			writeErr(w, err)
			return
		}
		st, _ := c.Status(r.PathValue("id"))
		writeJSON(w, http.StatusAccepted, st)
	})
	mux.HandleFunc("GET /api/v1/workers", func(w http.ResponseWriter, r *http.Request) {
		ws, err := c.cfg.Plane.Workers(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, ws)
	})
	c.functionRoutes(mux)
	c.clusterRoutes(mux, reg)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	if reg != nil {
		reg.MustRegister(c.collector())
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	return mux
}

func (c *Coordinator) handleSubmit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, APIError{Error: "read spec: " + err.Error()})
		return
	}
	name := r.URL.Query().Get("file")
	if name == "" {
		name = "spec"
	}
	js, err := spec.Parse(body, name)
	if err == nil {
		opts := SubmitOptions{FromSavepoint: r.URL.Query().Get("fromSavepoint")}
		if p := r.URL.Query().Get("parallelism"); p != "" {
			if opts.Parallelism, err = strconv.Atoi(p); err != nil || opts.Parallelism < 1 {
				writeJSON(w, http.StatusBadRequest, APIError{Error: fmt.Sprintf("parallelism %q: want a whole number ≥ 1", p)})
				return
			}
		}
		var id string
		id, err = c.SubmitWith(r.Context(), js, opts)
		if err == nil {
			writeJSON(w, http.StatusCreated, SubmitResponse{ID: id})
			return
		}
	}
	if ps, ok := spec.AsProblems(err); ok {
		ps = spec.WithLines(ps, body, name)
		writeJSON(w, http.StatusBadRequest, APIError{Error: ps.Error(), Problems: ps})
		return
	}
	writeErr(w, err)
}

func writeErr(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrEnded), errors.Is(err, ErrFunctionInUse), errors.Is(err, ErrUpgradeRefused), errors.Is(err, ErrScaleRefused), errors.Is(err, ErrNotRunning):
		code = http.StatusConflict
	case errors.Is(err, registry.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, registry.ErrInvalid):
		code = http.StatusBadRequest
	}
	retry := errors.Is(err, ErrNotRunning)
	if retry {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, code, APIError{Error: err.Error(), RetryLater: retry})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// collector exports job states and per-vertex counters.
func (c *Coordinator) collector() prometheus.Collector { return &jobCollector{c: c} }

// DescribeMetrics sends the descriptions of the families a coordinator's
// /metrics exports (those of its collector), without a coordinator: for
// checks of dashboards and alerts against the names.
func DescribeMetrics(ch chan<- *prometheus.Desc) {
	(&jobCollector{}).Describe(ch)
	(&clusterCollector{}).Describe(ch)
}

type jobCollector struct{ c *Coordinator }

var (
	descJobs = prometheus.NewDesc("weir_jobs", "Jobs by state.", []string{"state"}, nil)
	descIn   = prometheus.NewDesc("weir_vertex_records_in_total", "Records read by a vertex's subtasks.", []string{"job", "vertex"}, nil)
	descOut  = prometheus.NewDesc("weir_vertex_records_out_total", "Records written by a vertex's subtasks.", []string{"job", "vertex"}, nil)
	descBP   = prometheus.NewDesc("weir_vertex_backpressured_seconds_total", "Time a vertex's subtasks waited for credit.", []string{"job", "vertex"}, nil)

	jobLabels           = []string{"job"}
	descRestarts        = prometheus.NewDesc("weir_job_restarts_total", "Restarts of a job since it was submitted (Flink's numRestarts).", jobLabels, nil)
	descCkpts           = prometheus.NewDesc("weir_job_checkpoints_total", "A job's checkpoints by outcome (completed, failed) in this coordinator's history.", []string{"job", "outcome"}, nil)
	descCkptDuration    = prometheus.NewDesc("weir_job_last_checkpoint_duration_seconds", "Trigger to completion of a job's latest completed checkpoint.", jobLabels, nil)
	descCkptState       = prometheus.NewDesc("weir_job_last_checkpoint_state_bytes", "Bytes of state a job's latest completed checkpoint references.", jobLabels, nil)
	descCkptUploaded    = prometheus.NewDesc("weir_job_last_checkpoint_uploaded_bytes", "Bytes of state a job's latest completed checkpoint uploaded (incremental size).", jobLabels, nil)
	descCkptCompletedAt = prometheus.NewDesc("weir_job_last_checkpoint_completed_timestamp_seconds", "When a job's latest checkpoint completed (Unix time).", jobLabels, nil)
	descJobDead         = prometheus.NewDesc("weir_job_dead_letters_total", "Malformed records a job's sources sent to its dead letters.", jobLabels, nil)
	descJobLate         = prometheus.NewDesc("weir_job_late_records_total", "A job's records behind the watermark, by outcome (dropped, side).", []string{"job", "outcome"}, nil)

	fnLabels        = []string{"job", "vertex", "operator", "function"}
	descFnCalls     = prometheus.NewDesc("weir_function_invocations_total", "Calls into a Wasm function (input batches and rounds of timers).", fnLabels, nil)
	descFnRowsIn    = prometheus.NewDesc("weir_function_rows_in_total", "Rows handed to a Wasm function.", fnLabels, nil)
	descFnRowsOut   = prometheus.NewDesc("weir_function_rows_out_total", "Rows a Wasm function emitted.", fnLabels, nil)
	descFnGuest     = prometheus.NewDesc("weir_function_guest_seconds_total", "Time spent inside a Wasm function, host calls included.", fnLabels, nil)
	descFnHostCalls = prometheus.NewDesc("weir_function_host_calls_total", "Host functions (state, timers, emit) a Wasm function called.", fnLabels, nil)
	descFnMemory    = prometheus.NewDesc("weir_function_memory_bytes", "Linear memory of a Wasm function's instances.", fnLabels, nil)
)

func (jc *jobCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descJobs
	ch <- descIn
	ch <- descOut
	ch <- descBP
	for _, d := range []*prometheus.Desc{descRestarts, descCkpts, descCkptDuration, descCkptState, descCkptUploaded, descCkptCompletedAt, descJobDead, descJobLate} {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{descFnCalls, descFnRowsIn, descFnRowsOut, descFnGuest, descFnHostCalls, descFnMemory} {
		ch <- d
	}
}

// collectJob sends a job's job-level families.
func (jc *jobCollector) collectJob(ch chan<- prometheus.Metric, s JobStatus) {
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{s.ID}, l...)...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, s.ID)
	}
	counter(descRestarts, float64(s.Restarts))
	counter(descJobDead, float64(s.Totals.DeadLetters))
	counter(descJobLate, float64(s.Totals.LateDropped), "dropped")
	counter(descJobLate, float64(s.Totals.LateSide), "side")
	if s.Checkpoints == nil {
		return
	}
	counter(descCkpts, float64(s.Checkpoints.Completed), "completed")
	counter(descCkpts, float64(s.Checkpoints.Failed), "failed")
	cps, err := jc.c.Checkpoints(s.ID)
	if err != nil {
		return
	}
	for _, cp := range cps { // newest first
		if cp.Status != CheckpointCompleted {
			continue
		}
		gauge(descCkptDuration, cp.Duration)
		gauge(descCkptState, float64(cp.StateSize))
		gauge(descCkptUploaded, float64(cp.Bytes))
		gauge(descCkptCompletedAt, float64(cp.Triggered.Add(time.Duration(cp.Duration*float64(time.Second))).UnixMilli())/1000)
		return
	}
}

func (jc *jobCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{}
	for _, s := range jc.c.List() {
		counts[s.State]++
		if lifecycle.Terminal(s.State) {
			continue // an ended job has no series
		}
		jc.collectJob(ch, s)
		if s.State != JobRunning {
			continue
		}
		full, err := jc.c.Status(s.ID)
		if err != nil {
			continue
		}
		for _, v := range full.Vertices {
			ch <- prometheus.MustNewConstMetric(descIn, prometheus.CounterValue, float64(v.Totals.RecordsIn), s.ID, v.Name)
			ch <- prometheus.MustNewConstMetric(descOut, prometheus.CounterValue, float64(v.Totals.RecordsOut), s.ID, v.Name)
			ch <- prometheus.MustNewConstMetric(descBP, prometheus.CounterValue, v.Totals.BackpressureSec, s.ID, v.Name)
			for _, f := range v.Totals.Functions {
				l := []string{s.ID, v.Name, f.Operator, f.Function}
				ch <- prometheus.MustNewConstMetric(descFnCalls, prometheus.CounterValue, float64(f.Calls), l...)
				ch <- prometheus.MustNewConstMetric(descFnRowsIn, prometheus.CounterValue, float64(f.RowsIn), l...)
				ch <- prometheus.MustNewConstMetric(descFnRowsOut, prometheus.CounterValue, float64(f.RowsOut), l...)
				ch <- prometheus.MustNewConstMetric(descFnGuest, prometheus.CounterValue, f.GuestSeconds, l...)
				ch <- prometheus.MustNewConstMetric(descFnHostCalls, prometheus.CounterValue, float64(f.HostCalls), l...)
				ch <- prometheus.MustNewConstMetric(descFnMemory, prometheus.GaugeValue, float64(f.MemoryBytes), l...)
			}
		}
	}
	for _, st := range []string{JobCreated, JobRunning, JobCanceling, JobFinished, JobFailed, JobCanceled} {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(counts[st]), st)
	}
}
