package statestore

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
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

// Backend is the in-memory keyed state of one operator instance: its tables
// by name and its timers, for the key groups [start, end) it owns. It is not
// safe for concurrent use.
type Backend struct {
	start, end int
	tables     map[string]anyTable
	timers     *Timers
	// pending holds restored rows of tables no OpenTable has registered
	// yet, encoded; OpenTable decodes them, and full snapshots carry them
	// on meanwhile (see Restore).
	pending map[string]*encodedTable
	// batchBytes caps the variable-length bytes of one snapshot batch
	// (tests lower it).
	batchBytes int
}

// NewBackend returns an empty backend owning key groups [start, end). It
// panics if the range is empty or negative: that is a bug in the caller.
func NewBackend(start, end int) *Backend {
	if start < 0 || end <= start {
		panic(fmt.Sprintf("statestore: invalid key group range [%d,%d)", start, end))
	}
	return &Backend{
		start:      start,
		end:        end,
		tables:     map[string]anyTable{},
		timers:     newTimers(start, end),
		pending:    map[string]*encodedTable{},
		batchBytes: snapshotBatchBytes,
	}
}

// KeyGroups returns the range of key groups the backend owns.
func (b *Backend) KeyGroups() (start, end int) { return b.start, b.end }

// Timers returns the backend's timer service.
func (b *Backend) Timers() *Timers { return b.timers }

// TableNames returns the names of the registered tables, sorted. Tables
// restored but not opened yet are not among them.
func (b *Backend) TableNames() []string {
	names := make([]string, 0, len(b.tables))
	for n := range b.tables {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Dirty is what changed in one table since its last TakeDirty.
type Dirty struct {
	Table string
	// Scopes written or deleted, sorted by key group, key and namespace.
	// Whether each still exists is what the table holds now.
	Scopes []Scope
}

// TakeDirty returns, per table with changes, the scopes changed since the
// last call, and clears the dirty sets. Tables come sorted by name. Timers
// keep their own dirty set (Timers.TakeDirty).
func (b *Backend) TakeDirty() []Dirty {
	var out []Dirty
	for _, name := range b.TableNames() {
		if s := b.tables[name].takeDirty(); len(s) > 0 {
			out = append(out, Dirty{Table: name, Scopes: s})
		}
	}
	return out
}

// OpenTable returns the table name of b, registering it with codec (nil:
// DefaultCodec[V]) if it is new. Opening a registered name again with the
// same value type returns the same table (and keeps its first codec);
// another value type is ErrTypeMismatch. Names starting with "__timers"
// are reserved for the timers in snapshots (ErrInvalidName).
//
// If Restore has kept rows of name (it was restored before it was
// opened), registering it decodes them with codec; an entry codec cannot
// decode is an error and leaves the table unregistered.
func OpenTable[V any](b *Backend, name string, codec Codec[V]) (*Table[V], error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty name", ErrInvalidName)
	}
	if strings.HasPrefix(name, reservedPrefix) {
		return nil, fmt.Errorf("%w: %q: names starting with %q are reserved for timers", ErrInvalidName, name, reservedPrefix)
	}
	if t, ok := b.tables[name]; ok {
		if tt, ok := t.(*Table[V]); ok {
			return tt, nil
		}
		return nil, fmt.Errorf("%w: %q holds %s, not %s", ErrTypeMismatch, name, t.valueType(), reflect.TypeFor[V]())
	}
	if codec == nil {
		codec = DefaultCodec[V]()
	}
	t := &Table[V]{
		name:   name,
		codec:  codec,
		start:  b.start,
		end:    b.end,
		groups: make([]group[V], b.end-b.start),
	}
	if p := b.pending[name]; p != nil {
		if err := p.decodeInto(t); err != nil {
			return nil, err
		}
		delete(b.pending, name)
	}
	b.tables[name] = t
	return t, nil
}

// anyTable is a Table seen without its value type, as snapshots see it.
type anyTable interface {
	valueType() reflect.Type
	takeDirty() []Scope
	// appendEncoded appends the encoding of an entry; ok is false if the
	// entry does not exist.
	appendEncoded(dst []byte, kg int, key, ns string) (out []byte, ok bool, err error)
	// putEncoded decodes b and stores it (restore).
	putEncoded(kg int, key, ns string, b []byte) error
	snapTable
}

func checkGroup(kg, start, end int) {
	if kg < start || kg >= end {
		panic(fmt.Sprintf("statestore: key group %d outside the backend's range [%d,%d)", kg, start, end))
	}
}
