package guest

import (
	"encoding/json"
	"fmt"
	"math"
)

// Codec turns state values of type T into bytes and back. The host stores
// the bytes as they are.
type Codec[T any] interface {
	// Append appends the encoding of v to dst.
	Append(dst []byte, v T) []byte
	// Decode returns the value b encodes. b is valid only during the call.
	Decode(b []byte) (T, error)
}

// DefaultCodec returns the codec Value, List and Map use for T: 8 bytes
// little-endian for int64 and float64, the bytes themselves for string
// and []byte, one byte for bool, and encoding/json for every other type
// (named types included: give those a Codec of their own when speed
// matters).
func DefaultCodec[T any]() Codec[T] { return defaultCodec[T]{} }

type defaultCodec[T any] struct{}

func (defaultCodec[T]) Append(dst []byte, v T) []byte {
	switch p := any(&v).(type) {
	case *int64:
		return le.AppendUint64(dst, uint64(*p))
	case *float64:
		return le.AppendUint64(dst, math.Float64bits(*p))
	case *string:
		return append(dst, *p...)
	case *[]byte:
		return append(dst, *p...)
	case *bool:
		if *p {
			return append(dst, 1)
		}
		return append(dst, 0)
	}
	return appendJSON(dst, v)
}

// appendJSON and decodeJSON are apart from the codec's methods so that the
// values of the fixed-size types do not escape to the heap with them.
func appendJSON[T any](dst []byte, v T) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("guest: encode state value of type %T: %v", v, err))
	}
	return append(dst, b...)
}

func decodeJSON[T any](b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("decode %T state value: %w", v, err)
	}
	return v, nil
}

func sizeError(what string, n int) error {
	return fmt.Errorf("decode %s state value: %d bytes, want 8", what, n)
}

func (defaultCodec[T]) Decode(b []byte) (T, error) {
	var v T
	switch p := any(&v).(type) {
	case *int64:
		if len(b) != 8 {
			return v, sizeError("int64", len(b))
		}
		*p = int64(le.Uint64(b))
	case *float64:
		if len(b) != 8 {
			return v, sizeError("float64", len(b))
		}
		*p = math.Float64frombits(le.Uint64(b))
	case *string:
		*p = string(b)
	case *[]byte:
		*p = append([]byte(nil), b...)
	case *bool:
		if len(b) != 1 || b[0] > 1 {
			return v, fmt.Errorf("decode bool state value: %d bytes %x, want one byte 0 or 1", len(b), b)
		}
		*p = b[0] == 1
	default:
		return decodeJSON[T](b)
	}
	return v, nil
}
