package arrowfmt

import (
	"bytes"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Encoder turns the record batches of one channel into Arrow IPC stream
// messages. The first payload carries the schema message followed by the
// record batch message; later payloads carry only the record batch message,
// so a channel pays for its schema once. An Encoder is not safe for
// concurrent use.
type Encoder struct {
	schema  *arrow.Schema
	opts    []ipc.Option // the writer's, but for its schema
	w       *ipc.Writer
	wire    *arrow.Schema // the schema w writes: schema, or its compact form
	compact *compactor    // nil unless WireOptions.Compact
	out     appendWriter
	scratch []byte
	err     error
}

// appendWriter collects what the ipc.Writer writes into a caller's slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// Compression is the codec an Encoder compresses the buffers of record
// batch bodies with (Arrow IPC body compression), or none.
type Compression uint8

const (
	CompressNone Compression = iota
	CompressLZ4              // LZ4 frames: fast, for loopback and LAN links
	CompressZstd             // zstd: smaller, slower
)

// minSpaceSavings is what compressing a buffer must save for the encoder
// to send it compressed; a buffer that compresses worse (random floats,
// say) goes as is, and its reader pays no decompression.
const minSpaceSavings = 0.15

var compressionNames = []string{CompressNone: "none", CompressLZ4: "lz4", CompressZstd: "zstd"}

func (c Compression) String() string {
	if int(c) < len(compressionNames) {
		return compressionNames[c]
	}
	return fmt.Sprintf("Compression(%d)", c)
}

// ParseCompression parses none, lz4 or zstd.
func ParseCompression(s string) (Compression, error) {
	for c, name := range compressionNames {
		if s == name {
			return Compression(c), nil
		}
	}
	return 0, fmt.Errorf("%q is not a compression: want none, lz4 or zstd", s)
}

// NewEncoder returns an Encoder for record batches of schema. mem is used
// for temporary buffers while encoding.
func NewEncoder(schema *arrow.Schema, mem memory.Allocator) *Encoder {
	return NewWireEncoder(schema, mem, WireOptions{})
}

// WireOptions say how an Encoder writes payloads that leave the process.
// A Decoder reads any of them.
type WireOptions struct {
	// Compression compresses each buffer of a record batch where that
	// saves at least 15% of the buffer.
	Compression Compression
	// Compact sends int64 and timestamp_ms columns in 1, 2 or 4 bytes a
	// value where their values fit (see compact.go). A payload of a
	// compact column is standard Arrow IPC (an unsigned column with its
	// base in the field's metadata) that only a Decoder turns back into
	// the schema's type.
	Compact bool
}

// NewWireEncoder returns an Encoder for record batches of schema that
// writes them as o says.
func NewWireEncoder(schema *arrow.Schema, mem memory.Allocator, o WireOptions) *Encoder {
	e := &Encoder{schema: schema, opts: []ipc.Option{ipc.WithAllocator(mem)}}
	switch o.Compression {
	case CompressLZ4:
		e.opts = append(e.opts, ipc.WithLZ4(), ipc.WithMinSpaceSavings(minSpaceSavings))
	case CompressZstd:
		e.opts = append(e.opts, ipc.WithZstd(), ipc.WithMinSpaceSavings(minSpaceSavings))
	}
	if o.Compact {
		e.compact = newCompactor(schema)
	} else {
		e.setWire(schema)
	}
	return e
}

// setWire starts a new IPC stream of schema: its first payload carries
// the schema message.
func (e *Encoder) setWire(schema *arrow.Schema) {
	if e.w != nil {
		_ = e.w.Close() // its end-of-stream marker goes nowhere
		e.out.b = nil
	}
	e.wire = schema
	e.w = ipc.NewWriter(&e.out, append(e.opts, ipc.WithSchema(schema))...)
}

// Encode returns rec as a new payload that the caller owns.
//
// A record whose schema differs from the encoder's is rejected with
// ErrSchemaMismatch and the encoder stays usable. Any other error is sticky:
// the stream the encoder was writing is broken, and the channel needs a new
// Encoder (whose first payload carries the schema again).
func (e *Encoder) Encode(rec arrow.RecordBatch) ([]byte, error) {
	b, err := e.encode(e.scratch[:0], rec)
	if err != nil {
		return nil, err
	}
	e.scratch = b[:0]
	return bytes.Clone(b), nil
}

// AppendEncode appends the payload for rec to dst and returns the extended
// slice, for callers that reuse buffers. On error dst is returned unchanged.
// Errors are as for Encode.
func (e *Encoder) AppendEncode(dst []byte, rec arrow.RecordBatch) ([]byte, error) {
	return e.encode(dst, rec)
}

func (e *Encoder) encode(dst []byte, rec arrow.RecordBatch) ([]byte, error) {
	if e.err != nil {
		return dst, e.err
	}
	if !rec.Schema().Equal(e.schema) {
		return dst, fmt.Errorf("%w: encode record batch with schema %v: encoder has %v", ErrSchemaMismatch, rec.Schema(), e.schema)
	}
	if e.compact != nil {
		wire, schema := e.compact.apply(rec)
		defer wire.Release()
		if schema != e.wire {
			e.setWire(schema)
		}
		rec = wire
	}
	e.out.b = dst
	err := e.w.Write(rec)
	b := e.out.b
	e.out.b = nil
	if err != nil {
		e.err = fmt.Errorf("encode record batch: %w", err)
		return dst, e.err
	}
	return b, nil
}

// Decoder turns the payloads of one channel, as produced by an Encoder, back
// into record batches. It is not safe for concurrent use.
//
// Decoding is zero-copy: the arrays of a returned record point into the
// payload. The payload must therefore stay unmodified while the record (or
// any array or slice taken from it) is in use; it may be backed by an
// immutable string, because decoding never writes into it. The garbage
// collector keeps the payload alive as long as the record references it.
type Decoder struct {
	mem        memory.Allocator
	schema     *arrow.Schema
	types      []Type
	schemaMeta []byte      // copy of the schema message metadata, to rebuild the reader
	compact    []expandCol // the wire schema's compact columns, widened by Decode
	recycle    recycler    // the widened columns' buffers
	queue      *messageQueue
	reader     *ipc.Reader
	msgs       []rawMessage
}

// NewDecoder returns a Decoder that has not seen a schema yet. mem is used
// for what the IPC reader allocates; the record's data is not copied.
func NewDecoder(mem memory.Allocator) *Decoder {
	return &Decoder{mem: mem}
}

// Schema returns the schema of the channel, or nil before the first payload.
func (d *Decoder) Schema() *arrow.Schema { return d.schema }

// Decode returns the record batch carried by payload; the caller releases it.
// The first payload of a channel must carry the schema (ErrNoSchema
// otherwise); a later payload that carries a schema, as a restarted Encoder
// sends, switches the decoder to that schema. A payload that is not a valid
// encoding of a supported schema gives an error wrapping ErrMalformed, and
// the decoder stays usable for the next payload.
func (d *Decoder) Decode(payload []byte) (rec arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			if rec != nil {
				rec.Release()
				rec = nil
			}
			d.closeReader()
			err = fmt.Errorf("%w: decode record batch: %v", ErrMalformed, p)
		}
	}()

	d.msgs, err = splitMessages(d.msgs[:0], payload, msgRules{compressed: true})
	defer clear(d.msgs) // do not keep the payload alive through the scratch
	if err != nil {
		return nil, err
	}
	msgs := d.msgs
	if len(msgs) > 0 && msgs[0].typ == ipc.MessageSchema {
		if err := d.setSchema(msgs[0].meta); err != nil {
			return nil, err
		}
		msgs = msgs[1:]
	}
	if d.schemaMeta == nil {
		return nil, fmt.Errorf("%w: first payload of a channel carries no schema message", ErrNoSchema)
	}
	if len(msgs) != 1 || msgs[0].typ != ipc.MessageRecordBatch {
		return nil, fmt.Errorf("%w: want one record batch message, got %s", ErrMalformed, describe(msgs))
	}
	if d.reader == nil {
		if d.reader, d.queue, err = newMessageReader(d.schemaMeta, d.mem); err != nil {
			return nil, err
		}
	}

	d.queue.push(ipc.NewMessage(memory.NewBufferBytes(msgs[0].meta), memory.NewBufferBytes(msgs[0].body)))
	if !d.reader.Next() {
		err := d.reader.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		d.closeReader() // a failed ipc.Reader stays failed; build a new one next time
		return nil, fmt.Errorf("%w: decode record batch: %w", ErrMalformed, err)
	}
	wire := d.reader.RecordBatch() // the reader's until its next record
	if err := validateRecord(wire, d.types, d.compact); err != nil {
		return nil, fmt.Errorf("%w: decode record batch: %w", ErrMalformed, err)
	}
	if d.compact != nil {
		return expand(wire, d.schema, d.compact, &d.recycle), nil
	}
	wire.Retain()
	return wire, nil
}

// Close releases what the decoder holds. It is safe to call twice.
func (d *Decoder) Close() error {
	d.closeReader()
	return nil
}

func (d *Decoder) closeReader() {
	if d.reader != nil {
		d.reader.Release()
		d.reader = nil
		d.queue = nil
	}
}

func (d *Decoder) setSchema(meta []byte) error {
	meta = bytes.Clone(meta) // the payload may be large; keep only the schema
	r, q, err := newMessageReader(meta, d.mem)
	if err != nil {
		return err
	}
	schema := r.Schema()
	if schema.NumFields() == 0 {
		// Its record batches could claim any number of rows.
		r.Release()
		return fmt.Errorf("%w: schema has no fields", ErrMalformed)
	}
	if !schema.IsNativeEndian() {
		r.Release()
		return fmt.Errorf("%w: schema is not in native byte order", ErrMalformed)
	}
	schema, compact, err := logicalSchema(schema)
	if err != nil {
		r.Release()
		return fmt.Errorf("%w: decode schema: %w", ErrMalformed, err)
	}
	types, err := Types(schema)
	if err != nil {
		r.Release()
		return fmt.Errorf("%w: decode schema: %w", ErrMalformed, err)
	}
	d.closeReader()
	d.reader, d.queue = r, q
	d.schema, d.types, d.schemaMeta, d.compact = schema, types, meta, compact
	return nil
}

// newMessageReader returns an ipc.Reader that has read the schema message
// meta and reads further messages from the returned queue.
func newMessageReader(meta []byte, mem memory.Allocator) (*ipc.Reader, *messageQueue, error) {
	q := &messageQueue{}
	q.push(ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(nil)))
	// Native endianness is checked by the caller; swapping would write into
	// the payload.
	r, err := ipc.NewReaderFromMessageReader(q, ipc.WithAllocator(mem), ipc.WithEnsureNativeEndian(false))
	if err != nil {
		q.Release()
		return nil, nil, fmt.Errorf("%w: decode schema: %w", ErrMalformed, err)
	}
	return r, q, nil
}

// messageQueue is the ipc.MessageReader of a Decoder: Decode pushes the
// message it parsed from a payload, and the ipc.Reader takes it.
type messageQueue struct {
	msgs []*ipc.Message
	cur  *ipc.Message // returned last; like ipc's own reader, valid until the next call
}

var _ ipc.MessageReader = (*messageQueue)(nil)

func (q *messageQueue) push(m *ipc.Message) { q.msgs = append(q.msgs, m) }

func (q *messageQueue) Message() (*ipc.Message, error) {
	if q.cur != nil {
		q.cur.Release()
		q.cur = nil
	}
	if len(q.msgs) == 0 {
		return nil, io.EOF
	}
	q.cur = q.msgs[0]
	q.msgs[0] = nil
	q.msgs = q.msgs[1:]
	return q.cur, nil
}

// Retain is a no-op: a queue belongs to exactly one ipc.Reader, which
// releases it once.
func (q *messageQueue) Retain() {}

func (q *messageQueue) Release() {
	if q.cur != nil {
		q.cur.Release()
		q.cur = nil
	}
	for _, m := range q.msgs {
		m.Release()
	}
	q.msgs = nil
}

// rawMessage is one encapsulated IPC message inside a payload.
type rawMessage struct {
	typ  ipc.MessageType
	meta []byte // flatbuffer Message
	body []byte
}

func describe(msgs []rawMessage) string {
	if len(msgs) == 0 {
		return "none"
	}
	var b []byte
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, m.typ.String()...)
	}
	return string(b)
}

const continuationMarker = 0xFFFFFFFF

// splitMessages appends to dst the encapsulated messages of payload:
// continuation marker, metadata length, flatbuffer metadata, body. The
// returned slices alias payload; their capacity is clipped so nothing can
// append into it.
func splitMessages(dst []rawMessage, p []byte, rules msgRules) ([]rawMessage, error) {
	if len(p) == 0 {
		return dst, fmt.Errorf("%w: empty payload", ErrMalformed)
	}
	for pos := 0; pos < len(p); {
		if len(p)-pos < 8 {
			return dst, fmt.Errorf("%w: truncated message prefix at byte %d", ErrMalformed, pos)
		}
		if le.Uint32(p[pos:]) != continuationMarker {
			return dst, fmt.Errorf("%w: no continuation marker at byte %d", ErrMalformed, pos)
		}
		n := int64(int32(le.Uint32(p[pos+4:])))
		if n <= 0 {
			return dst, fmt.Errorf("%w: metadata length %d at byte %d", ErrMalformed, n, pos)
		}
		start := int64(pos) + 8
		if n > int64(len(p))-start {
			return dst, fmt.Errorf("%w: metadata length %d at byte %d exceeds payload", ErrMalformed, n, pos)
		}
		meta := p[start : start+n : start+n]
		typ, bodyLen, err := verifyMessage(meta, rules)
		if err != nil {
			return dst, fmt.Errorf("%w: message at byte %d: %w", ErrMalformed, pos, err)
		}
		bodyStart := start + n
		if bodyLen < 0 || bodyLen > int64(len(p))-bodyStart {
			return dst, fmt.Errorf("%w: body length %d at byte %d exceeds payload", ErrMalformed, bodyLen, pos)
		}
		body := p[bodyStart : bodyStart+bodyLen : bodyStart+bodyLen]
		if typ == ipc.MessageRecordBatch && rules.compressed {
			if err := checkCompressedBody(meta, body); err != nil {
				return dst, fmt.Errorf("%w: message at byte %d: %w", ErrMalformed, pos, err)
			}
		}
		dst = append(dst, rawMessage{typ: typ, meta: meta, body: body})
		pos = int(bodyStart + bodyLen)
	}
	return dst, nil
}
