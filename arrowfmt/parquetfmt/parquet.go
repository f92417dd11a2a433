package parquetfmt

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/weirstream/weir/arrowfmt"
)

// rowGroupRows bounds a row group, and so the rows Write holds in memory
// before writing them out.
const rowGroupRows = 1 << 20

// Write writes recs, all of schema, to w as one zstd-compressed
// Parquet file. The Arrow schema is stored in the file, so a reader gets
// back the exact types (timestamps in ms, UTC). Small batches are buffered
// into row groups of up to about a million rows.
func Write(w io.Writer, schema *arrow.Schema, recs []arrow.RecordBatch) error {
	fw, err := NewWriter(w, schema)
	if err != nil {
		return err
	}
	for i, rec := range recs {
		if err = fw.Write(rec); err != nil {
			err = fmt.Errorf("batch %d: %w", i, err)
			break
		}
	}
	return errors.Join(err, fw.Close())
}

// Writer writes batches of one schema to a Parquet file as Write does,
// one batch at a time, so that a file larger than memory can be written.
type Writer struct {
	fw     *pqarrow.FileWriter
	schema *arrow.Schema
}

// NewWriter starts a Parquet file of schema on w. Close ends it.
func NewWriter(w io.Writer, schema *arrow.Schema) (*Writer, error) {
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithMaxRowGroupLength(rowGroupRows),
	)
	// pqarrow closes a writer that is an io.Closer; the caller's is left
	// open (it may be stdout).
	sink := struct{ io.Writer }{w}
	fw, err := pqarrow.NewFileWriter(schema, sink, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, fmt.Errorf("write parquet: %w", err)
	}
	return &Writer{fw: fw, schema: schema}, nil
}

// Write buffers rec's rows into the current row group, writing it out
// once it is full. The writer does not keep rec.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if !rec.Schema().Equal(w.schema) {
		return fmt.Errorf("%w: write parquet: batch has schema %v, want %v", arrowfmt.ErrSchemaMismatch, rec.Schema(), w.schema)
	}
	if err := w.fw.WriteBuffered(rec); err != nil {
		return fmt.Errorf("write parquet: %w", err)
	}
	return nil
}

// Close writes what is buffered and the file's footer. It does not close
// the underlying writer.
func (w *Writer) Close() error {
	if err := w.fw.Close(); err != nil {
		return fmt.Errorf("write parquet: close: %w", err)
	}
	return nil
}
