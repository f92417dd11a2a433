package guest

import (
	"fmt"
	"unsafe"
)

// Arrow flatbuffer numbering (format/Message.fbs, format/Schema.fbs).
const (
	// Message fields and header types.
	fbMessageVersion    = 0
	fbMessageHeaderType = 1
	fbMessageHeader     = 2
	fbMessageBodyLength = 3
	fbMetadataV5        = 4
	fbHeaderSchema      = 1
	fbHeaderRecordBatch = 3

	// Schema fields.
	fbSchemaEndianness = 0
	fbSchemaFields     = 1

	// Field fields.
	fbFieldName       = 0
	fbFieldNullable   = 1
	fbFieldTypeType   = 2
	fbFieldType       = 3
	fbFieldDictionary = 4
	fbFieldChildren   = 5

	// Type union tags.
	fbTypeInt           = 2
	fbTypeFloatingPoint = 3
	fbTypeUtf8          = 5
	fbTypeBool          = 6
	fbTypeTimestamp     = 10

	fbPrecisionDouble  = 2
	fbUnitMillisecond  = 1
	fbRecordLength     = 0
	fbRecordNodes      = 1
	fbRecordBuffers    = 2
	fbRecordCompressed = 3

	continuation = 0xFFFFFFFF
)

// buffersOf is how many body buffers a column of type t has: validity and
// values, and for strings validity, offsets and data.
func buffersOf(t Type) int {
	if t == String {
		return 3
	}
	return 2
}

// encoder writes the Arrow IPC payloads of one output stream: the schema
// message (sent once) and record batch messages, whose metadata is a
// template built once and patched per batch.
type encoder struct {
	schemaMsg []byte // the encapsulated schema message
	meta      []byte // the record batch flatbuffer, padded to 8
	// positions in meta of what changes per batch
	lengthAt, nodesAt, buffersAt, bodyLengthAt int
	nbuf                                       int
	buf                                        []byte // the payload, reused
}

func newEncoder(cols []Column) (*encoder, error) {
	e := &encoder{}
	w := newFBWriter()
	msg, mf := w.table(2, 1, 4, 8)
	w.root(msg)
	w.put16(mf[fbMessageVersion], fbMetadataV5)
	w.put8(mf[fbMessageHeaderType], fbHeaderSchema)
	schema, sf := w.table(2, 4)
	w.link(mf[fbMessageHeader], schema)
	vec, elems := w.vector(len(cols), 4, 4)
	w.link(sf[fbSchemaFields], vec)
	for i, c := range cols {
		f, ff := w.table(4, 1, 1, 4, 0, 4)
		w.link(elems+4*i, f)
		w.put8(ff[fbFieldNullable], 1)
		w.link(ff[fbFieldName], w.str(c.Name))
		var typ int
		switch c.Type {
		case Int64:
			w.put8(ff[fbFieldTypeType], fbTypeInt)
			var tf []int
			typ, tf = w.table(4, 1)
			w.put32(tf[0], 64)
			w.put8(tf[1], 1)
		case Float64:
			w.put8(ff[fbFieldTypeType], fbTypeFloatingPoint)
			var tf []int
			typ, tf = w.table(2)
			w.put16(tf[0], fbPrecisionDouble)
		case String:
			w.put8(ff[fbFieldTypeType], fbTypeUtf8)
			typ, _ = w.table()
		case Bool:
			w.put8(ff[fbFieldTypeType], fbTypeBool)
			typ, _ = w.table()
		case TimestampMs:
			w.put8(ff[fbFieldTypeType], fbTypeTimestamp)
			var tf []int
			typ, tf = w.table(2, 4)
			w.put16(tf[0], fbUnitMillisecond)
			w.link(tf[1], w.str("UTC"))
		default:
			return nil, fmt.Errorf("output column %q: unknown type %q: want one of %s", c.Name, c.Type, typeNames)
		}
		w.link(ff[fbFieldType], typ)
		children, _ := w.vector(0, 4, 4)
		w.link(ff[fbFieldChildren], children)
		e.nbuf += buffersOf(c.Type)
	}
	e.schemaMsg = frame(nil, w.finish())

	w = newFBWriter()
	msg, mf = w.table(2, 1, 4, 8)
	w.root(msg)
	w.put16(mf[fbMessageVersion], fbMetadataV5)
	w.put8(mf[fbMessageHeaderType], fbHeaderRecordBatch)
	rb, rf := w.table(8, 4, 4)
	w.link(mf[fbMessageHeader], rb)
	nodes, nodeElems := w.vector(len(cols), 16, 8)
	w.link(rf[fbRecordNodes], nodes)
	buffers, bufElems := w.vector(e.nbuf, 16, 8)
	w.link(rf[fbRecordBuffers], buffers)
	e.meta = w.finish()
	e.lengthAt, e.nodesAt, e.buffersAt, e.bodyLengthAt = rf[fbRecordLength], nodeElems, bufElems, mf[fbMessageBodyLength]
	return e, nil
}

const typeNames = "int64, float64, string, bool, timestamp_ms"

// frame appends the encapsulated message of flatbuffer meta (padded to 8)
// with an empty body.
func frame(dst, meta []byte) []byte {
	dst = le.AppendUint32(dst, continuation)
	dst = le.AppendUint32(dst, uint32(len(meta)))
	return append(dst, meta...)
}

// encode returns the payload of rows rows held in cols, with the schema
// message first when withSchema. The result is valid until the next call.
func (e *encoder) encode(withSchema bool, rows int, cols []colBuf) []byte {
	b := e.buf[:0]
	if withSchema {
		b = append(b, e.schemaMsg...)
	}
	b = le.AppendUint32(b, continuation)
	b = le.AppendUint32(b, uint32(len(e.meta)))
	meta := len(b)
	b = append(b, e.meta...)
	body := len(b)
	buf := 0
	// addBuffer appends p to the body, padded to 8, and records it.
	addBuffer := func(p []byte) {
		at := meta + e.buffersAt + 16*buf
		le.PutUint64(b[at:], uint64(len(b)-body))
		le.PutUint64(b[at+8:], uint64(len(p)))
		b = append(b, p...)
		for len(b)%8 != 0 {
			b = append(b, 0)
		}
		buf++
	}
	for i := range cols {
		c := &cols[i]
		at := meta + e.nodesAt + 16*i
		le.PutUint64(b[at:], uint64(rows))
		le.PutUint64(b[at+8:], uint64(len(c.nullRows)))
		if len(c.nullRows) > 0 {
			addBuffer(c.validity(rows))
		} else {
			addBuffer(nil)
		}
		switch c.kind {
		case kindString:
			addBuffer(asBytes(c.offs))
			addBuffer(c.data)
		case kindBool:
			addBuffer(c.boolBitmap())
		default:
			addBuffer(asBytes(c.vals))
		}
	}
	le.PutUint64(b[meta+e.lengthAt:], uint64(rows))
	le.PutUint64(b[meta+e.bodyLengthAt:], uint64(len(b)-body))
	e.buf = b
	return b
}

// asBytes is the memory of v, which the IPC format lays out the same way:
// WebAssembly (and every platform the tests run on) is little-endian.
func asBytes[T uint32 | uint64](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(v[0])))
}

// colBuf is one output column being built. A setter writes the current
// row's value in place (the row is len(vals) - 1, or len(offs) - 2, once
// set); EndRow pads a column left unset with a null. Nulls are kept as a
// list of rows and become a validity bitmap only in the payload, so a
// column without nulls costs nothing for them.
type colBuf struct {
	kind     kind
	vals     []uint64 // int64, float64 bits, timestamp_ms, bool (0 or 1)
	offs     []uint32 // string: the offsets of the rows so far and the current row's start
	data     []byte   // string data
	nullRows []int32  // the null rows, ascending

	bitmap []byte // scratch of validity and boolBitmap
}

// reset empties the column, keeping its buffers.
func (c *colBuf) reset() {
	c.vals, c.offs, c.data, c.nullRows = c.vals[:0], c.offs[:0], c.data[:0], c.nullRows[:0]
	if c.kind == kindString {
		c.offs = append(c.offs, 0) // where row 0 starts
	}
}

// setString makes s the value of row r of a string column, and reports
// whether row r had none before.
func (c *colBuf) setString(r int, s string) bool {
	c.unNull(r)
	c.data = append(c.data[:c.offs[r]], s...)
	if len(c.offs) == r+1 {
		c.offs = append(c.offs, uint32(len(c.data)))
		return true
	}
	c.offs[r+1] = uint32(len(c.data))
	return false
}

// setFixed makes v the value of row r of a fixed-width column, and
// reports whether row r had none before.
func (c *colBuf) setFixed(r int, v uint64) bool {
	if len(c.vals) == r {
		c.vals = append(c.vals, v)
		return true
	}
	c.unNull(r)
	c.vals[r] = v
	return false
}

// setNull makes row r null, and reports whether row r had no value before.
func (c *colBuf) setNull(r int) bool {
	var first bool
	if c.kind == kindString {
		first = c.setString(r, "")
	} else {
		first = c.setFixed(r, 0)
	}
	if n := len(c.nullRows); n == 0 || c.nullRows[n-1] != int32(r) {
		c.nullRows = append(c.nullRows, int32(r))
	}
	return first
}

// unNull undoes an earlier setNull of row r.
func (c *colBuf) unNull(r int) {
	if n := len(c.nullRows); n > 0 && c.nullRows[n-1] == int32(r) {
		c.nullRows = c.nullRows[:n-1]
	}
}

// isSet reports whether row r has a value (or an explicit null).
func (c *colBuf) isSet(r int) bool {
	if c.kind == kindString {
		return len(c.offs) > r+1
	}
	return len(c.vals) > r
}

// discard drops row r.
func (c *colBuf) discard(r int) {
	c.unNull(r)
	if c.kind == kindString {
		c.offs = c.offs[:r+1]
		c.data = c.data[:c.offs[r]]
	} else {
		c.vals = c.vals[:r]
	}
}

// validity returns the validity bitmap of rows rows.
func (c *colBuf) validity(rows int) []byte {
	b := c.bitmap[:0]
	for range (rows + 7) / 8 {
		b = append(b, 0xff)
	}
	for _, r := range c.nullRows {
		b[r>>3] &^= 1 << (r & 7)
	}
	c.bitmap = b
	return b
}

// boolBitmap returns the values of a bool column as a bitmap.
func (c *colBuf) boolBitmap() []byte {
	b := c.bitmap[:0]
	for i, v := range c.vals {
		if i%8 == 0 {
			b = append(b, 0)
		}
		b[i>>3] |= byte(v) << (i & 7)
	}
	c.bitmap = b
	return b
}
