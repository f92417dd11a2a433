package guest

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"
)

// fbTable is a flatbuffer table at pos in b. Reads are bounds-checked by
// Go; decode turns an out-of-range read of a corrupt payload into an
// error.
type fbTable struct {
	b   []byte
	pos int
}

func fbRoot(b []byte) fbTable { return fbTable{b, int(le.Uint32(b))} }

// field returns the position of field id, 0 if it is absent.
func (t fbTable) field(id int) int {
	vt := t.pos - int(int32(le.Uint32(t.b[t.pos:])))
	slot := 4 + 2*id
	if slot+2 > int(le.Uint16(t.b[vt:])) {
		return 0
	}
	off := int(le.Uint16(t.b[vt+slot:]))
	if off == 0 {
		return 0
	}
	return t.pos + off
}

func (t fbTable) u8(id int, def uint8) uint8 {
	if p := t.field(id); p != 0 {
		return t.b[p]
	}
	return def
}

func (t fbTable) i16(id int, def int16) int16 {
	if p := t.field(id); p != 0 {
		return int16(le.Uint16(t.b[p:]))
	}
	return def
}

func (t fbTable) i32(id int, def int32) int32 {
	if p := t.field(id); p != 0 {
		return int32(le.Uint32(t.b[p:]))
	}
	return def
}

func (t fbTable) i64(id int) int64 {
	if p := t.field(id); p != 0 {
		return int64(le.Uint64(t.b[p:]))
	}
	return 0
}

func (t fbTable) deref(p int) int { return p + int(le.Uint32(t.b[p:])) }

func (t fbTable) table(id int) (fbTable, bool) {
	p := t.field(id)
	if p == 0 {
		return fbTable{}, false
	}
	return fbTable{t.b, t.deref(p)}, true
}

// vector returns the position of the first element of vector field id and
// its length (0, 0 if absent), checking that n elements of size fit.
func (t fbTable) vector(id, size int) (start, n int) {
	p := t.field(id)
	if p == 0 {
		return 0, 0
	}
	v := t.deref(p)
	n = int(le.Uint32(t.b[v:]))
	if n > (len(t.b)-v-4)/size {
		panic(errCorrupt)
	}
	return v + 4, n
}

func (t fbTable) vectorTable(start, i int) fbTable {
	return fbTable{t.b, t.deref(start + 4*i)}
}

func (t fbTable) str(id int) string {
	start, n := t.vector(id, 1)
	return string(t.b[start : start+n])
}

var errCorrupt = errors.New("corrupt flatbuffer")

// kind is a column type as the hot paths compare it: a byte, where a
// Type is a string (and comparing strings costs a call in Go's wasm port).
type kind uint8

const (
	kindNone kind = iota
	kindInt64
	kindFloat64
	kindString
	kindBool
	kindTimestamp
)

var kindTypes = [...]Type{kindNone: "", kindInt64: Int64, kindFloat64: Float64, kindString: String, kindBool: Bool, kindTimestamp: TimestampMs}

func kindOf(t Type) kind {
	for k, kt := range kindTypes {
		if kt == t && k != int(kindNone) {
			return kind(k)
		}
	}
	return kindNone
}

// colData is one column of a decoded batch: slices of the payload.
type colData struct {
	kind  kind
	valid []byte // nil when the column has no nulls
	vals  []byte // 8 bytes per value, a bitmap (bool) or int32 offsets (string)
	data  []byte // string data
}

func (c *colData) isNull(i int) bool {
	return c.valid != nil && c.valid[i>>3]&(1<<(i&7)) == 0
}

// batch is the input batch rows read from, valid during one call.
type batch struct {
	cols  []Column
	index map[string]int // for wide schemas; narrow ones are scanned
	rows  int
	data  []colData
	// names remembers where names looked up before are, by the address
	// of their bytes: a column name in a function is mostly a literal, so
	// the same lookup finds the same string, and one comparison of
	// addresses costs less than comparing strings in a loop (loops and
	// calls are what is dear in Go's wasm port). The pointers keep the
	// strings alive, so an address is never reused for other bytes while
	// it is here.
	names [16]nameSlot
}

type nameSlot struct {
	p   *byte
	n   int
	idx int
}

// indexOf returns the index of column name, -1 if there is none.
func (b *batch) indexOf(name string) int {
	p := unsafe.StringData(name)
	s := &b.names[(uint64(uintptr(unsafe.Pointer(p)))*0x9E3779B97F4A7C15)>>60]
	if s.p == p && s.n == len(name) && p != nil {
		return s.idx
	}
	idx := b.scan(name)
	*s = nameSlot{p: p, n: len(name), idx: idx}
	return idx
}

func (b *batch) scan(name string) int {
	if b.index != nil {
		if i, ok := b.index[name]; ok {
			return i
		}
		return -1
	}
	for i := range b.cols {
		if b.cols[i].Name == name {
			return i
		}
	}
	return -1
}

// wideSchema is the column count from which names are looked up in a map.
const wideSchema = 12

// decoder reads the input payloads of an instance. The batch it returns
// points into the payload.
type decoder struct {
	batch batch
}

// decode reads payload into d.batch and reports whether it carried a new
// schema. A payload is a schema message (required in the first) and one
// record batch message.
func (d *decoder) decode(payload []byte) (changed bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed payload: %v", p)
		}
	}()
	batches := 0
	for pos := 0; pos < len(payload); {
		if len(payload)-pos < 8 || le.Uint32(payload[pos:]) != continuation {
			return changed, fmt.Errorf("no message at byte %d", pos)
		}
		n := int(int32(le.Uint32(payload[pos+4:])))
		if n == 0 { // end of stream
			break
		}
		if n < 0 || n > len(payload)-pos-8 {
			return changed, fmt.Errorf("metadata length %d at byte %d exceeds the payload", n, pos)
		}
		meta := payload[pos+8 : pos+8+n]
		msg := fbRoot(meta)
		bodyLen := msg.i64(fbMessageBodyLength)
		bodyStart := pos + 8 + n
		if bodyLen < 0 || bodyLen > int64(len(payload)-bodyStart) {
			return changed, fmt.Errorf("body length %d at byte %d exceeds the payload", bodyLen, pos)
		}
		body := payload[bodyStart : bodyStart+int(bodyLen)]
		hdr, ok := msg.table(fbMessageHeader)
		if !ok {
			return changed, fmt.Errorf("message at byte %d has no header", pos)
		}
		pos = bodyStart + int(bodyLen)
		switch typ := msg.u8(fbMessageHeaderType, 0); typ {
		case fbHeaderSchema:
			if batches > 0 {
				return changed, errors.New("schema message after a record batch")
			}
			c, err := d.readSchema(hdr)
			if err != nil {
				return changed, err
			}
			changed = changed || c
		case fbHeaderRecordBatch:
			if d.batch.cols == nil {
				return changed, errors.New("record batch before any schema")
			}
			if batches++; batches > 1 {
				return changed, errors.New("more than one record batch in a payload")
			}
			if err := d.readBatch(hdr, body); err != nil {
				return changed, err
			}
		default:
			return changed, fmt.Errorf("unsupported message type %d", typ)
		}
	}
	if batches == 0 {
		return changed, errors.New("payload has no record batch")
	}
	return changed, nil
}

func (d *decoder) readSchema(s fbTable) (bool, error) {
	if s.i16(fbSchemaEndianness, 0) != 0 {
		return false, errors.New("schema is big-endian")
	}
	start, n := s.vector(fbSchemaFields, 4)
	if n == 0 {
		return false, errors.New("schema has no fields")
	}
	cols := make([]Column, n)
	for i := range cols {
		f := s.vectorTable(start, i)
		cols[i].Name = f.str(fbFieldName)
		t, err := fieldType(f)
		if err != nil {
			return false, fmt.Errorf("schema field %q: %w", cols[i].Name, err)
		}
		cols[i].Type = t
	}
	if slices.Equal(cols, d.batch.cols) {
		return false, nil
	}
	d.batch.cols = cols
	d.batch.index = nil
	d.batch.names = [16]nameSlot{}
	if len(cols) >= wideSchema {
		d.batch.index = make(map[string]int, len(cols))
		for i := len(cols) - 1; i >= 0; i-- { // the first of equal names wins
			d.batch.index[cols[i].Name] = i
		}
	}
	d.batch.data = make([]colData, len(cols))
	for i, c := range cols {
		d.batch.data[i].kind = kindOf(c.Type)
	}
	return true, nil
}

func fieldType(f fbTable) (Type, error) {
	if f.field(fbFieldDictionary) != 0 {
		return "", errors.New("dictionary-encoded columns are not supported")
	}
	if _, n := f.vector(fbFieldChildren, 4); n != 0 {
		return "", errors.New("nested columns are not supported")
	}
	tag := f.u8(fbFieldTypeType, 0)
	t, _ := f.table(fbFieldType)
	switch tag {
	case fbTypeInt:
		if bw, signed := t.i32(0, 0), t.u8(1, 0); bw != 64 || signed == 0 {
			return "", fmt.Errorf("integer of %d bits (signed %v): want int64", bw, signed != 0)
		}
		return Int64, nil
	case fbTypeFloatingPoint:
		if p := t.i16(0, 0); p != fbPrecisionDouble {
			return "", fmt.Errorf("floating point of precision %d: want float64", p)
		}
		return Float64, nil
	case fbTypeUtf8:
		return String, nil
	case fbTypeBool:
		return Bool, nil
	case fbTypeTimestamp:
		if u := t.i16(0, 0); u != fbUnitMillisecond {
			return "", fmt.Errorf("timestamp of unit %d: want milliseconds", u)
		}
		return TimestampMs, nil
	}
	return "", fmt.Errorf("arrow type tag %d: want one of %s", tag, typeNames)
}

func (d *decoder) readBatch(rb fbTable, body []byte) error {
	if rb.field(fbRecordCompressed) != 0 {
		return errors.New("compressed record batches are not supported")
	}
	b := &d.batch
	rows := rb.i64(fbRecordLength)
	if rows < 0 || rows > 8*int64(len(body)) { // every column needs at least a bit per row
		return fmt.Errorf("record batch of %d rows", rows)
	}
	b.rows = int(rows)
	nodes, nn := rb.vector(fbRecordNodes, 16)
	bufs, nb := rb.vector(fbRecordBuffers, 16)
	if nn != len(b.cols) {
		return fmt.Errorf("record batch has %d columns, schema %d", nn, len(b.cols))
	}
	want := 0
	for _, c := range b.cols {
		want += buffersOf(c.Type)
	}
	if nb != want {
		return fmt.Errorf("record batch has %d buffers, want %d", nb, want)
	}
	buf := 0
	next := func() []byte {
		p := bufs + 16*buf
		buf++
		off, n := int64(le.Uint64(rb.b[p:])), int64(le.Uint64(rb.b[p+8:]))
		if off < 0 || n < 0 || off > int64(len(body)) || n > int64(len(body))-off {
			panic(fmt.Sprintf("buffer %d (offset %d, length %d) outside a body of %d bytes", buf-1, off, n, len(body)))
		}
		return body[off : off+n : off+n]
	}
	for i, c := range b.cols {
		node := nodes + 16*i
		if l := int64(le.Uint64(rb.b[node:])); l != rows {
			return fmt.Errorf("column %q has %d rows, the batch %d", c.Name, l, rows)
		}
		nulls := int64(le.Uint64(rb.b[node+8:]))
		cd := &b.data[i]
		cd.valid, cd.vals, cd.data = next(), next(), nil
		if c.Type == String {
			cd.data = next()
		}
		bitmapLen := (b.rows + 7) / 8
		switch {
		case nulls == 0:
			cd.valid = nil
		case len(cd.valid) < bitmapLen:
			return fmt.Errorf("column %q: validity bitmap of %d bytes for %d rows", c.Name, len(cd.valid), rows)
		}
		var need int
		switch c.Type {
		case Bool:
			need = bitmapLen
		case String:
			need = 4 * (b.rows + 1)
			if b.rows == 0 {
				need = 0
			}
		default:
			need = 8 * b.rows
		}
		if len(cd.vals) < need {
			return fmt.Errorf("column %q: values buffer of %d bytes for %d rows of %s", c.Name, len(cd.vals), rows, c.Type)
		}
		if c.Type == String && b.rows > 0 {
			if err := checkOffsets(cd.vals[:need], len(cd.data)); err != nil {
				return fmt.Errorf("column %q: %w", c.Name, err)
			}
		}
	}
	return nil
}

// checkOffsets checks that string offsets never decrease and stay in
// data, so that rows can slice without checks of their own.
func checkOffsets(offs []byte, dataLen int) error {
	prev := int32(le.Uint32(offs))
	if prev < 0 {
		return fmt.Errorf("negative string offset %d", prev)
	}
	for i := 4; i < len(offs); i += 4 {
		o := int32(le.Uint32(offs[i:]))
		if o < prev {
			return fmt.Errorf("decreasing string offsets %d, %d", prev, o)
		}
		prev = o
	}
	if int(prev) > dataLen {
		return fmt.Errorf("string offset %d beyond data of %d bytes", prev, dataLen)
	}
	return nil
}
