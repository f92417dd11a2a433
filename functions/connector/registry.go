package connector

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
)

// SourceType is a kind of source: what a job spec names in sources[].type,
// with everything weir needs to know about it. Name, Check and New are
// required; the rest is optional.
type SourceType struct {
	// Name is the type as job specs write it ("datagen").
	Name string
	// Outputs are the outputs of a source that is read through them only,
	// as <source>.<output>, each with a fixed stream (the nexmark source's
	// person, auction and bid). Nil for a source with one output whose
	// schema the spec gives.
	Outputs []Output
	// Check reports, at once, every problem with the fields of src that
	// the type owns, each Field a path such as sources[<name>].path.
	// spec.Validate calls it after its own checks of names and numbers
	// and, for a source with one output, of its schema and event time (a
	// source with Outputs checks what the spec says of those itself). It
	// must not read anything but src.
	Check func(src *spec.Source) spec.Problems
	// Plan checks src with the job's defaults filled in
	// (spec.Job.Effective), when the job is planned: for what Check cannot
	// know, such as the parallelism a job gives its sources.
	Plan func(src *spec.Source) spec.Problems
	// New returns a source for src producing out (from SourceSchema, or
	// the zero Stream for a source with Outputs). It must not start
	// anything: the runtime opens it. Errors name the field, as Check's.
	New func(src *spec.Source, out stream.Stream) (task.Source, error)
	// Splits says the source is a set of splits (redis: its streams;
	// files: its objects; datagen, nexmark: blocks of the event index) with
	// a position each, so it can run at another parallelism than the one
	// a checkpoint was taken at. Its position is then
	// {"splits": {"<split>": <its position>, ...}} with the splits the
	// subtask owns; a restore at another parallelism gives every subtask
	// the splits of all old subtasks merged, and each keeps those it owns:
	// of the splits sorted by id, subtask s of p owns the i-th when
	// i % p == s (connector.OwnsSplit). A split absent from a restored
	// position starts at its beginning.
	Splits bool
	// Share is the part of the source's events that subtask of
	// parallelism generates, for splitting the source's rate (a
	// generator of splits whose subtasks own unequal numbers of them).
	// Nil: 1/parallelism.
	Share func(src *spec.Source, subtask, parallelism int) float64
	// Pending reports whether input arrived after positions (the
	// checkpointed positions of every subtask of src, as Position
	// returned them, at least one), for waking a suspended job. Nil: the
	// type cannot say, and a job reading it is never suspended.
	Pending func(ctx context.Context, src *spec.Source, positions []json.RawMessage, env PendingEnv) (bool, error)
	// DescribePosition renders a checkpointed position of the source for
	// weir checkpoints inspect. Nil shows the position's JSON as stored,
	// which is how the built-in sources, whose positions are small JSON
	// objects, show theirs.
	DescribePosition func(pos json.RawMessage) string
}

// Output is one output of a source with several.
type Output struct {
	Name   string
	Stream stream.Stream
}

// SinkType is a kind of sink: what a job spec names in sinks[].type. Name,
// Check and New are required; Txn only for sinks with transactions.
type SinkType struct {
	// Name is the type as job specs write it ("files").
	Name string
	// Check reports, at once, every problem with the fields of snk that the
	// type owns (sinks[<name>].path, ...). spec.Validate calls it.
	Check func(snk *spec.Sink) spec.Problems
	// New returns a sink for snk consuming in. It must not start anything:
	// the runtime opens it. A sink with transactions implements
	// task.TwoPhaseSink, and StagingCleaner when it stages. NewSink adds
	// the rate limit of snk.Rate around it.
	New func(snk *spec.Sink, in stream.Stream) (task.Sink, error)
	// Txn reads the sink's transactions back for the CLI; nil for a sink
	// without transactions.
	Txn *TxnType
}

var registry struct {
	sync.Mutex
	sources []SourceType // in the order registered: error messages list them so
	sinks   []SinkType
}

// RegisterSource makes a source type available to job specs. It is meant
// for initialisation (functions/connectors registers the built-in ones)
// and panics if the name is empty or taken, or Check or New is missing.
func RegisterSource(t SourceType) {
	if t.Name == "" || t.Check == nil || t.New == nil {
		panic(fmt.Sprintf("connector: RegisterSource %q: a source type needs Name, Check and New", t.Name))
	}
	registry.Lock()
	defer registry.Unlock()
	for _, s := range registry.sources {
		if s.Name == t.Name {
			panic(fmt.Sprintf("connector: RegisterSource called twice for %q", t.Name))
		}
	}
	registry.sources = append(registry.sources, t)
}

// RegisterSink makes a sink type available to job specs; see
// RegisterSource. It panics too if Txn lacks a field.
func RegisterSink(t SinkType) {
	if t.Name == "" || t.Check == nil || t.New == nil {
		panic(fmt.Sprintf("connector: RegisterSink %q: a sink type needs Name, Check and New", t.Name))
	}
	if t.Txn != nil && (t.Txn.Owns == nil || t.Txn.Inspect == nil) {
		panic(fmt.Sprintf("connector: RegisterSink %q: Txn needs Owns and Inspect", t.Name))
	}
	registry.Lock()
	defer registry.Unlock()
	for _, s := range registry.sinks {
		if s.Name == t.Name {
			panic(fmt.Sprintf("connector: RegisterSink called twice for %q", t.Name))
		}
	}
	registry.sinks = append(registry.sinks, t)
}

// LookupSource returns the source type registered under name.
func LookupSource(name string) (SourceType, bool) {
	registry.Lock()
	defer registry.Unlock()
	for _, t := range registry.sources {
		if t.Name == name {
			return t, true
		}
	}
	return SourceType{}, false
}

// LookupSink returns the sink type registered under name.
func LookupSink(name string) (SinkType, bool) {
	registry.Lock()
	defer registry.Unlock()
	for _, t := range registry.sinks {
		if t.Name == name {
			return t, true
		}
	}
	return SinkType{}, false
}

// SourceTypes returns the names of the registered source types, in the
// order they were registered.
func SourceTypes() []string {
	registry.Lock()
	defer registry.Unlock()
	names := make([]string, len(registry.sources))
	for i, t := range registry.sources {
		names[i] = t.Name
	}
	return names
}

// SinkTypes returns the names of the registered sink types, in the order
// they were registered.
func SinkTypes() []string {
	registry.Lock()
	defer registry.Unlock()
	names := make([]string, len(registry.sinks))
	for i, t := range registry.sinks {
		names[i] = t.Name
	}
	return names
}

// sinkTypes returns the registered sink types, in order.
func sinkTypes() []SinkType {
	registry.Lock()
	defer registry.Unlock()
	return append([]SinkType(nil), registry.sinks...)
}

// unknownSource is the problem of a source whose type is not registered.
func unknownSource(src *spec.Source) spec.Problem {
	return spec.Problem{Field: fmt.Sprintf("sources[%s].type", src.Name),
		Msg: fmt.Sprintf("%q is not a source type: %s", src.Type, want(SourceTypes()))}
}

// unknownSink is the problem of a sink whose type is not registered.
func unknownSink(snk *spec.Sink) spec.Problem {
	return spec.Problem{Field: fmt.Sprintf("sinks[%s].type", snk.Name),
		Msg: fmt.Sprintf("%q is not a sink type: %s", snk.Type, want(SinkTypes()))}
}

// want lists what is accepted: "want a, b or c".
func want(names []string) string {
	switch len(names) {
	case 0:
		return "none is registered (a program that runs jobs imports functions/connectors)"
	case 1:
		return "want " + names[0]
	}
	return "want " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// OwnsSplit reports whether subtask of parallelism owns the split at
// index i of a source's splits sorted by id (see SourceType.Splits).
func OwnsSplit(i, subtask, parallelism int) bool { return parallelism > 0 && i%parallelism == subtask }

// SplitSource reports whether sources of type typ are made of splits
// (SourceType.Splits).
func SplitSource(typ string) bool {
	t, ok := LookupSource(typ)
	return ok && t.Splits
}

// RateShare is the part of src's rate that subtask of parallelism
// takes: its type's Share, else 1/parallelism.
func RateShare(src *spec.Source, subtask, parallelism int) float64 {
	if t, ok := LookupSource(src.Type); ok && t.Share != nil {
		return t.Share(src, subtask, parallelism)
	}
	return 1 / float64(max(parallelism, 1))
}

// PendingEnv is what a Pending check may read: the job's Redis (for a
// source without an address of its own) and its store.
type PendingEnv struct {
	RedisAddr string
	Bucket    blob.BucketReader
}

// Pending reports whether a source of src's type can say when input
// arrives (SourceType.Pending), and if so whether it has since positions.
func Pending(ctx context.Context, src *spec.Source, positions []json.RawMessage, env PendingEnv) (known, pending bool, err error) {
	t, ok := LookupSource(src.Type)
	if !ok || t.Pending == nil {
		return false, false, nil
	}
	pending, err = t.Pending(ctx, src, positions, env)
	return true, pending, err
}

// CanWake reports whether sources of type typ can say when input arrives.
func CanWake(typ string) bool {
	t, ok := LookupSource(typ)
	return ok && t.Pending != nil
}
