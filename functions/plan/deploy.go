package plan

import (
	"fmt"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/functions/builtin"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/layout"
)

// TaskConfig builds the configuration of one subtask of vertex v in one
// attempt of job jobID: its operators, sources and sinks instantiated, its
// input channels and its output edges. The caller fills in Transport,
// Bucket, RedisAddr, Logger and Mem.
func (p *Plan) TaskConfig(jobID string, attempt int, v *Vertex, subtask int) (task.Config, error) {
	j := p.Job
	cfg := task.Config{
		Job: jobID, Attempt: attempt, Vertex: v.Name, Subtask: subtask,
		Parallelism: v.Parallelism, MaxParallelism: j.MaxParallelism,
		Credits: j.Exchange.Credits,
		Wire: arrowfmt.WireOptions{
			// Validated: none, lz4, zstd or "" (none); compact, plain or "" (compact).
			Compression: compressionOf(j.Exchange.Compression),
			Compact:     j.Exchange.Encoding != spec.EncodingPlain,
		},
		Batching: task.Batching{
			Rows: j.Exchange.BatchRows, Bytes: j.Exchange.BatchBytes, Timeout: j.Exchange.BufferTimeout.D(),
		},
	}
	index := map[*Node]int{}
	for i, n := range v.Nodes {
		index[n] = i
	}
	targets := func(edges []*Edge) (main []task.Target, side map[string][]task.Target) {
		for _, e := range edges {
			var t task.Target
			if e.Chained {
				t = task.ChainTo(index[e.To] - p.headOffset(v))
			} else {
				eo := task.EdgeOut{Partitioning: e.Partitioning, KeyColumns: e.KeyColumns, Project: e.Project}
				if e.Project != nil {
					eo.ProjectSchema = e.Wire.Schema
				}
				for c := 0; c < e.To.Parallelism; c++ {
					eo.Channels = append(eo.Channels, exchange.Channel{
						Job: jobID, Attempt: attempt, Edge: e.Name(), Producer: subtask,
						ConsumerVertex: e.To.Vertex.Name, Consumer: c,
					})
				}
				cfg.Edges = append(cfg.Edges, eo)
				t = task.EdgeTo(len(cfg.Edges) - 1)
			}
			if e.Port == "" {
				main = append(main, t)
			} else {
				if side == nil {
					side = map[string][]task.Target{}
				}
				side[e.Port] = append(side[e.Port], t)
			}
		}
		return main, side
	}
	for _, n := range v.Nodes {
		main, side := targets(n.Outputs)
		switch n.Kind {
		case KindSource:
			src, err := connector.NewSource(n.Source, n.Out)
			if err != nil {
				return task.Config{}, fmt.Errorf("source %s: %w", n.Name, err)
			}
			head := &task.SourceHead{Name: n.Name, Source: src, Splits: connector.SplitSource(n.Source.Type), TimeColumn: n.Out.TimeColumn, Out: main}
			if names, streams := connector.SourceOutputs(n.Source); names != nil {
				head.Outputs = side
				for _, st := range streams {
					head.TimeColumns = append(head.TimeColumns, st.TimeColumn)
				}
			}
			if n.Source.Rate > 0 {
				head.Rate = n.Source.Rate * connector.RateShare(n.Source, subtask, n.Parallelism)
			}
			if ev := n.Source.Event; ev != nil {
				head.MaxOutOfOrderness = ev.MaxOutOfOrderness.D()
				head.IdleTimeout = ev.IdleTimeout.D()
			}
			if j.Checkpoint != nil {
				if head.DeadLetters, err = DeadLetterSink(jobID, n.Name); err != nil {
					return task.Config{}, fmt.Errorf("source %s: %w", n.Name, err)
				}
			}
			cfg.Source = head
		case KindOperator:
			op, err := p.NewOperator(n)
			if err != nil {
				return task.Config{}, fmt.Errorf("operator %s: %w", n.Name, err)
			}
			cfg.Nodes = append(cfg.Nodes, &task.Node{Name: n.Name, Op: op, Out: main, Side: side})
		case KindSink:
			snk, err := connector.NewSink(n.Sink, n.Input.Stream)
			if err != nil {
				return task.Config{}, fmt.Errorf("sink %s: %w", n.Name, err)
			}
			cfg.Nodes = append(cfg.Nodes, &task.Node{Name: n.Name, Sink: snk})
		}
	}
	for side, e := range v.Inputs {
		for prod := 0; prod < e.From.Parallelism; prod++ {
			cfg.Inputs = append(cfg.Inputs, exchange.Channel{
				Job: jobID, Attempt: attempt, Edge: e.Name(), Producer: prod,
				ConsumerVertex: v.Name, Consumer: subtask,
			})
			if len(v.Inputs) > 1 {
				cfg.InputSide = append(cfg.InputSide, side)
			}
		}
	}
	return cfg, nil
}

// DeadLetterSink returns the sink a checkpointing job's source source
// sends its dead letters to (task.SourceHead.DeadLetters): a files sink
// writing JSON lines under layout.DeadLetterPrefix, staged under its
// _staging/ and committed with the checkpoints like any files sink. Its
// transactions are named after the source in the manifests.
func DeadLetterSink(jobID, source string) (task.Sink, error) {
	snk := &spec.Sink{Name: source, Type: spec.SinkFiles, Path: layout.DeadLetterPrefix(jobID, source), Format: spec.FormatJSONL}
	return connector.NewSink(snk, stream.Stream{Schema: task.DeadLetterSchema, TimeColumn: -1})
}

// TxnSink returns the two-phase sink that owns the transactions a manifest
// lists under name, ready to Open for commits and aborts: the sink of
// that name, or the dead-letter sink of the source of that name.
func (p *Plan) TxnSink(jobID, name string) (task.TwoPhaseSink, error) {
	n := p.Node(name)
	var s task.Sink
	var err error
	typ := spec.SinkFiles
	switch {
	case n != nil && n.Kind == KindSink:
		typ = n.Sink.Type
		s, err = connector.NewSink(n.Sink, n.Input.Stream)
	case n != nil && n.Kind == KindSource:
		s, err = DeadLetterSink(jobID, name)
	default:
		return nil, fmt.Errorf("job %s has no sink %q", jobID, name)
	}
	if err != nil {
		return nil, err
	}
	tp, ok := task.AsTwoPhase(s)
	if !ok {
		return nil, fmt.Errorf("sink %s of type %s has no transactions", name, typ)
	}
	return tp, nil
}

// headOffset is 1 when the vertex starts with a source (which is not one of
// the task's Nodes), else 0.
func (p *Plan) headOffset(v *Vertex) int {
	if v.Nodes[0].Kind == KindSource {
		return 1
	}
	return 0
}

// NewOperator instantiates the operator of node n (KindOperator), not
// opened yet. A function operator runs its Wasm module on p.Wasm; function,
// window and join operators keep pebble state under p.StateDir.
func (p *Plan) NewOperator(n *Node) (task.Operator, error) {
	if n.Kind != KindOperator {
		return nil, fmt.Errorf("node %s is not an operator", n.Name)
	}
	o := n.Op
	if o.Join != nil {
		return builtin.NewJoinState(o, n.Inputs[0].ConsumerStream(), n.Inputs[1].ConsumerStream(), p.Job.State, p.StateDir)
	}
	in := n.Input.ConsumerStream()
	switch o.Kind() {
	case "filter":
		return builtin.NewFilter(o, in)
	case "select":
		return builtin.NewSelect(o, in)
	case "window":
		return builtin.NewWindowState(o, in, p.Job.State, p.StateDir)
	case "function":
		return builtin.NewProcess(o, in, builtin.ProcessEnv{Engine: p.Wasm, State: p.Job.State, StateDir: p.StateDir})
	}
	return nil, fmt.Errorf("unknown operator kind")
}

// compressionOf returns the codec of a validated exchange.compression.
func compressionOf(name string) arrowfmt.Compression {
	c, err := arrowfmt.ParseCompression(name)
	if err != nil {
		return arrowfmt.CompressNone // "": the default
	}
	return c
}
