package functions

import (
	"fmt"
	"iter"

	"github.com/weirstream/weir/statestore"
)

// defaultNamespace is the namespace of state a function declares.
const defaultNamespace = ""

// declare opens state name in the instance's backend during Open. A
// problem is recorded in oc and fails Open once it returns, so
// declarations read as one line each.
func declare[S any](oc *OpenContext, kind, name string, open func(statestore.Backend, string) (S, error)) S {
	if oc.done {
		panic(fmt.Sprintf("functions: %s state %q declared after Open returned: declare state in Open", kind, name))
	}
	s, err := open(oc.inst.state, name)
	if err != nil {
		oc.errs = append(oc.errs, fmt.Errorf("declare %s state %q: %w", kind, name, err))
	}
	return s
}

// ValueState is one value per key.
type ValueState[T any] struct {
	t    statestore.Table[T]
	inst *Instance
}

// Value declares a ValueState named name. Declaring the same name twice
// with the same type gives the same state; with another type, Open fails.
func Value[T any](oc *OpenContext, name string) *ValueState[T] {
	t := declare(oc, "value", name, func(b statestore.Backend, name string) (statestore.Table[T], error) {
		return statestore.OpenTable[T](b, name, nil)
	})
	return &ValueState[T]{t: t, inst: oc.inst}
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
	s    *statestore.ListState[T]
	inst *Instance
}

// List declares a ListState named name.
func List[T any](oc *OpenContext, name string) *ListState[T] {
	return &ListState[T]{s: declare(oc, "list", name, statestore.OpenList[T]), inst: oc.inst}
}

// Get returns the current key's list (nil if empty). It is the stored list:
// read it, do not change it (appending to it is safe).
func (s *ListState[T]) Get() []T {
	cur := s.inst.currentKey("state")
	return s.s.Get(cur.keyGroup, cur.key, defaultNamespace)
}

// Add appends v to the current key's list.
func (s *ListState[T]) Add(v T) {
	cur := s.inst.currentKey("state")
	s.s.Add(cur.keyGroup, cur.key, defaultNamespace, v)
}

// Update replaces the current key's list with a copy of vs; an empty vs
// clears it.
func (s *ListState[T]) Update(vs []T) {
	cur := s.inst.currentKey("state")
	s.s.Update(cur.keyGroup, cur.key, defaultNamespace, vs)
}

// Clear empties the current key's list.
func (s *ListState[T]) Clear() {
	cur := s.inst.currentKey("state")
	s.s.Clear(cur.keyGroup, cur.key, defaultNamespace)
}

// MapState is a map per key.
type MapState[K comparable, V any] struct {
	s    *statestore.MapState[K, V]
	inst *Instance
}

// Map declares a MapState named name. Map keys and values must encode to
// JSON (checkpoints store them that way).
func Map[K comparable, V any](oc *OpenContext, name string) *MapState[K, V] {
	return &MapState[K, V]{s: declare(oc, "map", name, statestore.OpenMap[K, V]), inst: oc.inst}
}

// Get returns the value of k in the current key's map.
func (s *MapState[K, V]) Get(k K) (V, bool) {
	cur := s.inst.currentKey("state")
	return s.s.Get(cur.keyGroup, cur.key, defaultNamespace, k)
}

// Put sets k to v in the current key's map.
func (s *MapState[K, V]) Put(k K, v V) {
	cur := s.inst.currentKey("state")
	s.s.Put(cur.keyGroup, cur.key, defaultNamespace, k, v)
}

// Delete removes k from the current key's map.
func (s *MapState[K, V]) Delete(k K) {
	cur := s.inst.currentKey("state")
	s.s.Delete(cur.keyGroup, cur.key, defaultNamespace, k)
}

// Len returns the number of entries in the current key's map.
func (s *MapState[K, V]) Len() int {
	cur := s.inst.currentKey("state")
	return s.s.Len(cur.keyGroup, cur.key, defaultNamespace)
}

// All iterates over the current key's map in no particular order. The loop
// may Delete the entry it is at.
func (s *MapState[K, V]) All() iter.Seq2[K, V] {
	cur := s.inst.currentKey("state")
	return s.s.All(cur.keyGroup, cur.key, defaultNamespace)
}

// Keys iterates over the current key's map keys in no particular order.
func (s *MapState[K, V]) Keys() iter.Seq[K] {
	all := s.All()
	return func(yield func(K) bool) {
		for k := range all {
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
	s.s.Clear(cur.keyGroup, cur.key, defaultNamespace)
}
