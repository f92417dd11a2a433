package arrowfmt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// WriteFile writes batches of schema to w as one Arrow IPC file (the
// format of checkpoint state files), each buffer of a batch's body
// compressed with c where that makes it smaller (Arrow IPC body
// compression; any Arrow reader reads it, and DecodeFile). It writes
// flat schemas only: columns of the types FileWritable accepts, as arrays
// that start at offset 0; anything else is ErrNotWritable, before a byte
// is written. A schema of NarrowSchema's writes batches of the schema it
// was made from, their narrowed columns in their narrow width.
//
// Arrow's own IPC writer makes a zstd encoder for every file it writes
// (about 18 MB of history and tables, allocated and zeroed, and two
// goroutines per block it compresses) and offers no way to reuse one.
// WriteFile compresses with encoders shared by every file of the
// process, each buffer in one call on the caller's goroutine, at zstd's
// fastest level: a state file is written on every checkpoint and read
// only on a restore.
func WriteFile(w io.Writer, schema *arrow.Schema, batches []arrow.RecordBatch, c Compression) error {
	return WriteFileEncoded(w, schema, batches, nil, c)
}

// WriteFileEncoded is WriteFile with batches encoded before (EncodeBatch)
// after batches, in order. They were compressed as they were encoded;
// each batch of an Arrow file says its own codec.
func WriteFileEncoded(w io.Writer, schema *arrow.Schema, batches []arrow.RecordBatch, encoded []EncodedBatch, c Compression) error {
	if err := FileWritable(schema, batches); err != nil {
		return err
	}
	for n, e := range encoded {
		if !e.schema.Equal(schema) {
			return fmt.Errorf("%w: encoded batch %d has schema %s, want %s", ErrSchemaMismatch, n, e.schema, schema)
		}
	}
	fw := fileWriterPool.Get().(*fileWriter)
	defer fileWriterPool.Put(fw)
	fw.reset(w, c)
	if err := fw.narrowFor(schema); err != nil {
		return err
	}
	return fw.write(schema, batches, encoded)
}

// EncodedBatch is a record batch encoded as WriteFile writes it into a
// file: its message, metadata and body, which WriteFileEncoded places in
// a file of its schema. It shares no memory with the batch, and takes
// what the batch's buffers take compressed: a capture that must hold
// rows a while holds them so.
type EncodedBatch struct {
	schema *arrow.Schema
	msg    []byte // the metadata (continuation, length, flatbuffer, padding), then the body
	meta   int32  // bytes of msg before the body
	rows   int64
}

// Len returns the bytes of the encoded batch.
func (e EncodedBatch) Len() int { return len(e.msg) }

// Rows returns the batch's rows.
func (e EncodedBatch) Rows() int64 { return e.rows }

// EncodeBatch encodes b, its buffers compressed with c where that makes
// them smaller, for WriteFileEncoded of a file of schema: b's own, or one
// NarrowSchema made of it. It refuses what WriteFile refuses.
func EncodeBatch(b arrow.RecordBatch, schema *arrow.Schema, c Compression) (EncodedBatch, error) {
	if schema == nil {
		schema = b.Schema()
	}
	if err := FileWritable(schema, []arrow.RecordBatch{b}); err != nil {
		return EncodedBatch{}, err
	}
	fw := fileWriterPool.Get().(*fileWriter)
	defer fileWriterPool.Put(fw)
	// The message is written into the writer's scratch and copied out at
	// its size: a buffer grown by doubling left its smaller copies as
	// garbage, more than the message itself, for every batch.
	fw.scratch.Reset()
	fw.reset(&fw.scratch, c)
	if err := fw.narrowFor(schema); err != nil {
		return EncodedBatch{}, err
	}
	defer func() {
		fw.w = nil
		clear(fw.body)
	}()
	if err := fw.batch(b); err != nil {
		return EncodedBatch{}, err
	}
	return EncodedBatch{schema: schema, msg: bytes.Clone(fw.scratch.Bytes()), meta: fw.blocks[0].meta, rows: b.NumRows()}, nil
}

// ErrNotWritable: WriteFile does not write this schema or batch (a
// nested or dictionary column, a type outside FileWritable's, a sliced
// array); Arrow's own IPC writer does.
var ErrNotWritable = errors.New("arrowfmt: not a flat schema WriteFile writes")

// FileWritable reports, as ErrNotWritable, why WriteFile would not write
// batches into a file of schema, or nil if it would. It writes signed and
// unsigned integers, float32 and float64, utf8, binary, bool and
// timestamps, of arrays that start at offset 0 (as builders make them).
// The batches are of schema, or of the schema NarrowSchema made schema
// of.
func FileWritable(schema *arrow.Schema, batches []arrow.RecordBatch) error {
	for i, f := range schema.Fields() {
		if _, ok := fileTypeOf(f.Type); !ok {
			return fmt.Errorf("%w: column %d (%s) is %s", ErrNotWritable, i, f.Name, f.Type)
		}
	}
	logical, _, err := logicalSchema(schema)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotWritable, err)
	}
	for n, b := range batches {
		if !b.Schema().Equal(logical) {
			return fmt.Errorf("%w: batch %d has schema %s, want %s", ErrSchemaMismatch, n, b.Schema(), logical)
		}
		for i, col := range b.Columns() {
			d := col.Data()
			if d.Offset() != 0 {
				return fmt.Errorf("%w: batch %d, column %d starts at offset %d", ErrNotWritable, n, i, d.Offset())
			}
			if bin, ok := col.(array.BinaryLike); ok && col.Len() > 0 && bin.ValueOffset64(0) != 0 {
				return fmt.Errorf("%w: batch %d, column %d: its values start at byte %d", ErrNotWritable, n, i, bin.ValueOffset64(0))
			}
		}
	}
	return nil
}

// fileType is how a column type is written: its flatbuffer Type union tag
// and table, and its buffers after the validity bitmap.
type fileType struct {
	tag   byte
	width int // bytes a value of a fixed-width column; 0: bits (bool); -1: offsets and data
}

func fileTypeOf(dt arrow.DataType) (fileType, bool) {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return fileType{tag: fbTypeInt, width: dt.(arrow.FixedWidthDataType).Bytes()}, true
	case arrow.FLOAT32, arrow.FLOAT64:
		return fileType{tag: fbTypeFloatingPoint, width: dt.(arrow.FixedWidthDataType).Bytes()}, true
	case arrow.TIMESTAMP:
		return fileType{tag: fbTypeTimestamp, width: 8}, true
	case arrow.BOOL:
		return fileType{tag: fbTypeBool}, true
	case arrow.STRING:
		return fileType{tag: fbTypeUtf8, width: -1}, true
	case arrow.BINARY:
		return fileType{tag: fbTypeBinary, width: -1}, true
	}
	return fileType{}, false
}

// Arrow's IPC constants (format/Message.fbs, Schema.fbs, File.fbs).
const (
	metadataV5          = 4 // MetadataVersion.V5
	messageHeaderSchema = 1
	messageHeaderBatch  = 3
	codecLZ4Frame       = 0 // CompressionType
	codecZstd           = 1
	timeUnitSecond      = 0
	precisionSingle     = 1
	precisionDouble     = 2
	ipcAlignment        = 8
)

// fileWriter is WriteFile's scratch, pooled: the flatbuffer builder, the
// body of the batch being written, the positions of what was written.
type fileWriter struct {
	w       io.Writer
	codec   Compression
	pos     int64
	fb      *flatbuffers.Builder
	body    []bodyPiece // the batch's body, in order
	bodyLen int64
	packed  []byte     // the compressed buffers the body's pieces refer to
	bufs    [][2]int64 // offset, length of each buffer in the body
	nodes   [][2]int64 // length, null count of each column
	blocks  []fileBlock
	lz4     *lz4.Writer
	scratch bytes.Buffer // EncodeBatch's message
	// narrow: the file's narrowed columns (NarrowSchema), by column,
	// and the buffer each batch's values of one are narrowed into.
	narrow    []expandCol
	narrowBuf [][]byte
}

// narrowFor sets the columns the writer narrows, those of a file of
// schema, which FileWritable accepted.
func (fw *fileWriter) narrowFor(schema *arrow.Schema) error {
	_, cols, err := logicalSchema(schema)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotWritable, err)
	}
	fw.narrow = cols
	for len(fw.narrowBuf) < len(cols) {
		fw.narrowBuf = append(fw.narrowBuf, nil)
	}
	return nil
}

// bodyPiece is bytes of a batch's body: a column's own buffer (written
// as it is, not copied), padding, or packed[start:end].
type bodyPiece struct {
	bytes      []byte
	start, end int
}

// fileBlock is a record batch's place in the file, for the footer.
type fileBlock struct {
	offset int64
	meta   int32
	body   int64
}

var fileWriterPool = sync.Pool{New: func() any { return &fileWriter{fb: flatbuffers.NewBuilder(1024)} }}

// zstdFileEncoder is the zstd encoder of every WriteFile, made once:
// EncodeAll may be called from many goroutines at once, each call taking
// one of GOMAXPROCS block encoders and running on its caller's goroutine.
// Its window (1 MiB) covers a buffer of a full batch of int64s (512 KiB)
// whole.
var zstdFileEncoder = sync.OnceValue(func() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithWindowSize(1<<20),
		zstd.WithLowerEncoderMem(true),
		zstd.WithEncoderCRC(false))
	if err != nil {
		panic(fmt.Sprintf("arrowfmt: zstd encoder: %v", err)) // the options are constants
	}
	return enc
})

func (fw *fileWriter) reset(w io.Writer, c Compression) {
	fw.w, fw.codec, fw.pos = w, c, 0
	fw.blocks, fw.narrow = fw.blocks[:0], nil
}

func (fw *fileWriter) write(schema *arrow.Schema, batches []arrow.RecordBatch, encoded []EncodedBatch) error {
	defer func() {
		fw.w = nil
		clear(fw.body) // the pool holds no column's buffers
	}()
	if err := fw.put(fileMagic, make([]byte, 2)); err != nil { // "ARROW1" and padding to 8
		return err
	}
	fw.fb.Reset()
	fw.fb.Finish(fw.message(messageHeaderSchema, fw.schema(schema), 0))
	if _, err := fw.putMessage(fw.fb.FinishedBytes()); err != nil {
		return err
	}
	for _, b := range batches {
		if err := fw.batch(b); err != nil {
			return err
		}
	}
	for _, e := range encoded {
		blk := fileBlock{offset: fw.pos, meta: e.meta, body: int64(len(e.msg)) - int64(e.meta)}
		if err := fw.put(e.msg); err != nil {
			return err
		}
		fw.blocks = append(fw.blocks, blk)
	}
	var eos [8]byte // the stream's end: continuation and a zero length
	binary.LittleEndian.PutUint32(eos[:], continuationMarker)
	if err := fw.put(eos[:]); err != nil {
		return err
	}
	fw.fb.Reset()
	fw.fb.Finish(fw.footer(schema))
	footer := fw.fb.FinishedBytes()
	var size [4]byte
	binary.LittleEndian.PutUint32(size[:], uint32(len(footer)))
	return fw.put(footer, size[:], fileMagic)
}

// put writes each of ps.
func (fw *fileWriter) put(ps ...[]byte) error {
	for _, p := range ps {
		n, err := fw.w.Write(p)
		fw.pos += int64(n)
		if err != nil {
			return fmt.Errorf("write Arrow file: %w", err)
		}
	}
	return nil
}

var padding [ipcAlignment]byte

// putMessage writes a message's metadata: the continuation marker, its
// length and the flatbuffer, padded so that what follows is aligned. It
// returns the bytes written.
func (fw *fileWriter) putMessage(meta []byte) (int32, error) {
	n := (len(meta) + 8 + ipcAlignment - 1) / ipcAlignment * ipcAlignment
	var head [8]byte
	binary.LittleEndian.PutUint32(head[:], continuationMarker)
	binary.LittleEndian.PutUint32(head[4:], uint32(n-8))
	return int32(n), fw.put(head[:], meta, padding[:n-8-len(meta)])
}

// batch writes a record batch message: its buffers, compressed, into the
// body, then the metadata that says where each one is, then the body.
func (fw *fileWriter) batch(b arrow.RecordBatch) error {
	clear(fw.body) // drop the columns' buffers
	fw.body, fw.bodyLen, fw.packed = fw.body[:0], 0, fw.packed[:0]
	fw.bufs, fw.nodes = fw.bufs[:0], fw.nodes[:0]
	rows := int(b.NumRows())
	k := 0 // the next narrowed column
	for i, col := range b.Columns() {
		d := col.Data()
		ft, _ := fileTypeOf(col.DataType())
		var narrowed []byte
		if k < len(fw.narrow) && fw.narrow[k].index == i {
			var err error
			if narrowed, err = fw.narrow[k].narrowInto(fw.narrowBuf[k], d); err != nil {
				return fmt.Errorf("column %q: %w", b.ColumnName(i), err)
			}
			fw.narrowBuf[k], ft.width = narrowed, fw.narrow[k].width
			k++
		}
		fw.nodes = append(fw.nodes, [2]int64{int64(rows), int64(col.NullN())})
		var validity []byte
		if col.NullN() > 0 {
			validity = bufferBytes(d.Buffers()[0], bitmapBytes(rows))
		}
		bufs := [3][]byte{validity}
		switch {
		case narrowed != nil:
			bufs[1] = narrowed
		case ft.width > 0:
			bufs[1] = bufferBytes(d.Buffers()[1], rows*ft.width)
		case ft.width == 0:
			bufs[1] = bufferBytes(d.Buffers()[1], bitmapBytes(rows))
		case rows > 0:
			bufs[1] = bufferBytes(d.Buffers()[1], (rows+1)*4)
			offsets := arrow.Int32Traits.CastFromBytes(bufs[1])
			bufs[2] = bufferBytes(d.Buffers()[2], int(offsets[rows]))
		}
		n := 2
		if ft.width < 0 {
			n = 3 // offsets and data
		}
		for _, p := range bufs[:n] {
			if err := fw.buffer(p); err != nil {
				return err
			}
		}
	}
	fw.fb.Reset()
	fw.fb.Finish(fw.message(messageHeaderBatch, fw.recordBatch(int64(rows)), fw.bodyLen))
	blk := fileBlock{offset: fw.pos, body: fw.bodyLen}
	var err error
	if blk.meta, err = fw.putMessage(fw.fb.FinishedBytes()); err != nil {
		return err
	}
	fw.blocks = append(fw.blocks, blk)
	for _, pc := range fw.body {
		p := pc.bytes
		if p == nil {
			p = fw.packed[pc.start:pc.end]
		}
		if err := fw.put(p); err != nil {
			return err
		}
	}
	return nil
}

func bitmapBytes(n int) int { return (n + 7) / 8 }

// bufferBytes returns the first n bytes of buf (none of a nil buf, which
// an empty array may have).
func bufferBytes(buf *memory.Buffer, n int) []byte {
	if n == 0 {
		return nil
	}
	return buf.Bytes()[:n]
}

// buffer appends p to the body, compressed if that makes it smaller
// (prefixed with its length, or with -1 and stored as is), and padded.
func (fw *fileWriter) buffer(p []byte) error {
	n := len(p)
	switch {
	case n == 0:
	case fw.codec == CompressNone:
		fw.body = append(fw.body, bodyPiece{bytes: p})
	default:
		start := len(fw.packed)
		fw.packed = binary.LittleEndian.AppendUint64(fw.packed, uint64(n))
		var err error
		if fw.packed, err = fw.compress(fw.packed, p); err != nil {
			return err
		}
		if len(fw.packed)-start-8 < n {
			fw.body = append(fw.body, bodyPiece{start: start, end: len(fw.packed)})
			n = len(fw.packed) - start
			break
		}
		fw.packed = binary.LittleEndian.AppendUint64(fw.packed[:start], ^uint64(0))
		fw.body = append(fw.body, bodyPiece{start: start, end: len(fw.packed)}, bodyPiece{bytes: p})
		n += 8
	}
	fw.bufs = append(fw.bufs, [2]int64{fw.bodyLen, int64(n)})
	fw.bodyLen += int64(n)
	if pad := -n & (ipcAlignment - 1); pad > 0 {
		fw.body = append(fw.body, bodyPiece{bytes: padding[:pad]})
		fw.bodyLen += int64(pad)
	}
	return nil
}

// compress appends p compressed to dst.
func (fw *fileWriter) compress(dst, p []byte) ([]byte, error) {
	if fw.codec == CompressZstd {
		return zstdFileEncoder().EncodeAll(p, dst), nil
	}
	if fw.lz4 == nil {
		fw.lz4 = lz4.NewWriter(nil)
		// As Arrow's writers: no checksum, blocks of 64 KiB.
		if err := fw.lz4.Apply(lz4.ChecksumOption(false), lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			return dst, fmt.Errorf("lz4 writer: %w", err)
		}
	}
	out := appendWriter{b: dst}
	fw.lz4.Reset(&out)
	if _, err := fw.lz4.Write(p); err != nil {
		return dst, fmt.Errorf("compress with lz4: %w", err)
	}
	if err := fw.lz4.Close(); err != nil {
		return dst, fmt.Errorf("compress with lz4: %w", err)
	}
	fw.lz4.Reset(nil)
	return out.b, nil
}

// message builds a Message table (its header built already).
func (fw *fileWriter) message(typ byte, header flatbuffers.UOffsetT, bodyLen int64) flatbuffers.UOffsetT {
	b := fw.fb
	b.StartObject(5)
	b.PrependInt16Slot(0, metadataV5, 0)
	b.PrependByteSlot(1, typ, 0)
	b.PrependUOffsetTSlot(2, header, 0)
	b.PrependInt64Slot(3, bodyLen, 0)
	return b.EndObject()
}

// recordBatch builds the RecordBatch table of the batch in fw.nodes and
// fw.bufs.
func (fw *fileWriter) recordBatch(rows int64) flatbuffers.UOffsetT {
	b := fw.fb
	b.StartVector(16, len(fw.nodes), 8)
	for i := len(fw.nodes) - 1; i >= 0; i-- {
		b.Prep(8, 16)
		b.PrependInt64(fw.nodes[i][1])
		b.PrependInt64(fw.nodes[i][0])
	}
	nodes := b.EndVector(len(fw.nodes))
	b.StartVector(16, len(fw.bufs), 8)
	for i := len(fw.bufs) - 1; i >= 0; i-- {
		b.Prep(8, 16)
		b.PrependInt64(fw.bufs[i][1])
		b.PrependInt64(fw.bufs[i][0])
	}
	bufs := b.EndVector(len(fw.bufs))
	var comp flatbuffers.UOffsetT
	if fw.codec != CompressNone {
		b.StartObject(2) // BodyCompression: codec, method BUFFER (0)
		codec := byte(codecZstd)
		if fw.codec == CompressLZ4 {
			codec = codecLZ4Frame
		}
		b.PrependByteSlot(0, codec, 0)
		comp = b.EndObject()
	}
	b.StartObject(5)
	b.PrependInt64Slot(0, rows, 0)
	b.PrependUOffsetTSlot(1, nodes, 0)
	b.PrependUOffsetTSlot(2, bufs, 0)
	if comp != 0 {
		b.PrependUOffsetTSlot(3, comp, 0)
	}
	return b.EndObject()
}

// footer builds the Footer table: the schema again, and the place of
// every record batch.
func (fw *fileWriter) footer(schema *arrow.Schema) flatbuffers.UOffsetT {
	b := fw.fb
	s := fw.schema(schema)
	b.StartVector(24, 0, 8)
	dicts := b.EndVector(0)
	b.StartVector(24, len(fw.blocks), 8)
	for i := len(fw.blocks) - 1; i >= 0; i-- {
		blk := fw.blocks[i]
		b.Prep(8, 24)
		b.PrependInt64(blk.body)
		b.Pad(4)
		b.PrependInt32(blk.meta)
		b.PrependInt64(blk.offset)
	}
	recs := b.EndVector(len(fw.blocks))
	b.StartObject(5)
	b.PrependInt16Slot(0, metadataV5, 0)
	b.PrependUOffsetTSlot(1, s, 0)
	b.PrependUOffsetTSlot(2, dicts, 0)
	b.PrependUOffsetTSlot(3, recs, 0)
	return b.EndObject()
}

// schema builds a Schema table (little-endian, the default).
func (fw *fileWriter) schema(schema *arrow.Schema) flatbuffers.UOffsetT {
	b := fw.fb
	fields := make([]flatbuffers.UOffsetT, schema.NumFields())
	for i, f := range schema.Fields() {
		fields[i] = fw.field(f)
	}
	meta := fw.keyValues(schema.Metadata())
	vec := fw.tables(fields)
	b.StartObject(4)
	b.PrependUOffsetTSlot(1, vec, 0)
	if meta != 0 {
		b.PrependUOffsetTSlot(2, meta, 0)
	}
	return b.EndObject()
}

// field builds a Field table of a flat column. Its children vector is
// there, empty: Arrow C++ refuses a field without one.
func (fw *fileWriter) field(f arrow.Field) flatbuffers.UOffsetT {
	b := fw.fb
	name := b.CreateString(f.Name)
	ft, _ := fileTypeOf(f.Type)
	typ := fw.typeTable(f.Type)
	children := fw.tables(nil)
	meta := fw.keyValues(f.Metadata)
	b.StartObject(7)
	b.PrependUOffsetTSlot(0, name, 0)
	b.PrependBoolSlot(1, f.Nullable, false)
	b.PrependByteSlot(2, ft.tag, 0)
	b.PrependUOffsetTSlot(3, typ, 0)
	b.PrependUOffsetTSlot(5, children, 0)
	if meta != 0 {
		b.PrependUOffsetTSlot(6, meta, 0)
	}
	return b.EndObject()
}

// typeTable builds the table of a column's Type union.
func (fw *fileWriter) typeTable(dt arrow.DataType) flatbuffers.UOffsetT {
	b := fw.fb
	switch t := dt.(type) {
	case arrow.FixedWidthDataType:
		switch dt.ID() {
		case arrow.FLOAT32, arrow.FLOAT64:
			precision := int16(precisionDouble)
			if dt.ID() == arrow.FLOAT32 {
				precision = precisionSingle
			}
			b.StartObject(1)
			b.PrependInt16Slot(0, precision, 0)
			return b.EndObject()
		case arrow.TIMESTAMP:
			ts := dt.(*arrow.TimestampType)
			var tz flatbuffers.UOffsetT
			if ts.TimeZone != "" {
				tz = b.CreateString(ts.TimeZone)
			}
			b.StartObject(2)
			b.PrependInt16Slot(0, int16(ts.Unit), timeUnitSecond)
			if tz != 0 {
				b.PrependUOffsetTSlot(1, tz, 0)
			}
			return b.EndObject()
		case arrow.BOOL:
			b.StartObject(0)
			return b.EndObject()
		}
		signed := false
		switch dt.ID() {
		case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
			signed = true
		}
		b.StartObject(2)
		b.PrependInt32Slot(0, int32(t.BitWidth()), 0)
		b.PrependBoolSlot(1, signed, false)
		return b.EndObject()
	}
	b.StartObject(0) // Utf8, Binary
	return b.EndObject()
}

// keyValues builds a vector of KeyValue tables, or returns 0 for none.
func (fw *fileWriter) keyValues(md arrow.Metadata) flatbuffers.UOffsetT {
	if md.Len() == 0 {
		return 0
	}
	b := fw.fb
	kvs := make([]flatbuffers.UOffsetT, md.Len())
	for i := range kvs {
		k, v := b.CreateString(md.Keys()[i]), b.CreateString(md.Values()[i])
		b.StartObject(2)
		b.PrependUOffsetTSlot(0, k, 0)
		b.PrependUOffsetTSlot(1, v, 0)
		kvs[i] = b.EndObject()
	}
	return fw.tables(kvs)
}

// tables builds a vector of tables.
func (fw *fileWriter) tables(ts []flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	fw.fb.StartVector(4, len(ts), 4)
	for i := len(ts) - 1; i >= 0; i-- {
		fw.fb.PrependUOffsetT(ts[i])
	}
	return fw.fb.EndVector(len(ts))
}
