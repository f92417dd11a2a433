package parquetfmt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/arrowfmt"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// One column of every type.
var testFields = []arrowfmt.Field{
	{Name: "id", Type: arrowfmt.Int64},
	{Name: "name", Type: arrowfmt.String},
	{Name: "price", Type: arrowfmt.Float64},
	{Name: "ts", Type: arrowfmt.TimestampMs},
	{Name: "ok", Type: arrowfmt.Bool},
}

// testCell is the value of column c in row i; every column has nulls, at
// different rows.
func testCell(i, c int) any {
	if i%(c+3) == 1 {
		return nil
	}
	switch c {
	case 0:
		return int64(i) - 50
	case 1:
		return fmt.Sprintf("ünï \"%d\"\n", i%13)
	case 2:
		return float64(i)*0.25 - 3
	case 3:
		return time.UnixMilli(1709294400000 + int64(i)*1001).UTC()
	default:
		return i%3 == 1
	}
}

func TestWrite(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema, err := arrowfmt.NewSchema(testFields)
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	var want [][]any
	for i, n := range []int{100, 0, 1, 333} {
		b := arrowfmt.NewBuilder(schema, mem)
		for r := i * 1000; r < i*1000+n; r++ {
			row := make([]any, len(testFields))
			for c := range row {
				row[c] = testCell(r, c)
				if err := b.AppendAny(c, row[c]); err != nil {
					t.Fatal(err)
				}
			}
			want = append(want, row)
		}
		rec := b.NewBatch()
		b.Release()
		defer rec.Release()
		recs = append(recs, rec)
	}
	var buf bytes.Buffer
	if err := Write(&buf, schema, recs); err != nil {
		t.Fatal(err)
	}

	tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(buf.Bytes()), parquet.NewReaderProperties(mem), pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	// The reader adds field metadata (PARQUET:field_id); names and types
	// must come back exactly.
	fields, err := arrowfmt.Fields(tbl.Schema())
	if err != nil {
		t.Fatal(err)
	}
	for i := range fields {
		if fields[i] != testFields[i] {
			t.Fatalf("read field %d as %v, want %v", i, fields[i], testFields[i])
		}
	}
	if tbl.NumRows() != int64(len(want)) {
		t.Fatalf("read %d rows, want %d", tbl.NumRows(), len(want))
	}
	for c := range int(tbl.NumCols()) {
		col, err := array.Concatenate(tbl.Column(c).Data().Chunks(), mem)
		if err != nil {
			t.Fatal(err)
		}
		defer col.Release()
		for r := range want {
			got, w := arrowfmt.Value(col, r), want[r][c]
			if wt, ok := w.(time.Time); ok {
				if gt, ok := got.(time.Time); ok && gt.Equal(wt) {
					continue
				}
			} else if got == w {
				continue
			}
			t.Fatalf("row %d column %s: got %#v, want %#v", r, testFields[c].Name, got, w)
		}
	}
}

func TestWriteSchemaMismatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema, _ := arrowfmt.NewSchema(testFields)
	b := arrowfmt.NewBuilder(schema, mem)
	defer b.Release()
	for c := range testFields {
		if err := b.AppendAny(c, testCell(0, c)); err != nil {
			t.Fatal(err)
		}
	}
	rec := b.NewBatch()
	defer rec.Release()
	other, _ := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "k", Type: arrowfmt.String}})
	var buf bytes.Buffer
	if err := Write(&buf, other, []arrow.RecordBatch{rec}); !errors.Is(err, arrowfmt.ErrSchemaMismatch) {
		t.Errorf("got %v, want ErrSchemaMismatch", err)
	}
}
