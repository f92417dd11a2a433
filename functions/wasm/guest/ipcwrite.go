package guest

import "fmt"

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
		le.PutUint64(b[at+8:], uint64(c.nulls))
		if c.nulls > 0 {
			addBuffer(c.valid)
		} else {
			addBuffer(nil)
		}
		addBuffer(c.vals)
		if c.typ == String {
			addBuffer(c.data)
		}
	}
	le.PutUint64(b[meta+e.lengthAt:], uint64(rows))
	le.PutUint64(b[meta+e.bodyLengthAt:], uint64(len(b)-body))
	e.buf = b
	return b
}

// colBuf is one output column being built: a validity bitmap, the values
// (8 bytes each, a bitmap for bool, int32 offsets for string) and string
// data. The current row's value is staged in cur until the row ends.
type colBuf struct {
	typ   Type
	valid []byte
	nulls int
	vals  []byte
	data  []byte

	cur     uint64 // staged int64, float64 bits or bool
	set     bool   // the current row has a value or an explicit null
	curNull bool
}

// reset empties the column, keeping its buffers.
func (c *colBuf) reset() {
	c.valid, c.vals, c.data = c.valid[:0], c.vals[:0], c.data[:0]
	c.nulls = 0
	if c.typ == String {
		c.vals = le.AppendUint32(c.vals, 0) // offset of row 0
	}
	c.set, c.curNull, c.cur = false, false, 0
}

// rowStart is where the current row's string data begins.
func (c *colBuf) rowStart() int {
	return int(le.Uint32(c.vals[len(c.vals)-4:]))
}

// commit appends the staged value of row r (a null if none was set).
func (c *colBuf) commit(r int) {
	valid := c.set && !c.curNull
	if r%8 == 0 {
		c.valid = append(c.valid, 0)
	}
	if valid {
		c.valid[r/8] |= 1 << (r % 8)
	} else {
		c.nulls++
	}
	switch c.typ {
	case String:
		if !valid {
			c.data = c.data[:c.rowStart()]
		}
		c.vals = le.AppendUint32(c.vals, uint32(len(c.data)))
	case Bool:
		if r%8 == 0 {
			c.vals = append(c.vals, 0)
		}
		if valid && c.cur != 0 {
			c.vals[r/8] |= 1 << (r % 8)
		}
	default:
		if !valid {
			c.cur = 0
		}
		c.vals = le.AppendUint64(c.vals, c.cur)
	}
	c.set, c.curNull, c.cur = false, false, 0
}

// discard drops the staged value.
func (c *colBuf) discard() {
	if c.typ == String {
		c.data = c.data[:c.rowStart()]
	}
	c.set, c.curNull, c.cur = false, false, 0
}
