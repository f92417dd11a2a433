package guest

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Key encoding tags (docs/wasm-abi.md, "The key encoding").
const (
	keyNull    = 0x00
	keyPresent = 0x01
)

// decodeKey appends to dst the values of the encoded key b whose columns
// have types: int64, float64, string, bool, time.Time (UTC) or nil for
// null.
func decodeKey(dst []any, b []byte, types []Type) ([]any, error) {
	for i, t := range types {
		if len(b) == 0 {
			return dst, fmt.Errorf("decode key: truncated at column %d of %d", i, len(types))
		}
		tag := b[0]
		b = b[1:]
		if tag == keyNull {
			dst = append(dst, nil)
			continue
		}
		if tag != keyPresent {
			return dst, fmt.Errorf("decode key: bad tag %#x at column %d", tag, i)
		}
		switch t {
		case Int64, TimestampMs, Float64:
			if len(b) < 8 {
				return dst, fmt.Errorf("decode key: truncated %s at column %d", t, i)
			}
			u := binary.BigEndian.Uint64(b)
			b = b[8:]
			switch t {
			case Int64:
				dst = append(dst, int64(u^(1<<63)))
			case TimestampMs:
				dst = append(dst, time.UnixMilli(int64(u^(1<<63))).UTC())
			default:
				if u&(1<<63) != 0 {
					u &^= 1 << 63
				} else {
					u = ^u
				}
				dst = append(dst, math.Float64frombits(u))
			}
		case Bool:
			if len(b) < 1 || b[0] > 1 {
				return dst, fmt.Errorf("decode key: bad bool at column %d", i)
			}
			dst = append(dst, b[0] == 1)
			b = b[1:]
		case String:
			n, w := binary.Uvarint(b)
			if w <= 0 || n > uint64(len(b)-w) {
				return dst, fmt.Errorf("decode key: bad string length at column %d", i)
			}
			dst = append(dst, string(b[w:w+int(n)]))
			b = b[w+int(n):]
		default:
			return dst, fmt.Errorf("decode key: unknown type %q at column %d", t, i)
		}
	}
	if len(b) != 0 {
		return dst, fmt.Errorf("decode key: %d trailing bytes", len(b))
	}
	return dst, nil
}
