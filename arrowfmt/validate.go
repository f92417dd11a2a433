package arrowfmt

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// validateRecord checks what the IPC reader takes on trust from a payload:
// that every column has the record's length and buffers large enough for it,
// null counts that agree with validity bitmaps, and string offsets that stay
// inside their data. Arrays that pass can be read without panics. The
// compact columns (sorted by index) are checked at their wire width.
func validateRecord(rec arrow.RecordBatch, types []Type, compact []expandCol) error {
	rows := rec.NumRows()
	if rows < 0 {
		return fmt.Errorf("negative row count %d", rows)
	}
	if int(rec.NumCols()) != len(types) {
		return fmt.Errorf("%d columns, schema has %d", rec.NumCols(), len(types))
	}
	for i, col := range rec.Columns() {
		if int64(col.Len()) != rows {
			return fmt.Errorf("column %q: %d rows, record has %d", rec.ColumnName(i), col.Len(), rows)
		}
		var err error
		if len(compact) > 0 && compact[0].index == i {
			err = validateLayout(col.Data(), layoutFixed, compact[0].width)
			compact = compact[1:]
		} else {
			err = validateArray(col.Data(), types[i])
		}
		if err != nil {
			return fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
		}
	}
	return nil
}

func validateArray(data arrow.ArrayData, t Type) error {
	switch t {
	case Int64, Float64, TimestampMs:
		return validateLayout(data, layoutFixed, 8)
	case Bool:
		return validateLayout(data, layoutBitmap, 0)
	case String:
		return validateLayout(data, layoutOffsets, 0)
	}
	return fmt.Errorf("unsupported type %q", t)
}

// validateArrowArray is validateArray for any flat Arrow type with a
// fixed width, a bitmap, or 32-bit offsets (state files hold int32 key
// groups, int8 flags and binary values).
func validateArrowArray(data arrow.ArrayData) error {
	dt := data.DataType()
	switch dt.ID() {
	case arrow.BOOL:
		return validateLayout(data, layoutBitmap, 0)
	case arrow.STRING, arrow.BINARY:
		return validateLayout(data, layoutOffsets, 0)
	}
	if fw, ok := dt.(arrow.FixedWidthDataType); ok && fw.BitWidth() >= 8 && fw.BitWidth()%8 == 0 {
		return validateLayout(data, layoutFixed, fw.BitWidth()/8)
	}
	return fmt.Errorf("unsupported type %s", dt)
}

type layout int

const (
	layoutFixed   layout = iota // values of width bytes
	layoutBitmap                // one bit per value
	layoutOffsets               // int32 offsets into a data buffer
)

func validateLayout(data arrow.ArrayData, l layout, width int) error {
	n, off := data.Len(), data.Offset()
	if n < 0 || off < 0 || off > maxInt-n-1 {
		return fmt.Errorf("bad length %d or offset %d", n, off)
	}
	end := off + n
	bufs := data.Buffers()
	buf := func(i int) []byte {
		if i < len(bufs) && bufs[i] != nil {
			return bufs[i].Bytes()
		}
		return nil
	}

	nulls := data.NullN() // as declared; array.NullN would compute it from the bitmap
	if nulls > n {
		return fmt.Errorf("null count %d for %d rows", nulls, n)
	}
	if bitmap := buf(0); len(bitmap) > 0 {
		if int64(len(bitmap)) < bitutil.BytesForBits(int64(end)) {
			return fmt.Errorf("validity bitmap of %d bytes for %d rows", len(bitmap), end)
		}
		if got := n - bitutil.CountSetBits(bitmap, off, n); nulls >= 0 && nulls != got {
			return fmt.Errorf("null count %d, bitmap has %d", nulls, got)
		}
	} else if nulls != 0 && n > 0 {
		return fmt.Errorf("null count %d without a validity bitmap", nulls)
	}
	values := buf(1)
	if n == 0 {
		// No values to read, but a writer reads the first offset of an
		// empty string column to find its data.
		if l == layoutOffsets && len(values)/4 > off {
			if o := arrow.Int32Traits.CastFromBytes(values)[off]; o < 0 || int64(o) > int64(len(buf(2))) {
				return fmt.Errorf("string offset %d of an empty column, beyond data of %d bytes", o, len(buf(2)))
			}
		}
		return nil
	}
	switch l {
	case layoutFixed:
		if len(values)/width < end {
			return fmt.Errorf("values buffer of %d bytes for %d rows", len(values), end)
		}
	case layoutBitmap:
		if int64(len(values)) < bitutil.BytesForBits(int64(end)) {
			return fmt.Errorf("values bitmap of %d bytes for %d rows", len(values), end)
		}
	case layoutOffsets:
		if len(values)/4 < end+1 {
			return fmt.Errorf("offsets buffer of %d bytes for %d rows", len(values), end)
		}
		offsets := arrow.Int32Traits.CastFromBytes(values)[off : end+1]
		dataLen := int64(len(buf(2)))
		prev := offsets[0]
		if prev < 0 {
			return fmt.Errorf("negative string offset %d", prev)
		}
		for _, o := range offsets[1:] {
			if o < prev {
				return fmt.Errorf("decreasing string offsets %d, %d", prev, o)
			}
			prev = o
		}
		if int64(prev) > dataLen {
			return fmt.Errorf("string offset %d beyond data of %d bytes", prev, dataLen)
		}
	}
	return nil
}

const maxInt = int(^uint(0) >> 1)
