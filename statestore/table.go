package statestore

import (
	"reflect"
	"slices"
)

// heapTable is the in-memory Table: it holds Go values per key group
// and (key, namespace). It tracks which entries changed since the last
// TakeDirty. Key groups outside the backend's range are a bug in the caller
// and panic.
type heapTable[V any] struct {
	name       string
	codec      Codec[V]
	start, end int
	groups     []group[V]
	// capture is the snapshot being captured in steps, which this table
	// is the index-th table of, or nil.
	capture *memCapture
	index   int
}

var _ Table[int64] = (*heapTable[int64])(nil)

// anyTable is a table of the in-memory backend seen without its value
// type, as snapshots see it.
type anyTable interface {
	// user returns the Table[V] OpenTable hands out.
	user() any
	valueType() reflect.Type
	takeDirty() []Scope
	// appendEncoded appends the encoding of an entry; ok is false if the
	// entry does not exist.
	appendEncoded(dst []byte, kg int, key, ns string) (out []byte, ok bool, err error)
	// putEncoded decodes b and stores it (restore).
	putEncoded(kg int, key, ns string, b []byte) error
	snapTable
}

type entryKey struct{ key, ns string }

// group is one key group's part of a table; its maps are made on first
// write, since most of a subtask's tables × key groups stay empty.
type group[V any] struct {
	entries map[entryKey]V
	dirty   map[entryKey]struct{}
}

func (g *group[V]) markDirty(k entryKey) {
	if g.dirty == nil {
		g.dirty = map[entryKey]struct{}{}
	}
	g.dirty[k] = struct{}{}
}

// Name implements Table.
func (t *heapTable[V]) Name() string { return t.name }

// Codec implements Table.
func (t *heapTable[V]) Codec() Codec[V] { return t.codec }

func (t *heapTable[V]) group(kg int) *group[V] {
	checkGroup(kg, t.start, t.end)
	return &t.groups[kg-t.start]
}

// Get returns the value at (kg, key, ns) and whether there is one. The value
// is the one stored, not a copy: change a mutable value only to Put it back.
func (t *heapTable[V]) Get(kg int, key, ns string) (V, bool) {
	v, ok := t.group(kg).entries[entryKey{key, ns}]
	return v, ok
}

// Put stores v at (kg, key, ns) and marks the entry dirty.
func (t *heapTable[V]) Put(kg int, key, ns string, v V) {
	g := t.group(kg)
	if g.entries == nil {
		g.entries = map[entryKey]V{}
	}
	k := entryKey{key, ns}
	if t.capture != nil {
		t.capture.copyEntry(t.index, kg, k)
	}
	g.entries[k] = v
	g.markDirty(k)
}

// Delete removes the entry at (kg, key, ns), marking it dirty if it existed.
func (t *heapTable[V]) Delete(kg int, key, ns string) {
	g := t.group(kg)
	k := entryKey{key, ns}
	if _, ok := g.entries[k]; !ok {
		return
	}
	if t.capture != nil {
		t.capture.copyEntry(t.index, kg, k)
	}
	delete(g.entries, k)
	g.markDirty(k)
}

// Range calls fn for every entry of key group kg, in no particular order,
// until fn returns false. fn may Delete the entry it is given.
func (t *heapTable[V]) Range(kg int, fn func(key, ns string, v V) bool) {
	for k, v := range t.group(kg).entries {
		if !fn(k.key, k.ns, v) {
			return
		}
	}
}

// Len returns the number of entries in key group kg.
func (t *heapTable[V]) Len(kg int) int { return len(t.group(kg).entries) }

// TakeDirty returns the scopes written or deleted since the last call,
// sorted by key group, key and namespace, and clears the dirty set. An
// entry written then deleted is in it (as absent now).
func (t *heapTable[V]) TakeDirty() []Scope { return t.takeDirty() }

func (t *heapTable[V]) takeDirty() []Scope {
	var out []Scope
	for i := range t.groups {
		g := &t.groups[i]
		if len(g.dirty) == 0 {
			continue
		}
		first := len(out)
		for k := range g.dirty {
			out = append(out, Scope{KeyGroup: t.start + i, Key: k.key, Namespace: k.ns})
		}
		slices.SortFunc(out[first:], Scope.compare)
		g.dirty = nil
	}
	return out
}

func (t *heapTable[V]) user() any { return t }

func (t *heapTable[V]) valueType() reflect.Type { return reflect.TypeFor[V]() }

func (t *heapTable[V]) appendEncoded(dst []byte, kg int, key, ns string) ([]byte, bool, error) {
	v, ok := t.Get(kg, key, ns)
	if !ok {
		return dst, false, nil
	}
	out, err := t.codec.Append(dst, v)
	return out, true, err
}

func (t *heapTable[V]) putEncoded(kg int, key, ns string, b []byte) error {
	v, err := t.codec.Decode(b)
	if err != nil {
		return err
	}
	// Restored entries are in the snapshot already: not dirty.
	g := t.group(kg)
	if g.entries == nil {
		g.entries = map[entryKey]V{}
	}
	g.entries[entryKey{key, ns}] = v
	return nil
}
