package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm"
	"github.com/weirstream/weir/functions/wasm/registry"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/blob"
)

// wasmChecker checks the modules deployed as functions, and opens the
// deployed Wasm functions of a submitted job once, with their config, so
// that a config the function refuses is a problem of the submit rather
// than a task failing at every restart. Its engine (compiled modules, in
// memory and in the config's WasmCache) is made on first use and closed
// with the coordinator: a module deployed and then used by a job is
// compiled once.
type wasmChecker struct {
	mu  sync.Mutex
	eng *wasm.Engine
}

func (w *wasmChecker) engine(b blob.BucketReader, cacheDir string) (*wasm.Engine, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.eng == nil {
		eng, err := wasm.NewEngine(wasm.EngineConfig{CacheDir: cacheDir, Fetch: func(ctx context.Context, pin *spec.Module) ([]byte, error) {
			return registry.Module(ctx, b, pin)
		}})
		if err != nil {
			return nil, err
		}
		w.eng = eng
	}
	return w.eng, nil
}

func (w *wasmChecker) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.eng == nil {
		return nil
	}
	err := w.eng.Close()
	w.eng = nil
	return err
}

// checkFunctions opens one instance of every Wasm function operator of p
// with the operator's schemas and config (weir_open), on scratch state,
// and reports every one that fails.
func (c *Coordinator) checkFunctions(ctx context.Context, p *plan.Plan) error {
	var ps spec.Problems
	for _, n := range p.Nodes {
		if n.Op == nil || n.Op.Module == nil {
			continue
		}
		if err := c.checkFunction(ctx, p, n); err != nil {
			var load loadError
			if errors.As(err, &load) {
				return fmt.Errorf("check operators[%s].function: %w", n.Name, load.err)
			}
			ps.Add(fmt.Sprintf("operators[%s].config", n.Name), "%v", err)
		}
	}
	if len(ps) > 0 {
		return ps
	}
	return nil
}

// loadError is a failure to load a module (the store, say), which is not
// a problem of the spec.
type loadError struct{ err error }

func (e loadError) Error() string { return e.err.Error() }

func (c *Coordinator) checkFunction(ctx context.Context, p *plan.Plan, n *plan.Node) error {
	eng, err := c.wasm.engine(c.cfg.Bucket, c.cfg.WasmCache)
	if err != nil {
		return loadError{err}
	}
	m, err := eng.Load(ctx, n.Op.Module)
	if err != nil {
		return loadError{err}
	}
	in := n.Input.ConsumerStream()
	maxP := p.Job.MaxParallelism
	if maxP <= 0 {
		maxP = arrowfmt.DefaultMaxParallelism
	}
	state := statestore.NewMemory(0, maxP)
	defer state.Close()
	inst, err := m.NewInstance(ctx, wasm.InstanceConfig{
		Operator: n.Name, Input: in.Schema, InputTimeColumn: in.TimeColumn, InputTimeOffset: in.TimeOffset,
		KeyColumns: n.Op.KeyBy, Output: n.Out.Schema, Config: n.Op.Config,
		State:   state,
		Subtask: 0, Parallelism: n.Parallelism,
		Emit: func(arrow.RecordBatch) error { return nil },
	})
	if err != nil {
		return err
	}
	return inst.Close()
}
