package arrowfmt

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// Arrow's IPC reader trusts the flatbuffer metadata of a message: it
// allocates as many fields or key-value pairs as a vector's length claims
// (an out-of-memory crash, not a recoverable panic, for a corrupt length)
// and computes positions with wrapping uint32 arithmetic. verifyMessage
// checks, before arrow sees a message, that every table, vector and string
// arrow will read lies inside the metadata, and that the message describes
// only what weir encodes: a schema of supported flat types without
// dictionaries, or a record batch whose compressed buffers (if any)
// claim a bounded size (checkCompressedBody). The layout follows Arrow's
// format/Message.fbs and format/Schema.fbs.

var errFlatbuf = errors.New("corrupt flatbuffer")

// Field ids of the tables verifyMessage reads.
const (
	messageHeaderType     = 1
	messageHeader         = 2
	messageBodyLength     = 3
	messageCustomMetadata = 4

	schemaFields         = 1
	schemaCustomMetadata = 2
	schemaFeatures       = 3

	fieldName           = 0
	fieldTypeType       = 2
	fieldType           = 3
	fieldDictionary     = 4
	fieldChildren       = 5
	fieldCustomMetadata = 6

	timestampTimezone = 1

	keyValueKey   = 0
	keyValueValue = 1

	recordBatchNodes         = 1
	recordBatchBuffers       = 2
	recordBatchCompression   = 3
	recordBatchVariadicCount = 4
)

// Union tags of Schema.fbs's Type for the types weir supports.
const (
	fbTypeInt           = 2
	fbTypeFloatingPoint = 3
	fbTypeUtf8          = 5
	fbTypeBool          = 6
	fbTypeTimestamp     = 10
	fbTypeBinary        = 4
)

// msgRules widen what verifyMessage accepts: state files (DecodeFile)
// hold binary columns; both state files and channel payloads may hold
// compressed record batches.
type msgRules struct {
	binary, compressed bool
}

// MaxDecompressed bounds what the compressed buffers of one record batch
// may claim to decompress to: arrow allocates what a buffer's length
// prefix says before it decompresses, so a corrupt prefix would otherwise
// be an out-of-memory crash.
const MaxDecompressed = 1 << 30

// checkCompressedBody checks the body of a compressed record batch
// message (meta verified by verifyMessage): every buffer lies in the
// body, and each one's uncompressed-length prefix is -1 (stored as is)
// or a length that, summed over the buffers, stays within
// MaxDecompressed. An uncompressed batch passes as is.
func checkCompressedBody(meta, body []byte) error {
	root, err := fbRoot(meta)
	if err != nil {
		return err
	}
	hdr, ok, err := root.table(messageHeader)
	if err != nil || !ok || hdr.slot(recordBatchCompression) == 0 {
		return err
	}
	start, n, err := hdr.vector(recordBatchBuffers, 16)
	if err != nil {
		return err
	}
	var total int64
	for i := range n {
		off := int64(le.Uint64(meta[start+16*i:]))
		size := int64(le.Uint64(meta[start+16*i+8:]))
		switch {
		case off < 0 || size < 0 || off > int64(len(body)) || size > int64(len(body))-off:
			return fmt.Errorf("buffer %d at [%d, +%d) lies outside the body of %d bytes", i, off, size, len(body))
		case size == 0:
			continue
		case size < 8:
			return fmt.Errorf("compressed buffer %d has %d bytes, fewer than its 8-byte length prefix", i, size)
		}
		raw := int64(le.Uint64(body[off:]))
		switch {
		case raw == -1:
			raw = size - 8
		case raw < 0:
			return fmt.Errorf("compressed buffer %d claims %d bytes uncompressed", i, raw)
		}
		if total += raw; total > MaxDecompressed {
			return fmt.Errorf("compressed buffers claim more than %d bytes uncompressed", MaxDecompressed)
		}
	}
	return nil
}

// verifyMessage checks the flatbuffer Message meta and returns its type and
// body length.
func verifyMessage(meta []byte, rules msgRules) (ipc.MessageType, int64, error) {
	root, err := fbRoot(meta)
	if err != nil {
		return 0, 0, err
	}
	typ, err := root.uint8(messageHeaderType)
	if err != nil {
		return 0, 0, err
	}
	bodyLen, err := root.int64(messageBodyLength)
	if err != nil {
		return 0, 0, err
	}
	if err := verifyKeyValues(root, messageCustomMetadata); err != nil {
		return 0, 0, err
	}
	hdr, ok, err := root.table(messageHeader)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("message without header")
	}
	switch mt := ipc.MessageType(typ); mt {
	case ipc.MessageSchema:
		return mt, bodyLen, verifySchema(hdr, rules)
	case ipc.MessageRecordBatch:
		if hdr.slot(recordBatchCompression) != 0 {
			if !rules.compressed {
				return 0, 0, fmt.Errorf("compressed record batches are not supported")
			}
			if _, _, err := hdr.table(recordBatchCompression); err != nil {
				return 0, 0, err
			}
		}
		for _, v := range []struct{ id, size int }{
			{recordBatchNodes, 16}, {recordBatchBuffers, 16}, {recordBatchVariadicCount, 8},
		} {
			if _, _, err := hdr.vector(v.id, v.size); err != nil {
				return 0, 0, err
			}
		}
		return mt, bodyLen, nil
	default:
		return 0, 0, fmt.Errorf("unsupported message type %v", mt)
	}
}

func verifySchema(s fbTable, rules msgRules) error {
	start, n, err := s.vector(schemaFields, 4)
	if err != nil {
		return err
	}
	for i := range n {
		f, err := s.vectorTable(start, i)
		if err != nil {
			return err
		}
		if err := verifyField(f, rules); err != nil {
			return fmt.Errorf("field %d: %w", i, err)
		}
	}
	if err := verifyKeyValues(s, schemaCustomMetadata); err != nil {
		return err
	}
	_, _, err = s.vector(schemaFeatures, 8)
	return err
}

func verifyField(f fbTable, rules msgRules) error {
	if err := f.checkString(fieldName); err != nil {
		return err
	}
	tag, err := f.uint8(fieldTypeType)
	if err != nil {
		return err
	}
	switch tag {
	case fbTypeInt, fbTypeFloatingPoint, fbTypeUtf8, fbTypeBool, fbTypeTimestamp:
	case fbTypeBinary:
		if !rules.binary {
			return fmt.Errorf("%w: type tag %d", ErrUnknownType, tag)
		}
	default:
		return fmt.Errorf("%w: type tag %d", ErrUnknownType, tag)
	}
	typ, ok, err := f.table(fieldType)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("field without type")
	}
	if tag == fbTypeTimestamp {
		if err := typ.checkString(timestampTimezone); err != nil {
			return err
		}
	}
	if f.slot(fieldDictionary) != 0 {
		return fmt.Errorf("dictionary-encoded fields are not supported")
	}
	_, n, err := f.vector(fieldChildren, 4)
	if err != nil {
		return err
	}
	if n != 0 {
		return fmt.Errorf("nested fields are not supported")
	}
	return verifyKeyValues(f, fieldCustomMetadata)
}

func verifyKeyValues(t fbTable, id int) error {
	start, n, err := t.vector(id, 4)
	if err != nil {
		return err
	}
	for i := range n {
		kv, err := t.vectorTable(start, i)
		if err != nil {
			return err
		}
		if err := kv.checkString(keyValueKey); err != nil {
			return err
		}
		if err := kv.checkString(keyValueValue); err != nil {
			return err
		}
	}
	return nil
}

// fbTable is a verified flatbuffers table: its position and vtable lie in
// buf. Positions are computed in int, which cannot wrap for buffers of
// realistic size.
type fbTable struct {
	buf             []byte
	pos, vt, vtSize int
}

var le = binary.LittleEndian

func fbRoot(buf []byte) (fbTable, error) {
	if len(buf) < 4 {
		return fbTable{}, errFlatbuf
	}
	return fbTableAt(buf, int(le.Uint32(buf)))
}

func fbTableAt(buf []byte, pos int) (fbTable, error) {
	if pos < 0 || pos > len(buf)-4 {
		return fbTable{}, errFlatbuf
	}
	vt := pos - int(int32(le.Uint32(buf[pos:])))
	if vt < 0 || vt > len(buf)-4 {
		return fbTable{}, errFlatbuf
	}
	vtSize := int(le.Uint16(buf[vt:]))
	if vtSize < 4 || vtSize%2 != 0 || vtSize > len(buf)-vt {
		return fbTable{}, errFlatbuf
	}
	return fbTable{buf: buf, pos: pos, vt: vt, vtSize: vtSize}, nil
}

// slot returns the offset of field id within the table, 0 if absent.
func (t fbTable) slot(id int) int {
	s := 4 + 2*id
	if s+2 > t.vtSize {
		return 0
	}
	return int(le.Uint16(t.buf[t.vt+s:]))
}

// field returns the position of field id, whose value takes size bytes.
func (t fbTable) field(id, size int) (pos int, ok bool, err error) {
	off := t.slot(id)
	if off == 0 {
		return 0, false, nil
	}
	if t.pos+off > len(t.buf)-size {
		return 0, false, errFlatbuf
	}
	return t.pos + off, true, nil
}

func (t fbTable) uint8(id int) (uint8, error) {
	p, ok, err := t.field(id, 1)
	if !ok {
		return 0, err
	}
	return t.buf[p], nil
}

func (t fbTable) int64(id int) (int64, error) {
	p, ok, err := t.field(id, 8)
	if !ok {
		return 0, err
	}
	return int64(le.Uint64(t.buf[p:])), nil
}

// deref follows the unsigned offset stored at p.
func (t fbTable) deref(p int) int { return p + int(le.Uint32(t.buf[p:])) }

func (t fbTable) table(id int) (fbTable, bool, error) {
	p, ok, err := t.field(id, 4)
	if !ok {
		return fbTable{}, false, err
	}
	sub, err := fbTableAt(t.buf, t.deref(p))
	return sub, err == nil, err
}

// vector returns the position of the first element of vector field id and
// its length, after checking that n elements of size bytes fit in buf.
func (t fbTable) vector(id, size int) (start, n int, err error) {
	p, ok, err := t.field(id, 4)
	if !ok {
		return 0, 0, err
	}
	v := t.deref(p)
	if v > len(t.buf)-4 {
		return 0, 0, errFlatbuf
	}
	n = int(le.Uint32(t.buf[v:]))
	if n > (len(t.buf)-v-4)/size {
		return 0, 0, errFlatbuf
	}
	return v + 4, n, nil
}

// vectorTable returns element i of a vector of tables starting at start.
func (t fbTable) vectorTable(start, i int) (fbTable, error) {
	return fbTableAt(t.buf, t.deref(start+4*i))
}

func (t fbTable) checkString(id int) error {
	p, ok, err := t.field(id, 4)
	if !ok {
		return err
	}
	s := t.deref(p)
	if s > len(t.buf)-4 || int(le.Uint32(t.buf[s:])) > len(t.buf)-s-4 {
		return errFlatbuf
	}
	return nil
}
