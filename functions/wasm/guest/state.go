package guest

import (
	"fmt"
	"iter"
)

// Every state method works on the key of the row or timer being
// processed and takes an optional namespace (the NS forms): bytes that
// scope state below the key, as a window's start scopes its accumulators.
// The plain forms use the empty namespace. Using state outside
// ProcessElement and OnTimer panics.

// stateRef is what every state kind holds: the id the host gave it.
type stateRef struct {
	r    *runtime
	id   int32
	kind string
	name string
}

func declare(oc *OpenContext, kind int32, what, name string) stateRef {
	if oc.done {
		panic(fmt.Sprintf("guest: %s state %q declared after Open returned: declare state in Open", what, name))
	}
	id := oc.r.h.state(kind, name)
	if id < 0 {
		panic(fmt.Sprintf("guest: declare %s state %q: the host returned %d", what, name, id))
	}
	return stateRef{r: oc.r, id: id, kind: what, name: name}
}

func (s *stateRef) handle() int32 { return s.r.handle("state") }

func (s *stateRef) decodeFailed(err error) {
	panic(fmt.Sprintf("guest: %s state %q: %v", s.kind, s.name, err))
}

// ValueState is one value per key (and namespace).
type ValueState[T any] struct {
	stateRef
	c Codec[T]
}

// Value declares a ValueState named name, encoded with DefaultCodec.
// Declaring the same name twice gives the same state.
func Value[T any](oc *OpenContext, name string) *ValueState[T] {
	return ValueWith(oc, name, DefaultCodec[T]())
}

// ValueWith declares a ValueState named name whose values c encodes.
func ValueWith[T any](oc *OpenContext, name string, c Codec[T]) *ValueState[T] {
	return &ValueState[T]{stateRef: declare(oc, kindValue, "value", name), c: c}
}

// Value returns the current key's value, and false if it has none.
func (s *ValueState[T]) Value() (T, bool) { return s.ValueNS("") }

// ValueNS returns the current key's value in namespace ns.
func (s *ValueState[T]) ValueNS(ns string) (T, bool) {
	h, r := s.handle(), s.r
	b, ok := readInto(&r.obuf, func(out []byte) int32 { return r.h.valueGet(s.id, h, ns, out) })
	if !ok {
		var zero T
		return zero, false
	}
	v, err := s.c.Decode(b)
	if err != nil {
		s.decodeFailed(err)
	}
	return v, true
}

// Update sets the current key's value.
func (s *ValueState[T]) Update(v T) { s.UpdateNS("", v) }

// UpdateNS sets the current key's value in namespace ns.
func (s *ValueState[T]) UpdateNS(ns string, v T) {
	h, r := s.handle(), s.r
	r.vbuf = s.c.Append(r.vbuf[:0], v)
	r.h.valuePut(s.id, h, ns, r.vbuf)
}

// Clear removes the current key's value.
func (s *ValueState[T]) Clear() { s.ClearNS("") }

// ClearNS removes the current key's value in namespace ns.
func (s *ValueState[T]) ClearNS(ns string) { s.r.h.valueDelete(s.id, s.handle(), ns) }

// ListState is a list of values per key (and namespace).
type ListState[T any] struct {
	stateRef
	c Codec[T]
}

// List declares a ListState named name, encoded with DefaultCodec.
func List[T any](oc *OpenContext, name string) *ListState[T] {
	return ListWith(oc, name, DefaultCodec[T]())
}

// ListWith declares a ListState named name whose elements c encodes.
func ListWith[T any](oc *OpenContext, name string, c Codec[T]) *ListState[T] {
	return &ListState[T]{stateRef: declare(oc, kindList, "list", name), c: c}
}

// Get returns the current key's list, nil if it is empty.
func (s *ListState[T]) Get() []T { return s.GetNS("") }

// GetNS returns the current key's list in namespace ns.
func (s *ListState[T]) GetNS(ns string) []T {
	var vs []T
	for v := range s.AllNS(ns) {
		vs = append(vs, v)
	}
	return vs
}

// All iterates over the current key's list in order.
func (s *ListState[T]) All() iter.Seq[T] { return s.AllNS("") }

// AllNS iterates over the current key's list in namespace ns, as it was
// when the loop started.
func (s *ListState[T]) AllNS(ns string) iter.Seq[T] {
	return func(yield func(T) bool) {
		h, r := s.handle(), s.r
		buf := r.takeBuf()
		defer r.giveBuf(buf)
		b, ok := readInto(buf, func(out []byte) int32 { return r.h.listGet(s.id, h, ns, out) })
		if !ok {
			return
		}
		for len(b) > 0 {
			elem, rest, err := lengthPrefixed(b)
			if err != nil {
				s.decodeFailed(err)
			}
			b = rest
			v, err := s.c.Decode(elem)
			if err != nil {
				s.decodeFailed(err)
			}
			if !yield(v) {
				return
			}
		}
	}
}

// Add appends v to the current key's list.
func (s *ListState[T]) Add(v T) { s.AddNS("", v) }

// AddNS appends v to the current key's list in namespace ns.
func (s *ListState[T]) AddNS(ns string, v T) {
	h, r := s.handle(), s.r
	r.vbuf = s.c.Append(r.vbuf[:0], v)
	r.h.listAdd(s.id, h, ns, r.vbuf)
}

// Update replaces the current key's list with vs; an empty vs clears it.
func (s *ListState[T]) Update(vs []T) { s.UpdateNS("", vs) }

// UpdateNS replaces the current key's list in namespace ns with vs.
func (s *ListState[T]) UpdateNS(ns string, vs []T) {
	s.ClearNS(ns)
	for _, v := range vs {
		s.AddNS(ns, v)
	}
}

// Clear empties the current key's list.
func (s *ListState[T]) Clear() { s.ClearNS("") }

// ClearNS empties the current key's list in namespace ns.
func (s *ListState[T]) ClearNS(ns string) { s.r.h.listClear(s.id, s.handle(), ns) }

// MapState is a map per key (and namespace).
type MapState[K comparable, V any] struct {
	stateRef
	kc Codec[K]
	vc Codec[V]
}

// Map declares a MapState named name, keys and values encoded with
// DefaultCodec.
func Map[K comparable, V any](oc *OpenContext, name string) *MapState[K, V] {
	return MapWith(oc, name, DefaultCodec[K](), DefaultCodec[V]())
}

// MapWith declares a MapState named name whose keys kc and values vc
// encode. Equal keys must encode to equal bytes.
func MapWith[K comparable, V any](oc *OpenContext, name string, kc Codec[K], vc Codec[V]) *MapState[K, V] {
	return &MapState[K, V]{stateRef: declare(oc, kindMap, "map", name), kc: kc, vc: vc}
}

// Get returns the value of k in the current key's map.
func (s *MapState[K, V]) Get(k K) (V, bool) { return s.GetNS("", k) }

// GetNS returns the value of k in the current key's map in namespace ns.
func (s *MapState[K, V]) GetNS(ns string, k K) (V, bool) {
	h, r := s.handle(), s.r
	r.kbuf = s.kc.Append(r.kbuf[:0], k)
	b, ok := readInto(&r.obuf, func(out []byte) int32 { return r.h.mapGet(s.id, h, ns, r.kbuf, out) })
	if !ok {
		var zero V
		return zero, false
	}
	v, err := s.vc.Decode(b)
	if err != nil {
		s.decodeFailed(err)
	}
	return v, true
}

// Put sets k to v in the current key's map.
func (s *MapState[K, V]) Put(k K, v V) { s.PutNS("", k, v) }

// PutNS sets k to v in the current key's map in namespace ns.
func (s *MapState[K, V]) PutNS(ns string, k K, v V) {
	h, r := s.handle(), s.r
	r.kbuf = s.kc.Append(r.kbuf[:0], k)
	r.vbuf = s.vc.Append(r.vbuf[:0], v)
	r.h.mapPut(s.id, h, ns, r.kbuf, r.vbuf)
}

// Delete removes k from the current key's map.
func (s *MapState[K, V]) Delete(k K) { s.DeleteNS("", k) }

// DeleteNS removes k from the current key's map in namespace ns.
func (s *MapState[K, V]) DeleteNS(ns string, k K) {
	h, r := s.handle(), s.r
	r.kbuf = s.kc.Append(r.kbuf[:0], k)
	r.h.mapDelete(s.id, h, ns, r.kbuf)
}

// Len returns the number of entries in the current key's map.
func (s *MapState[K, V]) Len() int { return s.LenNS("") }

// LenNS returns the number of entries in the current key's map in
// namespace ns.
func (s *MapState[K, V]) LenNS(ns string) int {
	n := 0
	s.entries(ns, func(_, _ []byte) bool { n++; return true })
	return n
}

// All iterates over the current key's map in no particular order.
func (s *MapState[K, V]) All() iter.Seq2[K, V] { return s.AllNS("") }

// AllNS iterates over the current key's map in namespace ns, in no
// particular order, as it was when the loop started: the loop may change
// the map (Delete the entry it is at, say).
func (s *MapState[K, V]) AllNS(ns string) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		s.entries(ns, func(kb, vb []byte) bool {
			k, err := s.kc.Decode(kb)
			if err != nil {
				s.decodeFailed(err)
			}
			v, err := s.vc.Decode(vb)
			if err != nil {
				s.decodeFailed(err)
			}
			return yield(k, v)
		})
	}
}

// Keys iterates over the current key's map keys in no particular order.
func (s *MapState[K, V]) Keys() iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range s.All() {
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
func (s *MapState[K, V]) Clear() { s.ClearNS("") }

// ClearNS empties the current key's map in namespace ns.
func (s *MapState[K, V]) ClearNS(ns string) { s.r.h.mapClear(s.id, s.handle(), ns) }

// entries calls fn with the encoded key and value of each entry of the
// current key's map in namespace ns until fn returns false.
func (s *MapState[K, V]) entries(ns string, fn func(k, v []byte) bool) {
	h, r := s.handle(), s.r
	buf := r.takeBuf()
	defer r.giveBuf(buf)
	b, ok := readInto(buf, func(out []byte) int32 { return r.h.mapEntries(s.id, h, ns, out) })
	if !ok {
		return
	}
	for len(b) > 0 {
		k, rest, err := lengthPrefixed(b)
		if err != nil {
			s.decodeFailed(err)
		}
		v, rest, err := lengthPrefixed(rest)
		if err != nil {
			s.decodeFailed(err)
		}
		b = rest
		if !fn(k, v) {
			return
		}
	}
}

// lengthPrefixed splits an `i32 len, bytes` element off b.
func lengthPrefixed(b []byte) (elem, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("truncated element length (%d bytes left)", len(b))
	}
	n := int32(le.Uint32(b))
	if n < 0 || int(n) > len(b)-4 {
		return nil, nil, fmt.Errorf("element length %d with %d bytes left", n, len(b)-4)
	}
	return b[4 : 4+n], b[4+n:], nil
}

// readInto calls get with *buf at its full capacity until the result
// fits, growing *buf, and returns the bytes, or false when get reports
// none (-1).
func readInto(buf *[]byte, get func(out []byte) int32) ([]byte, bool) {
	for {
		n := get((*buf)[:cap(*buf)])
		if n < 0 {
			return nil, false
		}
		if int(n) <= cap(*buf) {
			return (*buf)[:n], true
		}
		*buf = make([]byte, 0, max(int(n), 2*cap(*buf)))
	}
}
