package arrowfmt

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
)

// Narrow columns in files: an Arrow IPC file that WriteFile writes may
// hold an int64 or timestamp_ms column as unsigned offsets from a base,
// 1, 2 or 4 bytes a value, in the wire form of a compact channel
// (compact.go): a uint8, uint16 or uint32 column whose field metadata
// names its weir type (weir.type) and its base (weir.base). A file has one
// schema, so one width and base serve all its batches: the writer must
// know the range of the values before it writes the first, as a state
// capture does (every row it writes holds a value the operator had at the
// barrier, and the operator bounds those as it goes). DecodeFile widens
// the columns back.

// A Range is the lowest and highest of some int64 values. The zero Range
// holds none.
type Range struct {
	Lo, Hi int64
	Set    bool // Lo and Hi hold something
}

// Add widens r to hold [lo, hi] (lo <= hi).
func (r *Range) Add(lo, hi int64) {
	if !r.Set {
		*r = Range{Lo: lo, Hi: hi, Set: true}
		return
	}
	r.Lo, r.Hi = min(r.Lo, lo), max(r.Hi, hi)
}

// AddRange widens r to hold o.
func (r *Range) AddRange(o Range) {
	if o.Set {
		r.Add(o.Lo, o.Hi)
	}
}

// AddColumn widens r to hold every valid value of col, an int64 or
// timestamp column; a column of another type, or without valid values,
// adds nothing.
func (r *Range) AddColumn(col arrow.Array) {
	if lo, hi, ok := Bounds(col); ok {
		r.Add(lo, hi)
	}
}

// NarrowSchema returns the schema of a file of batches of schema in which
// each int64 or timestamp_ms column i with a set ranges[i] that spans
// less than 2^32 is written as offsets from ranges[i].Lo, in the fewest
// bytes that hold the span. The other columns are as in schema; ranges
// may be shorter than the columns. WriteFile and EncodeBatch, given the
// schema it returns, narrow the batches' columns as they write them, and
// refuse a value outside its column's range.
func NarrowSchema(schema *arrow.Schema, ranges []Range) *arrow.Schema {
	var fields []arrow.Field
	for i, r := range ranges[:min(len(ranges), schema.NumFields())] {
		f := schema.Field(i)
		t, err := TypeOf(f.Type)
		if !r.Set || err != nil || t != Int64 && t != TimestampMs {
			continue
		}
		w := widthFor(uint64(r.Hi) - uint64(r.Lo))
		if w == 8 {
			continue
		}
		if fields == nil {
			fields = append([]arrow.Field(nil), schema.Fields()...)
		}
		fields[i] = narrowField(f, t, w, r.Lo)
	}
	if fields == nil {
		return schema
	}
	md := schema.Metadata()
	return arrow.NewSchema(fields, &md)
}

// NarrowToFit returns NarrowSchema of schema with each column's range
// that of its valid values in batches, batches of schema: the schema of a
// file of them whose int64 and timestamp_ms columns take the fewest bytes
// their values need, for a writer that has every batch before it writes.
func NarrowToFit(schema *arrow.Schema, batches []arrow.RecordBatch) *arrow.Schema {
	ranges := make([]Range, schema.NumFields())
	for _, b := range batches {
		for c := range ranges {
			ranges[c].AddColumn(b.Column(c))
		}
	}
	return NarrowSchema(schema, ranges)
}

// Narrowed reports whether schema narrows a column (NarrowSchema): a
// file of it is read as another schema.
func Narrowed(schema *arrow.Schema) bool {
	for _, f := range schema.Fields() {
		if f.Metadata.FindKey(metaWeirType) >= 0 {
			return true
		}
	}
	return false
}

// narrowField is field f, of weir type t, as offsets from base in width
// bytes: its wire type, and its metadata with weir.type and weir.base
// first.
func narrowField(f arrow.Field, t Type, width int, base int64) arrow.Field {
	keys := append([]string{metaWeirType, metaWeirBase}, f.Metadata.Keys()...)
	vals := append([]string{string(t), strconv.FormatInt(base, 10)}, f.Metadata.Values()...)
	f.Type, f.Metadata = wireType(width), arrow.NewMetadata(keys, vals)
	return f
}

// narrowInto writes the values of data, an int64-backed array starting
// at offset 0, as offsets from c.base in c.width bytes each into dst (of
// len(values) * width bytes), and returns dst; a valid value outside the
// column's range is an error naming it. Null slots hold what their
// value gave; DecodeFile zeroes them.
func (c expandCol) narrowInto(dst []byte, data arrow.ArrayData) ([]byte, error) {
	vals := int64Values(data)
	if lo, hi, ok := bounds(data); ok && (lo < c.base || uint64(hi)-uint64(c.base) > maxOffset(c.width)) {
		bad := lo
		if lo >= c.base {
			bad = hi
		}
		return dst, fmt.Errorf("value %d is outside the range [%d, %d] of the file's schema", bad, c.base, int64(uint64(c.base)+maxOffset(c.width)))
	}
	n := len(vals) * c.width
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	switch c.width {
	case 1:
		narrowTo(dst, vals, c.base)
	case 2:
		narrowTo(arrow.Uint16Traits.CastFromBytes(dst), vals, c.base)
	case 4:
		narrowTo(arrow.Uint32Traits.CastFromBytes(dst), vals, c.base)
	}
	return dst, nil
}
