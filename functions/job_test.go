package functions

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/functions/spec"
)

func TestJobBuilderMatchesParse(t *testing.T) {
	const yaml = `
job: clicks
parallelism: 3
exchange: {batchRows: 1000}
sources:
  - {name: in, type: redis, stream: clicks, schema: {user: string, ts: timestamp_ms}, eventTime: {column: ts}}
operators:
  - name: per-user
    input: in
    keyBy: [user]
    window: {type: tumbling, size: 1m}
    aggregate: {n: count()}
  - name: sessions
    input: in
    keyBy: [user]
    window: {type: session, gap: 30s, allowedLateness: 5s, lateOutput: late}
    aggregate: {n: count()}
  - {name: big, input: per-user, select: {user: user, many: n > 10}}
  - {name: fn, input: big, keyBy: [user], function: f, config: {k: 2}}
sinks:
  - {name: out, input: fn, type: stdout}
`
	want, err := spec.Parse([]byte(yaml), "clicks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b := NewJob("clicks").
		Parallelism(3).
		Exchange(spec.Exchange{BatchRows: 1000}).
		Source(spec.Source{Name: "in", Type: spec.SourceRedis, Stream: "clicks", Schema: Schema("user", "string", "ts", "timestamp_ms"), Event: &spec.EventTime{Column: "ts"}}).
		Operator(spec.Operator{Name: "per-user", Input: "in", KeyBy: []string{"user"}, Window: Tumbling(time.Minute), Aggregate: Aggregate("n", "count()")}).
		Operator(spec.Operator{Name: "sessions", Input: "in", KeyBy: []string{"user"}, Window: Late(Session(30*time.Second), 5*time.Second, "late"), Aggregate: Aggregate("n", "count()")}).
		Operator(spec.Operator{Name: "big", Input: "per-user", Select: Select("user", "user", "many", "n > 10")}).
		Operator(spec.Operator{Name: "fn", Input: "big", KeyBy: []string{"user"}, Function: "f", Config: map[string]any{"k": 2}}).
		Sink(spec.Sink{Name: "out", Input: "fn", Type: spec.SinkStdout})
	got, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("builder:\n%+v\nparse:\n%+v", got, want)
	}
	// The built job does not share slices with the builder.
	b.Sink(spec.Sink{Name: "more", Input: "fn", Type: spec.SinkStdout})
	if len(got.Sinks) != 1 {
		t.Error("building on after Build changed the built job")
	}
}

func TestJoinBuildersMatchParse(t *testing.T) {
	const yaml = `
job: joins
sources:
  - {name: nx, type: nexmark, count: 1000, eventTime: {column: dateTime, maxOutOfOrderness: 1s}}
operators:
  - name: sellers
    join:
      type: regular
      left: {input: nx.person, keyBy: [id]}
      right: {input: nx.auction, keyBy: [seller]}
      ttl: 1h
      columns: {name: left.name, auction: right.id}
      where: name != ""
  - name: near
    join: {type: interval, left: {input: nx.bid, keyBy: [auction]}, right: {input: nx.auction, keyBy: [id]}, lower: -10s, upper: 0s}
  - name: same-window
    join:
      type: window
      left: {input: sellers, keyBy: [auction]}
      right: {input: nx.bid, keyBy: [auction]}
      window: {type: tumbling, size: 10s}
sinks:
  - {name: out, input: near, type: stdout}
`
	want, err := spec.Parse([]byte(yaml), "joins.yaml")
	if err != nil {
		t.Fatal(err)
	}
	regular := RegularJoin(Side("nx.person", "id"), Side("nx.auction", "seller"), time.Hour)
	regular.Columns = Columns("name", "left.name", "auction", "right.id")
	regular.Where = `name != ""`
	got, err := NewJob("joins").
		Source(spec.Source{Name: "nx", Type: spec.SourceNexmark, Count: 1000, Event: &spec.EventTime{Column: "dateTime", MaxOutOfOrderness: spec.Duration(time.Second)}}).
		Operator(spec.Operator{Name: "sellers", Join: regular}).
		Operator(spec.Operator{Name: "near", Join: IntervalJoin(Side("nx.bid", "auction"), Side("nx.auction", "id"), -10*time.Second, 0)}).
		Operator(spec.Operator{Name: "same-window", Join: WindowJoin(Side("sellers", "auction"), Side("nx.bid", "auction"), Tumbling(10*time.Second))}).
		Sink(spec.Sink{Name: "out", Input: "near", Type: spec.SinkStdout}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("builder:\n%+v\nparse:\n%+v", got, want)
	}
}

func TestJobBuilderValidates(t *testing.T) {
	_, err := NewJob("bad job").
		Source(spec.Source{Name: "s", Type: "kafka", Schema: Schema("a", "int64")}).
		Operator(spec.Operator{Name: "w", Input: "s", Window: Sliding(time.Second, time.Minute), Aggregate: Aggregate("n", "count()")}).
		Build()
	ps, ok := spec.AsProblems(err)
	if !ok {
		t.Fatalf("error %v is not spec.Problems", err)
	}
	msg := ps.Error()
	for _, frag := range []string{
		`job: "bad job" is not a valid job name`,
		`sources[s].type: "kafka" is not a source type`,
		"operators[w].window.slide: slide 1m0s is longer than size 1s",
		"sinks: a job needs at least one sink",
	} {
		if !strings.Contains(msg, frag) {
			t.Errorf("problems %s\nmiss %q", msg, frag)
		}
	}
}

func TestPairHelpers(t *testing.T) {
	s := Schema("a", "int64", "b", "string")
	if !reflect.DeepEqual(s, spec.Schema{Keys: []string{"a", "b"}, Values: []string{"int64", "string"}}) {
		t.Errorf("Schema = %+v", s)
	}
	mustPanic(t, "functions.Aggregate: odd number of arguments (1): want name, value pairs", func() {
		//lint:ignore SA5012 the odd count is what this tests
		Aggregate("n")
	})
	if w := Tumbling(time.Second); w.Type != spec.WindowTumbling || w.Size.D() != time.Second {
		t.Errorf("Tumbling = %+v", w)
	}
}
