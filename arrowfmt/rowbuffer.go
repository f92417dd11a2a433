package arrowfmt

import (
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// RowBuffer gathers rows of one schema from record batches, whole or by
// index, into buffers it keeps and reuses. It is a task's output buffer:
// each row is copied once, where taking a batch's rows per target into new
// batches (Partition) and concatenating a target's batches (Concat) copied
// it twice, into fresh memory each time.
//
// Batch returns the rows gathered as a record batch that shares the
// buffer's memory: it is valid until the next Append or Reset, so encode
// it (or copy it) and release it before either. Columns are of the types
// Take takes: int64, float64, timestamp, bool and string. A RowBuffer is
// not safe for concurrent use.
type RowBuffer struct {
	schema *arrow.Schema
	cols   []rowColumn
	rows   int
}

type rowColumn struct {
	dt      arrow.DataType
	valid   []byte // validity bitmap; nil while no row gathered is null
	nulls   int
	words   []uint64 // int64, float64, timestamp: the values' bits
	bits    []byte   // bool: the values' bitmap
	offsets []int32  // string: rows+1 offsets into data
	data    []byte
}

// NewRowBuffer returns an empty buffer for rows of schema. It returns an
// error naming the column if a column's type is not one it gathers.
func NewRowBuffer(schema *arrow.Schema) (*RowBuffer, error) {
	b := &RowBuffer{schema: schema, cols: make([]rowColumn, schema.NumFields())}
	for i, f := range schema.Fields() {
		switch f.Type.ID() {
		case arrow.INT64, arrow.FLOAT64, arrow.TIMESTAMP, arrow.BOOL:
		case arrow.STRING:
			b.cols[i].offsets = []int32{0}
		default:
			return nil, fmt.Errorf("arrowfmt: row buffer: column %q has type %v, which it does not gather", f.Name, f.Type)
		}
		b.cols[i].dt = f.Type
	}
	return b, nil
}

// Schema returns the buffer's schema.
func (b *RowBuffer) Schema() *arrow.Schema { return b.schema }

// Rows returns how many rows are gathered.
func (b *RowBuffer) Rows() int { return b.rows }

// Bytes returns the size of the rows gathered, as their buffers would be.
func (b *RowBuffer) Bytes() int {
	n := 0
	for i := range b.cols {
		c := &b.cols[i]
		n += len(c.valid) + 8*len(c.words) + len(c.bits) + 4*len(c.offsets) + len(c.data)
	}
	return n
}

// Append gathers the rows idx of rec, in that order, or every row of rec
// if idx is nil. It returns ErrSchemaMismatch if rec's schema is not the
// buffer's, and gathers nothing then. It panics if an index is out of
// range.
func (b *RowBuffer) Append(rec arrow.RecordBatch, idx []int32) error {
	if s := rec.Schema(); s != b.schema && !s.Equal(b.schema) {
		return fmt.Errorf("%w: row buffer of schema %v given a batch of %v", ErrSchemaMismatch, b.schema, s)
	}
	n := len(idx)
	if idx == nil {
		n = int(rec.NumRows())
	}
	if n == 0 {
		return nil
	}
	for i, col := range rec.Columns() {
		b.cols[i].append(col, idx, b.rows, n)
	}
	b.rows += n
	return nil
}

// Reset drops the rows gathered and keeps the memory for the next.
func (b *RowBuffer) Reset() {
	for i := range b.cols {
		c := &b.cols[i]
		c.valid, c.nulls = nil, 0
		c.words, c.bits, c.data = c.words[:0], c.bits[:0], c.data[:0]
		if c.offsets != nil {
			c.offsets = c.offsets[:1]
		}
	}
	b.rows = 0
}

// Batch returns the rows gathered, in the buffer's memory (see RowBuffer);
// the caller releases it.
func (b *RowBuffer) Batch() arrow.RecordBatch {
	cols := make([]arrow.Array, len(b.cols))
	for i := range b.cols {
		cols[i] = b.cols[i].array(b.rows)
	}
	rec := array.NewRecordBatch(b.schema, cols, int64(b.rows))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// append gathers n rows of col (the rows idx, or the first n) after the
// have rows gathered before.
func (c *rowColumn) append(col arrow.Array, idx []int32, have, n int) {
	c.appendValidity(col, idx, have, n)
	switch a := col.(type) {
	case *array.Int64, *array.Float64, *array.Timestamp:
		d := a.Data()
		src := arrow.Uint64Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset():]
		if idx == nil {
			c.words = append(c.words, src[:n]...)
			return
		}
		m := len(c.words)
		c.words = slices.Grow(c.words, n)[:m+n]
		dst := c.words[m:]
		for i, j := range idx {
			dst[i] = src[j]
		}
	case *array.Boolean:
		c.bits = growBits(c.bits, have+n)
		for i := range n {
			if a.Value(rowAt(idx, i)) {
				bitutil.SetBit(c.bits, have+i)
			}
		}
	case *array.String:
		offsets := a.ValueOffsets() // absolute positions in the data buffer
		var data []byte
		if buf := a.Data().Buffers()[2]; buf != nil {
			data = buf.Bytes()
		}
		if idx == nil {
			c.data = append(c.data, data[offsets[0]:offsets[n]]...)
			shift := c.offsets[len(c.offsets)-1] - offsets[0]
			for _, o := range offsets[1 : n+1] {
				c.offsets = append(c.offsets, o+shift)
			}
		} else {
			for _, j := range idx {
				c.data = append(c.data, data[offsets[j]:offsets[j+1]]...)
				c.offsets = append(c.offsets, int32(len(c.data)))
			}
		}
		if len(c.data) > math.MaxInt32 {
			panic(fmt.Sprintf("arrowfmt: row buffer holds %d bytes of strings, more than a string array holds", len(c.data)))
		}
	default:
		panic(fmt.Sprintf("arrowfmt: row buffer given a column of type %v", col.DataType()))
	}
}

// appendValidity extends the validity bitmap by n rows of col, starting
// one only when a null comes.
func (c *rowColumn) appendValidity(col arrow.Array, idx []int32, have, n int) {
	if col.NullN() == 0 {
		if c.valid != nil {
			c.valid = growBits(c.valid, have+n)
			bitutil.SetBitsTo(c.valid, int64(have), int64(n), true)
		}
		return
	}
	if c.valid == nil {
		c.valid = growBits(nil, have)
		bitutil.SetBitsTo(c.valid, 0, int64(have), true)
	}
	c.valid = growBits(c.valid, have+n)
	for i := range n {
		if col.IsValid(rowAt(idx, i)) {
			bitutil.SetBit(c.valid, have+i)
		} else {
			c.nulls++
		}
	}
}

// rowAt returns the row of the batch that gathered row i comes from.
func rowAt(idx []int32, i int) int {
	if idx == nil {
		return i
	}
	return int(idx[i])
}

// growBits returns bm with room for bits bits, the new bytes zero.
func growBits(bm []byte, bits int) []byte {
	n := int(bitutil.BytesForBits(int64(bits)))
	if n <= len(bm) {
		return bm
	}
	m := len(bm)
	bm = slices.Grow(bm, n-m)[:n]
	clear(bm[m:])
	return bm
}

// array returns the column's rows as an array over its memory.
func (c *rowColumn) array(rows int) arrow.Array {
	var valid *memory.Buffer
	if c.nulls > 0 {
		valid = memory.NewBufferBytes(c.valid)
	}
	var bufs []*memory.Buffer
	switch c.dt.ID() {
	case arrow.BOOL:
		bufs = []*memory.Buffer{valid, memory.NewBufferBytes(growBits(c.bits, rows))}
	case arrow.STRING:
		bufs = []*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(c.offsets)), memory.NewBufferBytes(c.data)}
	default:
		bufs = []*memory.Buffer{valid, memory.NewBufferBytes(arrow.Uint64Traits.CastToBytes(c.words))}
	}
	data := array.NewData(c.dt, rows, bufs, nil, c.nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}
