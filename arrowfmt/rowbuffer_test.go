package arrowfmt

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var rowBufferSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
}, nil)

// randomRowBatch returns a batch of rows of rowBufferSchema, with nulls in
// some columns (nullRate 0: none), sliced from a larger one half the time.
func randomRowBatch(t testing.TB, r *rand.Rand, mem memory.Allocator, rows int, nullRate float64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, rowBufferSchema)
	defer b.Release()
	pad := 0
	if r.IntN(2) == 0 {
		pad = r.IntN(5)
	}
	for range rows + 2*pad {
		null := func() bool { return r.Float64() < nullRate }
		if null() {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.Int64Builder).Append(r.Int64() - r.Int64())
		}
		if null() {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("s%d", r.IntN(1<<r.IntN(20))))
		}
		if null() {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(r.NormFloat64())
		}
		if null() {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.BooleanBuilder).Append(r.IntN(2) == 0)
		}
		if null() {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(r.Int64N(1 << 42)))
		}
	}
	rec := b.NewRecordBatch()
	if pad == 0 {
		return rec
	}
	defer rec.Release()
	return rec.NewSlice(int64(pad), int64(pad+rows))
}

// TestRowBuffer gathers rows of random batches, whole and by random
// indexes, and checks what it holds against Take and Concat of the same
// rows, across Resets that reuse its memory.
func TestRowBuffer(t *testing.T) {
	mem := newMem(t)
	r := rand.New(rand.NewPCG(5, 6))
	buf, err := NewRowBuffer(rowBufferSchema)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 200 {
		var want []arrow.RecordBatch
		nullRate := []float64{0, 0, 0.1, 0.9}[r.IntN(4)]
		for range 1 + r.IntN(5) {
			rows := r.IntN(300)
			if r.IntN(8) == 0 {
				rows = 0
			}
			rec := randomRowBatch(t, r, mem, rows, nullRate)
			var idx []int32
			if r.IntN(3) > 0 {
				idx = []int32{}
				for range r.IntN(2*rows + 1) {
					idx = append(idx, int32(r.IntN(rows)))
				}
				want = append(want, Take(rec, idx, mem))
			} else {
				rec.Retain()
				want = append(want, rec)
			}
			if err := buf.Append(rec, idx); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		got := buf.Batch()
		wantRec, err := Concat(want, mem)
		if err != nil {
			t.Fatal(err)
		}
		if !array.RecordEqual(got, wantRec) {
			t.Fatalf("round %d: gathered\n%v\nwant\n%v", round, got, wantRec)
		}
		if got.NumRows() != int64(buf.Rows()) {
			t.Fatalf("round %d: %d rows in the batch, Rows says %d", round, got.NumRows(), buf.Rows())
		}
		// What the exchange does with it: encode, decode, compare.
		enc := NewEncoder(rowBufferSchema, mem)
		payload, err := enc.Encode(got)
		if err != nil {
			t.Fatalf("round %d: encode: %v", round, err)
		}
		dec := NewDecoder(mem)
		back, err := dec.Decode(payload)
		if err != nil {
			t.Fatalf("round %d: decode: %v", round, err)
		}
		if !array.RecordEqual(back, wantRec) {
			t.Fatalf("round %d: decoded\n%v\nwant\n%v", round, back, wantRec)
		}
		back.Release()
		dec.Close()
		got.Release()
		wantRec.Release()
		for _, w := range want {
			w.Release()
		}
		buf.Reset()
		if buf.Rows() != 0 || buf.Bytes() != 4 { // a string column's first offset

			t.Fatalf("after Reset: %d rows, %d bytes", buf.Rows(), buf.Bytes())
		}
	}
}

// A batch of another schema is refused, and nothing of it is gathered; a
// column type the buffer does not gather is refused by name.
func TestRowBufferRefuses(t *testing.T) {
	mem := newMem(t)
	buf, err := NewRowBuffer(rowBufferSchema)
	if err != nil {
		t.Fatal(err)
	}
	other := testBatch(t, mem, 0, 10)
	defer other.Release()
	if err := buf.Append(other, nil); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("Append of another schema: %v, want ErrSchemaMismatch", err)
	}
	if buf.Rows() != 0 {
		t.Errorf("%d rows gathered from a refused batch", buf.Rows())
	}
	_, err = NewRowBuffer(arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int32}}, nil))
	if err == nil || !strings.Contains(err.Error(), `"n"`) || !strings.Contains(err.Error(), "int32") {
		t.Errorf("NewRowBuffer with an int32 column: %v, want an error naming the column and type", err)
	}
}

func BenchmarkRowBuffer(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec := benchBatch(b, mem)
	defer rec.Release()
	const p = 4
	idx := make([][]int32, p)
	for i, h := range HashKeys(rec, []int{0}, nil) {
		t := SubtaskForKeyGroup(KeyGroup(h, DefaultMaxParallelism), DefaultMaxParallelism, p)
		idx[t] = append(idx[t], int32(i))
	}
	bufs := make([]*RowBuffer, p)
	for i := range bufs {
		var err error
		if bufs[i], err = NewRowBuffer(rec.Schema()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for i, buf := range bufs {
			if err := buf.Append(rec, idx[i]); err != nil {
				b.Fatal(err)
			}
			if buf.Rows() >= 4*int(rec.NumRows())/p {
				buf.Batch().Release()
				buf.Reset()
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rec.NumRows()), "ns/row")
}
