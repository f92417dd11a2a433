package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/layout"
)

// ErrScaleRefused is wrapped by the errors of a rescale that cannot be
// done (the job, the names or the parallelism).
var ErrScaleRefused = errors.New("coordinator: rescale refused")

// ScaleResponse says what a rescale changed: each vertex's parallelism
// before and after (the vertices of the new plan; a vertex whose chain
// the rescale split appears under its new name).
type ScaleResponse struct {
	Job     string         `json:"job"`
	Before  map[string]int `json:"before"`
	After   map[string]int `json:"after"`
	Attempt int            `json:"attempt"` // the attempt that runs at the new parallelism
}

// scaleCheckpointTimeout bounds the wait for the checkpoint a rescale
// takes first.
const scaleCheckpointTimeout = 30 * time.Second

// Scale changes the parallelism of a running, checkpointing job in place:
// to maps a vertex (every operator and sink of its chain) or one operator
// or sink to its new parallelism. It takes a checkpoint now, the job's
// stored spec takes the new parallelism, then the job restarts at once as
// a new attempt of the new plan, restored from that checkpoint with key
// groups redistributed: exactly-once, without a savepoint or a stop. A source
// rescales if it is made of splits (connector.SourceType.Splits: its
// splits are reassigned; every built-in source is); others keep their
// parallelism (their positions are per subtask).
func (c *Coordinator) Scale(ctx context.Context, id string, to map[string]int) (ScaleResponse, error) {
	refuse := func(format string, args ...any) (ScaleResponse, error) {
		return ScaleResponse{}, fmt.Errorf("rescale %s: %s: %w", id, fmt.Sprintf(format, args...), ErrScaleRefused)
	}
	// refuseNow refuses for the job's state now: asked again once the
	// job runs, the same rescale may go through.
	refuseNow := func(format string, args ...any) (ScaleResponse, error) {
		_, err := refuse(format, args...)
		return ScaleResponse{}, notRunning(err)
	}
	if len(to) == 0 {
		return refuse("name at least one vertex, operator or sink and its parallelism, e.g. window=4")
	}
	c.mu.Lock()
	j := c.mu.jobs[id]
	if j == nil {
		c.mu.Unlock()
		return ScaleResponse{}, fmt.Errorf("rescale %s: %w", id, ErrNotFound)
	}
	state, attempt, oldJSON, oldPlan := j.lc.State(), j.lc.Attempt(), j.specJSON, j.plan
	checkpointing := j.ck.cfg != nil
	c.mu.Unlock()
	switch {
	case lifecycle.Terminal(state):
		return ScaleResponse{}, fmt.Errorf("rescale %s (%s): %w", id, state, ErrEnded)
	case !checkpointing:
		return refuse("the job has no checkpoint section: a rescale restores the state from a checkpoint")
	}
	// The names and parallelisms first: what waiting would not change is
	// refused as such, even while the job restarts.
	js, err := rescaledSpec(oldJSON, oldPlan, to)
	if err != nil {
		return ScaleResponse{}, fmt.Errorf("rescale %s: %w", id, err)
	}
	specJSON, err := json.MarshalIndent(js, "", "  ")
	if err != nil {
		return ScaleResponse{}, fmt.Errorf("rescale %s: encode spec: %w", id, err)
	}
	p, err := plan.Build(js)
	if err != nil {
		// The job planned at its old parallelism: the new one is refused
		// (a source of fewer splits than subtasks).
		return ScaleResponse{}, fmt.Errorf("rescale %s: %w: %w", id, err, ErrScaleRefused)
	}
	if state != JobRunning {
		return refuseNow("the job is %s; try again when it runs", state)
	}
	resp := ScaleResponse{Job: id, Before: parallelisms(oldPlan), After: parallelisms(p)}
	if maps.Equal(resp.Before, resp.After) {
		resp.Attempt = attempt
		return resp, nil // nothing changes
	}
	// A checkpoint now, so the new attempt replays (almost) nothing; if
	// it cannot be taken the rescale restores the latest one, which is
	// as exact, only later.
	cctx, cancel := context.WithTimeout(ctx, scaleCheckpointTimeout)
	err = c.checkpointNow(cctx, id)
	cancel()
	if err != nil {
		c.cfg.Logger.Warn("rescale: no checkpoint before it; it restores the latest", "job", id, "err", err)
	}
	// The stored spec first: a coordinator that takes over, or restarts,
	// plans the job at the new parallelism (any checkpoint restores at
	// any parallelism). A deposed leader writes nothing.
	if err := c.checkFence(ctx, id); err != nil {
		return ScaleResponse{}, fmt.Errorf("rescale %s: %w", id, err)
	}
	if err := c.cfg.Bucket.Put(ctx, layout.SpecKey(id), specJSON); err != nil {
		return ScaleResponse{}, fmt.Errorf("rescale %s: store spec: %w", id, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if j.specJSON == nil || string(j.specJSON) != string(oldJSON) || j.lc.Attempt() != attempt {
		// Another rescale or a restart came first: put its spec back.
		if err := c.cfg.Bucket.Put(ctx, layout.SpecKey(id), j.specJSON); err != nil {
			c.cfg.Logger.Warn("restore the spec after a refused rescale", "job", id, "err", err)
		}
		return refuseNow("the job changed meanwhile (another rescale, or a restart); try again")
	}
	var tasks []lifecycle.Task
	for _, v := range p.Vertices {
		for s := range v.Parallelism {
			tasks = append(tasks, lifecycle.Task{Vertex: v.Name, Subtask: s})
		}
	}
	ds, ok := j.lc.Rescale(c.now(), tasks, describeRescale(resp.Before, resp.After))
	if !ok {
		if err := c.cfg.Bucket.Put(ctx, layout.SpecKey(id), j.specJSON); err != nil {
			c.cfg.Logger.Warn("restore the spec after a refused rescale", "job", id, "err", err)
		}
		return refuseNow("the job is %s; try again when it runs", j.lc.State())
	}
	j.spec, j.specJSON, j.plan = js, specJSON, p
	c.cfg.Logger.Info("job rescaling", "job", id, "change", describeRescale(resp.Before, resp.After))
	c.exec(ctx, j, ds)
	c.notifyLocked()
	resp.Attempt = attempt + 1
	return resp, nil
}

// rescaledSpec returns the job's spec (decoded from its stored JSON) with
// the parallelism of to. A vertex name sets every node of its chain; a
// source that is not made of splits, or a name that is none, is refused.
func rescaledSpec(specJSON []byte, p *plan.Plan, to map[string]int) (*spec.Job, error) {
	js := new(spec.Job)
	if err := json.Unmarshal(specJSON, js); err != nil {
		return nil, fmt.Errorf("decode stored spec: %w", err)
	}
	set := map[string]int{} // node name -> parallelism
	for _, name := range slices.Sorted(maps.Keys(to)) {
		n := to[name]
		if n < 1 {
			return nil, fmt.Errorf("%s=%d: a parallelism is at least 1: %w", name, n, ErrScaleRefused)
		}
		if kg := p.Job.MaxParallelism; n > kg {
			return nil, fmt.Errorf("%s=%d: the job has %d key groups (maxParallelism), so at most %d subtasks: %w", name, n, kg, kg, ErrScaleRefused)
		}
		var nodes []*plan.Node
		if v := p.Vertex(name); v != nil {
			nodes = v.Nodes
		} else if nd := p.Node(name); nd != nil {
			nodes = []*plan.Node{nd}
		} else {
			return nil, fmt.Errorf("%s: no vertex, operator or sink of that name (vertices: %s): %w", name, vertexNames(p), ErrScaleRefused)
		}
		for _, nd := range nodes {
			if nd.Kind == plan.KindSource && !connector.SplitSource(nd.Source.Type) {
				return nil, fmt.Errorf("%s: %s is a %s source, which keeps its parallelism (its position is per subtask; sources of splits, such as redis and datagen, rescale): %w",
					name, nd.Name, nd.Source.Type, ErrScaleRefused)
			}
			set[nd.Name] = n
		}
	}
	for i := range js.Sources {
		if n, ok := set[js.Sources[i].Name]; ok {
			js.Sources[i].Parallelism = n
		}
	}
	for i := range js.Operators {
		if n, ok := set[js.Operators[i].Name]; ok {
			js.Operators[i].Parallelism = n
		}
	}
	for i := range js.Sinks {
		if n, ok := set[js.Sinks[i].Name]; ok {
			js.Sinks[i].Parallelism = n
		}
	}
	if err := js.Validate(); err != nil {
		return nil, err
	}
	return js, nil
}

func parallelisms(p *plan.Plan) map[string]int {
	out := map[string]int{}
	for _, v := range p.Vertices {
		out[v.Name] = v.Parallelism
	}
	return out
}

func vertexNames(p *plan.Plan) string {
	var names []string
	for _, v := range p.Vertices {
		names = append(names, v.Name)
	}
	return strings.Join(names, ", ")
}

// describeRescale renders what changes, "win 2->4, out 2->4".
func describeRescale(before, after map[string]int) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(after)) {
		if b, ok := before[name]; !ok {
			parts = append(parts, fmt.Sprintf("%s (new) %d", name, after[name]))
		} else if b != after[name] {
			parts = append(parts, fmt.Sprintf("%s %d->%d", name, b, after[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[name]; !ok {
			parts = append(parts, fmt.Sprintf("%s (merged)", name))
		}
	}
	return strings.Join(parts, ", ")
}
