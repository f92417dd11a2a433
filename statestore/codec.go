package statestore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// Codec turns a table's values into bytes and back. Snapshots use it;
// reads and writes of live state do not. Encodings are part of the snapshot
// format: a codec must decode what earlier versions of itself encoded.
type Codec[V any] interface {
	// Append appends the encoding of v to dst and returns the result.
	Append(dst []byte, v V) ([]byte, error)
	// Decode returns the value encoded in b. It does not keep b.
	Decode(b []byte) (V, error)
}

// Fast codecs for common value types.
var (
	Int64Codec   Codec[int64]   = int64Codec{}   // 8 bytes, little-endian
	Float64Codec Codec[float64] = float64Codec{} // IEEE 754 bits, 8 bytes, little-endian
	StringCodec  Codec[string]  = stringCodec{}  // the bytes of the string
	BoolCodec    Codec[bool]    = boolCodec{}    // one byte, 0 or 1
)

// DefaultCodec returns the fast codec for int64, float64, string and bool,
// and JSONCodec for any other type.
func DefaultCodec[V any]() Codec[V] {
	var c any
	switch any(*new(V)).(type) {
	case int64:
		c = Int64Codec
	case float64:
		c = Float64Codec
	case string:
		c = StringCodec
	case bool:
		c = BoolCodec
	default:
		return JSONCodec[V]{}
	}
	return c.(Codec[V])
}

type int64Codec struct{}

func (int64Codec) Append(dst []byte, v int64) ([]byte, error) {
	return binary.LittleEndian.AppendUint64(dst, uint64(v)), nil
}

func (int64Codec) Decode(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("statestore: decode int64: %d bytes, want 8", len(b))
	}
	return int64(binary.LittleEndian.Uint64(b)), nil
}

type float64Codec struct{}

func (float64Codec) Append(dst []byte, v float64) ([]byte, error) {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v)), nil
}

func (float64Codec) Decode(b []byte) (float64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("statestore: decode float64: %d bytes, want 8", len(b))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
}

type stringCodec struct{}

func (stringCodec) Append(dst []byte, v string) ([]byte, error) { return append(dst, v...), nil }
func (stringCodec) Decode(b []byte) (string, error)             { return string(b), nil }

type boolCodec struct{}

func (boolCodec) Append(dst []byte, v bool) ([]byte, error) {
	if v {
		return append(dst, 1), nil
	}
	return append(dst, 0), nil
}

func (boolCodec) Decode(b []byte) (bool, error) {
	if len(b) != 1 || b[0] > 1 {
		return false, fmt.Errorf("statestore: decode bool: want one byte 0 or 1, got %d bytes", len(b))
	}
	return b[0] == 1, nil
}

// JSONCodec encodes values with encoding/json: exported fields only, and
// what JSON cannot hold (NaN, infinities, channels, functions) is an error
// when a snapshot is taken.
type JSONCodec[V any] struct{}

// Append implements Codec.
func (JSONCodec[V]) Append(dst []byte, v V) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("statestore: encode %T as JSON: %w", v, err)
	}
	return append(dst, b...), nil
}

// Decode implements Codec.
func (JSONCodec[V]) Decode(b []byte) (V, error) {
	var v V
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("statestore: decode %T from JSON: %w", v, err)
	}
	return v, nil
}

// MapCodec encodes a map[K]V as a JSON array of [key, value] pairs sorted
// by the key's JSON, so any key type JSON can encode works (not only
// strings and integers) and equal maps encode to equal bytes.
type MapCodec[K comparable, V any] struct{}

// Append implements Codec.
func (MapCodec[K, V]) Append(dst []byte, m map[K]V) ([]byte, error) {
	type pair struct{ k, v []byte }
	pairs := make([]pair, 0, len(m))
	for k, v := range m {
		kb, err := json.Marshal(k)
		if err != nil {
			return dst, fmt.Errorf("statestore: encode map key %T as JSON: %w", k, err)
		}
		vb, err := json.Marshal(v)
		if err != nil {
			return dst, fmt.Errorf("statestore: encode map value %T as JSON: %w", v, err)
		}
		pairs = append(pairs, pair{kb, vb})
	}
	slices.SortFunc(pairs, func(a, b pair) int { return cmp.Or(bytes.Compare(a.k, b.k), bytes.Compare(a.v, b.v)) })
	dst = append(dst, '[')
	for i, p := range pairs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = append(dst, p.k...)
		dst = append(dst, ',')
		dst = append(dst, p.v...)
		dst = append(dst, ']')
	}
	return append(dst, ']'), nil
}

// Decode implements Codec.
func (MapCodec[K, V]) Decode(b []byte) (map[K]V, error) {
	var pairs [][2]json.RawMessage
	if err := json.Unmarshal(b, &pairs); err != nil {
		return nil, fmt.Errorf("statestore: decode map: %w", err)
	}
	m := make(map[K]V, len(pairs))
	for _, p := range pairs {
		var k K
		var v V
		if err := json.Unmarshal(p[0], &k); err != nil {
			return nil, fmt.Errorf("statestore: decode map key %T: %w", k, err)
		}
		if err := json.Unmarshal(p[1], &v); err != nil {
			return nil, fmt.Errorf("statestore: decode map value %T: %w", v, err)
		}
		m[k] = v
	}
	return m, nil
}
