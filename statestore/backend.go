package statestore

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrTypeMismatch: a table was registered again with another value type.
	ErrTypeMismatch = errors.New("statestore: table type mismatch")
	// ErrInvalidName: a table name is empty.
	ErrInvalidName = errors.New("statestore: invalid table name")
)

// Scope is where one state entry lives within a table.
type Scope struct {
	KeyGroup  int
	Key       string
	Namespace string
}

func (s Scope) compare(o Scope) int {
	if c := s.KeyGroup - o.KeyGroup; c != 0 {
		return c
	}
	if c := strings.Compare(s.Key, o.Key); c != 0 {
		return c
	}
	return strings.Compare(s.Namespace, o.Namespace)
}

// Snapshotter is state that checkpoints capture and restore as Arrow
// record batches whose first column is key_group (int32), so that the
// runtime can keep the rows of a subtask's key groups after a rescale.
// It is the one interface the checkpoint runtime captures every stateful
// operator through (task.Stateful's State). A Backend is one; so is an
// operator that keeps its keyed state in its own columnar structures (a
// window's accumulators, a join's kept rows; see rows.Layout and
// rows.ChangeLog). One goroutine, the task's, uses it.
type Snapshotter interface {
	// Schema is the schema of every batch Snapshot returns and Restore
	// reads. It never changes.
	Schema() *arrow.Schema
	// Snapshot captures every entry (full, a base) or what changed since
	// the previous Snapshot or Restore (a delta), and starts tracking
	// changes afresh. The batches are allocated from mem and owned by the
	// caller; they share no memory with the state, so processing goes on
	// while they are written out. No rows gives no batches. It fails if a
	// value cannot be encoded, leaving the change tracking as it was.
	Snapshot(mem memory.Allocator, full bool) ([]arrow.RecordBatch, error)
	// Restore applies the rows of rec, a batch of Schema holding only
	// rows of the owner's key groups: a base and then its deltas, batch
	// by batch in the order they were captured, rebuild the state.
	// Restored rows count as unchanged: the next delta holds only later
	// changes. It does not keep rec. A row that does not fit (a key
	// group outside the owner's range, a bad value) is an error naming
	// the row; whether the rows before it stay applied is the
	// implementation's to say (discard the state after an error).
	Restore(rec arrow.RecordBatch) error
}

// OlderSchemas is a Snapshotter whose Restore also reads batches of the
// schemas its state had in earlier versions of weir, so that checkpoints
// written before a change of its schema still restore.
type OlderSchemas interface {
	Snapshotter
	// CheckSchema returns nil if Restore reads batches of s (Schema, or
	// an older one), else an error naming the columns that differ.
	CheckSchema(s *arrow.Schema) error
}

// RestoreSizer is a Snapshotter told, before a state file's batches are
// restored, every one of them at once (the rows of the owner's key groups
// only), so that it can size its structures for what comes instead of
// growing them row by row.
type RestoreSizer interface {
	Snapshotter
	SizeRestore(recs []arrow.RecordBatch)
}

// SteppedSnapshotter is a Snapshotter that the task can capture in steps
// between batches, so that a large state does not stop processing at the
// barrier. BeginSnapshot only marks the state as of now; from then on, the
// first change to an entry the capture has not reached yet copies the
// entry into the capture before it changes (copy on write), and the
// capture reaches the rest in its Steps. The batches equal what Snapshot
// would have returned at BeginSnapshot.
type SteppedSnapshotter interface {
	Snapshotter
	// BeginSnapshot starts capturing every entry (full) or what changed
	// since the previous snapshot or restore, and starts tracking changes
	// afresh, as Snapshot does. The previous capture must be done or
	// released first.
	BeginSnapshot(mem memory.Allocator, full bool) (Capture, error)
}

// CaptureAtOnce is Snapshot for a SteppedSnapshotter: BeginSnapshot, then
// one Step to the end.
func CaptureAtOnce(s SteppedSnapshotter, mem memory.Allocator, full bool) ([]arrow.RecordBatch, error) {
	c, err := s.BeginSnapshot(mem, full)
	if err != nil {
		return nil, err
	}
	if _, err := c.Step(time.Time{}); err != nil {
		c.Release()
		return nil, err
	}
	return c.Batches(), nil
}

// Capture is a snapshot being captured in steps (SteppedSnapshotter). The
// state's goroutine drives it, between its other calls into the state.
type Capture interface {
	// Step captures entries until deadline passes (a zero deadline: until
	// the end) and reports whether the capture is complete. A step does
	// a little work even if deadline has passed, so steps always end it.
	Step(deadline time.Time) (done bool, err error)
	// Batches hands out the batches once Step has reported done: the
	// caller owns them, and they share no memory with the state.
	Batches() []arrow.RecordBatch
	// Release drops what the capture holds and detaches it from the
	// state; after Batches it only detaches. It is safe to call twice.
	Release()
}

// Part is rows of a capture in parts (PartedCapture): all its rows of key
// groups [KeyGroupStart, KeyGroupEnd), in the capture's order: Batches,
// then Encoded (see EncodingCapture). The receiver owns Batches.
type Part struct {
	Batches                    []arrow.RecordBatch
	Encoded                    []arrowfmt.EncodedBatch
	KeyGroupStart, KeyGroupEnd int
}

// PartedCapture is a Capture that hands out its rows in parts, key group
// range by key group range, while it goes on: the task uploads each part
// as its own state file, so a large capture (a base of state larger than
// memory) is never held in memory whole. Applying the parts in order is
// applying the whole capture.
type PartedCapture interface {
	Capture
	// SplitParts makes the capture end a part at the first key group
	// boundary once the rows it holds since the last part reach bytes
	// (variable-length bytes, as the batches count them). Call it before
	// the first Step; 0 (the default) makes one part.
	SplitParts(bytes int)
	// TakeParts hands out the parts ended so far, in order. Once Step has
	// reported done, the last part is among them, and Batches is empty: the
	// parts together cover the backend's key groups.
	TakeParts() []Part
}

// EncodingCapture is a PartedCapture that may encode rows it has to hold
// a while as it goes, as a state file's batches compressed with the
// file's codec, and hand them out so (Part.Encoded): a window operator's
// copies on write, which wait for the walk to end their part and would
// take memory uncompressed for every key changed ahead of it. Call
// EncodeWith before the first Step.
type EncodingCapture interface {
	PartedCapture
	EncodeWith(codec arrowfmt.Compression)
}

// NarrowingCapture is a Capture whose state files hold some int64 and
// timestamp_ms columns in fewer bytes: FileSchema is the schema to write
// them in, Schema with those columns narrowed (arrowfmt.NarrowSchema) to
// the ranges of the values the capture writes, which it knew at its
// barrier. statefile.Decode reads such a file as Schema.
type NarrowingCapture interface {
	Capture
	FileSchema() *arrow.Schema
}

// CopyingCapture is a Capture that counts what it copied on write: the
// entries changed after its barrier before its walk reached them, which
// it copied first (see SteppedSnapshotter). The task adds them to its
// metrics once the capture is complete.
type CopyingCapture interface {
	Capture
	Copies() CopyCounts
}

// CopyCounts are the rows a capture copied on write (Rows), and of those,
// the rows it encoded as they waited for their part (EncodedRows, see
// EncodingCapture).
type CopyCounts struct {
	Rows, EncodedRows int64
}

// PartHolder is a PartedCapture that goes on while its parts wait for
// the uploader, holding them, rather than wait for the uploads: a window
// operator's, whose state is in memory anyway, and whose keys would be
// copied on write while its walk waited (each change to a key the walk
// has not reached copies it), which costs the task more than the walk.
// A capture that is not one waits, so that a state larger than memory
// (pebble) is never held whole.
type PartHolder interface {
	PartedCapture
	HoldsParts() bool
}

// Backend is the keyed state of one operator instance (one operator of one
// subtask) over the key groups it owns: tables of values scoped to (key
// group, key, namespace) by state name, and the timer service. It tracks
// what changed since the last snapshot and captures and restores itself
// as batches of SnapshotSchema (Snapshotter). Memory is the in-memory
// implementation; statetest is the contract suite every implementation
// passes.
//
// A Backend and everything obtained from it is used by one goroutine, the
// task's. Key groups outside KeyGroups are a bug in the caller: tables and
// timers panic on them.
type Backend interface {
	// KeyGroups returns the range [start, end) the backend owns, fixed
	// when it is made.
	KeyGroups() (start, end int)
	// OpenTable returns table name, registering it with value type vt if
	// it is new; use the typed OpenTable, which makes vt and asserts the
	// result (a Table of vt's value type, owned by the backend and valid
	// as long as it is). Opening a registered name again with the same
	// value type returns the same table; another type is ErrTypeMismatch,
	// an empty or reserved name ErrInvalidName. Rows restored before the
	// table was opened belong to it. A backend that decodes them now
	// (Memory) returns an error for an entry vt cannot decode and leaves
	// the table unregistered; one that decodes on read (ValueType.Encoded)
	// panics there.
	OpenTable(name string, vt ValueType) (any, error)
	// TableNames returns the names of the registered tables, sorted.
	// Tables restored but not opened yet are not among them.
	TableNames() []string
	// Timers returns the timer service, owned by the backend. Timers are
	// state: they are snapshotted and restored with the tables.
	Timers() TimerService
	// TakeDirty returns, per table with changes (sorted by name), the
	// scopes written or deleted since the last TakeDirty or Snapshot, and
	// clears the dirty sets. It never fails. Snapshot consumes the same
	// sets: a backend that is snapshotted must not have them taken by
	// anyone else. Timers keep their own (TimerService.TakeDirty).
	TakeDirty() []Dirty
	// Snapshotter: Schema is SnapshotSchema; see the package doc and
	// snapshot.go for the rows.
	Snapshotter
	// Close frees what the backend holds outside the Go heap (a heap
	// table's index and cells, say). Neither the backend nor its tables
	// may be used after. Safe to call twice; a backend never closed is
	// freed by the collector once unreachable.
	Close()
}

// Dirty is what changed in one table since its last TakeDirty.
type Dirty struct {
	Table string
	// Scopes written or deleted, sorted by key group, key and namespace.
	// Whether each still exists is what the table holds now.
	Scopes []Scope
}

// Table holds the values of one state name, per key group and (key,
// namespace), and tracks which entries changed since the last TakeDirty
// or snapshot. Its methods do not fail; a key group outside the backend's
// range panics.
type Table[V any] interface {
	// Name returns the table's state name.
	Name() string
	// Codec returns the codec snapshots encode values with.
	Codec() Codec[V]
	// Get returns the value at (kg, key, ns) and whether there is one. A
	// heap backend returns the value stored, not a copy: change a mutable
	// value only to Put it back.
	Get(kg int, key, ns string) (V, bool)
	// Put stores v at (kg, key, ns) and marks the entry dirty. A heap
	// backend keeps v by reference.
	Put(kg int, key, ns string, v V)
	// Delete removes the entry at (kg, key, ns), marking it dirty if it
	// existed. Get and Delete keep neither key nor ns, which may point
	// into memory the caller reuses; Put keeps both.
	Delete(kg int, key, ns string)
	// Range calls fn for every entry of key group kg, in no particular
	// order, until fn returns false. fn may Delete the entry it is given.
	Range(kg int, fn func(key, ns string, v V) bool)
	// Len returns the number of entries in key group kg.
	Len(kg int) int
	// TakeDirty returns the scopes written or deleted since the last
	// call, sorted by key group, key and namespace, and clears the dirty
	// set. An entry written then deleted is in it (as absent now).
	TakeDirty() []Scope
}

// ValueType is a table's value type and codec as a backend sees them.
// OpenTable makes one from V; backends do not implement it.
type ValueType interface {
	// Type returns the value type V.
	Type() reflect.Type
	// Encoded returns a Table[V] (as any, for Backend.OpenTable to
	// return) over t, a table of encoded values that a backend storing
	// bytes provides (pebble): Get decodes with V's codec, Put encodes.
	// The Table's methods cannot return errors: a value the codec cannot
	// encode, or bytes it cannot decode (corrupt state), panic there,
	// where Memory reports the first at Snapshot.
	Encoded(t EncodedTable) any
	// newHeapTable returns an empty Table[V] keeping Go values over key
	// groups [start, end), the in-memory backend's.
	newHeapTable(name string, start, end int) anyTable
}

// EncodedTable is a table of encoded values, what a backend storing bytes
// implements for ValueType.Encoded; its methods are Table's. Get's result
// is only read until the next call; the v given to Put is the table's.
type EncodedTable interface {
	Name() string
	Get(kg int, key, ns string) (v []byte, ok bool)
	Put(kg int, key, ns string, v []byte)
	Delete(kg int, key, ns string)
	Range(kg int, fn func(key, ns string, v []byte) bool)
	Len(kg int) int
	TakeDirty() []Scope
}

type valueType[V any] struct{ codec Codec[V] }

func (valueType[V]) Type() reflect.Type { return reflect.TypeFor[V]() }

func (vt valueType[V]) Encoded(t EncodedTable) any { return &encodedValues[V]{t: t, codec: vt.codec} }

func (vt valueType[V]) newHeapTable(name string, start, end int) anyTable {
	return newHeapTable[V](name, vt.codec, start, end)
}

// OpenTable returns table name of b holding values of type V, registering
// it with codec (nil: DefaultCodec[V]) if it is new (see
// Backend.OpenTable).
func OpenTable[V any](b Backend, name string, codec Codec[V]) (Table[V], error) {
	if codec == nil {
		codec = DefaultCodec[V]()
	}
	t, err := b.OpenTable(name, valueType[V]{codec})
	if err != nil {
		return nil, err
	}
	tt, ok := t.(Table[V])
	if !ok {
		return nil, fmt.Errorf("%w: %q: the backend returned %T, not a table of %s", ErrTypeMismatch, name, t, reflect.TypeFor[V]())
	}
	return tt, nil
}
