// Package control is the cluster protocol: how the coordinator and workers
// talk. Workers register and heartbeat, the coordinator sends them commands
// (deploy a subtask, cancel one, trigger a checkpoint), and tasks report
// their state, metrics and checkpoint acknowledgements back as events.
//
// Both roles import this package and it imports neither: its wire types
// (Command, Event, Stats, Ack) are its own. Two planes implement it with
// the same semantics, checked by one contract suite: Redis (workers are
// separate processes; the coordinator can restart and find them again) and
// in-process (the embedded single-process mode).
package control

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"time"

	"github.com/weirstream/weir/statestore/manifest"
)

// ErrUnknownWorker is returned by Send for a worker that is not registered.
var ErrUnknownWorker = errors.New("control: unknown worker")

// WorkerInfo is what a worker says about itself.
type WorkerInfo struct {
	ID      string    `json:"id"`
	Slots   int       `json:"slots"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Usage is what the worker's latest heartbeat said of it (Workers
	// fills it in; nil before the first).
	Usage *WorkerUsage `json:"usage,omitempty"`
}

// WorkerUsage is what a worker's heartbeat carries: its tasks and the
// resources of its process.
type WorkerUsage struct {
	At    time.Time `json:"at"` // the worker's clock when it sent the heartbeat
	Tasks int       `json:"tasks"`
	// CPUSeconds is the user and system CPU time of the process since it
	// started; CPUCores is the CPU it used over the last heartbeat
	// interval, in cores (1.5: one and a half cores busy).
	CPUSeconds float64 `json:"cpuSeconds"`
	CPUCores   float64 `json:"cpuCores"`
	RSSBytes   int64   `json:"rssBytes"` // resident memory
}

// Command kinds.
const (
	CmdDeploy = "deploy"
	CmdCancel = "cancel"
	// CmdStop asks a source task to end its input early and drain.
	CmdStop = "stop"
	// CmdTrigger asks a source task to take checkpoint Checkpoint.
	CmdTrigger = "trigger"
)

// TaskID names one subtask of one attempt of a job.
type TaskID struct {
	Job     string `json:"job"`
	Attempt int    `json:"attempt"`
	Vertex  string `json:"vertex"`
	Subtask int    `json:"subtask"`
}

// Command is what the coordinator asks a worker to do.
type Command struct {
	Kind string `json:"kind"`
	Task TaskID `json:"task"`
	// Spec is the job spec (JSON) for deploy; workers plan it themselves.
	Spec json.RawMessage `json:"spec,omitempty"`
	// Restore is the key of the manifest a deployed task restores from
	// ("" starts empty).
	Restore string `json:"restore,omitempty"`
	// Checkpoint is the checkpoint to take (CmdTrigger).
	Checkpoint int64 `json:"checkpoint,omitempty"`
	// Epoch is the leader epoch of the coordinator that sent it (0: a
	// coordinator without a lease, the embedded one): a worker drops a
	// command whose epoch is older than the cluster's (Leases.Epoch).
	Epoch int64 `json:"epoch,omitempty"`
}

// Task states.
const (
	StateCreated  = "CREATED"
	StateRunning  = "RUNNING"
	StateFinished = "FINISHED"
	StateFailed   = "FAILED"
	StateCanceled = "CANCELED"
)

// Event is a task's report: a state change, or (State RUNNING again) fresh
// metrics.
type Event struct {
	Task   TaskID    `json:"task"`
	Worker string    `json:"worker"`
	State  string    `json:"state"`
	Error  string    `json:"error,omitempty"`
	Stats  Stats     `json:"stats"`
	Time   time.Time `json:"time"`
	// Ack is a checkpoint acknowledgement (State RUNNING), or the task's
	// final transactions (just before FINISHED).
	Ack *Ack `json:"ack,omitempty"`
	// CorruptCheckpoint is set on a FAILED event when the task could not
	// restore because checkpoint CorruptCheckpoint's state is damaged.
	CorruptCheckpoint int64 `json:"corruptCheckpoint,omitempty"`
}

// Stats are a task's counters, as a worker reports them every second.
type Stats struct {
	RecordsIn       int64   `json:"recordsIn"`
	RecordsOut      int64   `json:"recordsOut"`
	SinkIn          int64   `json:"sinkIn"`
	BytesOut        int64   `json:"bytesOut"`
	BusySeconds     float64 `json:"busySeconds"`
	IdleSeconds     float64 `json:"idleSeconds"`
	BackpressureSec float64 `json:"backpressuredSeconds"`
	Watermark       int64   `json:"watermark"`
	LateDropped     int64   `json:"lateDropped"`
	LateSide        int64   `json:"lateSide"`
	DeadLetters     int64   `json:"deadLetters"`
	SinkRows        int64   `json:"sinkRows"`
	WindowsFired    int64   `json:"windowsFired"`
	Checkpoints     int64   `json:"checkpoints"`
	// StateBytes is the size of the task's state files in its latest
	// acknowledged checkpoint, or before its first, of those it restored
	// and goes on from (0 for a stateless task, and for an operator a
	// rescale gave other key groups until its first checkpoint).
	StateBytes int64 `json:"stateBytes,omitempty"`
	// Backlog is how much input a source task has not read yet, in
	// BacklogUnit: "records" (events behind the configured rate; a redis
	// stream's entries after the position) or "bytes" (files not yet
	// read). BacklogUnit is empty when the task has no source or its
	// source cannot say.
	Backlog     int64  `json:"backlog,omitempty"`
	BacklogUnit string `json:"backlogUnit,omitempty"`
	// Channels are the task's output channels, one per consumer subtask it
	// writes to. Add leaves them out of totals.
	Channels []ChannelStats `json:"channels,omitempty"`
	// Functions are the counters of the Wasm functions the task runs,
	// one per function operator.
	Functions []FunctionStats `json:"functions,omitempty"`
	// SourceRead of SourceTotal is how much of a bounded source's input
	// the subtask has read, in SourceUnit ("records" or "bytes"; "mixed"
	// in a sum over sources that count differently). Zero for an
	// unbounded source and for tasks that are not sources.
	SourceRead  int64  `json:"sourceRead,omitempty"`
	SourceTotal int64  `json:"sourceTotal,omitempty"`
	SourceUnit  string `json:"sourceUnit,omitempty"`
	// RestoreRead of RestoreTotal are the bytes of state files the task
	// has restored so far (while it restores; equal once it has).
	RestoreRead  int64 `json:"restoreRead,omitempty"`
	RestoreTotal int64 `json:"restoreTotal,omitempty"`
	// RestoreSeconds is how long the task took to restore its state
	// (reading, checking and decoding its files, rebuilding the state),
	// once it has; in a sum, the longest of them.
	RestoreSeconds float64 `json:"restoreSeconds,omitempty"`
	// CopiedRows are the rows of keyed state the task's complete
	// captures copied on write: keys that changed after a barrier before
	// the capture's walk reached them. CopiedEncoded of them waited for
	// their part encoded (compressed, as the state file's batches).
	CopiedRows    int64 `json:"copiedRows,omitempty"`
	CopiedEncoded int64 `json:"copiedEncoded,omitempty"`
}

// ChannelStats are the counters of one output channel of a task.
type ChannelStats struct {
	ToVertex  string `json:"toVertex"`
	ToSubtask int    `json:"toSubtask"`
	// Edge names the channel's edge among the consumer's inputs (the
	// producing operator): a task may feed two inputs of one join.
	Edge    string `json:"edge,omitempty"`
	Entries int64  `json:"entries"` // entries written, of every kind
	Bytes   int64  `json:"bytes"`   // payload bytes written
	// CreditWaits counts the data entries that found no credit;
	// CreditWaitSeconds is the time they waited for it.
	CreditWaits       int64   `json:"creditWaits"`
	CreditWaitSeconds float64 `json:"creditWaitSeconds"`
}

// FunctionStats are the counters of one Wasm function operator.
type FunctionStats struct {
	Operator string `json:"operator"`
	// Function is the deployed function and its version, NAME@VERSION.
	Function     string  `json:"function"`
	Calls        int64   `json:"calls"` // export calls: input batches and rounds of timers
	RowsIn       int64   `json:"rowsIn"`
	RowsOut      int64   `json:"rowsOut"`
	GuestSeconds float64 `json:"guestSeconds"` // time inside the guest, host calls included
	HostCalls    int64   `json:"hostCalls"`
	// MemoryBytes is the linear memory of the instances (summed over
	// subtasks).
	MemoryBytes int64 `json:"memoryBytes"`
}

func (a FunctionStats) add(b FunctionStats) FunctionStats {
	a.Calls += b.Calls
	a.RowsIn += b.RowsIn
	a.RowsOut += b.RowsOut
	a.GuestSeconds += b.GuestSeconds
	a.HostCalls += b.HostCalls
	a.MemoryBytes += b.MemoryBytes
	return a
}

// addFunctions merges b into a by operator, keeping a's order and
// appending operators a lacks.
func addFunctions(a, b []FunctionStats) []FunctionStats {
	if len(b) == 0 {
		return a
	}
	out := slices.Clone(a)
	for _, f := range b {
		i := slices.IndexFunc(out, func(o FunctionStats) bool { return o.Operator == f.Operator })
		if i < 0 {
			out = append(out, f)
		} else {
			out[i] = out[i].add(f)
		}
	}
	return out
}

// IsZero reports whether s carries no metrics (a state change may carry
// none).
func (s Stats) IsZero() bool { return reflect.ValueOf(s).IsZero() }

// Add sums two snapshots (for per-vertex and per-job totals).
func (a Stats) Add(b Stats) Stats {
	a.RecordsIn += b.RecordsIn
	a.RecordsOut += b.RecordsOut
	a.SinkIn += b.SinkIn
	a.BytesOut += b.BytesOut
	a.BusySeconds += b.BusySeconds
	a.IdleSeconds += b.IdleSeconds
	a.BackpressureSec += b.BackpressureSec
	a.LateDropped += b.LateDropped
	a.LateSide += b.LateSide
	a.DeadLetters += b.DeadLetters
	a.SinkRows += b.SinkRows
	a.WindowsFired += b.WindowsFired
	a.StateBytes += b.StateBytes
	if b.BacklogUnit != "" && (a.BacklogUnit == "" || a.BacklogUnit == b.BacklogUnit) {
		a.Backlog += b.Backlog
		a.BacklogUnit = b.BacklogUnit
	}
	a.Channels = nil
	a.Functions = addFunctions(a.Functions, b.Functions)
	if b.Watermark < a.Watermark || a.Watermark == 0 {
		a.Watermark = b.Watermark
	}
	a.SourceRead += b.SourceRead
	a.SourceTotal += b.SourceTotal
	if a.SourceUnit == "" {
		a.SourceUnit = b.SourceUnit
	} else if b.SourceUnit != "" && b.SourceUnit != a.SourceUnit {
		a.SourceUnit = "mixed"
	}
	a.RestoreRead += b.RestoreRead
	a.RestoreTotal += b.RestoreTotal
	a.RestoreSeconds = max(a.RestoreSeconds, b.RestoreSeconds)
	a.CopiedRows += b.CopiedRows
	a.CopiedEncoded += b.CopiedEncoded
	return a
}

// Ack is a task's checkpoint acknowledgement: its share of the manifest.
type Ack struct {
	Checkpoint int64 `json:"checkpoint"`
	// Final: the task finished its input; Subtask holds the sinks' last
	// transactions and nothing to restore.
	Final   bool             `json:"final,omitempty"`
	Subtask manifest.Subtask `json:"subtask"`
	// Decline, if set, is why the checkpoint failed at this task (an
	// upload or a pre-commit failed); the coordinator aborts it. The task
	// goes on.
	Decline string `json:"decline,omitempty"`
}

// Plane is the control channel between one coordinator and its workers.
// Methods are safe for concurrent use.
type Plane interface {
	// Register announces a worker; it is live until its heartbeat lapses
	// (ttl) or it deregisters.
	Register(ctx context.Context, w WorkerInfo, ttl time.Duration) error
	// Heartbeat keeps a worker live for another ttl, and records u as its
	// usage.
	Heartbeat(ctx context.Context, workerID string, ttl time.Duration, u WorkerUsage) error
	// Deregister removes a worker at once.
	Deregister(ctx context.Context, workerID string) error
	// Workers returns the live workers, sorted by ID.
	Workers(ctx context.Context) ([]WorkerInfo, error)

	// Send queues a command for a worker.
	Send(ctx context.Context, workerID string, c Command) error
	// Receive returns the worker's next command, waiting up to wait
	// (ok=false when none came).
	Receive(ctx context.Context, workerID string, wait time.Duration) (c Command, ok bool, err error)

	// Report publishes a task event.
	Report(ctx context.Context, e Event) error
	// Events returns the events reported since the previous call, waiting
	// up to wait for the first. Only one consumer (the coordinator) reads.
	Events(ctx context.Context, wait time.Duration) ([]Event, error)

	// Leases is the coordinators' leadership lease (lease.go).
	Leases

	// Close releases the plane; safe to call twice.
	Close() error
}
