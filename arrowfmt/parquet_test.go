package arrowfmt

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

func TestWriteParquet(t *testing.T) {
	mem := newMem(t)
	schema := testSchema(t)
	var recs []arrow.RecordBatch
	for i, n := range []int{100, 0, 1, 333} {
		rec := testBatch(t, mem, i*1000, n)
		defer rec.Release()
		recs = append(recs, rec)
	}
	var buf bytes.Buffer
	if err := WriteParquet(&buf, schema, recs); err != nil {
		t.Fatal(err)
	}

	tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(buf.Bytes()), parquet.NewReaderProperties(mem), pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	// The reader adds field metadata (PARQUET:field_id); names and types
	// must come back exactly.
	fields, err := Fields(tbl.Schema())
	if err != nil {
		t.Fatal(err)
	}
	for i := range fields {
		if fields[i] != testFields[i] {
			t.Fatalf("read field %d as %v, want %v", i, fields[i], testFields[i])
		}
	}
	want, err := Concat(recs, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Release()
	if tbl.NumRows() != want.NumRows() {
		t.Fatalf("read %d rows, want %d", tbl.NumRows(), want.NumRows())
	}
	cols := make([]arrow.Array, tbl.NumCols())
	for c := range cols {
		col, err := array.Concatenate(tbl.Column(c).Data().Chunks(), mem)
		if err != nil {
			t.Fatal(err)
		}
		defer col.Release()
		cols[c] = col
	}
	got := array.NewRecordBatch(schema, cols, tbl.NumRows())
	defer got.Release()
	requireRows(t, got, rowsOf(want))
}

func TestWriteParquetSchemaMismatch(t *testing.T) {
	mem := newMem(t)
	rec := testBatch(t, mem, 0, 3)
	defer rec.Release()
	other, _ := NewSchema([]Field{{Name: "k", Type: String}})
	var buf bytes.Buffer
	if err := WriteParquet(&buf, other, []arrow.RecordBatch{rec}); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("got %v, want ErrSchemaMismatch", err)
	}
}
