package statestore

import (
	"iter"
	"slices"
)

// The kinds of keyed state, as Flink has them, over a Backend's tables.
// Each is scoped like a Table entry, to (key group, key, namespace), and
// is one table entry per scope, so changing it marks that scope dirty and
// snapshots carry it as one row. A value is a Table itself.

// ListState is a list of values per scope, in one Table[[]V].
type ListState[V any] struct{ t Table[[]V] }

// OpenList returns list state name of b (see OpenTable).
func OpenList[V any](b Backend, name string) (*ListState[V], error) {
	t, err := OpenTable[[]V](b, name, nil)
	if err != nil {
		return nil, err
	}
	return &ListState[V]{t: t}, nil
}

// Get returns the list at the scope (nil if empty). It is the stored
// list: read it, do not change it (appending to it is safe).
func (s *ListState[V]) Get(kg int, key, ns string) []V {
	l, _ := s.t.Get(kg, key, ns)
	return l[:len(l):len(l)]
}

// Add appends v to the list at the scope.
func (s *ListState[V]) Add(kg int, key, ns string, v V) {
	l, _ := s.t.Get(kg, key, ns)
	s.t.Put(kg, key, ns, append(l, v))
}

// Update replaces the list at the scope with a copy of vs; an empty vs
// clears it.
func (s *ListState[V]) Update(kg int, key, ns string, vs []V) {
	if len(vs) == 0 {
		s.t.Delete(kg, key, ns)
		return
	}
	s.t.Put(kg, key, ns, slices.Clone(vs))
}

// Clear empties the list at the scope.
func (s *ListState[V]) Clear(kg int, key, ns string) { s.t.Delete(kg, key, ns) }

// MapState is a map per scope, in one Table[map[K]V] with MapCodec: keys
// and values must encode to JSON.
type MapState[K comparable, V any] struct{ t Table[map[K]V] }

// OpenMap returns map state name of b (see OpenTable).
func OpenMap[K comparable, V any](b Backend, name string) (*MapState[K, V], error) {
	t, err := OpenTable(b, name, Codec[map[K]V](MapCodec[K, V]{}))
	if err != nil {
		return nil, err
	}
	return &MapState[K, V]{t: t}, nil
}

// Get returns the value of k in the map at the scope.
func (s *MapState[K, V]) Get(kg int, key, ns string, k K) (V, bool) {
	m, _ := s.t.Get(kg, key, ns)
	v, ok := m[k]
	return v, ok
}

// Put sets k to v in the map at the scope.
func (s *MapState[K, V]) Put(kg int, key, ns string, k K, v V) {
	m, _ := s.t.Get(kg, key, ns)
	if m == nil {
		m = map[K]V{}
	}
	m[k] = v
	s.t.Put(kg, key, ns, m) // marks it changed
}

// Delete removes k from the map at the scope; the last one removes the
// entry.
func (s *MapState[K, V]) Delete(kg int, key, ns string, k K) {
	m, _ := s.t.Get(kg, key, ns)
	if _, ok := m[k]; !ok {
		return
	}
	if len(m) == 1 {
		s.t.Delete(kg, key, ns)
		return
	}
	delete(m, k)
	s.t.Put(kg, key, ns, m)
}

// Len returns the number of entries in the map at the scope.
func (s *MapState[K, V]) Len(kg int, key, ns string) int {
	m, _ := s.t.Get(kg, key, ns)
	return len(m)
}

// All iterates over the map at the scope in no particular order. The
// loop may Delete the entry it is at.
func (s *MapState[K, V]) All(kg int, key, ns string) iter.Seq2[K, V] {
	m, _ := s.t.Get(kg, key, ns)
	return func(yield func(K, V) bool) {
		for k, v := range m {
			if !yield(k, v) {
				return
			}
		}
	}
}

// Clear empties the map at the scope.
func (s *MapState[K, V]) Clear(kg int, key, ns string) { s.t.Delete(kg, key, ns) }

// ReducingState folds the values added at a scope into one with reduce,
// kept in one Table[V].
type ReducingState[V any] struct {
	t      Table[V]
	reduce func(acc, v V) V
}

// OpenReducing returns reducing state name of b (see OpenTable); reduce
// combines the value so far with an added one.
func OpenReducing[V any](b Backend, name string, reduce func(acc, v V) V) (*ReducingState[V], error) {
	t, err := OpenTable[V](b, name, nil)
	if err != nil {
		return nil, err
	}
	return &ReducingState[V]{t: t, reduce: reduce}, nil
}

// Get returns the reduced value at the scope, false if nothing was added.
func (s *ReducingState[V]) Get(kg int, key, ns string) (V, bool) { return s.t.Get(kg, key, ns) }

// Add folds v into the value at the scope (the first v is kept as it is).
func (s *ReducingState[V]) Add(kg int, key, ns string, v V) {
	if acc, ok := s.t.Get(kg, key, ns); ok {
		v = s.reduce(acc, v)
	}
	s.t.Put(kg, key, ns, v)
}

// Clear drops the value at the scope.
func (s *ReducingState[V]) Clear(kg int, key, ns string) { s.t.Delete(kg, key, ns) }

// Aggregator is what an AggregatingState folds with: inputs IN go into an
// accumulator ACC, whose result is OUT.
type Aggregator[IN, ACC, OUT any] interface {
	// New returns an empty accumulator.
	New() ACC
	// Add folds in into acc and returns the accumulator.
	Add(acc ACC, in IN) ACC
	// Result returns the result of acc.
	Result(acc ACC) OUT
}

// AggregatingState folds the inputs added at a scope into an accumulator,
// kept in one Table[ACC] (the accumulator's codec: codec, or
// DefaultCodec).
type AggregatingState[IN, ACC, OUT any] struct {
	t   Table[ACC]
	agg Aggregator[IN, ACC, OUT]
}

// OpenAggregating returns aggregating state name of b (see OpenTable).
func OpenAggregating[IN, ACC, OUT any](b Backend, name string, agg Aggregator[IN, ACC, OUT], codec Codec[ACC]) (*AggregatingState[IN, ACC, OUT], error) {
	t, err := OpenTable(b, name, codec)
	if err != nil {
		return nil, err
	}
	return &AggregatingState[IN, ACC, OUT]{t: t, agg: agg}, nil
}

// Get returns the result at the scope, false if nothing was added.
func (s *AggregatingState[IN, ACC, OUT]) Get(kg int, key, ns string) (OUT, bool) {
	acc, ok := s.t.Get(kg, key, ns)
	if !ok {
		var out OUT
		return out, false
	}
	return s.agg.Result(acc), true
}

// Add folds in into the accumulator at the scope.
func (s *AggregatingState[IN, ACC, OUT]) Add(kg int, key, ns string, in IN) {
	acc, ok := s.t.Get(kg, key, ns)
	if !ok {
		acc = s.agg.New()
	}
	s.t.Put(kg, key, ns, s.agg.Add(acc, in))
}

// Clear drops the accumulator at the scope.
func (s *AggregatingState[IN, ACC, OUT]) Clear(kg int, key, ns string) { s.t.Delete(kg, key, ns) }
