package coordinator

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/plan"
)

// JobStatus is what the API returns about a job.
type JobStatus struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	State   string    `json:"state"`
	Attempt int       `json:"attempt"`
	Created time.Time `json:"created"`
	Started time.Time `json:"started,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
	// Error is why the job FAILED; it is set only in that state (a failure
	// the job restarted from is in Exceptions).
	Error string `json:"error,omitempty"`
	// Message says more of how a job ended: FINISHED, stopped with a
	// savepoint (naming it); CANCELED, the cancel timed out.
	Message  string         `json:"message,omitempty"`
	Vertices []VertexStatus `json:"vertices,omitempty"`
	Totals   control.Stats  `json:"totals"`
	// Checkpoints summarises the job's checkpoints (nil when off).
	Checkpoints *CheckpointSummary `json:"checkpoints,omitempty"`
	// Recoveries lists the job's restarts, oldest first.
	Recoveries []Recovery `json:"recoveries,omitempty"`
	// Restarts counts the job's restarts since it was submitted.
	Restarts int `json:"restarts"`
	// LastFailure is the newest of Exceptions (nil if it never failed).
	LastFailure *Exception `json:"lastFailure,omitempty"`
	// Exceptions are the job's newest failures (at most
	// lifecycle.ExceptionHistory), oldest first.
	Exceptions []Exception `json:"exceptions,omitempty"`
	// Epoch is the leader epoch of the coordinator that wrote this
	// status (0: one without a lease).
	Epoch int64 `json:"epoch,omitempty"`
	// Fences are the job's takeovers by new leaders (see Fence).
	Fences []Fence `json:"fences,omitempty"`
	// Savepoint is how far the copy of a savepoint is, while one runs.
	Savepoint *SavepointProgress `json:"savepoint,omitempty"`
	// Scaling is the autoscaler's history, oldest first (when the spec
	// turns it on): each decision, to act or not, with its inputs.
	Scaling []ScalingDecision `json:"scaling,omitempty"`
}

// Exception is one failure of a job, one that restarted or failed it.
type Exception = lifecycle.Exception

// CheckpointSummary counts a job's checkpoints.
type CheckpointSummary struct {
	Completed int   `json:"completed"`
	Failed    int   `json:"failed"`
	Latest    int64 `json:"latest"` // newest completed, 0 for none
}

// VertexStatus sums a vertex's subtasks.
type VertexStatus struct {
	plan.VertexInfo
	Tasks  []TaskStatus  `json:"tasks"`
	Totals control.Stats `json:"totals"`
}

// TaskStatus is one subtask.
type TaskStatus struct {
	Subtask int           `json:"subtask"`
	Worker  string        `json:"worker"`
	State   string        `json:"state"`
	Error   string        `json:"error,omitempty"`
	Stats   control.Stats `json:"stats"`
	// Rates are per second over its two latest reports (nil until it has
	// two, and once it ended).
	Rates *TaskRates `json:"rates,omitempty"`
}

// Status returns one job's status.
func (c *Coordinator) Status(id string) (JobStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.mu.jobs[id]
	if j == nil {
		return JobStatus{}, fmt.Errorf("status of %s: %w", id, ErrNotFound)
	}
	return c.statusLocked(j), nil
}

// List returns every job's status (without per-task detail), newest first.
func (c *Coordinator) List() []JobStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]JobStatus, 0, len(c.mu.jobs))
	for _, j := range c.mu.jobs {
		st := c.statusLocked(j)
		st.Vertices = nil
		out = append(out, st)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Created.After(out[b].Created) })
	return out
}

func (c *Coordinator) statusLocked(j *job) JobStatus {
	lc := j.lc
	st := JobStatus{ID: j.id, Name: j.spec.Name, State: lc.State(), Attempt: lc.Attempt(),
		Created: j.created, Started: lc.Started(), Ended: lc.Ended(), Recoveries: lc.Recoveries(),
		Restarts: lc.Restarts(), Exceptions: lc.Exceptions(), Epoch: c.cfg.Epoch, Fences: j.fences}
	if lc.State() == JobFailed {
		st.Error = lc.Message()
	} else {
		st.Message = lc.Message()
	}
	if n := len(st.Exceptions); n > 0 {
		last := st.Exceptions[n-1]
		st.LastFailure = &last
	}
	if k := j.ck; k != nil {
		if k.cfg != nil {
			sum := &CheckpointSummary{Latest: k.latest}
			for _, h := range k.history {
				switch h.Status {
				case CheckpointCompleted:
					sum.Completed++
				case CheckpointFailed:
					sum.Failed++
				}
			}
			st.Checkpoints = sum
		}
		if k.copying != nil {
			st.Savepoint = k.copying.progress()
		}
	}
	if as := j.scaler; as != nil {
		st.Scaling = slices.Clone(as.history)
	}
	var sinks, sources control.Stats
	for _, vi := range j.plan.Describe() {
		vs := VertexStatus{VertexInfo: vi}
		v := j.plan.Vertex(vi.Name)
		for s := 0; s < vi.Parallelism; s++ {
			ts := TaskStatus{Subtask: s, State: JobCreated}
			t := lifecycle.Task{Vertex: vi.Name, Subtask: s}
			if worker, state, ok := lc.Task(t); ok {
				ts.Worker, ts.State = worker, state
				if info := j.tasks[t]; info != nil {
					ts.Error, ts.Stats = info.errMsg, info.stats
					if info.hasRates && !lifecycle.Terminal(state) {
						r := info.rates
						ts.Rates = &r
					}
				}
			}
			vs.Tasks = append(vs.Tasks, ts)
			vs.Totals = vs.Totals.Add(ts.Stats)
		}
		if v != nil && v.Nodes[0].Kind == plan.KindSource {
			sources = sources.Add(vs.Totals)
		}
		sinks = sinks.Add(vs.Totals)
		st.Vertices = append(st.Vertices, vs)
	}
	// Job totals: events in are what the sources read; the rest sums.
	st.Totals = sinks
	st.Totals.RecordsIn = sources.RecordsIn
	return st
}
