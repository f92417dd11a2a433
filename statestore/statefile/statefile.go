package statefile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/manifest"
)

// MaxExpansion bounds what decoding a state file may allocate, as a
// multiple of its size (compressed columns grow when decoded), plus 1 MiB:
// a damaged length in the file is refused instead of allocating gigabytes.
const MaxExpansion = 64

// Encode writes batches of schema as one Arrow IPC file whose buffers are
// compressed with codec (Arrow IPC body compression; Decode, and any
// Arrow reader, reads each codec). It returns f, which names the file
// (key, kind, operator, key groups), with Size and SHA256 set to the
// encoded bytes'. A schema may narrow columns (arrowfmt.NarrowSchema):
// the batches are then of the schema it was made of, which Decode
// returns, and f says Narrowed (manifest version 3).
func Encode(f manifest.File, schema *arrow.Schema, batches []arrow.RecordBatch, mem memory.Allocator, codec arrowfmt.Compression) (manifest.File, []byte, error) {
	var buf bytes.Buffer
	f, err := EncodeTo(&buf, f, schema, batches, nil, mem, codec)
	if err != nil {
		return f, nil, err
	}
	return f, buf.Bytes(), nil
}

// EncodeTo is Encode writing the file to w as it is encoded: a large
// file goes to an offheap.Buffer, uploaded from there (blob.PutReader),
// rather than to one slice that doubles as it grows.
//
// A flat schema (every state schema weir has) is written by
// arrowfmt.WriteFile, whose zstd encoders every file shares; anything else
// by Arrow's IPC writer, with mem. Batches encoded already (a part's
// Encoded, arrowfmt.EncodeBatch) follow batches; only a flat schema has
// them.
func EncodeTo(w io.Writer, f manifest.File, schema *arrow.Schema, batches []arrow.RecordBatch, encoded []arrowfmt.EncodedBatch, mem memory.Allocator, codec arrowfmt.Compression) (manifest.File, error) {
	out := &summingWriter{w: w, h: sha256.New()}
	f.Narrowed = arrowfmt.Narrowed(schema)
	// WriteFile refuses what it does not write before it writes a byte.
	switch err := arrowfmt.WriteFileEncoded(out, schema, batches, encoded, codec); {
	case err == nil:
		f.Size, f.SHA256 = out.n, hex.EncodeToString(out.h.Sum(nil))
		return f, nil
	case !errors.Is(err, arrowfmt.ErrNotWritable) || len(encoded) > 0 || f.Narrowed:
		// Arrow's writer writes neither encoded batches nor narrowed
		// columns.
		return f, fmt.Errorf("encode state: %w", err)
	}
	opts := []ipc.Option{ipc.WithSchema(schema), ipc.WithAllocator(mem)}
	switch codec {
	case arrowfmt.CompressLZ4:
		opts = append(opts, ipc.WithLZ4())
	case arrowfmt.CompressZstd:
		opts = append(opts, ipc.WithZstd())
	}
	fw, err := ipc.NewFileWriter(out, opts...)
	if err != nil {
		return f, fmt.Errorf("encode state: %w", err)
	}
	for _, b := range batches {
		if err := fw.Write(b); err != nil {
			_ = fw.Close()
			return f, fmt.Errorf("encode state: %w", err)
		}
	}
	if err := fw.Close(); err != nil {
		return f, fmt.Errorf("encode state: %w", err)
	}
	f.Size, f.SHA256 = out.n, hex.EncodeToString(out.h.Sum(nil))
	return f, nil
}

// summingWriter writes to w and counts and hashes what it writes.
type summingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (s *summingWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.h.Write(p[:n])
	s.n += int64(n)
	return n, err
}

func sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// MismatchError says that a state file is not what its manifest entry
// records: it was damaged or replaced.
type MismatchError struct {
	Key                   string
	WantSize, GotSize     int64
	WantSHA256, GotSHA256 string // set when the sizes match
}

func (e *MismatchError) Error() string {
	if e.WantSize != e.GotSize {
		return fmt.Sprintf("state file %s has %d bytes, the manifest says %d", e.Key, e.GotSize, e.WantSize)
	}
	return fmt.Sprintf("state file %s has SHA-256 %s, the manifest says %s", e.Key, e.GotSHA256, e.WantSHA256)
}

// Verify checks data against f's size and SHA-256; a mismatch is a
// *MismatchError.
func Verify(f manifest.File, data []byte) error {
	if int64(len(data)) != f.Size {
		return &MismatchError{Key: f.Segment(), WantSize: f.Size, GotSize: int64(len(data))}
	}
	if got := sum(data); got != f.SHA256 {
		return &MismatchError{Key: f.Segment(), WantSize: f.Size, GotSize: f.Size, WantSHA256: f.SHA256, GotSHA256: got}
	}
	return nil
}

// Read gets state file f from b and verifies it (Verify). An error reading
// it names the key and wraps the store's (blob.ErrNotFound, ...).
func Read(ctx context.Context, b blob.BucketReader, f manifest.File) ([]byte, error) {
	var data []byte
	var err error
	if f.Packed {
		data, err = b.GetRange(ctx, f.Key, f.Offset, f.Size)
	} else {
		data, err = b.Get(ctx, f.Key)
	}
	if err != nil {
		return nil, fmt.Errorf("read state file %s: %w", f.Segment(), err)
	}
	if err := Verify(f, data); err != nil {
		return nil, err
	}
	return data, nil
}

// Decode reads a state file without trusting it (arrowfmt.DecodeFile),
// allocating at most MaxExpansion times its size from mem. A want schema
// that is not nil must be the file's. It returns the file's schema and
// batches (the caller releases them), or an error for anything that is not
// such a file, never a panic.
func Decode(data []byte, want *arrow.Schema, mem memory.Allocator) (schema *arrow.Schema, batches []arrow.RecordBatch, err error) {
	limit := &limitAllocator{mem: mem, left: int64(len(data))*MaxExpansion + 1<<20}
	defer func() {
		if p := recover(); p != nil { // the allocation limit
			schema, batches, err = nil, nil, fmt.Errorf("not a readable Arrow IPC file: %v", p)
		}
	}()
	schema, batches, err = arrowfmt.DecodeFile(data, limit)
	if err != nil {
		return nil, nil, err
	}
	if want != nil && !schema.Equal(want) {
		for _, b := range batches {
			b.Release()
		}
		return nil, nil, fmt.Errorf("schema %s is not the operator's state schema %s", schema, want)
	}
	return schema, batches, nil
}

// limitAllocator refuses (panics, which Decode recovers) once more than
// left bytes are asked for in all.
type limitAllocator struct {
	mem  memory.Allocator
	left int64
}

func (a *limitAllocator) Allocate(n int) []byte {
	if a.left -= int64(n); a.left < 0 {
		panic(fmt.Sprintf("state file asks for %d more bytes than its size allows", -a.left))
	}
	return a.mem.Allocate(n)
}

func (a *limitAllocator) Reallocate(n int, b []byte) []byte {
	if a.left -= int64(n - len(b)); a.left < 0 {
		panic(fmt.Sprintf("state file asks for %d more bytes than its size allows", -a.left))
	}
	return a.mem.Reallocate(n, b)
}

func (a *limitAllocator) Free(b []byte) { a.mem.Free(b) }
