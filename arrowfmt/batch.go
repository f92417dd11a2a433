package arrowfmt

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Take returns a new record batch of the rows idx of rec, in that order
// (an index may repeat). The caller releases it. It panics if an index is
// out of range or a column has a type other than those of Type.
func Take(rec arrow.RecordBatch, idx []int32, mem memory.Allocator) arrow.RecordBatch {
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, col := range rec.Columns() {
		cols[i] = takeArray(col, idx, mem)
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(idx)))
}

func takeArray(col arrow.Array, idx []int32, mem memory.Allocator) arrow.Array {
	validity, nulls := takeValidity(col, idx, mem)
	bufs := []*memory.Buffer{validity}
	switch a := col.(type) {
	case *array.Int64:
		bufs = append(bufs, takeFixed(a.Int64Values(), idx, mem))
	case *array.Float64:
		bufs = append(bufs, takeFixed(a.Float64Values(), idx, mem))
	case *array.Timestamp:
		bufs = append(bufs, takeFixed(a.TimestampValues(), idx, mem))
	case *array.Boolean:
		bufs = append(bufs, takeBools(a, idx, mem))
	case *array.String:
		offsets, data := takeStrings(a, idx, mem)
		bufs = append(bufs, offsets, data)
	default:
		if validity != nil {
			validity.Release()
		}
		panic(fmt.Sprintf("arrowfmt: take from column of type %v", col.DataType()))
	}
	data := array.NewData(col.DataType(), len(idx), bufs, nil, nulls, 0)
	for _, b := range bufs {
		if b != nil {
			b.Release() // data holds them now
		}
	}
	defer data.Release()
	return array.MakeFromData(data)
}

// takeValidity returns the validity bitmap of the taken rows and their null
// count, or nil if none of them is null.
func takeValidity(col arrow.Array, idx []int32, mem memory.Allocator) (*memory.Buffer, int) {
	if col.NullN() == 0 {
		return nil, 0
	}
	buf := newBitmap(len(idx), mem)
	bits := buf.Bytes()
	nulls := 0
	for i, j := range idx {
		if col.IsValid(int(j)) {
			bitutil.SetBit(bits, i)
		} else {
			nulls++
		}
	}
	if nulls == 0 {
		buf.Release()
		return nil, 0
	}
	return buf, nulls
}

func newBitmap(n int, mem memory.Allocator) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(n))))
	clear(buf.Bytes()) // not every allocator zeroes
	return buf
}

func takeFixed[T int64 | float64 | arrow.Timestamp](src []T, idx []int32, mem memory.Allocator) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(len(idx) * 8)
	dst := arrow.GetData[T](buf.Bytes())
	for i, j := range idx {
		dst[i] = src[j]
	}
	return buf
}

func takeBools(a *array.Boolean, idx []int32, mem memory.Allocator) *memory.Buffer {
	buf := newBitmap(len(idx), mem)
	bits := buf.Bytes()
	for i, j := range idx {
		if a.Value(int(j)) {
			bitutil.SetBit(bits, i)
		}
	}
	return buf
}

func takeStrings(a *array.String, idx []int32, mem memory.Allocator) (offsets, data *memory.Buffer) {
	srcOffsets := a.ValueOffsets() // absolute positions in the data buffer
	var srcData []byte
	if b := a.Data().Buffers()[2]; b != nil {
		srcData = b.Bytes()
	}
	total := 0
	for _, j := range idx {
		total += int(srcOffsets[j+1] - srcOffsets[j])
	}
	if total > math.MaxInt32 {
		panic(fmt.Sprintf("arrowfmt: take %d bytes of strings, more than a string array holds", total))
	}
	offsets = memory.NewResizableBuffer(mem)
	offsets.Resize((len(idx) + 1) * 4)
	dstOffsets := arrow.Int32Traits.CastFromBytes(offsets.Bytes())
	data = memory.NewResizableBuffer(mem)
	data.Resize(total)
	dst := data.Bytes()
	pos := int32(0)
	dstOffsets[0] = 0
	for i, j := range idx {
		pos += int32(copy(dst[pos:], srcData[srcOffsets[j]:srcOffsets[j+1]]))
		dstOffsets[i+1] = pos
	}
	return offsets, data
}

// Concat returns one record batch with the rows of recs in order, which the
// caller releases; a single batch is returned retained, not copied. All
// batches must have the same schema (ErrSchemaMismatch).
func Concat(recs []arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("arrowfmt: concat: no record batches")
	}
	if len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	schema := recs[0].Schema()
	rows := int64(0)
	for i, r := range recs {
		if !r.Schema().Equal(schema) {
			return nil, fmt.Errorf("%w: concat: batch %d has schema %v, batch 0 has %v", ErrSchemaMismatch, i, r.Schema(), schema)
		}
		rows += r.NumRows()
	}
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	parts := make([]arrow.Array, len(recs))
	for c := range cols {
		for i, r := range recs {
			parts[i] = r.Column(c)
		}
		col, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, fmt.Errorf("concat column %q: %w", schema.Field(c).Name, err)
		}
		cols[c] = col
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}

// Filter returns the rows of rec for which keep holds (every row if keep
// is nil), with the columns cols of rec (every column if cols is nil), as
// a batch of schema (rec's if nil; its fields must have the types of the
// columns kept); nil if no row is kept. The caller releases the result.
// It slices rec's columns at runs of kept rows and concatenates the
// slices, so it works for any column type; rec kept whole is returned
// retained, not copied.
func Filter(rec arrow.RecordBatch, schema *arrow.Schema, cols []int, keep func(row int) bool, mem memory.Allocator) (arrow.RecordBatch, error) {
	var runs [][2]int64 // kept rows [from, to)
	kept := int64(0)
	for i := range int(rec.NumRows()) {
		if keep != nil && !keep(i) {
			continue
		}
		kept++
		if k := len(runs); k > 0 && runs[k-1][1] == int64(i) {
			runs[k-1][1]++
		} else {
			runs = append(runs, [2]int64{int64(i), int64(i) + 1})
		}
	}
	if kept == 0 {
		return nil, nil
	}
	if schema == nil {
		schema = rec.Schema()
	}
	if cols == nil {
		if kept == rec.NumRows() && schema == rec.Schema() {
			rec.Retain()
			return rec, nil
		}
		cols = make([]int, rec.NumCols())
		for c := range cols {
			cols[c] = c
		}
	}
	arrs := make([]arrow.Array, len(cols))
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	for j, c := range cols {
		if len(runs) == 1 {
			arrs[j] = array.NewSlice(rec.Column(c), runs[0][0], runs[0][1])
			continue
		}
		parts := make([]arrow.Array, len(runs))
		for i, run := range runs {
			parts[i] = array.NewSlice(rec.Column(c), run[0], run[1])
		}
		a, err := array.Concatenate(parts, mem)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			return nil, fmt.Errorf("arrowfmt: filter column %q: %w", rec.Schema().Field(c).Name, err)
		}
		arrs[j] = a
	}
	return array.NewRecordBatch(schema, arrs, kept), nil
}

// Value returns the value at row of arr as a Go value: int64, float64,
// string, bool, time.Time (UTC) for timestamps, nil for null. It is for
// slow paths and tests; other Arrow types give what arrow marshals to JSON.
func Value(arr arrow.Array, row int) any {
	if arr.IsNull(row) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Int64:
		return a.Value(row)
	case *array.Float64:
		return a.Value(row)
	case *array.String:
		return a.Value(row)
	case *array.Boolean:
		return a.Value(row)
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(row).ToTime(unit).UTC()
	}
	return arr.GetOneForMarshal(row)
}
