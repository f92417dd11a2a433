package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm"
	"github.com/weirstream/weir/functions/wasm/registry"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// ErrFunctionInUse is returned when a deployed function that a job which
// has not ended pins is to be deleted without force.
var ErrFunctionInUse = errors.New("coordinator: function in use")

// FunctionDetail is a deployed function: every version, and the jobs that
// have not ended and pin one of them.
type FunctionDetail struct {
	Name     string             `json:"name"`
	Versions []registry.Version `json:"versions"`
	Jobs     []FunctionJob      `json:"jobs"`
}

// FunctionJob is a job that pins versions of a deployed function.
type FunctionJob struct {
	ID       string `json:"id"`
	Versions []int  `json:"versions"`
}

// DeployFunction stores module as the next version of function name
// (registry.Deploy, with the coordinator's clock), checked by the engine
// that later opens it for the jobs that use it.
func (c *Coordinator) DeployFunction(ctx context.Context, name string, module []byte, lim wasm.Limits) (registry.Version, error) {
	eng, err := c.wasm.engine(c.cfg.Bucket, c.cfg.WasmCache)
	if err != nil {
		return registry.Version{}, err
	}
	return registry.DeployChecked(ctx, c.cfg.Bucket, name, module, lim, c.now(), eng.Check)
}

// Functions lists the deployed functions.
func (c *Coordinator) Functions(ctx context.Context) ([]registry.Function, error) {
	return registry.List(ctx, c.cfg.Bucket)
}

// Function returns a deployed function's versions and the jobs that have
// not ended and pin it.
func (c *Coordinator) Function(ctx context.Context, name string) (FunctionDetail, error) {
	vs, err := registry.Versions(ctx, c.cfg.Bucket, name)
	if err != nil {
		return FunctionDetail{}, err
	}
	return FunctionDetail{Name: name, Versions: vs, Jobs: c.functionJobs(name)}, nil
}

// functionJobs returns the jobs this coordinator runs (not ended) that pin
// function name, by id.
func (c *Coordinator) functionJobs(name string) []FunctionJob {
	c.mu.Lock()
	defer c.mu.Unlock()
	jobs := []FunctionJob{}
	for _, j := range c.mu.jobs {
		if lifecycle.Terminal(j.lc.State()) {
			continue
		}
		if vs := registry.Uses(j.spec, name); vs != nil {
			jobs = append(jobs, FunctionJob{ID: j.id, Versions: vs})
		}
	}
	slices.SortFunc(jobs, func(a, b FunctionJob) int { return cmp.Compare(a.ID, b.ID) })
	return jobs
}

// DeleteFunction removes a deployed function (registry.Delete) and
// returns what it was. While a job that has not ended pins it, it refuses
// with ErrFunctionInUse naming the jobs, unless force: such a job then
// fails when it next loads the module (a restart, a recovery or a
// rescale).
func (c *Coordinator) DeleteFunction(ctx context.Context, name string, force bool) (FunctionDetail, error) {
	d, err := c.Function(ctx, name)
	if err != nil {
		return FunctionDetail{}, err
	}
	if len(d.Jobs) > 0 && !force {
		return FunctionDetail{}, InUseError(name, d.Jobs)
	}
	return d, registry.Delete(ctx, c.cfg.Bucket, name)
}

// InUseError is the error (wrapping ErrFunctionInUse) for deleting a
// function that jobs use.
func InUseError(name string, jobs []FunctionJob) error {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return fmt.Errorf("delete function %s: jobs that have not ended use it: %s (cancel or stop them first, or force the delete: they fail when they next load it): %w",
		name, strings.Join(ids, ", "), ErrFunctionInUse)
}

// StoredFunctionJobs finds, in the jobs stored in b (jobs/*/spec.json and
// status.json), those that pin function name and have not ended: what a
// coordinator starting on that bucket would run. A job without a status,
// or one a coordinator's restart interrupted, counts as not ended.
func StoredFunctionJobs(ctx context.Context, b blob.BucketReader, name string) ([]FunctionJob, error) {
	infos, err := b.List(ctx, layout.JobsPrefix)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs := []FunctionJob{}
	for _, o := range infos {
		id, ok := layout.ParseSpecKey(o.Key)
		if !ok {
			continue
		}
		raw, err := b.Get(ctx, o.Key)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", o.Key, err)
		}
		var js spec.Job
		if json.Unmarshal(raw, &js) != nil {
			continue // Load skips it too
		}
		vs := registry.Uses(&js, name)
		if vs == nil {
			continue
		}
		s, ok, err := readStatus(ctx, b, id)
		if err != nil {
			return nil, fmt.Errorf("read the status of %s: %w", id, err)
		}
		if ok && lifecycle.Terminal(s.State) &&
			(s.State != JobFailed || s.Error != lifecycle.RestartedMessage) {
			continue
		}
		jobs = append(jobs, FunctionJob{ID: id, Versions: vs})
	}
	return jobs, nil
}

// functionRoutes adds the deployed functions' API to mux:
//
//	POST   /api/v1/functions/{name}?memory=64MiB&timeout=5s  deploy the module in the body -> registry.Version
//	GET    /api/v1/functions                                 list -> []registry.Function
//	GET    /api/v1/functions/{name}                          versions and jobs -> FunctionDetail
//	DELETE /api/v1/functions/{name}[?force=true]             delete -> the FunctionDetail deleted (409 while a job that has not ended pins it)
//	POST   /api/v1/jobs/{id}/upgrade?function=NAME@VERSION   move a job to another version from a savepoint -> UpgradeResponse
func (c *Coordinator) functionRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/jobs/{id}/upgrade", func(w http.ResponseWriter, r *http.Request) {
		ref := r.URL.Query().Get("function")
		if ref == "" {
			writeJSON(w, http.StatusBadRequest, APIError{Error: "function: missing: want the version to run, as in ?function=zone-stats@3"})
			return
		}
		resp, err := c.Upgrade(r.Context(), r.PathValue("id"), ref)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("POST /api/v1/functions/{name}", c.handleDeployFunction)
	mux.HandleFunc("GET /api/v1/functions", func(w http.ResponseWriter, r *http.Request) {
		fs, err := c.Functions(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, fs)
	})
	mux.HandleFunc("GET /api/v1/functions/{name}", func(w http.ResponseWriter, r *http.Request) {
		d, err := c.Function(r.Context(), r.PathValue("name"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc("DELETE /api/v1/functions/{name}", func(w http.ResponseWriter, r *http.Request) {
		force := r.URL.Query().Get("force")
		if force != "" && force != "true" && force != "false" {
			writeJSON(w, http.StatusBadRequest, APIError{Error: fmt.Sprintf("force %q: want true or false", force)})
			return
		}
		d, err := c.DeleteFunction(r.Context(), r.PathValue("name"), force == "true")
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
}

func (c *Coordinator) handleDeployFunction(w http.ResponseWriter, r *http.Request) {
	var lim wasm.Limits
	var problems []string
	q := r.URL.Query()
	if s := q.Get("memory"); s != "" {
		n, err := spec.ParseSize(s)
		if err != nil {
			problems = append(problems, "memory: "+err.Error())
		}
		lim.Memory = n
	}
	if s := q.Get("timeout"); s != "" {
		d, err := spec.ParseDuration(s)
		if err != nil {
			problems = append(problems, "timeout: "+err.Error())
		}
		lim.Timeout = d.D()
	}
	if s := q.Get("trusted"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			problems = append(problems, "trusted: "+err.Error())
		}
		lim.Trusted = b
	}
	if len(problems) > 0 {
		writeJSON(w, http.StatusBadRequest, APIError{Error: strings.Join(problems, "; ")})
		return
	}
	module, err := io.ReadAll(io.LimitReader(r.Body, registry.MaxModuleBytes+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, APIError{Error: "read module: " + err.Error()})
		return
	}
	if len(module) > registry.MaxModuleBytes {
		writeJSON(w, http.StatusRequestEntityTooLarge, APIError{Error: fmt.Sprintf("module: more than the %s accepted", spec.FormatSize(registry.MaxModuleBytes))})
		return
	}
	v, err := c.DeployFunction(r.Context(), r.PathValue("name"), module, lim)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}
