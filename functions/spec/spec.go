// Package spec is the job spec: what a user deploys, as YAML (or the Go
// builder in package functions), and what the coordinator stores as
// jobs/<id>/spec.json. Parse reads it strictly (an unknown key is an error
// naming the key, its line and what is accepted); Validate checks its
// structure. Type checking against schemas happens in package plan, which
// knows the operators.
package spec

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Job is a whole deployable job.
type Job struct {
	Name           string     `yaml:"job" json:"job"`
	Parallelism    int        `yaml:"parallelism,omitempty" json:"parallelism,omitempty"`
	MaxParallelism int        `yaml:"maxParallelism,omitempty" json:"maxParallelism,omitempty"`
	Sources        []Source   `yaml:"sources" json:"sources"`
	Operators      []Operator `yaml:"operators,omitempty" json:"operators,omitempty"`
	Sinks          []Sink     `yaml:"sinks" json:"sinks"`
	Exchange       *Exchange  `yaml:"exchange,omitempty" json:"exchange,omitempty"`
	// Checkpoint turns on exactly-once checkpoints; nil is off.
	Checkpoint *Checkpoint `yaml:"checkpoint,omitempty" json:"checkpoint,omitempty"`
	// Restart says how a failed job restarts from its latest checkpoint.
	Restart *Restart `yaml:"restart,omitempty" json:"restart,omitempty"`
	// Autoscale lets the coordinator change the parallelism of the
	// job's vertices from their metrics (docs/autoscaling.md); nil is off.
	Autoscale *Autoscale `yaml:"autoscale,omitempty" json:"autoscale,omitempty"`
	// State chooses where the keyed state of process functions lives;
	// nil is the in-memory backend.
	State *State `yaml:"state,omitempty" json:"state,omitempty"`
}

// State backends.
const (
	StateMemory = "memory" // the heap (default)
	StatePebble = "pebble" // pebble on the worker's local disk
)

// State chooses the keyed-state backend of a job's process functions (Go
// SDK and Wasm). Windows and joins keep their state in memory either way.
type State struct {
	// Backend is memory (default) or pebble: an LSM on the worker's local
	// disk, for state larger than memory.
	Backend string `yaml:"backend,omitempty" json:"backend,omitempty"`
	// Memory bounds what one pebble store (one operator of one subtask)
	// keeps in memory: its hot entries, memtables and blocks (default 64MiB, at
	// least 4MiB).
	Memory Size `yaml:"memory,omitempty" json:"memory,omitempty"`
}

// DefaultStateMemory and MinStateMemory are a pebble store's default and
// least memory.
const (
	DefaultStateMemory = 64 << 20
	MinStateMemory     = 4 << 20
)

// Autoscale configures the autoscaler of a job (docs/autoscaling.md).
// Zero fields take the defaults in DefaultAutoscale; EffectiveAutoscale
// fills them in.
type Autoscale struct {
	// Enabled turns the autoscaler on; a section without it only records
	// settings.
	Enabled bool `yaml:"enabled,omitempty" json:"enabled,omitempty"`
	// MinParallelism and MaxParallelism bound every vertex's parallelism
	// (defaults 1 and 8); MaxParallelism is at most the job's
	// maxParallelism (its key groups).
	MinParallelism int `yaml:"minParallelism,omitempty" json:"minParallelism,omitempty"`
	MaxParallelism int `yaml:"maxParallelism,omitempty" json:"maxParallelism,omitempty"`
	// TargetUtilization is the busy share each vertex is sized for, in
	// (0, 1] (default 0.7).
	TargetUtilization float64 `yaml:"targetUtilization,omitempty" json:"targetUtilization,omitempty"`
	// Window is how long metrics are averaged over (default 20s).
	Window Duration `yaml:"window,omitempty" json:"window,omitempty"`
	// Stabilization is the least time between two rescales (default 30s).
	Stabilization Duration `yaml:"stabilization,omitempty" json:"stabilization,omitempty"`
	// CatchUp is how soon a source's backlog should be gone (default 60s).
	CatchUp Duration `yaml:"catchUp,omitempty" json:"catchUp,omitempty"`
	// ScaleToZero suspends the job once every source received nothing
	// for this long; 0 never suspends it.
	ScaleToZero Duration `yaml:"scaleToZero,omitempty" json:"scaleToZero,omitempty"`
}

// DefaultAutoscale holds the values a zero field of an autoscale section
// takes.
var DefaultAutoscale = Autoscale{MinParallelism: 1, MaxParallelism: 8, TargetUtilization: 0.7,
	Window: Duration(20 * time.Second), Stabilization: Duration(30 * time.Second), CatchUp: Duration(time.Minute)}

// EffectiveAutoscale returns the autoscale settings with defaults filled
// in, and whether the autoscaler is on. MaxParallelism is lowered to the
// job's maxParallelism when the default would exceed it.
func (j *Job) EffectiveAutoscale() (Autoscale, bool) {
	if j.Autoscale == nil {
		return Autoscale{}, false
	}
	a, d := *j.Autoscale, DefaultAutoscale
	if a.MinParallelism == 0 {
		a.MinParallelism = d.MinParallelism
	}
	if a.MaxParallelism == 0 {
		a.MaxParallelism = max(min(d.MaxParallelism, j.maxParallelism()), a.MinParallelism)
	}
	if a.TargetUtilization == 0 {
		a.TargetUtilization = d.TargetUtilization
	}
	if a.Window == 0 {
		a.Window = d.Window
	}
	if a.Stabilization == 0 {
		a.Stabilization = d.Stabilization
	}
	if a.CatchUp == 0 {
		a.CatchUp = d.CatchUp
	}
	return a, a.Enabled
}

func (j *Job) maxParallelism() int {
	if j.MaxParallelism == 0 {
		return DefaultMaxParallelism
	}
	return j.MaxParallelism
}

// Checkpoint configures periodic checkpoints (DESIGN.md, "Checkpoints").
// With checkpoints on, sinks commit their output only when a checkpoint
// completes, and a failed job restarts from the latest one.
type Checkpoint struct {
	// Interval between the starts of two checkpoints, e.g. "1s" (required).
	Interval Duration `yaml:"interval" json:"interval"`
	// Timeout aborts a checkpoint not complete in time (default 10m).
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// MinPause is the least time from the end of one checkpoint to the
	// start of the next (default 0).
	MinPause Duration `yaml:"minPause,omitempty" json:"minPause,omitempty"`
	// Retain is how many completed checkpoints are kept (default 1).
	Retain int `yaml:"retain,omitempty" json:"retain,omitempty"`
	// PartSize is the size of the state files a process function's or
	// a window's state is uploaded in while a checkpoint captures it, one
	// per key group range, so that a large base is never in memory whole
	// (default 32MiB, at least MinPartSize).
	PartSize Size `yaml:"partSize,omitempty" json:"partSize,omitempty"`
	// Compression of the Arrow buffers of state files: lz4 (default),
	// zstd or none. zstd takes about twice lz4's CPU to write about 0.55
	// to 0.7 times the bytes (a keyed count's state), none a fraction of
	// it for 3 to 5 times (docs/benchmarks.md: with checkpoints every 2 s
	// at 5M and 10M keys, lz4 gave 4-12% more events per CPU-second, MinIO's
	// CPU counted, and restored faster).
	Compression string `yaml:"compression,omitempty" json:"compression,omitempty"`
}

// MinPartSize is the least checkpoint.partSize.
const MinPartSize = 64 << 10

// Restart is the restart strategy: exponential backoff with a limit.
// Missing fields take the defaults of the job's kind (DefaultCheckpointed
// for a job with a checkpoint section, DefaultUncheckpointed otherwise).
type Restart struct {
	// Attempts is how many restarts are allowed, counted since the job
	// last ran stably, before the job fails; UnlimitedAttempts (-1)
	// restarts for ever; 0 means the default (unlimited with checkpoints,
	// 10 without).
	Attempts int `yaml:"attempts,omitempty" json:"attempts,omitempty"`
	// Backoff is the delay before the first restart; each restart doubles
	// it up to MaxBackoff. Left out on a job with checkpoints, the first
	// restart after a stable run is immediate, the next waits 100ms, then
	// 200ms, and so on up to MaxBackoff (10s by default).
	Backoff    Duration `yaml:"backoff,omitempty" json:"backoff,omitempty"`
	MaxBackoff Duration `yaml:"maxBackoff,omitempty" json:"maxBackoff,omitempty"`
	// ResetAfter: a job that ran this long since its last restart counts
	// its restarts from zero and backs off from the start (default 1m).
	ResetAfter Duration `yaml:"resetAfter,omitempty" json:"resetAfter,omitempty"`
	// Immediate is set by EffectiveRestart, never in a spec: the first
	// restart after a stable run does not wait, Backoff applies from the
	// second.
	Immediate bool `yaml:"-" json:"-"`
}

// UnlimitedAttempts as restart.attempts restarts a job for ever.
const UnlimitedAttempts = -1

// Unlimited reports whether the strategy restarts for ever.
func (r Restart) Unlimited() bool { return r.Attempts == UnlimitedAttempts }

// Restart defaults. A job with checkpoints restores its state and output
// exactly once, so restarting it is cheap and safe: it restarts for ever,
// at once and then quickly. A job without checkpoints and without a
// restart section does not restart; with a section it gets the
// uncheckpointed defaults.
var (
	DefaultCheckpointed   = Restart{Attempts: UnlimitedAttempts, MaxBackoff: Duration(10 * time.Second), Backoff: Duration(100 * time.Millisecond), ResetAfter: Duration(time.Minute), Immediate: true}
	DefaultUncheckpointed = Restart{Attempts: 10, Backoff: Duration(time.Second), MaxBackoff: Duration(30 * time.Second), ResetAfter: Duration(time.Minute)}
)

// EffectiveRestart returns the restart strategy with defaults filled in.
// A job without checkpoints and without a restart section does not
// restart (Attempts 0).
func (j *Job) EffectiveRestart() Restart {
	def := DefaultUncheckpointed
	if j.Checkpoint != nil {
		def = DefaultCheckpointed
	}
	if j.Restart == nil {
		if j.Checkpoint == nil {
			return Restart{}
		}
		return def
	}
	r := *j.Restart
	r.Immediate = false
	if r.Attempts == 0 {
		r.Attempts = def.Attempts
	}
	if r.Backoff == 0 {
		// The default sequence, immediate first, comes with the default
		// backoff only: a backoff the user set is the first delay.
		r.Backoff, r.Immediate = def.Backoff, def.Immediate
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = max(def.MaxBackoff, r.Backoff)
	}
	if r.ResetAfter == 0 {
		r.ResetAfter = def.ResetAfter
	}
	return r
}

// Defaults used when a field is zero.
const (
	DefaultParallelism    = 1
	DefaultMaxParallelism = 128
)

// Exchange tunes the channels between vertices.
type Exchange struct {
	// BatchRows flushes an output buffer at this many rows (default 8192).
	BatchRows int `yaml:"batchRows,omitempty" json:"batchRows,omitempty"`
	// BatchBytes flushes an output buffer at this many bytes (default 1 MiB).
	BatchBytes int `yaml:"batchBytes,omitempty" json:"batchBytes,omitempty"`
	// BufferTimeout bounds how long a row waits in an output buffer
	// (default 100ms).
	BufferTimeout Duration `yaml:"bufferTimeout,omitempty" json:"bufferTimeout,omitempty"`
	// Credits per input channel (default 4).
	Credits int `yaml:"credits,omitempty" json:"credits,omitempty"`
	// Compression of the Arrow buffers of entries that cross processes:
	// none (default), lz4 or zstd. A buffer is sent compressed only when
	// that saves 15% of it. Entries between subtasks of one process are
	// never compressed. On loopback and fast LANs compression costs more
	// CPU than the smaller entries save (docs/benchmarks.md); it pays on
	// links where bandwidth is the limit.
	Compression string `yaml:"compression,omitempty" json:"compression,omitempty"`
	// Encoding of entries that cross processes: compact (default) sends
	// int64 and timestamp columns in 1, 2 or 4 bytes a value where their
	// values fit (keys from a few thousand ids, timestamps of one batch);
	// plain sends every column as it is in memory.
	Encoding string `yaml:"encoding,omitempty" json:"encoding,omitempty"`
}

// Exchange encodings.
const (
	EncodingCompact = "compact"
	EncodingPlain   = "plain"
)

// Source types.
const (
	SourceDatagen = "datagen"
	SourceFiles   = "files"
	SourceRedis   = "redis"
	SourceNexmark = "nexmark"
)

// Source reads records into the job.
type Source struct {
	Name        string `yaml:"name" json:"name"`
	Type        string `yaml:"type" json:"type"`
	Parallelism int    `yaml:"parallelism,omitempty" json:"parallelism,omitempty"`
	// Rate limits the source to this many events per second in total
	// (split over its subtasks); 0 is unlimited.
	Rate float64 `yaml:"rate,omitempty" json:"rate,omitempty"`
	// Count bounds a datagen source to this many events in total.
	Count int64 `yaml:"count,omitempty" json:"count,omitempty"`
	// Splits is how many splits a datagen or nexmark source's events are
	// cut into (default 120, splitseq.DefaultSplits), and so its largest
	// parallelism.
	Splits int         `yaml:"splits,omitempty" json:"splits,omitempty"`
	Schema Schema      `yaml:"schema" json:"schema"`
	Event  *EventTime  `yaml:"eventTime,omitempty" json:"eventTime,omitempty"`
	Gen    *DatagenOpt `yaml:"datagen,omitempty" json:"datagen,omitempty"`
	// Path is a prefix in the store (files).
	Path string `yaml:"path,omitempty" json:"path,omitempty"`
	// Format of the records (files, redis): jsonl.
	Format string `yaml:"format,omitempty" json:"format,omitempty"`
	// Addr of the Redis server (redis; default: the job's Redis).
	Addr string `yaml:"addr,omitempty" json:"addr,omitempty"`
	// Stream is the Redis stream key (redis); each entry's field "data"
	// holds one JSON record.
	Stream string `yaml:"stream,omitempty" json:"stream,omitempty"`
	// Streams are the Redis stream keys (redis), instead of Stream: a
	// list, or one glob pattern (a string with *, ? or [).
	Streams StreamNames `yaml:"streams,omitempty" json:"streams,omitempty"`
	// Nexmark configures the nexmark source, which has no schema of its
	// own: its outputs are <name>.person, <name>.auction and <name>.bid.
	Nexmark *NexmarkOpt `yaml:"nexmark,omitempty" json:"nexmark,omitempty"`
}

// StreamNames is a list of names that a spec may also write as one
// string: `streams: rides-*` is `streams: [rides-*]`. Empty is nil.
type StreamNames []string

// UnmarshalJSON reads a string or an array of strings.
func (n *StreamNames) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*n = StreamNames{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("streams %.100s: want a string or a list of strings", b)
	}
	*n = nil
	if len(list) > 0 {
		*n = list
	}
	return nil
}

// Nexmark outputs, read as <source>.<output>.
const (
	NexmarkPerson  = "person"
	NexmarkAuction = "auction"
	NexmarkBid     = "bid"
)

// NexmarkOpt configures the Nexmark event generator (docs/nexmark.md). Zero
// fields take the Nexmark defaults.
type NexmarkOpt struct {
	// Seed 0 generates exactly Nexmark's events; another seed another set.
	Seed int64 `yaml:"seed,omitempty" json:"seed,omitempty"`
	// Start is the event time of event 0: RFC 3339, or "now" for the
	// wall clock when the job starts (default 2026-01-01T00:00:00Z).
	Start string `yaml:"start,omitempty" json:"start,omitempty"`
	// EventsPerSecond of synthetic event time (default: rate, else 10000).
	EventsPerSecond float64 `yaml:"eventsPerSecond,omitempty" json:"eventsPerSecond,omitempty"`
	// Average sizes in bytes, reached by padding the extra column
	// (defaults 200, 500, 100).
	AvgPersonBytes  int `yaml:"avgPersonBytes,omitempty" json:"avgPersonBytes,omitempty"`
	AvgAuctionBytes int `yaml:"avgAuctionBytes,omitempty" json:"avgAuctionBytes,omitempty"`
	AvgBidBytes     int `yaml:"avgBidBytes,omitempty" json:"avgBidBytes,omitempty"`
	// Hot ratios: 1 in HotAuctionRatio bids is not for a hot auction, and
	// so on (defaults 2, 4, 4).
	HotAuctionRatio int `yaml:"hotAuctionRatio,omitempty" json:"hotAuctionRatio,omitempty"`
	HotSellersRatio int `yaml:"hotSellersRatio,omitempty" json:"hotSellersRatio,omitempty"`
	HotBiddersRatio int `yaml:"hotBiddersRatio,omitempty" json:"hotBiddersRatio,omitempty"`
	// ActivePeople and InFlightAuctions bound the ids cold bids and
	// auctions pick from (defaults 1000 and 100).
	ActivePeople     int `yaml:"activePeople,omitempty" json:"activePeople,omitempty"`
	InFlightAuctions int `yaml:"inFlightAuctions,omitempty" json:"inFlightAuctions,omitempty"`
}

// EventTime says where a source's event time comes from and how its
// watermarks are generated.
type EventTime struct {
	Column            string   `yaml:"column" json:"column"`
	MaxOutOfOrderness Duration `yaml:"maxOutOfOrderness,omitempty" json:"maxOutOfOrderness,omitempty"`
	IdleTimeout       Duration `yaml:"idleTimeout,omitempty" json:"idleTimeout,omitempty"`
}

// DatagenOpt configures the datagen source. Values are a deterministic
// function of (seed, field, event index), so the generated set does not
// depend on parallelism.
type DatagenOpt struct {
	Seed int64 `yaml:"seed,omitempty" json:"seed,omitempty"`
	// Start is the event time of the first event (RFC 3339; default
	// 2026-01-01T00:00:00Z).
	Start string `yaml:"start,omitempty" json:"start,omitempty"`
	// EventsPerSecond of synthetic event time (default: rate, else 1000).
	EventsPerSecond float64 `yaml:"eventsPerSecond,omitempty" json:"eventsPerSecond,omitempty"`
	// OutOfOrderness shifts each event's timestamp back by a random amount
	// in [0, OutOfOrderness].
	OutOfOrderness Duration `yaml:"outOfOrderness,omitempty" json:"outOfOrderness,omitempty"`
	// Fields configures value generation per column.
	Fields map[string]FieldGen `yaml:"fields,omitempty" json:"fields,omitempty"`
}

// FieldGen configures one generated column. Defaults: int64 is the event
// index, float64 uniform in [0,100), string one of 100 values "<name>-<i>",
// bool uniform, timestamp_ms the synthetic event time.
type FieldGen struct {
	Min         *float64 `yaml:"min,omitempty" json:"min,omitempty"`
	Max         *float64 `yaml:"max,omitempty" json:"max,omitempty"`
	Values      []string `yaml:"values,omitempty" json:"values,omitempty"`
	Cardinality int      `yaml:"cardinality,omitempty" json:"cardinality,omitempty"`
	// NullRate is the fraction of nulls in [0,1).
	NullRate float64 `yaml:"nullRate,omitempty" json:"nullRate,omitempty"`
}

// Operator transforms records. Exactly one of Filter, Select, Window,
// Function or Join is set.
type Operator struct {
	Name string `yaml:"name" json:"name"`
	// Input is the stream the operator reads (a join names its two inputs
	// in Join instead).
	Input       string   `yaml:"input,omitempty" json:"input,omitempty"`
	Parallelism int      `yaml:"parallelism,omitempty" json:"parallelism,omitempty"`
	KeyBy       []string `yaml:"keyBy,omitempty" json:"keyBy,omitempty"`
	// Filter keeps the rows for which the boolean expression is true.
	Filter string `yaml:"filter,omitempty" json:"filter,omitempty"`
	// Select computes the output columns, in order, from expressions.
	Select    *OrderedMap `yaml:"select,omitempty" json:"select,omitempty"`
	Window    *Window     `yaml:"window,omitempty" json:"window,omitempty"`
	Aggregate *OrderedMap `yaml:"aggregate,omitempty" json:"aggregate,omitempty"`
	// Function names a Go function registered with functions.Register,
	// or a Wasm function deployed into the bucket (NAME or NAME@VERSION).
	Function string `yaml:"function,omitempty" json:"function,omitempty"`
	// Module pins the deployed Wasm module Function names. It is set when
	// the job is deployed (never in a user's spec), so that every restart,
	// recovery and rescale runs the same code.
	Module *Module `yaml:"-" json:"module,omitempty"`
	// Config is passed to the function as is.
	Config map[string]any `yaml:"config,omitempty" json:"config,omitempty"`
	// Join joins two keyed inputs.
	Join *Join `yaml:"join,omitempty" json:"join,omitempty"`
}

// Inputs returns the streams the operator reads: its Input, or a join's
// left and right inputs.
func (o *Operator) Inputs() []string {
	if o.Join != nil {
		return []string{o.Join.Left.Input, o.Join.Right.Input}
	}
	return []string{o.Input}
}

// Join types.
const (
	// JoinRegular matches every pair of rows with equal keys, whenever
	// they arrive; each side's rows are kept (for TTL, if set).
	JoinRegular = "regular"
	// JoinInterval matches rows with equal keys whose event times satisfy
	// right.time + lower <= left.time <= right.time + upper.
	JoinInterval = "interval"
	// JoinWindow matches rows with equal keys in the same event-time
	// window, when the window fires.
	JoinWindow = "window"
)

// Join is a two-input operator: rows of Left and Right with equal key
// values are joined into one output row.
type Join struct {
	Type  string   `yaml:"type" json:"type"`
	Left  JoinSide `yaml:"left" json:"left"`
	Right JoinSide `yaml:"right" json:"right"`
	// TTL (regular): a row is forgotten once the watermark passes its event
	// time plus TTL; 0 keeps every row.
	TTL Duration `yaml:"ttl,omitempty" json:"ttl,omitempty"`
	// Lower and Upper bound an interval join (either may be negative).
	Lower Duration `yaml:"lower,omitempty" json:"lower,omitempty"`
	Upper Duration `yaml:"upper,omitempty" json:"upper,omitempty"`
	// Window (window join): tumbling or sliding.
	Window *Window `yaml:"window,omitempty" json:"window,omitempty"`
	// Columns names the output columns, in order, each "left.<column>" or
	// "right.<column>". Default: the left columns then the right columns.
	Columns *OrderedMap `yaml:"columns,omitempty" json:"columns,omitempty"`
	// Where keeps only the joined rows for which this boolean expression
	// over the output columns is true.
	Where string `yaml:"where,omitempty" json:"where,omitempty"`
}

// JoinSide is one input of a join and the columns its key is made of.
type JoinSide struct {
	Input string   `yaml:"input" json:"input"`
	KeyBy []string `yaml:"keyBy" json:"keyBy"`
}

// Kind returns which kind of operator o is, or "" if none or several are set.
func (o *Operator) Kind() string {
	var kinds []string
	if o.Filter != "" {
		kinds = append(kinds, "filter")
	}
	if o.Select != nil {
		kinds = append(kinds, "select")
	}
	if o.Window != nil || o.Aggregate != nil {
		kinds = append(kinds, "window")
	}
	if o.Function != "" {
		kinds = append(kinds, "function")
	}
	if o.Join != nil {
		kinds = append(kinds, "join")
	}
	if len(kinds) != 1 {
		return ""
	}
	return kinds[0]
}

// Window types.
const (
	WindowTumbling = "tumbling"
	WindowSliding  = "sliding"
	WindowSession  = "session"
)

// Window configures an event-time window.
type Window struct {
	Type            string   `yaml:"type" json:"type"`
	Size            Duration `yaml:"size,omitempty" json:"size,omitempty"`
	Slide           Duration `yaml:"slide,omitempty" json:"slide,omitempty"`
	Gap             Duration `yaml:"gap,omitempty" json:"gap,omitempty"`
	AllowedLateness Duration `yaml:"allowedLateness,omitempty" json:"allowedLateness,omitempty"`
	// LateOutput names a side output that receives records too late even
	// for AllowedLateness; when empty they are counted and dropped.
	LateOutput string `yaml:"lateOutput,omitempty" json:"lateOutput,omitempty"`
}

// Sink types and formats.
const (
	SinkFiles  = "files"
	SinkRedis  = "redis"
	SinkStdout = "stdout"
	// SinkBlackhole discards its input, counting rows and measuring how
	// long after its event time each row arrived (benchmarks).
	SinkBlackhole = "blackhole"
	FormatJSONL   = "jsonl"
	FormatParq    = "parquet"
)

// Sink writes records out of the job.
type Sink struct {
	Name        string `yaml:"name" json:"name"`
	Input       string `yaml:"input" json:"input"`
	Type        string `yaml:"type" json:"type"`
	Parallelism int    `yaml:"parallelism,omitempty" json:"parallelism,omitempty"`
	Path        string `yaml:"path,omitempty" json:"path,omitempty"`
	Format      string `yaml:"format,omitempty" json:"format,omitempty"`
	Addr        string `yaml:"addr,omitempty" json:"addr,omitempty"`
	Stream      string `yaml:"stream,omitempty" json:"stream,omitempty"`
	// Rate limits the sink to this many rows per second per subtask; 0 is
	// unlimited. Mostly for testing backpressure.
	Rate float64 `yaml:"rate,omitempty" json:"rate,omitempty"`
}

// Duration is a time.Duration written as "5s", "1m30s".
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads "5s" (or a number of nanoseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration %s: want a string like \"5s\"", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ParseDuration parses a Go duration, and also "7d" for days.
func ParseDuration(s string) (Duration, error) {
	if n := len(s); n > 1 && s[n-1] == 'd' {
		if days, err := strconv.ParseFloat(s[:n-1], 64); err == nil && math.Abs(days) < math.MaxInt64/float64(24*time.Hour) {
			return Duration(days * float64(24*time.Hour)), nil
		}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want e.g. 500ms, 5s, 1m30s, 2h", s)
	}
	return Duration(v), nil
}

// Module is a deployed Wasm function as a job runs it: which module (name,
// version and the SHA-256 of its bytes), the limits it was deployed with,
// and what it declared (docs/wasm-abi.md, weir_describe).
type Module struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	SHA256  string `json:"sha256"`
	// MemoryBytes limits the instance's linear memory; Timeout bounds one
	// call of an export.
	MemoryBytes int64    `json:"memoryBytes"`
	Timeout     Duration `json:"timeout"`
	// Trusted modules run without the checks that let a call be stopped
	// at its deadline (faster; a runaway call cannot be interrupted).
	Trusted bool `json:"trusted,omitempty"`
	// Input are the columns the function reads, Output the columns it
	// emits, in order; TimeColumn the output column carrying event time.
	Input      []ModuleColumn `json:"input"`
	Output     []ModuleColumn `json:"output"`
	TimeColumn string         `json:"timeColumn,omitempty"`
	// TimeOffset is added to TimeColumn's value to get an output row's
	// event time (a window result's last millisecond is window_end - 1).
	TimeOffset int64 `json:"timeOffset,omitempty"`
}

// ModuleColumn is a column a module declares: its name and weir type.
type ModuleColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
}
