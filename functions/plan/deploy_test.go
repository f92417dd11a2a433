package plan_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
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

const dlJob = `job: dl
checkpoint: {interval: 1s}
sources:
  - {name: in, type: files, path: in/, format: jsonl, schema: {id: int64}}
sinks:
  - {name: out, input: in, type: files, path: out/, format: jsonl}
`

// TestDeadLetterSink: a checkpointing job's sources send their dead letters
// to a files sink under jobs/<id>/deadletters/<source>/ whose transactions
// the coordinator finds by the source's name (TxnSink); its commits are
// idempotent and the janitor removes an aborted one's staged letters.
func TestDeadLetterSink(t *testing.T) {
	ctx := t.Context()
	p := build(t, dlJob)
	if cfg := taskConfig(t, p, "in", 0); cfg.Source.DeadLetters == nil {
		t.Error("a checkpointing job's source has no dead-letter sink")
	}
	if cfg := taskConfig(t, build(t, strings.Replace(dlJob, "checkpoint: {interval: 1s}\n", "", 1)), "in", 0); cfg.Source.DeadLetters != nil {
		t.Error("a job without checkpoints has a dead-letter sink: its letters would wait for barriers that never come")
	}
	if _, err := p.TxnSink("dl-1", "nope"); err == nil || !strings.Contains(err.Error(), `no sink "nope"`) {
		t.Errorf("TxnSink of an unknown name: %v", err)
	}
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	open := func() task.TwoPhaseSink {
		tp, err := p.TxnSink("dl-1", "in")
		if err != nil {
			t.Fatal(err)
		}
		sc := &task.SinkContext{Context: task.Context{Job: "dl-1", Node: "in", Counters: new(task.Counters)}, Bucket: b, Attempt: 2}
		if err := tp.Open(sc); err != nil {
			t.Fatal(err)
		}
		tp.EnableTransactions()
		return tp
	}
	letter := task.DeadLetter{Source: "in", Origin: "in/a.jsonl:3", Reason: "not an object", Raw: `[1, "two"]`}
	stage := func(tp task.TwoPhaseSink, id string) json.RawMessage {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, task.DeadLetterSchema)
		defer rb.Release()
		for i, v := range []string{letter.Source, letter.Origin, letter.Reason, letter.Raw} {
			rb.Field(i).(*array.StringBuilder).Append(v)
		}
		rec := rb.NewRecordBatch()
		defer rec.Release()
		if err := tp.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		st, err := tp.(task.StagedSink).Seal(id)
		if err != nil {
			t.Fatal(err)
		}
		h, err := st(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	w := open()
	committed := stage(w, "dl-1-a2-in-s0-c1")
	stage(w, "dl-1-a2-in-s0-c2") // its checkpoint never completes
	prefix := layout.DeadLetterPrefix("dl-1", "in")
	final := func() []string {
		objs, err := b.List(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range objs {
			if !strings.HasPrefix(o.Key, layout.StagingPrefix(prefix)) {
				keys = append(keys, o.Key)
			}
		}
		return keys
	}
	if keys := final(); len(keys) != 0 {
		t.Fatalf("letters visible before commit: %v", keys)
	}
	// Recovery commits again, on another process: one object all the same.
	for range 2 {
		if err := open().Commit(ctx, committed); err != nil {
			t.Fatal(err)
		}
	}
	keys := final()
	if len(keys) != 1 {
		t.Fatalf("after two commits: %v, want one object", keys)
	}
	data, err := b.Get(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	var got task.DeadLetter
	if err := json.Unmarshal(data, &got); err != nil || got != letter {
		t.Errorf("committed %s (%v), want %+v", data, err, letter)
	}
	removed, err := open().(connector.StagingCleaner).CleanStaging(ctx, func(string) bool { return false })
	if err != nil || removed != 1 {
		t.Errorf("janitor removed %d (%v), want the aborted transaction's 1 object", removed, err)
	}
	if objs, _ := b.List(ctx, prefix); len(objs) != 1 {
		t.Errorf("after the janitor: %v, want only the committed object", objs)
	}
}

// TestTaskConfigRateShare: a source of splits whose subtasks own unequal
// numbers of them splits its rate as its splits: 7 splits over 3 subtasks
// are 3, 2 and 2, so event time advances at one pace on all of them.
func TestTaskConfigRateShare(t *testing.T) {
	p := build(t, strings.Replace(fanJob, "    parallelism: 2\n    rate: 1000\n", "    parallelism: 3\n    rate: 700\n    splits: 7\n", 1))
	for s, want := range []float64{300, 200, 200} {
		if got := taskConfig(t, p, "rides", s).Source.Rate; got < want-1e-9 || got > want+1e-9 {
			t.Errorf("subtask %d: rate %g, want %g", s, got, want)
		}
	}
	if _, err := plan.Build(parse(t, strings.Replace(fanJob, "    rate: 1000\n", "    rate: 1000\n    splits: 1\n", 1))); err == nil || !strings.Contains(err.Error(), "sources[rides].splits: 1 is below the parallelism 2") {
		t.Errorf("splits below the parallelism: %v", err)
	}
}
