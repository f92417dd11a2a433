package functions

import (
	"fmt"
	"time"

	// Build validates a job's sources and sinks as their registered types
	// do: a program that builds jobs has the built-in connectors.
	_ "github.com/weirstream/weir/functions/connectors"
	"github.com/weirstream/weir/functions/spec"
)

// JobBuilder builds a job spec in Go. It produces exactly the spec.Job that
// the same job written in YAML parses to, so either can be deployed:
//
//	job, err := functions.NewJob("surge-pricing").
//		Parallelism(2).
//		Source(spec.Source{Name: "rides", Type: spec.SourceDatagen, ...}).
//		Operator(spec.Operator{Name: "surge", Input: "stats", KeyBy: []string{"zone"}, Function: "surge-multiplier"}).
//		Sink(spec.Sink{Name: "out", Input: "surge", Type: spec.SinkStdout}).
//		Build()
type JobBuilder struct {
	job spec.Job
}

// NewJob starts a job spec named name.
func NewJob(name string) *JobBuilder { return &JobBuilder{job: spec.Job{Name: name}} }

// Parallelism sets the default parallelism of the job's vertices.
func (b *JobBuilder) Parallelism(n int) *JobBuilder { b.job.Parallelism = n; return b }

// MaxParallelism sets the number of key groups (fixed for the job's life).
func (b *JobBuilder) MaxParallelism(n int) *JobBuilder { b.job.MaxParallelism = n; return b }

// Source adds a source.
func (b *JobBuilder) Source(s spec.Source) *JobBuilder {
	b.job.Sources = append(b.job.Sources, s)
	return b
}

// Operator adds an operator.
func (b *JobBuilder) Operator(o spec.Operator) *JobBuilder {
	b.job.Operators = append(b.job.Operators, o)
	return b
}

// Sink adds a sink.
func (b *JobBuilder) Sink(s spec.Sink) *JobBuilder {
	b.job.Sinks = append(b.job.Sinks, s)
	return b
}

// Exchange tunes the channels between vertices.
func (b *JobBuilder) Exchange(e spec.Exchange) *JobBuilder {
	b.job.Exchange = &e
	return b
}

// Build validates the spec (spec.Job.Validate: every problem at once, as
// spec.Problems) and returns it. The builder can go on being used; the
// returned job does not share its slices.
func (b *JobBuilder) Build() (*spec.Job, error) {
	j := b.job
	j.Sources = append([]spec.Source(nil), b.job.Sources...)
	j.Operators = append([]spec.Operator(nil), b.job.Operators...)
	j.Sinks = append([]spec.Sink(nil), b.job.Sinks...)
	if err := j.NormalizeConfigs(); err != nil {
		return nil, err
	}
	if err := j.Validate(); err != nil {
		return nil, err
	}
	return &j, nil
}

// Schema returns a source schema from name, type pairs in column order:
// Schema("ride_id", "int64", "ts", "timestamp_ms"). It panics on an odd
// number of arguments.
func Schema(nameType ...string) spec.Schema { return *pairs("Schema", nameType) }

// Aggregate returns a window's aggregates from name, expression pairs in
// order: Aggregate("requests", "count()", "avg_fare", "avg(fare)"). It
// panics on an odd number of arguments.
func Aggregate(nameExpr ...string) *spec.OrderedMap { return pairs("Aggregate", nameExpr) }

// Select returns a select's outputs from name, expression pairs in order.
// It panics on an odd number of arguments.
func Select(nameExpr ...string) *spec.OrderedMap { return pairs("Select", nameExpr) }

func pairs(fn string, kv []string) *spec.OrderedMap {
	if len(kv)%2 != 0 {
		panic(fmt.Sprintf("functions.%s: odd number of arguments (%d): want name, value pairs", fn, len(kv)))
	}
	m := &spec.OrderedMap{}
	for i := 0; i < len(kv); i += 2 {
		m.Set(kv[i], kv[i+1])
	}
	return m
}

// Tumbling returns a tumbling window of the given size.
func Tumbling(size time.Duration) *spec.Window {
	return &spec.Window{Type: spec.WindowTumbling, Size: spec.Duration(size)}
}

// Sliding returns a sliding window of the given size, starting every slide.
func Sliding(size, slide time.Duration) *spec.Window {
	return &spec.Window{Type: spec.WindowSliding, Size: spec.Duration(size), Slide: spec.Duration(slide)}
}

// Session returns a session window closed by a gap of inactivity.
func Session(gap time.Duration) *spec.Window {
	return &spec.Window{Type: spec.WindowSession, Gap: spec.Duration(gap)}
}

// Late sets how long w keeps fired windows for late records, and the side
// output (if any) for records later than that; it returns w.
func Late(w *spec.Window, allowedLateness time.Duration, lateOutput string) *spec.Window {
	w.AllowedLateness = spec.Duration(allowedLateness)
	w.LateOutput = lateOutput
	return w
}

// Side names one input of a join and its key columns: Side("auctions",
// "seller").
func Side(input string, keyBy ...string) spec.JoinSide {
	return spec.JoinSide{Input: input, KeyBy: keyBy}
}

// RegularJoin joins every pair of left and right rows with equal keys, as
// they arrive. A ttl above zero forgets a row once the watermark passes its
// event time plus ttl; 0 keeps every row.
func RegularJoin(left, right spec.JoinSide, ttl time.Duration) *spec.Join {
	return &spec.Join{Type: spec.JoinRegular, Left: left, Right: right, TTL: spec.Duration(ttl)}
}

// IntervalJoin joins left and right rows with equal keys whose event times
// satisfy right + lower <= left <= right + upper.
func IntervalJoin(left, right spec.JoinSide, lower, upper time.Duration) *spec.Join {
	return &spec.Join{Type: spec.JoinInterval, Left: left, Right: right, Lower: spec.Duration(lower), Upper: spec.Duration(upper)}
}

// WindowJoin joins left and right rows with equal keys in the same
// tumbling or sliding window, when the window fires.
func WindowJoin(left, right spec.JoinSide, w *spec.Window) *spec.Join {
	return &spec.Join{Type: spec.JoinWindow, Left: left, Right: right, Window: w}
}

// Columns returns a join's output columns from name, "left.<column>" or
// "right.<column>" pairs, in order.
func Columns(nameRef ...string) *spec.OrderedMap { return pairs("Columns", nameRef) }
