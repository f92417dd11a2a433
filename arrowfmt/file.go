package arrowfmt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var fileMagic = []byte("ARROW1")

// DecodeFile reads an Arrow IPC file (the format of checkpoint state
// files) without trusting it: it checks the magic numbers, reads the
// stream of messages embedded before the footer, verifies every message's
// flatbuffer metadata before arrow parses it (as Decoder does; binary
// columns and compressed batches are allowed here), and validates each
// batch's buffers. The footer, which only repeats the schema and indexes
// the batches, is not read. Errors wrap ErrMalformed. The caller releases
// the batches.
//
// A file whose schema narrows columns (NarrowSchema) is read as the
// schema it was made from: the batches' narrowed columns are widened
// back into buffers of mem, with 0 in their null slots.
func DecodeFile(data []byte, mem memory.Allocator) (schema *arrow.Schema, batches []arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			releaseAll(batches)
			schema, batches, err = nil, nil, fmt.Errorf("%w: decode file: %v", ErrMalformed, p)
		}
	}()
	const head, tail = 8, 10 // magic+padding; footer length + magic
	if len(data) < head+tail || !bytes.Equal(data[:6], fileMagic) || !bytes.Equal(data[len(data)-6:], fileMagic) {
		return nil, nil, fmt.Errorf("%w: not an Arrow IPC file (magic ARROW1 missing)", ErrMalformed)
	}
	footer := int64(int32(binary.LittleEndian.Uint32(data[len(data)-tail:])))
	end := int64(len(data)) - tail - footer
	if footer < 0 || end < head {
		return nil, nil, fmt.Errorf("%w: footer length %d does not fit a file of %d bytes", ErrMalformed, footer, len(data))
	}
	stream := data[head:end]
	// The embedded stream ends with an end-of-stream marker (continuation
	// and a zero length); older writers leave out the continuation.
	switch {
	case len(stream) >= 8 && binary.LittleEndian.Uint64(stream[len(stream)-8:]) == continuationMarker:
		stream = stream[:len(stream)-8]
	case len(stream) >= 4 && binary.LittleEndian.Uint32(stream[len(stream)-4:]) == 0:
		stream = stream[:len(stream)-4]
	}
	msgs, err := splitMessages(nil, stream, msgRules{binary: true, compressed: true})
	if err != nil {
		return nil, nil, err
	}
	if len(msgs) == 0 || msgs[0].typ != ipc.MessageSchema {
		return nil, nil, fmt.Errorf("%w: the file does not start with a schema", ErrMalformed)
	}
	r, q, err := newMessageReader(msgs[0].meta, mem)
	if err != nil {
		return nil, nil, err
	}
	defer r.Release()
	wire := r.Schema()
	if wire.NumFields() == 0 || !wire.IsNativeEndian() {
		return nil, nil, fmt.Errorf("%w: schema has no fields or is not in native byte order", ErrMalformed)
	}
	schema, narrowed, err := logicalSchema(wire)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: schema: %w", ErrMalformed, err)
	}
	for i, m := range msgs[1:] {
		if m.typ != ipc.MessageRecordBatch {
			return nil, nil, fmt.Errorf("%w: message %d is a %s, not a record batch", ErrMalformed, i+1, m.typ)
		}
		q.push(ipc.NewMessage(memory.NewBufferBytes(m.meta), memory.NewBufferBytes(m.body)))
		if !r.Next() {
			err := r.Err()
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			releaseAll(batches)
			return nil, nil, fmt.Errorf("%w: batch %d: %w", ErrMalformed, i, err)
		}
		rec := r.RecordBatch()
		if err := validateFileRecord(rec); err != nil {
			releaseAll(batches)
			return nil, nil, fmt.Errorf("%w: batch %d: %w", ErrMalformed, i, err)
		}
		if len(narrowed) > 0 {
			batches = append(batches, expand(rec, schema, narrowed, mem))
			continue
		}
		rec.Retain()
		batches = append(batches, rec)
	}
	return schema, batches, nil
}

func validateFileRecord(rec arrow.RecordBatch) error {
	rows := rec.NumRows()
	if rows < 0 {
		return fmt.Errorf("negative row count %d", rows)
	}
	for i, col := range rec.Columns() {
		if int64(col.Len()) != rows {
			return fmt.Errorf("column %q: %d rows, record has %d", rec.ColumnName(i), col.Len(), rows)
		}
		if err := validateArrowArray(col.Data()); err != nil {
			return fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
		}
	}
	return nil
}

func releaseAll(batches []arrow.RecordBatch) {
	for _, b := range batches {
		b.Release()
	}
}
