package guest

import "math"

// Type is a column type: one of the five weir column types, spelled as in
// job specs.
type Type string

// The column types.
const (
	Int64       Type = "int64"
	Float64     Type = "float64"
	String      Type = "string"
	Bool        Type = "bool"
	TimestampMs Type = "timestamp_ms" // milliseconds since the Unix epoch, UTC
)

// Column is one named, typed column.
type Column struct {
	Name string `json:"name"`
	Type Type   `json:"type"`
}

// Description declares a function to the host (weir_describe): the columns
// it reads and emits. The host checks it at deploy.
type Description struct {
	// Input are the columns the function reads. The operator's input must
	// have each, with this type; other input columns reach the function too.
	Input []Column `json:"input"`
	// Output are the columns the function emits, in order. Every output
	// column is nullable.
	Output []Column `json:"output"`
	// TimeColumn names the timestamp_ms output column that carries the
	// output rows' event time, "" for none.
	TimeColumn string `json:"timeColumn,omitempty"`
	// TimeOffset is added to TimeColumn's value to get an output row's
	// event time: -1 when TimeColumn is a window_end (the window's last
	// millisecond is its event time, as for weir's built-in windows).
	TimeOffset int64 `json:"timeOffset,omitempty"`
	// Doc says in a line what the function does.
	Doc string `json:"doc,omitempty"`
}

// Function is a user function over a keyed stream. A module registers one
// with Register.
type Function interface {
	// Describe returns the function's declaration. It is called before
	// Open, also on an instance that is never opened (at deploy), so it
	// must not depend on config.
	Describe() Description
	// Open is called once per instance before any row: it reads the
	// config and declares state. An error fails the task; it should name
	// the config field and what is accepted.
	Open(oc *OpenContext) error
	// ProcessElement is called for each input row, with the row's key
	// current. An error fails the task (it restarts from the last
	// checkpoint).
	ProcessElement(ctx *Context, row Row, out *Collector) error
}

// TimerFunction is a Function with timers. A function that registers
// timers must implement it.
type TimerFunction interface {
	Function
	// OnTimer is called when a timer the function registered fires, with
	// the timer's key current.
	OnTimer(ctx *Context, t Timer, out *Collector) error
}

// TimeDomain says which clock a timer follows.
type TimeDomain int32

// Time domains, numbered as in the ABI.
const (
	// EventTime timers fire when the watermark reaches them.
	EventTime TimeDomain = 0
	// ProcessingTime timers fire when the task's clock reaches them.
	ProcessingTime TimeDomain = 1
)

func (d TimeDomain) String() string {
	switch d {
	case EventTime:
		return "event time"
	case ProcessingTime:
		return "processing time"
	}
	return "unknown time domain"
}

// Timer is a timer that fired: its time in milliseconds and its domain.
type Timer struct {
	Timestamp int64
	Domain    TimeDomain
}

// Watermarks with a special meaning.
const (
	// MinWatermark is the watermark before the first one.
	MinWatermark int64 = math.MinInt64 + 1
	// MaxWatermark is the watermark at the end of a bounded input.
	MaxWatermark int64 = math.MaxInt64
)

// Level is the level of a log line.
type Level int32

// Log levels, numbered as in the ABI.
const (
	LevelDebug Level = 0
	LevelInfo  Level = 1
	LevelWarn  Level = 2
	LevelError Level = 3
)

// registered is the function Register recorded. A module instance is one
// program running one function, and the ABI's exports are plain functions,
// so this is the one place that ties them to it.
var registered Function

// Register makes fn the module's function. Call it from an init function
// of package main; it panics if fn is nil or a function is already
// registered.
func Register(fn Function) {
	if fn == nil {
		panic("guest: Register(nil)")
	}
	if registered != nil {
		panic("guest: Register called twice: a module holds one function")
	}
	registered = fn
}
