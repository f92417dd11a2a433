package task

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/blob"
)

// Watermark values with a special meaning.
const (
	// MinWatermark is the watermark before any event: nothing is complete.
	MinWatermark int64 = math.MinInt64 + 1
	// MaxWatermark is the watermark at the end of a bounded input: every
	// window is complete.
	MaxWatermark int64 = math.MaxInt64
	// IdleWatermark, sent as a watermark entry, marks the channel idle: it
	// is left out of the minimum until it sends a real watermark again.
	IdleWatermark int64 = math.MinInt64
)

// Output receives batches from an operator.
type Output interface {
	// Emit passes b downstream. It does not take ownership of b: a
	// receiver that keeps b past the call retains it.
	Emit(b arrow.RecordBatch) error
}

// Context is what the runtime gives an operator, source or sink when it
// opens. It stays valid until Close.
type Context struct {
	Job            string
	Node           string // the operator's name in the spec
	Subtask        int
	Parallelism    int
	MaxParallelism int
	// KeyGroups is the half-open range of key groups this subtask owns.
	KeyGroupStart, KeyGroupEnd int

	Mem    memory.Allocator
	Logger *slog.Logger
	// Now is processing time.
	Now func() time.Time

	// Out is the main output (nil for sinks).
	Out Output
	// Side returns the side output with the given name; records emitted to
	// a side output nobody consumes are discarded.
	Side func(name string) Output
	// Counters the operator adds to; the runtime reports them.
	Counters *Counters
}

// Counters are per-subtask counts an operator, source or sink adds to. They
// are read concurrently by the metrics reporter.
type Counters struct {
	LateDropped   atomic.Int64 // records too late for any window, dropped
	LateSide      atomic.Int64 // records too late, sent to the late output
	DeadLetters   atomic.Int64 // malformed input records sent to the dead-letter output
	SinkRows      atomic.Int64 // rows written by a sink
	WindowsFired  atomic.Int64
	WindowsRefire atomic.Int64 // windows fired again because of allowed lateness

	functions struct {
		sync.Mutex
		list []FunctionCounter
	}
}

// FunctionCounter is a Wasm function operator's counters, read by the
// metrics reporter concurrently with the task.
type FunctionCounter interface {
	FunctionStats() control.FunctionStats
}

// AddFunction registers a function operator's counters to be reported
// with the subtask's (an operator calls it in Open).
func (c *Counters) AddFunction(f FunctionCounter) {
	c.functions.Lock()
	defer c.functions.Unlock()
	c.functions.list = append(c.functions.list, f)
}

// FunctionStats reads the registered function counters.
func (c *Counters) FunctionStats() []control.FunctionStats {
	c.functions.Lock()
	defer c.functions.Unlock()
	if len(c.functions.list) == 0 {
		return nil
	}
	out := make([]control.FunctionStats, len(c.functions.list))
	for i, f := range c.functions.list {
		out[i] = f.FunctionStats()
	}
	return out
}

// Operator transforms batches. The runtime calls it from one goroutine.
type Operator interface {
	// Open prepares the operator; ctx.Out and ctx.Side are ready.
	Open(ctx *Context) error
	// ProcessBatch processes one input batch. The operator does not own b
	// (retain what you keep).
	ProcessBatch(b arrow.RecordBatch) error
	// ProcessWatermark tells the operator that event time has advanced to
	// wm: it emits what became due (windows, event-time timers). The
	// runtime forwards the watermark downstream after it returns.
	ProcessWatermark(wm int64) error
	// Finish is called once when every input has ended (after the final
	// ProcessWatermark(MaxWatermark)): emit anything still held.
	Finish() error
	// Close releases resources; it is called once after Open, also on
	// failure, and may return an error from releasing.
	Close() error
}

// TwoInputOperator is an operator with two inputs, left (0) and right (1):
// a join. The runtime calls ProcessBatchFrom instead of ProcessBatch, and
// ProcessWatermark with the minimum of both inputs' watermarks.
type TwoInputOperator interface {
	Operator
	// ProcessBatchFrom processes one batch of input 0 or 1 (ownership as
	// in ProcessBatch).
	ProcessBatchFrom(input int, b arrow.RecordBatch) error
}

// ProcessingTimer is implemented by operators with processing-time timers.
type ProcessingTimer interface {
	// NextProcessingTime is when OnProcessingTime should next be called;
	// ok=false when no timer is set.
	NextProcessingTime() (t time.Time, ok bool)
	// OnProcessingTime fires every timer due at now.
	OnProcessingTime(now time.Time) error
}

// SourceContext is a source's Context plus what sources need.
type SourceContext struct {
	Context
	// Bucket is the job's store (files sources read from it).
	Bucket blob.BucketReader
	// RedisAddr is the job's Redis, for redis sources without an address.
	RedisAddr string
	// DeadLetter records one malformed input record with where it came
	// from and why it was refused. The job goes on.
	DeadLetter func(raw []byte, origin, reason string)
}

// Source produces batches. The runtime calls it from one goroutine; it
// handles rate limits, event-time watermarks and idleness, so a source only
// reads.
type Source interface {
	Open(ctx *SourceContext) error
	// Poll returns the next batch of at most maxRows rows. It returns
	// (nil, nil) when nothing is available within wait (unbounded sources)
	// and (nil, io.EOF) once the source is exhausted. The caller owns and
	// releases the batch.
	Poll(ctx context.Context, maxRows int, wait time.Duration) (arrow.RecordBatch, error)
	Close() error
}

// Waiter is a source whose Poll blocks waiting for input and can say for
// how long, so that the wait counts as idle even when the Poll returns
// rows (a Poll that returns none is idle throughout anyway): otherwise a
// source that waits for each batch looks busy, and an autoscaler would
// scale it up.
type Waiter interface {
	// Waited is the time spent waiting for input in Polls so far. It is
	// called on the task goroutine after each Poll.
	Waited() time.Duration
}

// Backlogged is a source that can say how much of its input it has not
// read yet, for the backlog metric and the autoscaler. Without it, a
// source with a rate reports the events it is behind that rate.
type Backlogged interface {
	// Backlog returns the input after the source's position and its unit,
	// "records" or "bytes"; ok is false when it cannot say now. It is
	// called on the task goroutine between Polls, about once a second,
	// and may make one round trip to the input.
	Backlog(ctx context.Context) (n int64, unit string, ok bool)
}

// MultiOutputSource is a source with several outputs, each with a schema
// of its own (the nexmark source's person, auction and bid streams). The
// runtime calls PollOutputs instead of Poll; Poll is never called.
type MultiOutputSource interface {
	Source
	// Outputs names the outputs, in the order PollOutputs returns them.
	Outputs() []string
	// PollOutputs is Poll for every output at once: batches[i] has output
	// i's rows, nil for none; together they hold at most maxRows rows.
	// Positions (Resumable) cover all outputs.
	PollOutputs(ctx context.Context, maxRows int, wait time.Duration) ([]arrow.RecordBatch, error)
}

// Bounded is implemented by sources that know how much input they have,
// so that a bounded job can show how far it is.
type Bounded interface {
	Source
	// Progress returns how much of its input the subtask has read and how
	// much there is, in unit: "records" or "bytes". ok is false when the
	// source has no end (a datagen source without a count). It is called
	// on the task goroutine after Open and after each Poll, and does not
	// block.
	Progress() (read, total int64, unit string, ok bool)
}

// Resumable is implemented by sources that can resume from a recorded
// position, so that a job restored from a checkpoint reads every input
// record exactly once. A position is JSON, and each source documents its
// fields.
type Resumable interface {
	Source
	// Position returns where the source is. It is called after Open,
	// between Polls: every row a Poll has returned so far is before the
	// position, nothing after it. It does not block. It returns an error
	// when it cannot say, for example after a Poll failed holding rows it
	// has not returned.
	Position() (json.RawMessage, error)
	// Restore makes the source resume at pos. It is called before Open,
	// with a position a source of the same spec returned at the same
	// subtask and parallelism, or, for a source of splits
	// (SourceHead.Splits) at another parallelism, the splits of every old
	// subtask's position merged (RestoreFor). It does
	// not keep pos. A position that is not valid JSON of the source's
	// shape is refused with an error naming the source and the field;
	// one that does not fit the input found at Open makes Open fail. A
	// source never falls back to reading from the start.
	Restore(pos json.RawMessage) error
}

// SinkContext is a sink's Context plus what sinks need.
type SinkContext struct {
	Context
	// Bucket is the job's store (files sinks write to it).
	Bucket blob.Bucket
	// RedisAddr is the job's Redis, for redis sinks without an address.
	RedisAddr string
	// Attempt is the job attempt; output object names carry it so that
	// attempts never overwrite each other.
	Attempt int
}

// Sink writes batches out of the job. The runtime calls it from one
// goroutine.
type Sink interface {
	Open(ctx *SinkContext) error
	// Write writes b (the sink does not own it). It may buffer.
	Write(ctx context.Context, b arrow.RecordBatch) error
	// Finish is called once at the end of a bounded input: flush and make
	// everything written visible.
	Finish(ctx context.Context) error
	Close() error
}

// StateKeyGroupField is the first field of every state batch: the key
// group (int32) of the row's key. Restoring at another parallelism keeps
// the rows of the key groups a subtask owns and drops the others, so an
// operator's state must be partitioned by key group.
const StateKeyGroupField = "key_group"

// Stateful is an operator whose keyed state checkpoints capture.
//
// State travels as Arrow record batches of the Snapshotter's Schema,
// whose first field is StateKeyGroupField (int32). The runtime writes them
// as Arrow IPC files in the bucket, so anyone can read a checkpoint with
// any Arrow reader; the columns after the first are the operator's own and
// should read well in a table (typed key columns, readable names).
//
// A checkpoint captures either everything (a base) or what changed since
// the previous capture (a delta); restore applies a base and then its
// deltas in order. How an operator encodes a change (a deletion flag, a
// "replace this key" row) is its own business, as long as applying the
// base and every delta in order rebuilds the state exactly.
type Stateful interface {
	Operator
	// State is the operator's keyed state as the checkpoint runtime
	// captures and restores it: the same Snapshotter for the operator's
	// life, valid after Open. The runtime calls it on the task goroutine:
	// Snapshot at a barrier, with the task's allocator (Context.Mem);
	// Restore after Open and before any input, with only the rows of the
	// subtask's key groups.
	State() statestore.Snapshotter
}

// TwoPhaseSink is a Sink whose output becomes visible only when a checkpoint
// completes (DESIGN.md, Checkpoints, steps 4-5).
type TwoPhaseSink interface {
	Sink
	// EnableTransactions switches the sink to transactional writing; the
	// runtime calls it before the first Write when the job checkpoints.
	// Afterwards Write only buffers (a full buffer may be encoded, but
	// nothing is written out), Finish keeps what is buffered for the last
	// PreCommit, and only Commit makes output visible. Without it the sink
	// writes as a plain Sink does, and Finish makes everything visible;
	// Commit and Abort work either way.
	EnableTransactions()
	// PreCommit makes everything written since the last PreCommit durable but
	// invisible, as transaction txnID (unique per sink subtask and checkpoint,
	// e.g. "<job>-a<attempt>-s<subtask>-c<checkpoint>"), and returns a handle
	// (JSON) that goes into the checkpoint's manifest. If it fails, what
	// was buffered stays buffered and goes into the next PreCommit; the
	// partly staged transaction is left for Abort or the janitor.
	PreCommit(ctx context.Context, txnID string) (json.RawMessage, error)
	// Commit makes a pre-committed transaction visible. It is idempotent: a
	// second Commit of the same handle (after a crash, on recovery) is a
	// no-op. It may be called on a different process than PreCommit, with
	// only the handle and the sink's spec: the sink must be Open (for its
	// store or Redis), nothing else.
	Commit(ctx context.Context, handle json.RawMessage) error
	// Abort discards a pre-committed transaction; idempotent.
	Abort(ctx context.Context, handle json.RawMessage) error
}

// StagedSink is a TwoPhaseSink whose pre-commit splits in two, so that the
// barrier does not wait for the upload: Seal, on the task goroutine, closes
// the transaction (what was written since the last Seal or PreCommit
// belongs to txnID, nothing written later does) and returns stage, which
// makes it durable and returns its handle. The runtime calls stage once,
// from another goroutine, while the sink goes on writing. If stage fails
// the sealed output is lost to the sink: the runtime fails the task (the
// job restarts from its latest checkpoint).
type StagedSink interface {
	TwoPhaseSink
	Seal(txnID string) (stage func(ctx context.Context) (json.RawMessage, error), err error)
}

// AsTwoPhase returns the two-phase sink inside s, seeing through wrappers
// with an `Unwrap() Sink` method (a throttle, say), or ok=false if s has
// none. The runtime keeps writing through s; PreCommit, Commit and Abort
// go to the result.
func AsTwoPhase(s Sink) (tp TwoPhaseSink, ok bool) {
	for s != nil {
		if tp, ok := s.(TwoPhaseSink); ok {
			return tp, true
		}
		u, ok := s.(interface{ Unwrap() Sink })
		if !ok {
			return nil, false
		}
		s = u.Unwrap()
	}
	return nil, false
}
