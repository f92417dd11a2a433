package arrowfmt

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Builder builds record batches of one schema row by row (or column by
// column) with typed appenders that do not box values. A row is complete
// when a value (or null) was appended to every column; NewBatch panics if
// the columns have different lengths. A Builder is not safe for concurrent
// use; Release it when done.
//
// The typed appenders panic if the column has another type: that is a bug in
// the caller, not bad input. AppendAny is the checked, slow path.
type Builder struct {
	schema *arrow.Schema
	types  []Type // "" for a column of an unsupported Arrow type
	rb     *array.RecordBuilder
	cols   []array.Builder
	ints   []*array.Int64Builder
	floats []*array.Float64Builder
	strs   []*array.StringBuilder
	bools  []*array.BooleanBuilder
	times  []*array.TimestampBuilder
}

// NewBuilder returns a Builder for schema whose buffers come from mem.
func NewBuilder(schema *arrow.Schema, mem memory.Allocator) *Builder {
	n := schema.NumFields()
	b := &Builder{
		schema: schema,
		types:  make([]Type, n),
		rb:     array.NewRecordBuilder(mem, schema),
		ints:   make([]*array.Int64Builder, n),
		floats: make([]*array.Float64Builder, n),
		strs:   make([]*array.StringBuilder, n),
		bools:  make([]*array.BooleanBuilder, n),
		times:  make([]*array.TimestampBuilder, n),
	}
	b.cols = b.rb.Fields()
	for i, f := range b.cols {
		b.types[i], _ = TypeOf(schema.Field(i).Type)
		switch f := f.(type) {
		case *array.Int64Builder:
			b.ints[i] = f
		case *array.Float64Builder:
			b.floats[i] = f
		case *array.StringBuilder:
			b.strs[i] = f
		case *array.BooleanBuilder:
			b.bools[i] = f
		case *array.TimestampBuilder:
			b.times[i] = f
		}
	}
	return b
}

// Schema returns the schema of the batches b builds.
func (b *Builder) Schema() *arrow.Schema { return b.schema }

// Len returns the number of rows appended since the last NewBatch, counted
// on the first column.
func (b *Builder) Len() int {
	if len(b.cols) == 0 {
		return 0
	}
	return b.cols[0].Len()
}

// Reserve makes room for n more rows in every column.
func (b *Builder) Reserve(n int) { b.rb.Reserve(n) }

// Int64 appends v to the int64 column col.
func (b *Builder) Int64(col int, v int64) {
	if c := b.ints[col]; c != nil {
		c.Append(v)
		return
	}
	b.wrongType(col, Int64)
}

// Float64 appends v to the float64 column col.
func (b *Builder) Float64(col int, v float64) {
	if c := b.floats[col]; c != nil {
		c.Append(v)
		return
	}
	b.wrongType(col, Float64)
}

// String appends v to the string column col.
func (b *Builder) String(col int, v string) {
	if c := b.strs[col]; c != nil {
		c.Append(v)
		return
	}
	b.wrongType(col, String)
}

// Bool appends v to the bool column col.
func (b *Builder) Bool(col int, v bool) {
	if c := b.bools[col]; c != nil {
		c.Append(v)
		return
	}
	b.wrongType(col, Bool)
}

// TimestampMs appends ms, milliseconds since the Unix epoch, to the
// timestamp_ms column col.
func (b *Builder) TimestampMs(col int, ms int64) {
	if c := b.times[col]; c != nil {
		c.Append(arrow.Timestamp(ms))
		return
	}
	b.wrongType(col, TimestampMs)
}

// Null appends a null to column col.
func (b *Builder) Null(col int) { b.cols[col].AppendNull() }

func (b *Builder) wrongType(col int, t Type) {
	f := b.schema.Field(col)
	panic(fmt.Sprintf("arrowfmt: append %s to column %d %q of type %v", t, col, f.Name, f.Type))
}

// AppendAny appends v to column col, converting it from a Go value:
//
//	int64:        any Go integer in range; a float64, float32 or json.Number with an integral value
//	float64:      any Go integer or float; json.Number
//	string:       string, []byte
//	bool:         bool
//	timestamp_ms: time.Time; integer milliseconds as for int64; an RFC 3339 string
//
// and nil as null. A value it cannot convert gives a *RecordError and
// appends nothing.
func (b *Builder) AppendAny(col int, v any) error {
	if v == nil {
		b.Null(col)
		return nil
	}
	t := b.types[col]
	reject := func(reason string) error {
		return &RecordError{Field: b.schema.Field(col).Name, Value: displayValue(v), Reason: reason}
	}
	switch t {
	case Int64, TimestampMs:
		var ms int64
		switch v := v.(type) {
		case time.Time:
			if t != TimestampMs {
				return reject("want int64, got time")
			}
			ms = v.UnixMilli()
		case string:
			if t != TimestampMs {
				return reject("want int64, got string")
			}
			tm, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return reject("want timestamp_ms, an RFC 3339 time or integer milliseconds")
			}
			ms = tm.UnixMilli()
		case arrow.Timestamp:
			ms = int64(v)
		default:
			i, reason := anyToInt64(v)
			if reason != "" {
				return reject(fmt.Sprintf("want %s, %s", t, reason))
			}
			ms = i
		}
		if t == Int64 {
			b.ints[col].Append(ms)
		} else {
			b.times[col].Append(arrow.Timestamp(ms))
		}
	case Float64:
		f, ok := anyToFloat64(v)
		if !ok {
			return reject("want float64, a number")
		}
		b.floats[col].Append(f)
	case String:
		switch v := v.(type) {
		case string:
			b.strs[col].Append(v)
		case []byte:
			b.strs[col].BinaryBuilder.Append(v)
		default:
			return reject(fmt.Sprintf("want string, got %T", v))
		}
	case Bool:
		bv, ok := v.(bool)
		if !ok {
			return reject(fmt.Sprintf("want bool, got %T", v))
		}
		b.bools[col].Append(bv)
	default:
		return reject(fmt.Sprintf("unsupported column type %v", b.schema.Field(col).Type))
	}
	return nil
}

// anyToInt64 converts a Go number to int64, or says why it cannot.
func anyToInt64(v any) (int64, string) {
	switch v := v.(type) {
	case int64:
		return v, ""
	case int:
		return int64(v), ""
	case int32:
		return int64(v), ""
	case int16:
		return int64(v), ""
	case int8:
		return int64(v), ""
	case uint8:
		return int64(v), ""
	case uint16:
		return int64(v), ""
	case uint32:
		return int64(v), ""
	case uint:
		if uint64(v) > math.MaxInt64 {
			return 0, "out of range"
		}
		return int64(v), ""
	case uint64:
		if v > math.MaxInt64 {
			return 0, "out of range"
		}
		return int64(v), ""
	case float64:
		return floatToInt64(v)
	case float32:
		return floatToInt64(float64(v))
	case json.Number:
		if end, ok := numberEnd([]byte(v), 0); !ok || end != len(v) {
			return 0, "not a number"
		}
		return parseJSONInt(string(v))
	}
	return 0, fmt.Sprintf("got %T", v)
}

func floatToInt64(f float64) (int64, string) {
	if f != math.Trunc(f) {
		return 0, "not an integral number"
	}
	if f < -(1<<63) || f >= 1<<63 {
		return 0, "out of range"
	}
	return int64(f), ""
}

func anyToFloat64(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case float32:
		return float64(v), true
	case json.Number:
		return parseJSONFloat(string(v))
	case uint64:
		return float64(v), true
	case uint:
		return float64(v), true
	}
	if i, reason := anyToInt64(v); reason == "" {
		return float64(i), true
	}
	return 0, false
}

// displayValue renders a rejected Go value for an error message.
func displayValue(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		s = fmt.Sprintf("%q", v)
	case []byte:
		s = fmt.Sprintf("%q", v)
	case json.Number:
		s = string(v)
	default:
		s = fmt.Sprint(v)
	}
	return truncateForError(s)
}

func truncateForError(s string) string {
	const limit = 100
	if len(s) > limit {
		return s[:limit] + "..."
	}
	return s
}

// NewBatch returns the rows appended so far as a record batch, which the
// caller releases, and resets the builder.
func (b *Builder) NewBatch() arrow.RecordBatch { return b.rb.NewRecordBatch() }

// Release frees the builder's buffers.
func (b *Builder) Release() { b.rb.Release() }
