package arrowfmt

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Key encoding. A key is the concatenation of its column values, each
//
//	0x00                      null
//	0x01 <8 bytes>            int64 or timestamp_ms: big-endian, sign bit flipped
//	0x01 <8 bytes>            float64: big-endian, ordered (IEEE bits, negatives inverted)
//	0x01 <1 byte>             bool: 0 or 1
//	0x01 <uvarint n> <n bytes> string
//
// Given the column types the encoding is unambiguous, so two keys are equal
// exactly when their encodings are. Fixed-width values sort like the values.
// As for hashing, -0 encodes as 0 and every NaN as one NaN.
const (
	keyNull    byte = 0
	keyPresent byte = 1
)

// KeyString returns the encoded key of row over the key columns cols, for
// use as a Go map key of keyed state. It panics if a key column has a type
// other than those of Type.
func KeyString(rec arrow.RecordBatch, cols []int, row int) string {
	var buf [64]byte
	return string(AppendRowKey(buf[:0], rec, cols, row))
}

// AppendRowKey appends the encoded key of row to dst. Looking a key up with
// m[string(AppendRowKey(buf[:0], ...))] does not allocate.
func AppendRowKey(dst []byte, rec arrow.RecordBatch, cols []int, row int) []byte {
	for _, c := range cols {
		col := rec.Column(c)
		if col.IsNull(row) {
			dst = append(dst, keyNull)
			continue
		}
		switch a := col.(type) {
		case *array.Int64:
			dst = appendKeyInt(dst, a.Value(row))
		case *array.Timestamp:
			dst = appendKeyInt(dst, int64(a.Value(row)))
		case *array.Float64:
			dst = appendKeyFloat(dst, a.Value(row))
		case *array.Boolean:
			dst = appendKeyBool(dst, a.Value(row))
		case *array.String:
			dst = appendKeyString(dst, a.Value(row))
		default:
			panic(fmt.Sprintf("arrowfmt: key column of type %v", col.DataType()))
		}
	}
	return dst
}

// AppendKey appends the encoding of a key whose column values are vals to
// dst, identical to what AppendRowKey gives for a row holding them. vals
// are int64 or int (int64 and timestamp columns), float64, string, bool,
// time.Time (timestamp columns, truncated to milliseconds) or nil (null); it
// panics on any other type.
func AppendKey(dst []byte, vals ...any) []byte {
	for _, v := range vals {
		switch v := v.(type) {
		case nil:
			dst = append(dst, keyNull)
		case int64:
			dst = appendKeyInt(dst, v)
		case int:
			dst = appendKeyInt(dst, int64(v))
		case int32:
			dst = appendKeyInt(dst, int64(v))
		case time.Time:
			dst = appendKeyInt(dst, v.UnixMilli())
		case arrow.Timestamp:
			dst = appendKeyInt(dst, int64(v))
		case float64:
			dst = appendKeyFloat(dst, v)
		case bool:
			dst = appendKeyBool(dst, v)
		case string:
			dst = appendKeyString(dst, v)
		default:
			panic(fmt.Sprintf("arrowfmt: key value of type %T", v))
		}
	}
	return dst
}

func appendKeyInt(dst []byte, v int64) []byte {
	dst = append(dst, keyPresent)
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

func appendKeyFloat(dst []byte, f float64) []byte {
	b := floatBits(f)
	if b&(1<<63) != 0 {
		b = ^b
	} else {
		b |= 1 << 63
	}
	dst = append(dst, keyPresent)
	return binary.BigEndian.AppendUint64(dst, b)
}

func appendKeyBool(dst []byte, v bool) []byte {
	return append(dst, keyPresent, byte(boolBits(v)))
}

func appendKeyString(dst []byte, s string) []byte {
	dst = append(dst, keyPresent)
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// DecodeKeyString returns the values of an encoded key whose columns have
// types: int64, float64, string, bool, time.Time (UTC) or nil for null, as
// Value returns them.
func DecodeKeyString(s string, types []Type) ([]any, error) {
	vals := make([]any, len(types))
	for i, t := range types {
		if len(s) == 0 {
			return nil, fmt.Errorf("arrowfmt: decode key: truncated at column %d of %d", i, len(types))
		}
		tag := s[0]
		s = s[1:]
		if tag == keyNull {
			continue
		}
		if tag != keyPresent {
			return nil, fmt.Errorf("arrowfmt: decode key: bad tag %#x at column %d", tag, i)
		}
		switch t {
		case Int64, TimestampMs, Float64:
			if len(s) < 8 {
				return nil, fmt.Errorf("arrowfmt: decode key: truncated %s at column %d", t, i)
			}
			b := binary.BigEndian.Uint64([]byte(s[:8]))
			s = s[8:]
			switch t {
			case Int64:
				vals[i] = int64(b ^ (1 << 63))
			case TimestampMs:
				vals[i] = time.UnixMilli(int64(b ^ (1 << 63))).UTC()
			default:
				if b&(1<<63) != 0 {
					b &^= 1 << 63
				} else {
					b = ^b
				}
				vals[i] = math.Float64frombits(b)
			}
		case Bool:
			if len(s) < 1 || s[0] > 1 {
				return nil, fmt.Errorf("arrowfmt: decode key: bad bool at column %d", i)
			}
			vals[i] = s[0] == 1
			s = s[1:]
		case String:
			n, w := binary.Uvarint([]byte(s[:min(len(s), binary.MaxVarintLen64)]))
			if w <= 0 || n > uint64(len(s)-w) {
				return nil, fmt.Errorf("arrowfmt: decode key: bad string length at column %d", i)
			}
			vals[i] = s[w : w+int(n)]
			s = s[w+int(n):]
		default:
			return nil, fmt.Errorf("arrowfmt: decode key: %w %q at column %d", ErrUnknownType, t, i)
		}
	}
	if len(s) != 0 {
		return nil, fmt.Errorf("arrowfmt: decode key: %d trailing bytes", len(s))
	}
	return vals, nil
}

// Int64Key returns the value of key, the encoding (AppendRowKey) of one
// Int64 or TimestampMs column, and false if it is null (or not of one
// such column; the caller knows the key's types, as AppendKeyValues's
// does). It is AppendKeyValues for such keys without a builder: a
// caller with many decodes them all, then appends them at once.
func Int64Key(key string) (int64, bool) {
	if len(key) != 9 || key[0] != keyPresent {
		return 0, false
	}
	u := uint64(key[1])<<56 | uint64(key[2])<<48 | uint64(key[3])<<40 | uint64(key[4])<<32 |
		uint64(key[5])<<24 | uint64(key[6])<<16 | uint64(key[7])<<8 | uint64(key[8])
	return int64(u ^ (1 << 63)), true
}

// AppendKeyValues appends the column values of an encoded key (as
// AppendRowKey makes it, of columns of types) to bs, one builder per
// column, of the column's Arrow type. Keyed state can then keep a key as
// its encoding alone and still emit its typed values. A float64 comes
// back canonical, as it was hashed and compared: -0 as 0, every NaN as one
// NaN.
func AppendKeyValues(bs []array.Builder, key string, types []Type) error {
	s := key
	for i, t := range types {
		if len(s) == 0 {
			return fmt.Errorf("arrowfmt: decode key: truncated at column %d of %d", i, len(types))
		}
		tag := s[0]
		s = s[1:]
		if tag == keyNull {
			bs[i].AppendNull()
			continue
		}
		if tag != keyPresent {
			return fmt.Errorf("arrowfmt: decode key: bad tag %#x at column %d", tag, i)
		}
		switch t {
		case Int64, TimestampMs, Float64:
			if len(s) < 8 {
				return fmt.Errorf("arrowfmt: decode key: truncated %s at column %d", t, i)
			}
			u := uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
				uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8 | uint64(s[7])
			s = s[8:]
			switch b := bs[i].(type) {
			case *array.Int64Builder:
				b.Append(int64(u ^ (1 << 63)))
			case *array.TimestampBuilder:
				b.Append(arrow.Timestamp(int64(u ^ (1 << 63))))
			case *array.Float64Builder:
				if u&(1<<63) != 0 {
					u &^= 1 << 63
				} else {
					u = ^u
				}
				b.Append(math.Float64frombits(u))
			default:
				return fmt.Errorf("arrowfmt: decode key: column %d is %s, the builder %T", i, t, bs[i])
			}
		case Bool:
			if len(s) < 1 || s[0] > 1 {
				return fmt.Errorf("arrowfmt: decode key: bad bool at column %d", i)
			}
			b, ok := bs[i].(*array.BooleanBuilder)
			if !ok {
				return fmt.Errorf("arrowfmt: decode key: column %d is %s, the builder %T", i, t, bs[i])
			}
			b.Append(s[0] == 1)
			s = s[1:]
		case String:
			n, w := uvarintString(s)
			if w <= 0 || n > uint64(len(s)-w) {
				return fmt.Errorf("arrowfmt: decode key: bad string length at column %d", i)
			}
			b, ok := bs[i].(*array.StringBuilder)
			if !ok {
				return fmt.Errorf("arrowfmt: decode key: column %d is %s, the builder %T", i, t, bs[i])
			}
			b.Append(s[w : w+int(n)])
			s = s[w+int(n):]
		default:
			return fmt.Errorf("arrowfmt: decode key: %w %q at column %d", ErrUnknownType, t, i)
		}
	}
	if len(s) != 0 {
		return fmt.Errorf("arrowfmt: decode key: %d trailing bytes", len(s))
	}
	return nil
}

// uvarintString is binary.Uvarint of the start of s, without a copy.
func uvarintString(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -(i + 1) // overflow
			}
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}
