package plan_test

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/arrowfmt"
	_ "github.com/weirstream/weir/examples/surge" // registers surge-multiplier
	"github.com/weirstream/weir/functions"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tagFn is a test function: it reads zone and emits (zone, n).
type tagFn struct{}

func (tagFn) ProcessElement(ctx *functions.Context, row functions.Row, out *functions.Collector) error {
	return out.Emit(row.String("zone"), int64(1))
}

func init() {
	functions.Register("plan-test-tag", functions.Definition{
		New: func(map[string]any) (functions.ProcessFunction, error) { return tagFn{}, nil },
		Output: func(in *arrow.Schema) ([]arrowfmt.Field, error) {
			if len(in.FieldIndices("zone")) == 0 {
				return nil, errors.New(`the input has no column "zone"`)
			}
			return []arrowfmt.Field{{Name: "zone", Type: arrowfmt.String}, {Name: "n", Type: arrowfmt.Int64}}, nil
		},
	})
}

func parse(t *testing.T, src string) *spec.Job {
	t.Helper()
	job, err := spec.Parse([]byte(src), "job.yaml")
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, src)
	}
	return job
}

func build(t *testing.T, src string) *plan.Plan {
	t.Helper()
	p, err := plan.Build(parse(t, src))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return p
}

// rides is the source every chaining case reads; %P is replaced by its
// parallelism.
const rides = `job: chain
sources:
  - name: rides
    type: datagen
    parallelism: %P
    count: 100
    schema: {id: int64, zone: string, fare: float64, ts: timestamp_ms}
    eventTime: {column: ts}
`

func ridesAt(p string) string { return strings.Replace(rides, "%P", p, 1) }

func TestChaining(t *testing.T) {
	type vertex = plan.VertexInfo
	type edge = plan.EdgeInfo
	tests := []struct {
		name string
		src  string
		want []vertex
	}{
		{
			name: "forward with equal parallelism is chained",
			src: ridesAt("2") + `operators:
  - {name: cheap, input: rides, parallelism: 2, filter: fare < 10}
sinks:
  - {name: out, input: cheap, parallelism: 2, type: stdout}
`,
			want: []vertex{{Name: "rides", Parallelism: 2, Nodes: []string{"rides", "cheap", "out"}}},
		},
		{
			name: "keyBy with parallelism above 1 is a hash edge",
			src: ridesAt("2") + `operators:
  - {name: stats, input: rides, parallelism: 2, keyBy: [zone], window: {type: tumbling, size: 1m}, aggregate: {n: count()}}
sinks:
  - {name: out, input: stats, parallelism: 2, type: stdout}
`,
			want: []vertex{
				{Name: "rides", Parallelism: 2, Nodes: []string{"rides"}},
				{Name: "stats", Parallelism: 2, Nodes: []string{"stats", "out"}, Inputs: []edge{{From: "rides", Name: "rides", Partitioning: "hash"}}},
			},
		},
		{
			name: "keyBy with parallelism 1 on both sides is chained",
			src: ridesAt("1") + `operators:
  - {name: stats, input: rides, parallelism: 1, keyBy: [zone], window: {type: tumbling, size: 1m}, aggregate: {n: count()}}
sinks:
  - {name: out, input: stats, parallelism: 1, type: stdout}
`,
			want: []vertex{{Name: "rides", Parallelism: 1, Nodes: []string{"rides", "stats", "out"}}},
		},
		{
			name: "keyBy into parallelism 1 from 2 is a hash edge",
			src: ridesAt("2") + `operators:
  - {name: stats, input: rides, parallelism: 1, keyBy: [zone], window: {type: tumbling, size: 1m}, aggregate: {n: count()}}
sinks:
  - {name: out, input: stats, parallelism: 1, type: stdout}
`,
			want: []vertex{
				{Name: "rides", Parallelism: 2, Nodes: []string{"rides"}},
				{Name: "stats", Parallelism: 1, Nodes: []string{"stats", "out"}, Inputs: []edge{{From: "rides", Name: "rides", Partitioning: "hash"}}},
			},
		},
		{
			name: "different parallelism rebalances",
			src: ridesAt("3") + `operators:
  - {name: cheap, input: rides, parallelism: 2, filter: fare < 10}
sinks:
  - {name: out, input: cheap, parallelism: 2, type: stdout}
  - {name: all, input: rides, parallelism: 1, type: stdout}
`,
			want: []vertex{
				{Name: "rides", Parallelism: 3, Nodes: []string{"rides"}},
				{Name: "cheap", Parallelism: 2, Nodes: []string{"cheap", "out"}, Inputs: []edge{{From: "rides", Name: "rides", Partitioning: "rebalance"}}},
				{Name: "all", Parallelism: 1, Nodes: []string{"all"}, Inputs: []edge{{From: "rides", Name: "rides", Partitioning: "rebalance"}}},
			},
		},
		{
			name: "a side output is chained into a sink of equal parallelism and rebalanced into others",
			src: ridesAt("2") + `operators:
  - {name: stats, input: rides, parallelism: 2, keyBy: [zone], window: {type: tumbling, size: 1m, lateOutput: late}, aggregate: {n: count()}}
sinks:
  - {name: out, input: stats, parallelism: 2, type: stdout}
  - {name: late-out, input: late, parallelism: 2, type: stdout}
  - {name: late-one, input: late, parallelism: 1, type: stdout}
`,
			want: []vertex{
				{Name: "rides", Parallelism: 2, Nodes: []string{"rides"}},
				{Name: "stats", Parallelism: 2, Nodes: []string{"stats", "out", "late-out"}, Inputs: []edge{{From: "rides", Name: "rides", Partitioning: "hash"}}},
				{Name: "late-one", Parallelism: 1, Nodes: []string{"late-one"}, Inputs: []edge{{From: "stats", Name: "stats.late", Partitioning: "rebalance"}}},
			},
		},
		{
			name: "operators listed before their inputs are planned in data-flow order",
			src: ridesAt("1") + `operators:
  - {name: c, input: b, filter: id > 2}
  - {name: b, input: a, filter: id > 1}
  - {name: a, input: rides, filter: id > 0}
sinks:
  - {name: out, input: c, type: stdout}
`,
			want: []vertex{{Name: "rides", Parallelism: 1, Nodes: []string{"rides", "a", "b", "c", "out"}}},
		},
		{
			name: "a keyed function after a window",
			src: ridesAt("2") + `parallelism: 2
operators:
  - {name: stats, input: rides, keyBy: [zone], window: {type: tumbling, size: 1m}, aggregate: {n: count()}}
  - {name: tag, input: stats, keyBy: [zone], function: plan-test-tag}
sinks:
  - {name: out, input: tag, type: stdout}
`,
			want: []vertex{
				{Name: "rides", Parallelism: 2, Nodes: []string{"rides"}},
				{Name: "stats", Parallelism: 2, Nodes: []string{"stats"}, Inputs: []edge{{From: "rides", Name: "rides", Partitioning: "hash"}}},
				{Name: "tag", Parallelism: 2, Nodes: []string{"tag", "out"}, Inputs: []edge{{From: "stats", Name: "stats", Partitioning: "hash"}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, tt.src)
			got := p.Describe()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Describe() =\n%s\nwant\n%s", describe(got), describe(tt.want))
			}
			// Each node sits in the vertex that lists it, and a node's
			// input edge is chained exactly when it does not start its
			// vertex.
			for _, v := range p.Vertices {
				for i, n := range v.Nodes {
					if n.Vertex != v {
						t.Errorf("node %s: Vertex = %v, want %s", n.Name, n.Vertex, v.Name)
					}
					if p.Node(n.Name) != n {
						t.Errorf("Node(%q) does not return the vertex's node", n.Name)
					}
					if n.Input != nil && n.Input.Chained != (i > 0) {
						t.Errorf("node %s at %d of vertex %s: input chained = %v", n.Name, i, v.Name, n.Input.Chained)
					}
				}
				if p.Vertex(v.Name) != v {
					t.Errorf("Vertex(%q) does not return it", v.Name)
				}
			}
			if p.Vertex("nope") != nil || p.Node("nope") != nil {
				t.Error("lookup of an unknown name returned something")
			}
		})
	}
}

func describe(vs []plan.VertexInfo) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("  " + v.Name + " p=" + strconv.Itoa(v.Parallelism) + " [" + strings.Join(v.Nodes, " ") + "]")
		for _, e := range v.Inputs {
			b.WriteString(" <-" + e.Partitioning + "- " + e.From + " (" + e.Name + ")")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// The example job plans to three vertices: the source, the window with its
// late sink, and the function with its sink.
func TestPlanExample(t *testing.T) {
	data, err := os.ReadFile("../../examples/surge-pricing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := build(t, string(data))
	want := []plan.VertexInfo{
		{Name: "rides", Parallelism: 2, Nodes: []string{"rides"}},
		{Name: "stats", Parallelism: 2, Nodes: []string{"stats", "late-out"}, Inputs: []plan.EdgeInfo{{From: "rides", Name: "rides", Partitioning: "hash"}}},
		{Name: "surge", Parallelism: 2, Nodes: []string{"surge", "out"}, Inputs: []plan.EdgeInfo{{From: "stats", Name: "stats", Partitioning: "hash"}}},
	}
	if got := p.Describe(); !reflect.DeepEqual(got, want) {
		t.Errorf("Describe() =\n%s\nwant\n%s", describe(got), describe(want))
	}
	var names []string
	for _, n := range p.Nodes {
		names = append(names, n.Name)
	}
	if want := []string{"rides", "stats", "surge", "out", "late-out"}; !reflect.DeepEqual(names, want) {
		t.Errorf("node order = %v, want %v", names, want)
	}
	// Plan.Job has the defaults filled in.
	if p.Job.Sinks[0].Parallelism != 2 || p.Job.Exchange == nil || p.Job.Exchange.Credits != 4 {
		t.Errorf("plan job lacks defaults: sink p=%d exchange %+v", p.Job.Sinks[0].Parallelism, p.Job.Exchange)
	}
	// The window's key column is the zone column of the rides stream;
	// the function's the zone column of the window's output.
	stats, surge := p.Node("stats"), p.Node("surge")
	if got := stats.Input.KeyColumns; !reflect.DeepEqual(got, []int{1}) {
		t.Errorf("stats key columns = %v, want [1] (zone)", got)
	}
	if got := surge.Input.Stream.Schema.Field(surge.Input.KeyColumns[0]).Name; got != "zone" {
		t.Errorf("surge keys by %q, want zone", got)
	}
	if late := p.Node("late-out").Input; late.Port != "late" || late.From != stats || late.Name() != "stats.late" {
		t.Errorf("late-out input = %+v", late)
	}
	if !stats.Out.HasTime() || !surge.Out.HasTime() {
		t.Error("window and function outputs lost event time")
	}
}

func TestTypeErrors(t *testing.T) {
	src := func(sourceExtra, ops string) string {
		return `job: types
sources:
  - name: rides
    type: datagen
    count: 10
    schema: {id: int64, zone: string, fare: float64, ts: timestamp_ms}
` + sourceExtra + `operators:
` + ops + `sinks:
  - {name: out, input: last, type: stdout}
`
	}
	const evTime = "    eventTime: {column: ts}\n"
	tests := []struct {
		name  string
		src   string
		field string
		msg   []string
	}{
		{"avg over a string", src(evTime, "  - {name: last, input: rides, keyBy: [id], window: {type: tumbling, size: 1m}, aggregate: {a: avg(zone)}}\n"),
			"operators[last].aggregate.a", []string{"avg", "zone", "string"}},
		{"filter not boolean", src(evTime, "  - {name: last, input: rides, filter: fare + 1}\n"),
			"operators[last].filter", []string{"filter must be a boolean expression"}},
		{"filter on a missing column", src(evTime, "  - {name: last, input: rides, filter: price > 1}\n"),
			"operators[last].filter", []string{"price"}},
		{"select of a missing column", src(evTime, "  - {name: last, input: rides, select: {p: price * 2}}\n"),
			"operators[last].select.p", []string{"price"}},
		{"unknown function", src(evTime, "  - {name: last, input: rides, keyBy: [zone], function: no-such-fn}\n"),
			"operators[last].function", []string{`"no-such-fn" is not a registered function`, "plan-test-tag", "surge-multiplier"}},
		{"function output refuses its input", src(evTime, "  - {name: sel, input: rides, select: {id: id}}\n  - {name: last, input: sel, keyBy: [id], function: plan-test-tag}\n"),
			"operators[last].function", []string{"plan-test-tag", `no column "zone"`}},
		{"keyBy column missing", src(evTime, "  - {name: last, input: rides, keyBy: [colour], window: {type: tumbling, size: 1m}, aggregate: {n: count()}}\n"),
			"operators[last].keyBy", []string{`"colour" is not a column of the input`, "zone"}},
		{"window without keyBy above parallelism 1", src(evTime, "  - {name: last, input: rides, parallelism: 2, window: {type: tumbling, size: 1m}, aggregate: {n: count()}}\n"),
			"operators[last].keyBy", []string{"a window without keyBy sees every row", "parallelism 1 (it has 2)"}},
		{"window without event time", src("", "  - {name: last, input: rides, keyBy: [zone], window: {type: tumbling, size: 1m}, aggregate: {n: count()}}\n"),
			"operators[last].input", []string{"the input has no event time"}},
		{"window after a select that drops event time", src(evTime, "  - {name: sel, input: rides, select: {zone: zone}}\n  - {name: last, input: sel, keyBy: [zone], window: {type: tumbling, size: 1m}, aggregate: {n: count()}}\n"),
			"operators[last].input", []string{"no event time"}},
		{"bad column type", strings.Replace(src("", "  - {name: last, input: rides, filter: id > 1}\n"), "fare: float64", "fare: float65", 1),
			"sources[rides].schema.fare", []string{"float65"}},
		{"event time not a timestamp", src("    eventTime: {column: id}\n", "  - {name: last, input: rides, filter: id > 1}\n"),
			"sources[rides].eventTime.column", []string{`column "id" is int64`, "timestamp_ms"}},
		{"redis source above parallelism 1", strings.Replace(src("", "  - {name: last, input: rides, filter: id > 1}\n"), "    type: datagen\n    count: 10\n", "    type: redis\n    stream: s\n    parallelism: 2\n", 1),
			"sources[rides].parallelism", []string{"a redis source reads one stream: parallelism must be 1, got 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := parse(t, tt.src)
			p, err := plan.Build(job)
			if p != nil {
				t.Errorf("Build returned a plan with an error")
			}
			ps, ok := spec.AsProblems(err)
			if !ok {
				t.Fatalf("Build error %v is not spec.Problems", err)
			}
			if len(ps) != 1 {
				t.Errorf("got %d problems, want 1 (nothing downstream of the bad node):\n%v", len(ps), ps)
			}
			var found *spec.Problem
			for i := range ps {
				if ps[i].Field == tt.field {
					found = &ps[i]
				}
			}
			if found == nil {
				t.Fatalf("no problem at %q:\n%v", tt.field, ps)
			}
			for _, s := range tt.msg {
				if !strings.Contains(found.Msg, s) {
					t.Errorf("problem %q lacks %q", found.Msg, s)
				}
			}
			// Through WithLines, the problem points at the operator's
			// line in the spec.
			wl := spec.WithLines(ps, []byte(tt.src), "job.yaml")
			if wl[0].File != "job.yaml" || wl[0].Line == 0 {
				t.Errorf("WithLines: %s:%d", wl[0].File, wl[0].Line)
			}
		})
	}
}

// Independent type errors are all reported; structural ones come from
// Validate before any type is checked.
func TestBuildReportsEveryProblem(t *testing.T) {
	job := parse(t, `job: two
sources:
  - {name: rides, type: datagen, schema: {id: int64, zone: string, ts: timestamp_ms}, eventTime: {column: ts}}
operators:
  - {name: a, input: rides, filter: id + 1}
  - {name: b, input: rides, select: {x: nope}}
  - {name: c, input: rides, keyBy: [zone], function: not-registered}
sinks:
  - {name: o1, input: a, type: stdout}
  - {name: o2, input: b, type: stdout}
  - {name: o3, input: c, type: stdout}
`)
	_, err := plan.Build(job)
	ps, ok := spec.AsProblems(err)
	if !ok {
		t.Fatalf("Build: %v", err)
	}
	var fields []string
	for _, p := range ps {
		fields = append(fields, p.Field)
	}
	if want := []string{"operators[a].filter", "operators[b].select.x", "operators[c].function"}; !reflect.DeepEqual(fields, want) {
		t.Errorf("problem fields = %v, want %v:\n%v", fields, want, ps)
	}

	job.Sinks[0].Input = "zzz"
	_, err = plan.Build(job)
	ps, _ = spec.AsProblems(err)
	if len(ps) != 1 || ps[0].Field != "sinks[o1].input" {
		t.Errorf("with a structural problem, Build = %v; want only Validate's problem", err)
	}
}

// Build does not change the job it is given.
func TestBuildLeavesJobAlone(t *testing.T) {
	job := parse(t, ridesAt("2")+`operators:
  - {name: cheap, input: rides, filter: fare < 10}
sinks:
  - {name: out, input: cheap, type: stdout}
`)
	before := *job
	before.Operators = append([]spec.Operator(nil), job.Operators...)
	before.Sinks = append([]spec.Sink(nil), job.Sinks...)
	if _, err := plan.Build(job); err != nil {
		t.Fatal(err)
	}
	if job.Parallelism != 0 || job.Exchange != nil || !reflect.DeepEqual(job.Operators, before.Operators) || !reflect.DeepEqual(job.Sinks, before.Sinks) {
		t.Errorf("Build changed its input: %+v", job)
	}
}

func TestPartitioningOfEdges(t *testing.T) {
	p := build(t, ridesAt("2")+`operators:
  - {name: stats, input: rides, parallelism: 3, keyBy: [zone, id], window: {type: tumbling, size: 1m, lateOutput: late}, aggregate: {n: count()}}
sinks:
  - {name: out, input: stats, parallelism: 3, type: stdout}
  - {name: late-out, input: late, parallelism: 1, type: stdout}
`)
	in := p.Node("stats").Input
	if in.Chained || in.Partitioning != task.Hash || !reflect.DeepEqual(in.KeyColumns, []int{1, 0}) {
		t.Errorf("stats input: chained %v partitioning %v keys %v; want hash on [1 0]", in.Chained, in.Partitioning, in.KeyColumns)
	}
	if e := p.Node("out").Input; !e.Chained || e.Partitioning != task.Forward {
		t.Errorf("out input: chained %v partitioning %v", e.Chained, e.Partitioning)
	}
	if e := p.Node("late-out").Input; e.Chained || e.Partitioning != task.Rebalance || len(e.KeyColumns) != 0 {
		t.Errorf("late-out input: chained %v partitioning %v keys %v", e.Chained, e.Partitioning, e.KeyColumns)
	}
	// The late output carries the window's input rows.
	if got := p.Node("late-out").Input.Stream.Schema; !got.Equal(p.Node("rides").Out.Schema) {
		t.Errorf("late stream schema = %v, want the input's", got)
	}
	if outs := p.Node("stats").Outputs; len(outs) != 2 || outs[0].To.Name != "out" || outs[1].To.Name != "late-out" {
		t.Errorf("stats outputs = %v", outs)
	}
}

// A network edge into a window carries only the columns the window reads;
// a chained edge, and an edge into a window with a late output, carry all.
func TestEdgeProjection(t *testing.T) {
	p := build(t, `job: proj
parallelism: 2
sources:
  - name: rides
    type: datagen
    count: 10
    schema: {id: int64, zone: string, fare: float64, note: string, ts: timestamp_ms}
    eventTime: {column: ts}
operators:
  - {name: w, input: rides, keyBy: [zone], window: {type: tumbling, size: 1m}, aggregate: {n: count(), total: sum(fare)}}
  - {name: late, input: rides, keyBy: [zone], window: {type: tumbling, size: 1m, lateOutput: l}, aggregate: {n: count()}}
  - {name: cheap, input: rides, filter: fare < 10}
sinks:
  - {name: out, input: w, type: stdout}
  - {name: out2, input: late, type: stdout}
  - {name: out3, input: cheap, type: stdout}
  - {name: out4, input: l, type: stdout}
`)
	e := p.Node("w").Input
	if e.Chained || !slices.Equal(e.Project, []int{1, 2, 4}) {
		t.Fatalf("edge into w: chained %v, project %v; want columns zone, fare, ts", e.Chained, e.Project)
	}
	if got := columnNames(e.Wire.Schema); got != "zone,fare,ts" || e.Wire.TimeColumn != 2 {
		t.Errorf("wire stream %s, time column %d", got, e.Wire.TimeColumn)
	}
	if !slices.Equal(e.KeyColumns, []int{1}) {
		t.Errorf("key columns %v index the producer's batch", e.KeyColumns)
	}
	if e := p.Node("late").Input; e.Project != nil {
		t.Errorf("a window with a late output gets projected columns %v", e.Project)
	}
	if e := p.Node("cheap").Input; !e.Chained || e.Project != nil {
		t.Errorf("chained filter edge: chained %v project %v", e.Chained, e.Project)
	}
	cfg, err := p.TaskConfig("j", 1, p.Node("rides").Vertex, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, eo := range cfg.Edges {
		if slices.Equal(eo.Project, []int{1, 2, 4}) && eo.ProjectSchema.NumFields() == 3 {
			found = true
		}
	}
	if !found {
		t.Errorf("no task edge carries the projection: %+v", cfg.Edges)
	}
}

func columnNames(s *arrow.Schema) string {
	var names []string
	for _, f := range s.Fields() {
		names = append(names, f.Name)
	}
	return strings.Join(names, ",")
}
