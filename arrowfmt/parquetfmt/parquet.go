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
func Write(w io.Writer, schema *arrow.Schema, recs []arrow.RecordBatch) (err error) {
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithMaxRowGroupLength(rowGroupRows),
	)
	fw, err := pqarrow.NewFileWriter(schema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return fmt.Errorf("write parquet: %w", err)
	}
	for i, rec := range recs {
		if !rec.Schema().Equal(schema) {
			err = fmt.Errorf("%w: write parquet: batch %d has schema %v, want %v", arrowfmt.ErrSchemaMismatch, i, rec.Schema(), schema)
			break
		}
		if err = fw.WriteBuffered(rec); err != nil {
			err = fmt.Errorf("write parquet: batch %d: %w", i, err)
			break
		}
	}
	if cerr := fw.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("write parquet: close: %w", cerr))
	}
	return err
}
