package statestore

import "fmt"

// encodedValues is a Table[V] over an EncodedTable: values are encoded
// with the codec on Put and decoded on Get (ValueType.Encoded).
type encodedValues[V any] struct {
	t     EncodedTable
	codec Codec[V]
}

var _ Table[int64] = (*encodedValues[int64])(nil)

func (e *encodedValues[V]) Name() string    { return e.t.Name() }
func (e *encodedValues[V]) Codec() Codec[V] { return e.codec }

func (e *encodedValues[V]) decode(kg int, key, ns string, b []byte) V {
	v, err := e.codec.Decode(b)
	if err != nil {
		panic(fmt.Sprintf("statestore: table %q, key group %d, key %q, namespace %q: decode value: %v", e.t.Name(), kg, key, ns, err))
	}
	return v
}

func (e *encodedValues[V]) Get(kg int, key, ns string) (V, bool) {
	b, ok := e.t.Get(kg, key, ns)
	if !ok {
		var zero V
		return zero, false
	}
	return e.decode(kg, key, ns, b), true
}

func (e *encodedValues[V]) Put(kg int, key, ns string, v V) {
	b, err := e.codec.Append(nil, v)
	if err != nil {
		panic(fmt.Sprintf("statestore: table %q, key group %d, key %q, namespace %q: encode value: %v", e.t.Name(), kg, key, ns, err))
	}
	e.t.Put(kg, key, ns, b) // the table's now
}

func (e *encodedValues[V]) Delete(kg int, key, ns string) { e.t.Delete(kg, key, ns) }

func (e *encodedValues[V]) Range(kg int, fn func(key, ns string, v V) bool) {
	e.t.Range(kg, func(key, ns string, b []byte) bool { return fn(key, ns, e.decode(kg, key, ns, b)) })
}

func (e *encodedValues[V]) Len(kg int) int     { return e.t.Len(kg) }
func (e *encodedValues[V]) TakeDirty() []Scope { return e.t.TakeDirty() }
