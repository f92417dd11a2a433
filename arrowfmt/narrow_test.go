package arrowfmt

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// narrowTestSchema is a state file's kind of schema: a key, a timestamp,
// a count that is never null, a string, and metadata on a narrowed field
// and on the schema.
func narrowTestSchema() *arrow.Schema {
	md := arrow.NewMetadata([]string{"weir.version"}, []string{"1"})
	return arrow.NewSchema([]arrow.Field{
		{Name: "key_group", Type: arrow.PrimitiveTypes.Int32},
		{Name: "key", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "window_start", Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true, Metadata: arrow.NewMetadata([]string{"weir.note"}, []string{"start"})},
		{Name: "count", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, &md)
}

// narrowTestBatch is n rows of narrowTestSchema from gen, null in the
// nullable columns where null(i).
func narrowTestBatch(mem memory.Allocator, n int, gen func(i int) (key, ts, count int64), null func(i int) bool) arrow.RecordBatch {
	rb := array.NewRecordBuilder(mem, narrowTestSchema())
	defer rb.Release()
	for i := range n {
		key, ts, count := gen(i)
		rb.Field(0).(*array.Int32Builder).Append(int32(i % 128))
		rb.Field(3).(*array.Int64Builder).Append(count)
		if null(i) {
			rb.Field(1).AppendNull()
			rb.Field(2).AppendNull()
			rb.Field(4).AppendNull()
			continue
		}
		rb.Field(1).(*array.Int64Builder).Append(key)
		rb.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(ts))
		rb.Field(4).(*array.StringBuilder).Append("k")
	}
	return rb.NewRecordBatch()
}

// windowStateBatch is rows of a window's state for a keyed count: a
// random key below 10M, one window, a count from 1 to 10; and the schema
// of a file of it narrowed to its values (NarrowToFit).
func windowStateBatch(mem memory.Allocator, rng *rand.Rand, rows int) (arrow.RecordBatch, *arrow.Schema) {
	rec := narrowTestBatch(mem, rows, func(i int) (int64, int64, int64) {
		return rng.Int64N(10_000_000), testBase, 1 + rng.Int64N(10)
	}, func(int) bool { return false })
	return rec, NarrowToFit(narrowTestSchema(), []arrow.RecordBatch{rec})
}

// TestNarrowFileRoundTrip: files of batches whose int64 and timestamp
// columns are narrowed to their range (NarrowSchema), written whole and
// as batches encoded before (EncodeBatch), in each codec, read back by
// DecodeFile as the batches written, in their own schema (metadata
// kept), with 0 in the null slots of narrowed columns; the file's schema
// holds each narrowed column in the width its range needs, and Arrow's
// own reader reads the file. Six shapes of values, as the compact
// channels' test, each with nulls, empty and 1-row batches.
func TestNarrowFileRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	type shape struct {
		name string
		gen  func(i, b int) (key, ts, count int64)
		// widths of key, window_start and count in the file (8: as is)
		widths [3]int
	}
	shapes := []shape{
		{"small keys, drifting time", func(i, b int) (int64, int64, int64) {
			return rng.Int64N(10_000_000), testBase + int64(b*8+i/1000), int64(1 + i%10)
		}, [3]int{4, 2, 1}},
		{"full range", func(i, b int) (int64, int64, int64) {
			return int64(rng.Uint64()), int64(rng.Uint64()), int64(rng.Uint64() >> 1)
		}, [3]int{8, 8, 8}},
		{"extremes", func(i, b int) (int64, int64, int64) {
			v := []int64{math.MinInt64, math.MaxInt64, math.MinInt64 + 1, math.MaxInt64 - 3}[i%4]
			return v, v, max(v, 0)
		}, [3]int{8, 8, 8}},
		{"near the lowest", func(i, b int) (int64, int64, int64) {
			return math.MinInt64 + int64(i%300), math.MinInt64 + int64(b), 0
		}, [3]int{2, 1, 1}},
		{"near the highest", func(i, b int) (int64, int64, int64) {
			return math.MaxInt64 - int64(i%70000), math.MaxInt64 - int64(b), math.MaxInt64
		}, [3]int{2, 1, 1}},
		{"outliers", func(i, b int) (int64, int64, int64) {
			if b%17 == 3 && i == 6 {
				return 1 << 40, -1 << 40, 1 << 20
			}
			return int64(i % 100), testBase - int64(b), int64(i % 200)
		}, [3]int{8, 8, 4}},
	}
	schema := narrowTestSchema()
	for _, c := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		for _, sh := range shapes {
			t.Run(c.String()+"/"+sh.name, func(t *testing.T) {
				mem := newMem(t)
				var batches []arrow.RecordBatch
				ranges := make([]Range, schema.NumFields())
				for b := range 40 {
					n := []int{500, 0, 1, 3000}[b%4]
					rec := narrowTestBatch(mem, n, func(i int) (int64, int64, int64) { return sh.gen(i, b) },
						func(i int) bool { return b%3 != 1 && i%5 == 0 })
					for col := range ranges {
						ranges[col].AddColumn(rec.Column(col))
					}
					batches = append(batches, rec)
				}
				defer releaseAll(batches)
				file := NarrowSchema(schema, ranges)
				for k, col := range []int{1, 2, 3} {
					want := map[int]arrow.DataType{1: arrow.PrimitiveTypes.Uint8, 2: arrow.PrimitiveTypes.Uint16, 4: arrow.PrimitiveTypes.Uint32, 8: schema.Field(col).Type}[sh.widths[k]]
					if got := file.Field(col).Type; !arrow.TypeEqual(got, want) {
						t.Fatalf("column %s in the file is %s, want %s (range %+v)", schema.Field(col).Name, got, want, ranges[col])
					}
				}
				var encoded []EncodedBatch
				for i, b := range batches[20:] {
					e, err := EncodeBatch(b, file, []Compression{c, CompressNone, CompressLZ4}[i%3])
					if err != nil {
						t.Fatal(err)
					}
					encoded = append(encoded, e)
				}
				var buf bytes.Buffer
				if err := WriteFileEncoded(&buf, file, batches[:20], encoded, c); err != nil {
					t.Fatal(err)
				}
				gotSchema, got, err := DecodeFile(buf.Bytes(), mem)
				if err != nil {
					t.Fatal(err)
				}
				defer releaseAll(got)
				if !gotSchema.Equal(schema) || !gotSchema.Metadata().Equal(schema.Metadata()) || !gotSchema.Field(2).Metadata.Equal(schema.Field(2).Metadata) {
					t.Fatalf("schema read back %s, want %s", gotSchema, schema)
				}
				requireBatches(t, "DecodeFile", got, batches)
				for i, rec := range got {
					for _, col := range []int{1, 2} {
						a := rec.Column(col)
						vals := int64Values(a.Data())
						for r := range a.Len() {
							if a.IsNull(r) && vals[r] != 0 {
								t.Fatalf("batch %d column %d row %d: null slot holds %d, want 0", i, col, r, vals[r])
							}
						}
					}
				}

				r, err := ipc.NewFileReader(bytes.NewReader(buf.Bytes()), ipc.WithAllocator(mem))
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if !r.Schema().Equal(file) {
					t.Fatalf("Arrow's file reader read the schema %s, want %s", r.Schema(), file)
				}
				if r.NumRecords() != len(batches) {
					t.Fatalf("Arrow's file reader found %d batches, want %d", r.NumRecords(), len(batches))
				}
			})
		}
	}
}

// TestNarrowFileSavesBytes: keys below 10M and counts up to 10 take 4
// bytes and 1 instead of 8 each, in a file without compression and in
// one with LZ4.
func TestNarrowFileSavesBytes(t *testing.T) {
	const rows = 50_000
	rec, file := windowStateBatch(newMem(t), rand.New(rand.NewPCG(9, 10)), rows)
	defer rec.Release()
	schema := narrowTestSchema()
	// NarrowToFit: the key in 4 bytes, window_start and the count in 1.
	for col, want := range map[int]arrow.DataType{1: arrow.PrimitiveTypes.Uint32, 2: arrow.PrimitiveTypes.Uint8, 3: arrow.PrimitiveTypes.Uint8} {
		if got := file.Field(col).Type; !arrow.TypeEqual(got, want) {
			t.Fatalf("column %s in the file is %s, want %s", file.Field(col).Name, got, want)
		}
	}
	for _, c := range []Compression{CompressNone, CompressLZ4} {
		var plain, narrow bytes.Buffer
		if err := WriteFile(&plain, schema, []arrow.RecordBatch{rec}, c); err != nil {
			t.Fatal(err)
		}
		if err := WriteFile(&narrow, file, []arrow.RecordBatch{rec}, c); err != nil {
			t.Fatal(err)
		}
		saved := plain.Len() - narrow.Len()
		t.Logf("%s: %d bytes plain, %d narrowed (%.1f bytes a row saved)", c, plain.Len(), narrow.Len(), float64(saved)/rows)
		// Without compression: 4 + 7 + 7 bytes a row (key, window_start,
		// count).
		if c == CompressNone && saved < rows*179/10 {
			t.Errorf("%s: %d bytes saved, want at least %d", c, saved, rows*179/10)
		}
		if c == CompressLZ4 && saved < rows*2 {
			t.Errorf("%s: %d bytes saved, want at least %d", c, saved, rows*2)
		}
	}
}

// TestNarrowFileRefuses: a value outside its column's range in the
// file's schema is refused, naming the column and the value; so are
// batches of another schema, and a schema whose narrowed column's
// metadata is broken, writing and reading.
func TestNarrowFileRefuses(t *testing.T) {
	mem := newMem(t)
	schema := narrowTestSchema()
	rec := narrowTestBatch(mem, 10, func(i int) (int64, int64, int64) { return int64(100 + i), testBase, 1 }, func(i int) bool { return i == 3 })
	defer rec.Release()
	ranges := make([]Range, schema.NumFields())
	ranges[1] = Range{Lo: 101, Hi: 300, Set: true} // row 0 holds 100
	ranges[3] = Range{Lo: 0, Hi: 1, Set: true}
	file := NarrowSchema(schema, ranges)
	for name, err := range map[string]error{
		"WriteFile":   WriteFile(&bytes.Buffer{}, file, []arrow.RecordBatch{rec}, CompressLZ4),
		"EncodeBatch": func() error { _, err := EncodeBatch(rec, file, CompressNone); return err }(),
	} {
		if err == nil || !strings.Contains(err.Error(), `column "key"`) || !strings.Contains(err.Error(), "value 100 is outside the range [101, 356]") {
			t.Errorf("%s: a key below its range: %v, want an error naming the column and the value", name, err)
		}
	}
	ranges[1] = Range{Lo: -200, Hi: -150, Set: true} // 1 byte: up to 55; row 9 holds 109
	file = NarrowSchema(schema, ranges)
	if err := WriteFile(&bytes.Buffer{}, file, []arrow.RecordBatch{rec}, CompressNone); err == nil || !strings.Contains(err.Error(), "value 109 is outside the range [-200, 55]") {
		t.Errorf("a key above its range: %v, want an error naming the value", err)
	}
	// A null slot's value is not checked: row 3 is null, and its key
	// slot holds 0 (the builder's), outside [101, 356].
	ranges[1] = Range{Lo: 101, Hi: 109, Set: true}
	file = NarrowSchema(schema, ranges)
	above := narrowTestBatch(mem, 10, func(i int) (int64, int64, int64) { return int64(100 + max(i, 1)), testBase, 1 }, func(i int) bool { return i == 3 })
	defer above.Release()
	if _, err := EncodeBatch(above, file, CompressNone); err != nil {
		t.Errorf("a null slot outside the range: %v", err)
	}
	cut := above.NewSlice(1, 10)
	defer cut.Release()
	if _, err := EncodeBatch(cut, file, CompressNone); err == nil || !errors.Is(err, ErrNotWritable) {
		t.Errorf("a sliced batch: %v, want ErrNotWritable", err)
	}

	// A batch encoded for a file of another base does not go into this
	// one: its offsets would be read from the wrong base.
	shifted := slices.Clone(ranges)
	shifted[1].Lo--
	e, err := EncodeBatch(above, NarrowSchema(schema, shifted), CompressNone)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFileEncoded(&bytes.Buffer{}, file, nil, []EncodedBatch{e}, CompressNone); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("a batch encoded with another base: %v, want ErrSchemaMismatch", err)
	}

	other := narrowTestSchema().Fields()
	other[3].Nullable = true
	ob := narrowTestBatch(mem, 1, func(int) (int64, int64, int64) { return 1, 1, 1 }, func(int) bool { return false })
	defer ob.Release()
	if err := WriteFile(&bytes.Buffer{}, NarrowSchema(arrow.NewSchema(other, nil), ranges), []arrow.RecordBatch{ob}, CompressNone); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("a batch of another schema: %v, want ErrSchemaMismatch", err)
	}

	bad := file.Fields()
	bad[1].Metadata = arrow.NewMetadata([]string{metaWeirType, metaWeirBase}, []string{"int64", "ten"})
	badSchema := arrow.NewSchema(bad, nil)
	if err := WriteFile(&bytes.Buffer{}, badSchema, nil, CompressNone); !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), `field "key": weir.base "ten"`) {
		t.Errorf("writing a schema with a broken base: %v, want ErrNotWritable naming the field and the value", err)
	}
	// Arrow's writer writes such a file; DecodeFile refuses it.
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(badSchema), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := DecodeFile(buf.Bytes(), mem); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), `field "key": weir.base "ten"`) {
		t.Errorf("reading a schema with a broken base: %v, want ErrMalformed naming the field and the value", err)
	}
}

// BenchmarkWriteFileNarrow: a window state's columns (a random key below
// 10M, one window, a count up to 10) written with LZ4, as they are and
// narrowed.
func BenchmarkWriteFileNarrow(b *testing.B) {
	const rows = 65_536
	rec, file := windowStateBatch(memory.NewGoAllocator(), rand.New(rand.NewPCG(11, 12)), rows)
	defer rec.Release()
	for name, s := range map[string]*arrow.Schema{"plain": narrowTestSchema(), "narrow": file} {
		b.Run(name, func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				if err := WriteFile(&buf, s, []arrow.RecordBatch{rec}, CompressLZ4); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
			b.ReportMetric(float64(buf.Len())/rows, "B/row")
		})
	}
}
