package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm/registry"
)

// ErrUpgradeRefused is returned when an upgrade is refused before anything
// stopped: the job does not run the function, or the new version does not
// fit where the old one runs.
var ErrUpgradeRefused = errors.New("coordinator: upgrade refused")

// UpgradeResponse says how a job was upgraded: the job that continues it
// from a savepoint, and which version of which function it runs.
type UpgradeResponse struct {
	// Job is the id of the new job; the old one FINISHED, stopped with
	// the savepoint.
	Job string `json:"job"`
	// Savepoint is the manifest key of the savepoint between the two.
	Savepoint string `json:"savepoint"`
	Function  string `json:"function"`
	Version   int    `json:"version"`
	// Operators are the operators that changed version.
	Operators []string `json:"operators"`
}

// Upgrade moves the operators of job id that run deployed function NAME
// to the version ref names (NAME or NAME@VERSION), keeping their state: it
// takes a savepoint, stops the job there, and submits its spec again from
// the savepoint with the new pin. The new version must emit the same
// output columns (and event time) as the pinned one, since downstream
// operators are planned against them, and the job must plan with it;
// otherwise the upgrade is refused (ErrUpgradeRefused) before anything
// stops. It returns once the new job is submitted.
func (c *Coordinator) Upgrade(ctx context.Context, id, ref string) (UpgradeResponse, error) {
	c.mu.Lock()
	j := c.mu.jobs[id]
	if j == nil {
		c.mu.Unlock()
		return UpgradeResponse{}, fmt.Errorf("upgrade %s: %w", id, ErrNotFound)
	}
	state, specJSON := j.lc.State(), j.specJSON
	c.mu.Unlock()
	if lifecycle.Terminal(state) {
		return UpgradeResponse{}, fmt.Errorf("upgrade %s (%s): %w", id, state, ErrEnded)
	}
	refuse := func(format string, args ...any) (UpgradeResponse, error) {
		return UpgradeResponse{}, fmt.Errorf("upgrade %s: %s: %w", id, fmt.Sprintf(format, args...), ErrUpgradeRefused)
	}
	js := new(spec.Job)
	if err := json.Unmarshal(specJSON, js); err != nil {
		return UpgradeResponse{}, fmt.Errorf("upgrade %s: decode stored spec: %w", id, err)
	}
	if js.Checkpoint == nil {
		return refuse("the job has no checkpoint section; an upgrade keeps state through a savepoint")
	}
	name, _, err := registry.ParseRef(ref)
	if err != nil {
		return UpgradeResponse{}, fmt.Errorf("upgrade %s: %w", id, err)
	}
	v, err := registry.Resolve(ctx, c.cfg.Bucket, ref)
	if err != nil {
		return UpgradeResponse{}, fmt.Errorf("upgrade %s: %w", id, err)
	}
	resp := UpgradeResponse{Function: v.Name, Version: v.Version}
	var running []string
	for i := range js.Operators {
		op := &js.Operators[i]
		if op.Module == nil {
			continue
		}
		running = append(running, op.Module.Name+"@"+fmt.Sprint(op.Module.Version))
		if op.Module.Name != name {
			continue
		}
		old := op.Module
		if !slices.Equal(old.Output, v.Describe.Output) || old.TimeColumn != v.Describe.TimeColumn || old.TimeOffset != v.Describe.TimeOffset {
			return refuse("%s emits %s, but operators[%s] runs %s@%d, which emits %s: the operators downstream are planned against that",
				v.Ref(), columnsOf(v.Describe.Output, v.Describe.TimeColumn), op.Name, old.Name, old.Version, columnsOf(old.Output, old.TimeColumn))
		}
		if old.Version == v.Version {
			continue
		}
		op.Function, op.Module = v.Ref(), v.Pin()
		resp.Operators = append(resp.Operators, op.Name)
	}
	switch {
	case len(running) == 0:
		return refuse("it runs no deployed function")
	case !slices.ContainsFunc(js.Operators, func(o spec.Operator) bool { return o.Module != nil && o.Module.Name == name }):
		return refuse("it does not run function %s (it runs %s)", name, strings.Join(running, ", "))
	case len(resp.Operators) == 0:
		return refuse("its operators already run %s", v.Ref())
	}
	// Plan the upgraded job now: an input the new version cannot read is
	// refused while the old job still runs.
	raw, err := json.Marshal(js)
	if err != nil {
		return UpgradeResponse{}, fmt.Errorf("upgrade %s: encode spec: %w", id, err)
	}
	planned := new(spec.Job)
	if err := json.Unmarshal(raw, planned); err != nil {
		return UpgradeResponse{}, fmt.Errorf("upgrade %s: decode spec: %w", id, err)
	}
	if _, err := plan.Build(planned); err != nil {
		return UpgradeResponse{}, fmt.Errorf("upgrade %s to %s: %w: %w", id, v.Ref(), err, ErrUpgradeRefused)
	}
	key, err := c.StopWithSavepoint(ctx, id)
	if err != nil {
		return UpgradeResponse{}, fmt.Errorf("upgrade %s: %w", id, err)
	}
	resp.Savepoint = key
	// The old job's tasks stop before the new job's start, so that the
	// two never write the same sink at once.
	if st, err := c.Wait(ctx, id); err != nil || !lifecycle.Terminal(st.State) {
		return resp, fmt.Errorf("upgrade %s: stopped at savepoint %s, but the job did not end (%v); deploy its spec with --from-savepoint %s to continue", id, key, err, key)
	}
	newID, err := c.SubmitWith(ctx, js, SubmitOptions{FromSavepoint: key})
	if err != nil {
		return resp, fmt.Errorf("upgrade %s: stopped at savepoint %s, but the upgraded job was refused (deploy it with --from-savepoint %s to continue): %w", id, key, key, err)
	}
	resp.Job = newID
	c.cfg.Logger.Info("job upgraded", "job", id, "new", newID, "function", v.Ref(), "savepoint", key)
	return resp, nil
}

func columnsOf(cols []spec.ModuleColumn, timeColumn string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.Name + " " + c.Type
	}
	s := "(" + strings.Join(parts, ", ") + ")"
	if timeColumn != "" {
		s += " with event time in " + timeColumn
	}
	return s
}
