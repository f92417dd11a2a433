package arrowfmt

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cespare/xxhash/v2"
)

// DefaultMaxParallelism is the number of key groups of a job unless its spec
// says otherwise. It bounds the parallelism of keyed operators and is fixed
// for a job's life.
const DefaultMaxParallelism = 128

// Key hashing. The hash of a key is a fold over its columns,
//
//	h = hashSeed
//	h = fmix64(h*prime ^ v)  for each column value v
//
// where v is the value's bits for fixed-width types (int64, float64 with -0
// and NaN canonicalised, bool as 0/1, timestamps as milliseconds), the xxhash64
// of the bytes for strings, and nullHash for a null. fmix64 (murmur3's
// finaliser) and multiplication by an odd prime are bijections, so every
// column influences every bit. Nothing is seeded at random: a key hashes the
// same in every process and run, which is what routes it to the same key
// group everywhere. Changing this changes which subtask owns which key and
// invalidates existing snapshots.
const (
	hashSeed  uint64 = 0x9e3779b97f4a7c15
	hashPrime uint64 = 0x9e3779b185ebca87 // xxhash64 PRIME64_1
	nullHash  uint64 = 0xc2b2ae3d27d4eb4f // a null differs from 0, "" and false
)

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

func combine(h, v uint64) uint64 { return fmix64(h*hashPrime ^ v) }

// floatBits returns the bits of f with -0 turned into 0 and every NaN into
// one NaN, so values that are equal as keys hash and encode equally.
func floatBits(f float64) uint64 {
	switch {
	case f == 0:
		return 0
	case f != f:
		return 0x7ff8000000000001
	}
	return math.Float64bits(f)
}

func boolBits(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// HashKeys returns the key hash of every row of rec over the key columns
// cols, in order, reusing out if it has room. Equal keys hash equally in
// every process; see HashKeyValues for the same hash from Go values. It
// panics if a key column has a type other than those of Type.
func HashKeys(rec arrow.RecordBatch, cols []int, out []uint64) []uint64 {
	n := int(rec.NumRows())
	if cap(out) < n {
		out = make([]uint64, n)
	}
	out = out[:n]
	for i := range out {
		out[i] = hashSeed
	}
	for _, c := range cols {
		hashColumn(rec.Column(c), out)
	}
	return out
}

func hashColumn(col arrow.Array, out []uint64) {
	switch a := col.(type) {
	case *array.Int64:
		hashInt64s(a, a.Int64Values(), out)
	case *array.Timestamp:
		hashInt64s(a, timestampsAsInt64s(a.TimestampValues()), out)
	case *array.Float64:
		vals := a.Float64Values()[:len(out)]
		for i, v := range vals {
			if a.IsNull(i) {
				out[i] = combine(out[i], nullHash)
			} else {
				out[i] = combine(out[i], floatBits(v))
			}
		}
	case *array.Boolean:
		for i := range out {
			if a.IsNull(i) {
				out[i] = combine(out[i], nullHash)
			} else {
				out[i] = combine(out[i], boolBits(a.Value(i)))
			}
		}
	case *array.String:
		for i := range out {
			if a.IsNull(i) {
				out[i] = combine(out[i], nullHash)
			} else {
				out[i] = combine(out[i], xxhash.Sum64String(a.Value(i)))
			}
		}
	default:
		panic(fmt.Sprintf("arrowfmt: hash key column of type %v", col.DataType()))
	}
}

func hashInt64s(a arrow.Array, vals []int64, out []uint64) {
	vals = vals[:len(out)]
	if a.NullN() == 0 {
		for i, v := range vals {
			out[i] = combine(out[i], uint64(v))
		}
		return
	}
	for i, v := range vals {
		if a.IsNull(i) {
			out[i] = combine(out[i], nullHash)
		} else {
			out[i] = combine(out[i], uint64(v))
		}
	}
}

func timestampsAsInt64s(ts []arrow.Timestamp) []int64 {
	return arrow.Int64Traits.CastFromBytes(arrow.TimestampTraits.CastToBytes(ts))
}

// HashKeyValues returns the hash HashKeys gives a row whose key columns hold
// vals: int64 or int (int64 and timestamp columns), float64, string, bool,
// time.Time (timestamp columns, truncated to milliseconds) or nil (null).
// It panics on any other type.
func HashKeyValues(vals ...any) uint64 {
	h := hashSeed
	for _, v := range vals {
		h = combine(h, valueHash(v))
	}
	return h
}

func valueHash(v any) uint64 {
	switch v := v.(type) {
	case nil:
		return nullHash
	case int64:
		return uint64(v)
	case int:
		return uint64(int64(v))
	case int32:
		return uint64(int64(v))
	case float64:
		return floatBits(v)
	case string:
		return xxhash.Sum64String(v)
	case bool:
		return boolBits(v)
	case time.Time:
		return uint64(v.UnixMilli())
	case arrow.Timestamp:
		return uint64(v)
	}
	panic(fmt.Sprintf("arrowfmt: hash key value of type %T", v))
}

// KeyGroup returns the key group, in [0, maxParallelism), of a key hash.
// Every row of a keyed edge takes one; a power of two (the default, 128)
// takes a mask where another number takes a division.
func KeyGroup(hash uint64, maxParallelism int) int {
	if m := uint64(maxParallelism); m&(m-1) == 0 {
		return int(hash & (m - 1))
	}
	return int(hash % uint64(maxParallelism))
}

// SubtaskForKeyGroup returns the subtask that owns key group kg when a
// vertex with maxParallelism key groups runs at parallelism subtasks
// (Flink's formula; 0 < parallelism <= maxParallelism). As in KeyGroup,
// a power of two takes a shift.
func SubtaskForKeyGroup(kg, maxParallelism, parallelism int) int {
	if maxParallelism&(maxParallelism-1) == 0 {
		return kg * parallelism >> bits.TrailingZeros(uint(maxParallelism))
	}
	return kg * parallelism / maxParallelism
}

// KeyGroupRange returns the key groups [start, end) that subtask owns:
// [ceil(i*K/p), ceil((i+1)*K/p)). The ranges of subtasks 0..p-1 tile
// [0, K) in order and agree with SubtaskForKeyGroup.
func KeyGroupRange(subtask, maxParallelism, parallelism int) (start, end int) {
	k, p := maxParallelism, parallelism
	return (subtask*k + p - 1) / p, ((subtask+1)*k + p - 1) / p
}
