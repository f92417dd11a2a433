package plan_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/task"
)

// fanJob has every kind of edge: rides (p=2) hash-partitions into stats
// (p=3), whose main output is chained into out (p=3) and whose late output
// is rebalanced into late-out (p=1).
const fanJob = `job: fan
exchange: {batchRows: 100, batchBytes: 4096, bufferTimeout: 50ms, credits: 8}
sources:
  - name: rides
    type: datagen
    parallelism: 2
    rate: 1000
    schema: {id: int64, zone: string, fare: float64, ts: timestamp_ms}
    eventTime: {column: ts, maxOutOfOrderness: 2s, idleTimeout: 30s}
operators:
  - {name: stats, input: rides, parallelism: 3, keyBy: [zone], window: {type: tumbling, size: 1m, lateOutput: late}, aggregate: {n: count()}}
sinks:
  - {name: out, input: stats, parallelism: 3, type: stdout}
  - {name: late-out, input: late, parallelism: 1, type: stdout}
`

func taskConfig(t *testing.T, p *plan.Plan, vertex string, subtask int) task.Config {
	t.Helper()
	v := p.Vertex(vertex)
	if v == nil {
		t.Fatalf("no vertex %q", vertex)
	}
	cfg, err := p.TaskConfig("fan-1234", 2, v, subtask)
	if err != nil {
		t.Fatalf("TaskConfig(%s, %d): %v", vertex, subtask, err)
	}
	return cfg
}

func channel(edge string, producer int, consumerVertex string, consumer int) exchange.Channel {
	return exchange.Channel{Job: "fan-1234", Attempt: 2, Edge: edge, Producer: producer, ConsumerVertex: consumerVertex, Consumer: consumer}
}

func TestTaskConfigSource(t *testing.T) {
	p := build(t, fanJob)
	cfg := taskConfig(t, p, "rides", 1)
	if cfg.Job != "fan-1234" || cfg.Attempt != 2 || cfg.Vertex != "rides" || cfg.Subtask != 1 || cfg.Parallelism != 2 || cfg.MaxParallelism != 128 {
		t.Errorf("identity = %s/%d %s[%d] p=%d maxP=%d", cfg.Job, cfg.Attempt, cfg.Vertex, cfg.Subtask, cfg.Parallelism, cfg.MaxParallelism)
	}
	if cfg.Credits != 8 || cfg.Batching != (task.Batching{Rows: 100, Bytes: 4096, Timeout: 50 * time.Millisecond}) {
		t.Errorf("exchange settings: credits %d batching %+v", cfg.Credits, cfg.Batching)
	}
	if len(cfg.Inputs) != 0 || len(cfg.Nodes) != 0 {
		t.Errorf("a lone source task has inputs %v and nodes %d", cfg.Inputs, len(cfg.Nodes))
	}
	src := cfg.Source
	if src == nil {
		t.Fatal("no source head")
	}
	// The rate is the source's total, split over its subtasks.
	if src.Name != "rides" || src.Rate != 500 || src.TimeColumn != 3 || src.MaxOutOfOrderness != 2*time.Second || src.IdleTimeout != 30*time.Second {
		t.Errorf("source head = %+v", src)
	}
	if !reflect.DeepEqual(src.Out, []task.Target{task.EdgeTo(0)}) {
		t.Errorf("source targets = %+v, want edge 0", src.Out)
	}
	if len(cfg.Edges) != 1 {
		t.Fatalf("edges = %+v, want 1", cfg.Edges)
	}
	e := cfg.Edges[0]
	if e.Partitioning != task.Hash || !reflect.DeepEqual(e.KeyColumns, []int{1}) {
		t.Errorf("edge partitioning %v keys %v, want hash on [1]", e.Partitioning, e.KeyColumns)
	}
	// One channel per consumer subtask, from this producer.
	want := []exchange.Channel{channel("rides", 1, "stats", 0), channel("rides", 1, "stats", 1), channel("rides", 1, "stats", 2)}
	if !reflect.DeepEqual(e.Channels, want) {
		t.Errorf("channels =\n%v\nwant\n%v", e.Channels, want)
	}
}

func TestTaskConfigChainWithSideOutput(t *testing.T) {
	p := build(t, fanJob)
	cfg := taskConfig(t, p, "stats", 2)
	if cfg.Source != nil {
		t.Error("stats task has a source head")
	}
	if cfg.Parallelism != 3 {
		t.Errorf("parallelism = %d", cfg.Parallelism)
	}
	// One input channel per producer subtask, into this subtask.
	if want := []exchange.Channel{channel("rides", 0, "stats", 2), channel("rides", 1, "stats", 2)}; !reflect.DeepEqual(cfg.Inputs, want) {
		t.Errorf("inputs =\n%v\nwant\n%v", cfg.Inputs, want)
	}
	if len(cfg.Nodes) != 2 || cfg.Nodes[0].Name != "stats" || cfg.Nodes[1].Name != "out" {
		t.Fatalf("nodes = %+v, want stats, out", cfg.Nodes)
	}
	stats, out := cfg.Nodes[0], cfg.Nodes[1]
	if stats.Op == nil || stats.Sink != nil || out.Sink == nil || out.Op != nil {
		t.Errorf("node kinds: stats op %v sink %v; out op %v sink %v", stats.Op, stats.Sink, out.Op, out.Sink)
	}
	if !reflect.DeepEqual(stats.Out, []task.Target{task.ChainTo(1)}) {
		t.Errorf("stats main targets = %+v, want chain to node 1", stats.Out)
	}
	if !reflect.DeepEqual(stats.Side, map[string][]task.Target{"late": {task.EdgeTo(0)}}) {
		t.Errorf("stats side targets = %+v, want late to edge 0", stats.Side)
	}
	if len(out.Out) != 0 || len(out.Side) != 0 {
		t.Errorf("sink has targets: %+v %+v", out.Out, out.Side)
	}
	if len(cfg.Edges) != 1 {
		t.Fatalf("edges = %+v", cfg.Edges)
	}
	e := cfg.Edges[0]
	if e.Partitioning != task.Rebalance || len(e.KeyColumns) != 0 {
		t.Errorf("late edge: %v keys %v, want rebalance", e.Partitioning, e.KeyColumns)
	}
	if want := []exchange.Channel{channel("stats.late", 2, "late-out", 0)}; !reflect.DeepEqual(e.Channels, want) {
		t.Errorf("late channels = %v, want %v", e.Channels, want)
	}
}

func TestTaskConfigSideOutputConsumer(t *testing.T) {
	p := build(t, fanJob)
	cfg := taskConfig(t, p, "late-out", 0)
	want := []exchange.Channel{channel("stats.late", 0, "late-out", 0), channel("stats.late", 1, "late-out", 0), channel("stats.late", 2, "late-out", 0)}
	if !reflect.DeepEqual(cfg.Inputs, want) {
		t.Errorf("inputs =\n%v\nwant\n%v", cfg.Inputs, want)
	}
	if len(cfg.Nodes) != 1 || cfg.Nodes[0].Sink == nil || len(cfg.Edges) != 0 {
		t.Errorf("late-out task: nodes %+v edges %+v", cfg.Nodes, cfg.Edges)
	}
}

// In a fully chained vertex the source's targets index the task's nodes,
// which do not include the source.
func TestTaskConfigChainTargets(t *testing.T) {
	p := build(t, ridesAt("1")+`operators:
  - {name: cheap, input: rides, filter: fare < 10}
  - {name: tag, input: cheap, keyBy: [zone], function: plan-test-tag}
sinks:
  - {name: a, input: cheap, type: stdout}
  - {name: b, input: tag, type: stdout}
  - {name: c, input: rides, type: stdout}
`)
	if len(p.Vertices) != 1 {
		t.Fatalf("vertices = %s", describe(p.Describe()))
	}
	cfg := taskConfig(t, p, "rides", 0)
	var names []string
	for _, n := range cfg.Nodes {
		names = append(names, n.Name)
	}
	// Nodes in plan order: operators, then sinks.
	if want := []string{"cheap", "tag", "a", "b", "c"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("nodes = %v, want %v", names, want)
	}
	if want := []task.Target{task.ChainTo(0), task.ChainTo(4)}; !reflect.DeepEqual(cfg.Source.Out, want) {
		t.Errorf("rides targets = %+v, want %+v", cfg.Source.Out, want)
	}
	if want := []task.Target{task.ChainTo(1), task.ChainTo(2)}; !reflect.DeepEqual(cfg.Nodes[0].Out, want) {
		t.Errorf("cheap targets = %+v, want %+v", cfg.Nodes[0].Out, want)
	}
	if want := []task.Target{task.ChainTo(3)}; !reflect.DeepEqual(cfg.Nodes[1].Out, want) {
		t.Errorf("tag targets = %+v, want %+v", cfg.Nodes[1].Out, want)
	}
	if cfg.Source.Rate != 0 {
		t.Errorf("unlimited source got rate %g", cfg.Source.Rate)
	}
	if len(cfg.Edges) != 0 || len(cfg.Inputs) != 0 {
		t.Errorf("chained vertex has edges %v inputs %v", cfg.Edges, cfg.Inputs)
	}
}

// A vertex whose head is an operator indexes its chain from 0.
func TestTaskConfigOperatorHead(t *testing.T) {
	p := build(t, ridesAt("2")+`operators:
  - {name: cheap, input: rides, parallelism: 1, filter: fare < 10}
  - {name: sel, input: cheap, parallelism: 1, select: {id: id}}
sinks:
  - {name: out, input: sel, parallelism: 1, type: stdout}
`)
	cfg := taskConfig(t, p, "cheap", 0)
	if want := []exchange.Channel{channel("rides", 0, "cheap", 0), channel("rides", 1, "cheap", 0)}; !reflect.DeepEqual(cfg.Inputs, want) {
		t.Errorf("inputs = %v, want %v", cfg.Inputs, want)
	}
	if len(cfg.Nodes) != 3 || !reflect.DeepEqual(cfg.Nodes[0].Out, []task.Target{task.ChainTo(1)}) || !reflect.DeepEqual(cfg.Nodes[1].Out, []task.Target{task.ChainTo(2)}) {
		t.Errorf("chain = %+v", cfg.Nodes)
	}
	src := taskConfig(t, p, "rides", 0)
	if e := src.Edges[0]; e.Partitioning != task.Rebalance || len(e.Channels) != 1 || e.Channels[0] != channel("rides", 0, "cheap", 0) {
		t.Errorf("rides edge = %+v", e)
	}
}
