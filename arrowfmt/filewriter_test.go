package arrowfmt

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// fileTestSchema has a column of every type WriteFile writes, nullable and
// not, and metadata on the schema and on a field.
func fileTestSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "key_group", Type: arrow.PrimitiveTypes.Int32},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ts_ms_utc", Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
		{Name: "ts_ns", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}, Nullable: true},
		{Name: "ts_s", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "Europe/Paris"}},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "kind", Type: arrow.BinaryTypes.String, Metadata: arrow.NewMetadata([]string{"weir.note"}, []string{"replace, window or clear"})},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, func() *arrow.Metadata {
		m := arrow.NewMetadata([]string{"weir.version", "empty"}, []string{"1", ""})
		return &m
	}())
}

// fileTestBatch builds n rows of fileTestSchema from rng, a column's
// values null with probability nulls (none in a column not nullable).
// Some columns repeat (they compress), raw is random bytes (it does not).
func fileTestBatch(mem memory.Allocator, rng *rand.Rand, n int, nulls float64) arrow.RecordBatch {
	schema := fileTestSchema()
	rb := array.NewRecordBuilder(mem, schema)
	defer rb.Release()
	for r := range n {
		for c, f := range schema.Fields() {
			b := rb.Field(c)
			if f.Nullable && rng.Float64() < nulls {
				b.AppendNull()
				continue
			}
			switch b := b.(type) {
			case *array.Int8Builder:
				b.Append(int8(rng.IntN(256) - 128))
			case *array.Int16Builder:
				b.Append(int16(rng.IntN(1 << 16)))
			case *array.Int32Builder:
				b.Append(int32(r % 128))
			case *array.Int64Builder:
				b.Append(rng.Int64N(10_000_000) - 5_000_000)
			case *array.Uint8Builder:
				b.Append(uint8(rng.IntN(256)))
			case *array.Uint16Builder:
				b.Append(uint16(r))
			case *array.Uint32Builder:
				b.Append(rng.Uint32())
			case *array.Uint64Builder:
				b.Append(rng.Uint64())
			case *array.Float32Builder:
				b.Append(rng.Float32())
			case *array.Float64Builder:
				b.Append(float64(rng.IntN(100)) / 4)
			case *array.TimestampBuilder:
				b.Append(arrow.Timestamp(1_700_000_000_000 + rng.Int64N(86_400_000)))
			case *array.BooleanBuilder:
				b.Append(rng.IntN(2) == 0)
			case *array.StringBuilder:
				b.Append([]string{"replace", "window", "", "clear", "ünïcödé"}[rng.IntN(5)])
			case *array.BinaryBuilder:
				v := make([]byte, rng.IntN(24))
				for i := range v {
					v[i] = byte(rng.Uint32())
				}
				b.Append(v)
			default:
				panic(fmt.Sprintf("no values for %T", b))
			}
		}
	}
	return rb.NewRecordBatch()
}

// TestWriteFileReadsBack: files WriteFile writes, of every type it
// writes, with and without nulls, of batches of 0, 1, 7, 8, 9 and more
// rows than a full batch, read back equal to what was written, by
// DecodeFile (which verifies every message first) and by Arrow's own file
// reader (which finds the batches through the footer), in each codec; a
// compressed file is smaller.
func TestWriteFileReadsBack(t *testing.T) {
	mem := newMem(t)
	rng := rand.New(rand.NewPCG(3, 4))
	var batches []arrow.RecordBatch
	for i, n := range []int{0, 1, 7, 8, 9, 1000, 70_000} {
		batches = append(batches, fileTestBatch(mem, rng, n, []float64{0, 0.3, 1}[i%3]))
	}
	defer releaseAll(batches)
	schema := fileTestSchema()
	sizes := map[Compression]int{}
	for _, c := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		t.Run(c.String(), func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteFile(&buf, schema, batches, c); err != nil {
				t.Fatal(err)
			}
			data := buf.Bytes()
			sizes[c] = len(data)
			gotSchema, got, err := DecodeFile(data, mem)
			if err != nil {
				t.Fatal(err)
			}
			defer releaseAll(got)
			if !gotSchema.Equal(schema) || !gotSchema.Metadata().Equal(schema.Metadata()) || !gotSchema.Field(14).Metadata.Equal(schema.Field(14).Metadata) {
				t.Fatalf("schema read back %s, want %s", gotSchema, schema)
			}
			requireBatches(t, "DecodeFile", got, batches)

			r, err := ipc.NewFileReader(bytes.NewReader(data), ipc.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if !r.Schema().Equal(schema) {
				t.Fatalf("Arrow's file reader read the footer's schema as %s, want %s", r.Schema(), schema)
			}
			var fromFooter []arrow.RecordBatch
			for i := range r.NumRecords() {
				rec, err := r.RecordBatch(i)
				if err != nil {
					t.Fatalf("Arrow's file reader, batch %d: %v", i, err)
				}
				rec.Retain() // the reader's until its next RecordBatch
				fromFooter = append(fromFooter, rec)
			}
			defer releaseAll(fromFooter)
			requireBatches(t, "Arrow's file reader", fromFooter, batches)
		})
	}
	for _, c := range []Compression{CompressLZ4, CompressZstd} {
		if sizes[c] >= sizes[CompressNone]*3/4 {
			t.Errorf("%s file of %d bytes, uncompressed %d: want it at least a quarter smaller", c, sizes[c], sizes[CompressNone])
		}
	}
	t.Logf("file sizes: %v", sizes)
}

// TestWriteFileEncoded: batches encoded before, each with its own codec,
// are placed after the others and read back in order, by DecodeFile and
// by Arrow's file reader; an encoded batch of another schema is refused.
func TestWriteFileEncoded(t *testing.T) {
	mem := newMem(t)
	rng := rand.New(rand.NewPCG(5, 6))
	var batches []arrow.RecordBatch
	for i, n := range []int{3, 1000, 0, 9, 4096, 70_000} {
		batches = append(batches, fileTestBatch(mem, rng, n, []float64{0, 0.3, 1}[i%3]))
	}
	defer releaseAll(batches)
	schema := fileTestSchema()
	codecs := []Compression{CompressZstd, CompressNone, CompressLZ4}
	var encoded []EncodedBatch
	for i, b := range batches[2:] {
		e, err := EncodeBatch(b, nil, codecs[i%3])
		if err != nil {
			t.Fatal(err)
		}
		if e.Rows() != b.NumRows() || e.Len() == 0 {
			t.Fatalf("encoded batch %d: %d rows in %d bytes, want %d rows", i, e.Rows(), e.Len(), b.NumRows())
		}
		encoded = append(encoded, e)
	}
	var buf bytes.Buffer
	if err := WriteFileEncoded(&buf, schema, batches[:2], encoded, CompressZstd); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	_, got, err := DecodeFile(data, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(got)
	requireBatches(t, "DecodeFile", got, batches)
	r, err := ipc.NewFileReader(bytes.NewReader(data), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var fromFooter []arrow.RecordBatch
	for i := range r.NumRecords() {
		rec, err := r.RecordBatch(i)
		if err != nil {
			t.Fatalf("Arrow's file reader, batch %d: %v", i, err)
		}
		rec.Retain()
		fromFooter = append(fromFooter, rec)
	}
	defer releaseAll(fromFooter)
	requireBatches(t, "Arrow's file reader", fromFooter, batches)

	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rb := array.NewRecordBuilder(mem, other)
	defer rb.Release()
	rb.Field(0).(*array.Int64Builder).Append(1)
	ob := rb.NewRecordBatch()
	defer ob.Release()
	e, err := EncodeBatch(ob, nil, CompressZstd)
	if err != nil {
		t.Fatal(err)
	}
	err = WriteFileEncoded(&bytes.Buffer{}, schema, nil, []EncodedBatch{e}, CompressZstd)
	if !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), "encoded batch 0") {
		t.Fatalf("an encoded batch of another schema: %v, want ErrSchemaMismatch naming it", err)
	}
}

func requireBatches(t *testing.T, reader string, got, want []arrow.RecordBatch) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s read %d batches, want %d", reader, len(got), len(want))
	}
	for i := range want {
		if !array.RecordEqual(got[i], want[i]) {
			for c := range int(want[i].NumCols()) {
				if !array.Equal(got[i].Column(c), want[i].Column(c)) {
					t.Fatalf("%s, batch %d, column %s: read %v, wrote %v", reader, i, want[i].ColumnName(c), got[i].Column(c), want[i].Column(c))
				}
			}
			t.Fatalf("%s, batch %d: read %v, wrote %v", reader, i, got[i], want[i])
		}
	}
}

// TestWriteFileStoresIncompressibleBuffers: a buffer that compression
// does not make smaller is stored as is, marked so (length -1): a file of
// random bytes is hardly larger compressed than not, and reads back.
func TestWriteFileStoresIncompressibleBuffers(t *testing.T) {
	mem := newMem(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: "raw", Type: arrow.BinaryTypes.Binary}}, nil)
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	rng := rand.New(rand.NewPCG(5, 6))
	for range 4096 {
		v := make([]byte, 64)
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		b.Append(v)
	}
	col := b.NewArray()
	b.Release()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
	defer rec.Release()
	var plain, zst bytes.Buffer
	if err := WriteFile(&plain, schema, []arrow.RecordBatch{rec}, CompressNone); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(&zst, schema, []arrow.RecordBatch{rec}, CompressZstd); err != nil {
		t.Fatal(err)
	}
	stored := append(bytes.Repeat([]byte{0xFF}, 8), col.Data().Buffers()[2].Bytes()[:64*4096]...)
	if !bytes.Contains(zst.Bytes(), stored) {
		t.Errorf("the random bytes are not in the zstd file as they are, after a length of -1 (file of %d bytes, %d uncompressed)", zst.Len(), plain.Len())
	}
	_, got, err := DecodeFile(zst.Bytes(), mem)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(got)
	requireBatches(t, "DecodeFile", got, []arrow.RecordBatch{rec})
}

// TestWriteFileRefuses: what WriteFile does not write is refused before
// it writes a byte.
func TestWriteFileRefuses(t *testing.T) {
	mem := newMem(t)
	rng := rand.New(rand.NewPCG(7, 8))
	rec := fileTestBatch(mem, rng, 20, 0.2)
	defer rec.Release()
	sliced := rec.NewSlice(3, 10)
	defer sliced.Release()
	list := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
	dict := arrow.NewSchema([]arrow.Field{{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}}}, nil)
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for _, tc := range []struct {
		name    string
		schema  *arrow.Schema
		batches []arrow.RecordBatch
		want    error
	}{
		{"sliced", fileTestSchema(), []arrow.RecordBatch{rec, sliced}, ErrNotWritable},
		{"list", list, nil, ErrNotWritable},
		{"dictionary", dict, nil, ErrNotWritable},
		{"another schema", other, []arrow.RecordBatch{rec}, ErrSchemaMismatch},
	} {
		var buf bytes.Buffer
		err := WriteFile(&buf, tc.schema, tc.batches, CompressZstd)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: %d bytes written before the error", tc.name, buf.Len())
		}
	}
}

// failingWriter fails once it has taken n bytes.
type failingWriter struct{ n int }

var errWriteFailed = errors.New("write failed")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errWriteFailed
	}
	w.n -= len(p)
	return len(p), nil
}

// TestWriteFileWriteError: a writer's error is returned, wherever in the
// file it comes.
func TestWriteFileWriteError(t *testing.T) {
	mem := newMem(t)
	rec := fileTestBatch(mem, rand.New(rand.NewPCG(9, 10)), 100, 0.1)
	defer rec.Release()
	var full bytes.Buffer
	if err := WriteFile(&full, rec.Schema(), []arrow.RecordBatch{rec}, CompressZstd); err != nil {
		t.Fatal(err)
	}
	for n := 0; n < full.Len(); n += 97 {
		if err := WriteFile(&failingWriter{n: n}, rec.Schema(), []arrow.RecordBatch{rec}, CompressZstd); !errors.Is(err, errWriteFailed) {
			t.Fatalf("writer failing after %d of %d bytes: %v, want its error", n, full.Len(), err)
		}
	}
}

// BenchmarkWriteFile writes 1M rows shaped like a window's state (as
// statefile's BenchmarkEncode did before it), with WriteFile and with
// Arrow's own IPC file writer.
func BenchmarkWriteFile(b *testing.B) {
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "key_group", Type: arrow.PrimitiveTypes.Int32},
		{Name: "key", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "kind", Type: arrow.BinaryTypes.String},
		{Name: "window_start", Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
		{Name: "window_end", Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
		{Name: "emitted", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "pending", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	rng := rand.New(rand.NewPCG(1, 1))
	var recs []arrow.RecordBatch
	for range 16 {
		rb := array.NewRecordBuilder(mem, schema)
		for range 65536 {
			k := rng.Int64N(10_000_000)
			rb.Field(0).(*array.Int32Builder).Append(int32(k % 128))
			rb.Field(1).(*array.Int64Builder).Append(k)
			rb.Field(2).(*array.StringBuilder).Append("replace")
			rb.Field(3).(*array.TimestampBuilder).Append(0)
			rb.Field(4).(*array.TimestampBuilder).Append(86_400_000)
			rb.Field(5).(*array.BooleanBuilder).Append(false)
			rb.Field(6).(*array.BooleanBuilder).Append(true)
			rb.Field(7).(*array.Int64Builder).Append(1 + rng.Int64N(5))
		}
		recs = append(recs, rb.NewRecordBatch())
		rb.Release()
	}
	defer releaseAll(recs)
	for _, c := range []Compression{CompressZstd, CompressLZ4, CompressNone} {
		b.Run("weir/"+c.String(), func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				if err := WriteFile(&buf, schema, recs, c); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len())/(16*65536), "B/row")
		})
		b.Run("arrow/"+c.String(), func(b *testing.B) {
			opts := []ipc.Option{ipc.WithSchema(schema), ipc.WithAllocator(mem)}
			switch c {
			case CompressLZ4:
				opts = append(opts, ipc.WithLZ4())
			case CompressZstd:
				opts = append(opts, ipc.WithZstd())
			}
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				w, err := ipc.NewFileWriter(&buf, opts...)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range recs {
					if err := w.Write(r); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len())/(16*65536), "B/row")
		})
	}
}
