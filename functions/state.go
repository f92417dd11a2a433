package functions

import (
	"fmt"
	"iter"
	"slices"

	"github.com/weirstream/weir/statestore"
)

// defaultNamespace is the namespace of state a function declares.
const defaultNamespace = ""

// openTable registers a state table during Open. A problem is recorded in
// oc and fails Open once it returns, so declarations read as one line each.
func openTable[V any](oc *OpenContext, kind, name string, codec statestore.Codec[V]) *statestore.Table[V] {
	if oc.done {
		panic(fmt.Sprintf("functions: %s state %q declared after Open returned: declare state in Open", kind, name))
	}
	t, err := statestore.OpenTable(oc.inst.state, name, codec)
	if err != nil {
		oc.errs = append(oc.errs, fmt.Errorf("declare %s state %q: %w", kind, name, err))
		return nil
	}
	return t
}

// ValueState is one value per key.
type ValueState[T any] struct {
	t    *statestore.Table[T]
	inst *Instance
}

// Value declares a ValueState named name. Declaring the same name twice
// with the same type gives the same state; with another type, Open fails.
func Value[T any](oc *OpenContext, name string) *ValueState[T] {
	return &ValueState[T]{t: openTable[T](oc, "value", name, nil), inst: oc.inst}
}

// Value returns the current key's value, and false if it has none.
func (s *ValueState[T]) Value() (T, bool) {
	cur := s.inst.currentKey("state")
	return s.t.Get(cur.keyGroup, cur.key, defaultNamespace)
}

// Update sets the current key's value.
func (s *ValueState[T]) Update(v T) {
	cur := s.inst.currentKey("state")
	s.t.Put(cur.keyGroup, cur.key, defaultNamespace, v)
}

// Clear removes the current key's value.
func (s *ValueState[T]) Clear() {
	cur := s.inst.currentKey("state")
	s.t.Delete(cur.keyGroup, cur.key, defaultNamespace)
}

// ListState is a list of values per key.
type ListState[T any] struct {
	t    *statestore.Table[[]T]
	inst *Instance
}

// List declares a ListState named name.
func List[T any](oc *OpenContext, name string) *ListState[T] {
	return &ListState[T]{t: openTable[[]T](oc, "list", name, nil), inst: oc.inst}
}

// Get returns the current key's list (nil if empty). It is the stored list:
// read it, do not change it (appending to it is safe).
func (s *ListState[T]) Get() []T {
	cur := s.inst.currentKey("state")
	l, _ := s.t.Get(cur.keyGroup, cur.key, defaultNamespace)
	return l[:len(l):len(l)]
}

// Add appends v to the current key's list.
func (s *ListState[T]) Add(v T) {
	cur := s.inst.currentKey("state")
	l, _ := s.t.Get(cur.keyGroup, cur.key, defaultNamespace)
	s.t.Put(cur.keyGroup, cur.key, defaultNamespace, append(l, v))
}

// Update replaces the current key's list with a copy of vs; an empty vs
// clears it.
func (s *ListState[T]) Update(vs []T) {
	if len(vs) == 0 {
		s.Clear()
		return
	}
	cur := s.inst.currentKey("state")
	s.t.Put(cur.keyGroup, cur.key, defaultNamespace, slices.Clone(vs))
}

// Clear empties the current key's list.
func (s *ListState[T]) Clear() {
	cur := s.inst.currentKey("state")
	s.t.Delete(cur.keyGroup, cur.key, defaultNamespace)
}

// MapState is a map per key.
type MapState[K comparable, V any] struct {
	t    *statestore.Table[map[K]V]
	inst *Instance
}

// Map declares a MapState named name. Map keys and values must encode to
// JSON (checkpoints store them that way).
func Map[K comparable, V any](oc *OpenContext, name string) *MapState[K, V] {
	return &MapState[K, V]{t: openTable(oc, "map", name, statestore.Codec[map[K]V](statestore.MapCodec[K, V]{})), inst: oc.inst}
}

func (s *MapState[K, V]) get() map[K]V {
	cur := s.inst.currentKey("state")
	m, _ := s.t.Get(cur.keyGroup, cur.key, defaultNamespace)
	return m
}

// Get returns the value of k in the current key's map.
func (s *MapState[K, V]) Get(k K) (V, bool) {
	v, ok := s.get()[k]
	return v, ok
}

// Put sets k to v in the current key's map.
func (s *MapState[K, V]) Put(k K, v V) {
	cur := s.inst.currentKey("state")
	m, _ := s.t.Get(cur.keyGroup, cur.key, defaultNamespace)
	if m == nil {
		m = map[K]V{}
	}
	m[k] = v
	s.t.Put(cur.keyGroup, cur.key, defaultNamespace, m) // marks it changed
}

// Delete removes k from the current key's map.
func (s *MapState[K, V]) Delete(k K) {
	cur := s.inst.currentKey("state")
	m, _ := s.t.Get(cur.keyGroup, cur.key, defaultNamespace)
	if _, ok := m[k]; !ok {
		return
	}
	if len(m) == 1 {
		s.t.Delete(cur.keyGroup, cur.key, defaultNamespace)
		return
	}
	delete(m, k)
	s.t.Put(cur.keyGroup, cur.key, defaultNamespace, m)
}

// Len returns the number of entries in the current key's map.
func (s *MapState[K, V]) Len() int { return len(s.get()) }

// All iterates over the current key's map in no particular order. The loop
// may Delete the entry it is at.
func (s *MapState[K, V]) All() iter.Seq2[K, V] {
	m := s.get()
	return func(yield func(K, V) bool) {
		for k, v := range m {
			if !yield(k, v) {
				return
			}
		}
	}
}

// Keys iterates over the current key's map keys in no particular order.
func (s *MapState[K, V]) Keys() iter.Seq[K] {
	m := s.get()
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Range calls fn for each entry of the current key's map, in no particular
// order, until fn returns false.
func (s *MapState[K, V]) Range(fn func(k K, v V) bool) {
	for k, v := range s.All() {
		if !fn(k, v) {
			return
		}
	}
}

// Clear empties the current key's map.
func (s *MapState[K, V]) Clear() {
	cur := s.inst.currentKey("state")
	s.t.Delete(cur.keyGroup, cur.key, defaultNamespace)
}
