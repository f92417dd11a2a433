// Package plan turns a job spec into what runs: it derives every stream's
// schema (so type errors are refused before anything is deployed), chains
// operators into vertices, and builds the task configuration of each
// subtask.
//
// Chaining: an operator (or sink) runs in the same task as its input when
// both have the same parallelism and no repartitioning is needed between
// them (no keyBy, or parallelism 1). Otherwise the edge is a network edge:
// hash-partitioned by key group when the consumer has keyBy, forward when
// parallelism is equal, rebalanced otherwise.
package plan

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/functions/builtin"
	"github.com/weirstream/weir/functions/connector"
	// The planner builds connectors by type: every program that plans
	// jobs (the weir binary, the coordinator, the workers) has the
	// built-in ones registered.
	_ "github.com/weirstream/weir/functions/connectors"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/functions/wasm"
)

// Kind is what a node is.
type Kind int

const (
	KindSource Kind = iota
	KindOperator
	KindSink
)

// Node is one source, operator or sink of the spec.
type Node struct {
	Name        string
	Kind        Kind
	Parallelism int
	Source      *spec.Source
	Op          *spec.Operator
	Sink        *spec.Sink

	// Input is the edge this node reads (nil for sources); a join reads
	// two, Inputs[0] (left, also Input) and Inputs[1] (right).
	Input  *Edge
	Inputs []*Edge
	// Out is the node's main output stream; Sides its side outputs.
	Out   builtin.Stream
	Sides map[string]builtin.Stream
	// Outputs are the edges that read this node (main and side outputs).
	Outputs []*Edge
	Vertex  *Vertex
}

// Edge connects a producer's output (main, or a side output by Port) to a
// consumer.
type Edge struct {
	From *Node
	Port string // "" for the main output, else the side output's name
	To   *Node
	// Chained edges pass batches by reference inside one task; the others
	// go through the exchange.
	Chained      bool
	Partitioning task.Partitioning
	KeyColumns   []int
	Stream       builtin.Stream
	// Project, for a network edge, lists the columns of Stream that go
	// over it (those its consumer reads; nil: all), and Wire is the
	// stream the consumer sees.
	Project []int
	Wire    builtin.Stream
}

// ConsumerStream is the stream the edge's consumer reads: Wire on a
// projected network edge, else Stream.
func (e *Edge) ConsumerStream() builtin.Stream {
	if e.Project != nil {
		return e.Wire
	}
	return e.Stream
}

// Name identifies the edge among its consumer's inputs.
func (e *Edge) Name() string {
	if e.Port != "" {
		return e.From.Name + "." + e.Port
	}
	return e.From.Name
}

// Vertex is a chain of nodes that runs as one task per subtask.
type Vertex struct {
	Name        string
	Parallelism int
	// Nodes in topological order; Nodes[0] is the head.
	Nodes []*Node
	// Inputs are the network edges into the head.
	Inputs []*Edge
}

// Plan is a validated, chained job.
type Plan struct {
	Job      *spec.Job // with defaults filled in
	Nodes    []*Node   // topological order
	Vertices []*Vertex // topological order
	// Wasm runs the deployed Wasm functions of the job's tasks; nil
	// refuses them in TaskConfig. The process that runs tasks sets it.
	Wasm *wasm.Engine
	// StateDir is where a job's pebble state backend keeps its files
	// ("": the system's temporary directory). The process that runs
	// tasks sets it.
	StateDir string
	byName   map[string]*Node
}

// Node returns the node with the given name.
func (p *Plan) Node(name string) *Node { return p.byName[name] }

// Vertex returns the vertex with the given name.
func (p *Plan) Vertex(name string) *Vertex {
	for _, v := range p.Vertices {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// Build validates job (structure and types) and plans it. The error, if
// any, is spec.Problems with every problem found.
func Build(job *spec.Job) (*Plan, error) {
	if err := job.Validate(); err != nil {
		return nil, err
	}
	j := job.Effective()
	p := &Plan{Job: j, byName: map[string]*Node{}}
	var probs spec.Problems
	// A check's error names its own field when it can (spec.Errorf);
	// field is for those that do not.
	fail := func(field string, err error) {
		probs = append(probs, spec.ProblemsOf(field, err)...)
	}
	// producers: name -> (node, port)
	type prod struct {
		n    *Node
		port string
	}
	producers := map[string]prod{}
	for i := range j.Sources {
		s := &j.Sources[i]
		n := &Node{Name: s.Name, Kind: KindSource, Parallelism: s.Parallelism, Source: s}
		if names, streams := connector.SourceOutputs(s); names != nil {
			// A multi-output source is read through its outputs only.
			n.Out = builtin.Stream{TimeColumn: -1}
			n.Sides = map[string]builtin.Stream{}
			for k, name := range names {
				n.Sides[name] = streams[k]
				producers[s.Name+"."+name] = prod{n: n, port: name}
			}
			p.add(n)
			continue
		}
		st, err := connector.SourceSchema(s)
		if err != nil {
			fail(fmt.Sprintf("sources[%s]", s.Name), err)
			continue
		}
		n.Out = st
		probs = append(probs, connector.PlanSource(s)...)
		p.add(n)
		producers[n.Name] = prod{n: n}
	}
	// Operators may be listed in any order: resolve them as their inputs
	// become known.
	pending := make([]*spec.Operator, len(j.Operators))
	for i := range j.Operators {
		pending[i] = &j.Operators[i]
	}
	for len(pending) > 0 {
		progress := false
		var rest []*spec.Operator
		for _, o := range pending {
			var srcs []prod
			for _, in := range o.Inputs() {
				if src, ok := producers[in]; ok {
					srcs = append(srcs, src)
				}
			}
			if len(srcs) < len(o.Inputs()) {
				rest = append(rest, o)
				continue
			}
			progress = true
			field := fmt.Sprintf("operators[%s]", o.Name)
			n := &Node{Name: o.Name, Kind: KindOperator, Parallelism: o.Parallelism, Op: o}
			if o.Join != nil {
				left, right := streamOf(srcs[0].n, srcs[0].port), streamOf(srcs[1].n, srcs[1].port)
				le := p.connect(srcs[0].n, srcs[0].port, n, left)
				re := p.connect(srcs[1].n, srcs[1].port, n, right)
				out, lk, rk, err := builtin.JoinSchema(o, left, right)
				if err != nil {
					fail(field+".join", err)
					continue
				}
				le.KeyColumns, re.KeyColumns = lk, rk
				n.Out = out
				p.add(n)
				producers[n.Name] = prod{n: n}
				continue
			}
			src := srcs[0]
			in := streamOf(src.n, src.port)
			e := p.connect(src.n, src.port, n, in)
			if len(o.KeyBy) > 0 {
				cols, err := in.Columns(field+".keyBy", o.KeyBy)
				if err != nil {
					fail(field+".keyBy", err)
					continue
				}
				e.KeyColumns = cols
			}
			out, err := operatorSchema(o, in)
			if err != nil {
				fail(field, err)
				continue
			}
			if o.Kind() == "window" && len(o.KeyBy) == 0 && n.Parallelism != 1 {
				fail(field+".keyBy", fmt.Errorf("missing: a window without keyBy sees every row, so it needs parallelism 1 (it has %d)", n.Parallelism))
				continue
			}
			n.Out = out
			if o.Window != nil && o.Window.LateOutput != "" {
				n.Sides = map[string]builtin.Stream{o.Window.LateOutput: builtin.WindowLateSchema(in)}
				producers[o.Window.LateOutput] = prod{n: n, port: o.Window.LateOutput}
			}
			p.add(n)
			producers[n.Name] = prod{n: n}
		}
		if !progress {
			// Inputs that failed to type-check upstream; Validate has
			// already refused missing inputs and cycles.
			break
		}
		pending = rest
	}
	for i := range j.Sinks {
		s := &j.Sinks[i]
		src, ok := producers[s.Input]
		if !ok {
			continue // its input failed above
		}
		n := &Node{Name: s.Name, Kind: KindSink, Parallelism: s.Parallelism, Sink: s}
		in := streamOf(src.n, src.port)
		p.connect(src.n, src.port, n, in)
		p.add(n)
	}
	if len(probs) > 0 {
		return nil, probs
	}
	p.chain()
	return p, nil
}

func (p *Plan) add(n *Node) {
	p.Nodes = append(p.Nodes, n)
	p.byName[n.Name] = n
}

func (p *Plan) connect(from *Node, port string, to *Node, st builtin.Stream) *Edge {
	e := &Edge{From: from, Port: port, To: to, Stream: st}
	from.Outputs = append(from.Outputs, e)
	if to.Input == nil {
		to.Input = e
	}
	to.Inputs = append(to.Inputs, e)
	return e
}

func streamOf(n *Node, port string) builtin.Stream {
	if port != "" {
		return n.Sides[port]
	}
	return n.Out
}

func operatorSchema(o *spec.Operator, in builtin.Stream) (builtin.Stream, error) {
	switch o.Kind() {
	case "filter":
		return builtin.FilterSchema(o, in)
	case "select":
		return builtin.SelectSchema(o, in)
	case "window":
		return builtin.WindowSchema(o, in)
	case "function":
		return builtin.ProcessSchema(o, in)
	}
	return builtin.Stream{}, fmt.Errorf("unknown operator kind")
}

// chain decides which edges are chained and groups nodes into vertices.
func (p *Plan) chain() {
	for _, n := range p.Nodes {
		if len(n.Inputs) > 1 {
			// A two-input operator heads its own vertex: its inputs come
			// from two places, so neither can be chained.
			for _, e := range n.Inputs {
				e.Partitioning = task.Hash
			}
			continue
		}
		e := n.Input
		if e == nil {
			continue
		}
		keyed := len(e.KeyColumns) > 0
		switch {
		case e.From.Parallelism == n.Parallelism && (!keyed || n.Parallelism == 1):
			e.Chained = true
			e.Partitioning = task.Forward
		case keyed:
			e.Partitioning = task.Hash
		case e.From.Parallelism == n.Parallelism:
			e.Partitioning = task.Forward
		default:
			e.Partitioning = task.Rebalance
		}
	}
	for _, n := range p.Nodes {
		for side, e := range n.Inputs {
			if !e.Chained && n.Kind == KindOperator {
				e.project(builtin.InputColumns(n.Op, side, e.Stream))
			}
		}
	}
	for _, n := range p.Nodes {
		if n.Input != nil && n.Input.Chained {
			v := n.Input.From.Vertex
			v.Nodes = append(v.Nodes, n)
			n.Vertex = v
			continue
		}
		v := &Vertex{Name: n.Name, Parallelism: n.Parallelism, Nodes: []*Node{n}}
		v.Inputs = n.Inputs
		n.Vertex = v
		p.Vertices = append(p.Vertices, v)
	}
}

// project makes e carry only the named columns (nil: all), if that drops
// any.
func (e *Edge) project(names []string) {
	schema := e.Stream.Schema
	if names == nil || len(names) >= schema.NumFields() {
		return
	}
	var idx []int
	var fields []arrow.Field
	wire := builtin.Stream{TimeColumn: -1, TimeOffset: e.Stream.TimeOffset}
	for i, f := range schema.Fields() {
		if !slices.Contains(names, f.Name) {
			continue
		}
		if i == e.Stream.TimeColumn {
			wire.TimeColumn = len(idx)
		}
		idx = append(idx, i)
		fields = append(fields, f)
	}
	if len(idx) == len(schema.Fields()) {
		return
	}
	md := schema.Metadata()
	wire.Schema = arrow.NewSchema(fields, &md)
	e.Project, e.Wire = idx, wire
}

// Describe renders the plan's vertices for humans (weir jobs status).
func (p *Plan) Describe() []VertexInfo {
	out := make([]VertexInfo, 0, len(p.Vertices))
	for _, v := range p.Vertices {
		vi := VertexInfo{Name: v.Name, Parallelism: v.Parallelism}
		for _, n := range v.Nodes {
			vi.Nodes = append(vi.Nodes, n.Name)
		}
		for _, e := range v.Inputs {
			vi.Inputs = append(vi.Inputs, EdgeInfo{From: e.From.Vertex.Name, Name: e.Name(), Partitioning: partName(e.Partitioning)})
		}
		out = append(out, vi)
	}
	return out
}

// VertexInfo and EdgeInfo describe a plan for APIs.
type VertexInfo struct {
	Name        string     `json:"name"`
	Parallelism int        `json:"parallelism"`
	Nodes       []string   `json:"nodes"`
	Inputs      []EdgeInfo `json:"inputs,omitempty"`
}

type EdgeInfo struct {
	From         string `json:"from"`
	Name         string `json:"edge"`
	Partitioning string `json:"partitioning"`
}

func partName(p task.Partitioning) string {
	switch p {
	case task.Hash:
		return "hash"
	case task.Rebalance:
		return "rebalance"
	}
	return "forward"
}
