package arrowfmt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	mem := newMem(t)
	enc := NewEncoder(testSchema(t), mem)
	dec := NewDecoder(mem)
	defer dec.Close()

	var payloads [][]byte
	var recs []arrow.RecordBatch
	for i, n := range []int{100, 1, 0, 257} {
		rec := testBatch(t, mem, i*1000, n)
		defer rec.Release()
		p, err := enc.Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, p)
		recs = append(recs, rec)
	}
	for i, p := range payloads {
		got, err := dec.Decode(p)
		if err != nil {
			t.Fatalf("payload %d: %v", i, err)
		}
		if !array.RecordEqual(got, recs[i]) {
			t.Errorf("payload %d: decoded %v, want %v", i, got, recs[i])
		}
		requireRows(t, got, rowsOf(recs[i]))
		got.Release()
	}
	if !dec.Schema().Equal(testSchema(t)) {
		t.Errorf("Schema() = %v", dec.Schema())
	}
}

func TestSchemaSentOnce(t *testing.T) {
	mem := newMem(t)
	enc := NewEncoder(testSchema(t), mem)
	rec := testBatch(t, mem, 0, 10)
	defer rec.Release()

	first, err := enc.Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	second, err := enc.Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	types := func(p []byte) []ipc.MessageType {
		msgs, err := splitMessages(nil, p, msgRules{})
		if err != nil {
			t.Fatal(err)
		}
		var ts []ipc.MessageType
		for _, m := range msgs {
			ts = append(ts, m.typ)
		}
		return ts
	}
	if got := types(first); len(got) != 2 || got[0] != ipc.MessageSchema || got[1] != ipc.MessageRecordBatch {
		t.Errorf("first payload has messages %v, want schema, record batch", got)
	}
	if got := types(second); len(got) != 1 || got[0] != ipc.MessageRecordBatch {
		t.Errorf("second payload has messages %v, want record batch", got)
	}
	if !bytes.HasSuffix(first, second) {
		t.Error("first payload does not end with the same record batch message as the second")
	}

	// A decoder that missed the first payload cannot decode the second.
	dec := NewDecoder(mem)
	defer dec.Close()
	if _, err := dec.Decode(second); !errors.Is(err, ErrNoSchema) {
		t.Errorf("decode without schema: got %v, want ErrNoSchema", err)
	}
}

func TestEncodeReturnsFreshSlices(t *testing.T) {
	mem := newMem(t)
	enc := NewEncoder(testSchema(t), mem)
	a := testBatch(t, mem, 0, 10)
	defer a.Release()
	b := testBatch(t, mem, 100, 10)
	defer b.Release()
	p1, _ := enc.Encode(a)
	p1copy := bytes.Clone(p1)
	if _, err := enc.Encode(b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p1, p1copy) {
		t.Fatal("a later Encode overwrote an earlier payload")
	}

	buf := []byte("prefix")
	buf, err := enc.AppendEncode(buf, b)
	if err != nil {
		t.Fatal(err)
	}
	dec := NewDecoder(mem)
	defer dec.Close()
	got, err := dec.Decode(p1)
	if err != nil {
		t.Fatal(err)
	}
	got.Release()
	if !bytes.HasPrefix(buf, []byte("prefix")) {
		t.Fatal("AppendEncode lost dst")
	}
	got, err = dec.Decode(buf[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if !array.RecordEqual(got, b) {
		t.Error("AppendEncode payload decodes to a different batch")
	}
}

// TestDecodeFromString decodes payloads held in Go strings, as go-redis
// returns them, without copying: the record must alias the string and the
// string must be unchanged.
func TestDecodeFromString(t *testing.T) {
	mem := newMem(t)
	enc := NewEncoder(testSchema(t), mem)
	dec := NewDecoder(mem)
	defer dec.Close()
	for i := range 3 {
		rec := testBatch(t, mem, i*100, 50)
		p, err := enc.Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		s := string(p) // immutable
		before := string(p)
		got, err := dec.Decode(unsafe.Slice(unsafe.StringData(s), len(s)))
		if err != nil {
			t.Fatal(err)
		}
		if !array.RecordEqual(got, rec) {
			t.Errorf("batch %d differs", i)
		}
		ids := got.Column(colID).Data().Buffers()[1].Bytes()
		start := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		if p := uintptr(unsafe.Pointer(&ids[0])); p < start || p >= start+uintptr(len(s)) {
			t.Errorf("batch %d: decoded values do not point into the payload", i)
		}
		if s != before {
			t.Fatalf("batch %d: decoding modified the payload", i)
		}
		got.Release()
		rec.Release()
	}
}

func TestDecoderAcceptsNewSchema(t *testing.T) {
	mem := newMem(t)
	dec := NewDecoder(mem)
	defer dec.Close()
	rec := testBatch(t, mem, 0, 5)
	defer rec.Release()
	for range 2 { // a restarted producer starts a new encoder
		enc := NewEncoder(testSchema(t), mem)
		for range 2 {
			p, err := enc.Encode(rec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dec.Decode(p)
			if err != nil {
				t.Fatal(err)
			}
			got.Release()
		}
	}

	other, err := NewSchema([]Field{{Name: "k", Type: String}})
	if err != nil {
		t.Fatal(err)
	}
	b := NewBuilder(other, mem)
	defer b.Release()
	b.String(0, "x")
	orec := b.NewBatch()
	defer orec.Release()
	p, err := NewEncoder(other, mem).Encode(orec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dec.Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if !dec.Schema().Equal(other) || !array.RecordEqual(got, orec) {
		t.Errorf("after a new schema: schema %v, record %v", dec.Schema(), got)
	}
}

func TestEncodeSchemaMismatch(t *testing.T) {
	mem := newMem(t)
	other, _ := NewSchema([]Field{{Name: "k", Type: String}})
	enc := NewEncoder(other, mem)
	rec := testBatch(t, mem, 0, 5)
	defer rec.Release()
	if _, err := enc.Encode(rec); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("got %v, want ErrSchemaMismatch", err)
	}
	// The rejected batch must not have consumed the schema message.
	b := NewBuilder(other, mem)
	defer b.Release()
	b.String(0, "x")
	orec := b.NewBatch()
	defer orec.Release()
	p, err := enc.Encode(orec)
	if err != nil {
		t.Fatal(err)
	}
	dec := NewDecoder(mem)
	defer dec.Close()
	got, err := dec.Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	got.Release()
}

// TestEncodeSlicedBatch checks that a batch sharing buffers with a larger
// one (a slice) encodes only its own rows.
func TestEncodeSlicedBatch(t *testing.T) {
	mem := newMem(t)
	rec := testBatch(t, mem, 0, 100)
	defer rec.Release()
	sl := rec.NewSlice(13, 40)
	defer sl.Release()
	p, err := NewEncoder(testSchema(t), mem).Encode(sl)
	if err != nil {
		t.Fatal(err)
	}
	dec := NewDecoder(mem)
	defer dec.Close()
	got, err := dec.Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	requireRows(t, got, rowsOf(sl))
}

func TestDecodeFloatSpecials(t *testing.T) {
	mem := newMem(t)
	s, _ := NewSchema([]Field{{Name: "f", Type: Float64}})
	b := NewBuilder(s, mem)
	defer b.Release()
	vals := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64}
	for _, v := range vals {
		b.Float64(0, v)
	}
	rec := b.NewBatch()
	defer rec.Release()
	p, _ := NewEncoder(s, mem).Encode(rec)
	dec := NewDecoder(mem)
	defer dec.Close()
	got, err := dec.Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	for i, v := range vals {
		if g := got.Column(0).(*array.Float64).Value(i); math.Float64bits(g) != math.Float64bits(v) {
			t.Errorf("row %d: got %v, want %v", i, g, v)
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	mem := newMem(t)
	enc := NewEncoder(testSchema(t), mem)
	rec := testBatch(t, mem, 0, 20)
	defer rec.Release()
	first, _ := enc.Encode(rec)
	second, _ := enc.Encode(rec)

	// Decode a valid first payload, then damaged ones; the decoder must stay
	// usable for the good payload after each.
	dec := NewDecoder(mem)
	defer dec.Close()
	got, err := dec.Decode(first)
	if err != nil {
		t.Fatal(err)
	}
	got.Release()

	damaged := map[string][]byte{
		"empty":           nil,
		"truncated":       second[:len(second)-9],
		"short prefix":    second[:5],
		"no continuation": append([]byte{1, 2, 3, 4}, second[4:]...),
		"trailing bytes":  append(bytes.Clone(second), 0, 0, 0, 0),
		"two batches":     append(bytes.Clone(second), second...),
		"eos marker":      {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},
	}
	// Lengths larger than the buffers: raise each int64 20 (the record
	// batch length and the field node lengths) in the metadata.
	msgs, _ := splitMessages(nil, second, msgRules{})
	twenty := binary.LittleEndian.AppendUint64(nil, 20)
	for i := range len(msgs[0].meta) - 8 {
		if bytes.Equal(msgs[0].meta[i:i+8], twenty) {
			p := bytes.Clone(second)
			binary.LittleEndian.PutUint64(p[8+i:], 1<<40)
			damaged[fmt.Sprintf("huge length at %d", i)] = p
		}
	}
	if len(damaged) < 10 {
		t.Fatal("found no length fields to damage")
	}
	for name, p := range damaged {
		got, err := dec.Decode(p)
		if err == nil {
			got.Release()
			t.Errorf("%s: decoded without error", name)
			continue
		}
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
		got, err = dec.Decode(second)
		if err != nil {
			t.Fatalf("after %s: %v", name, err)
		}
		got.Release()
	}
}

func TestDecodeRejectsUnsupportedSchema(t *testing.T) {
	mem := newMem(t)
	s := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, s)
	defer b.Release()
	b.Field(0).(*array.Int32Builder).Append(1)
	rec := b.NewRecordBatch()
	defer rec.Release()
	p, err := NewEncoder(s, mem).Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	dec := NewDecoder(mem)
	defer dec.Close()
	if _, err := dec.Decode(p); !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrUnknownType) {
		t.Fatalf("got %v, want ErrMalformed and ErrUnknownType", err)
	}
}

func TestCompressedRoundTrip(t *testing.T) {
	for _, c := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		t.Run(c.String(), func(t *testing.T) {
			mem := newMem(t)
			enc := NewWireEncoder(testSchema(t), mem, WireOptions{Compression: c})
			dec := NewDecoder(mem)
			defer dec.Close()
			plain := NewEncoder(testSchema(t), mem)
			for i, n := range []int{2000, 0, 1, 5000} {
				rec := testBatch(t, mem, i*10000, n)
				p, err := enc.Encode(rec)
				if err != nil {
					t.Fatal(err)
				}
				q, err := plain.Encode(rec)
				if err != nil {
					t.Fatal(err)
				}
				// The test rows repeat (a few zones, counting ids): a
				// codec must save bytes on the large batches.
				if c != CompressNone && n >= 2000 && len(p) >= len(q) {
					t.Errorf("batch %d: %s payload %d bytes, uncompressed %d", i, c, len(p), len(q))
				}
				got, err := dec.Decode(p)
				if err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
				if !array.RecordEqual(got, rec) {
					t.Errorf("batch %d: decoded %v, want %v", i, got, rec)
				}
				got.Release()
				rec.Release()
			}
		})
	}
	if _, err := ParseCompression("snappy"); err == nil || !strings.Contains(err.Error(), `"snappy"`) {
		t.Errorf("ParseCompression(snappy) = %v", err)
	}
}

// TestDecodeRefusesCompressionBomb: a compressed buffer whose length
// prefix claims more than MaxDecompressed, or a negative length, is
// refused before arrow allocates it.
func TestDecodeRefusesCompressionBomb(t *testing.T) {
	for _, claim := range []int64{MaxDecompressed + 1, -5} {
		mem := newMem(t)
		rec := testBatch(t, mem, 0, 1000)
		p, err := NewWireEncoder(testSchema(t), mem, WireOptions{Compression: CompressLZ4}).Encode(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := splitMessages(nil, p, msgRules{compressed: true})
		if err != nil || len(msgs) != 2 {
			t.Fatalf("%d messages, %v", len(msgs), err)
		}
		// Overwrite the length prefix of the first non-empty buffer.
		root, _ := fbRoot(msgs[1].meta)
		hdr, _, _ := root.table(messageHeader)
		start, n, _ := hdr.vector(recordBatchBuffers, 16)
		patched := false
		for i := range n {
			off := int(binary.LittleEndian.Uint64(msgs[1].meta[start+16*i:]))
			if binary.LittleEndian.Uint64(msgs[1].meta[start+16*i+8:]) >= 8 {
				binary.LittleEndian.PutUint64(msgs[1].body[off:], uint64(claim))
				patched = true
				break
			}
		}
		if !patched {
			t.Fatal("no compressed buffer to patch")
		}
		dec := NewDecoder(mem)
		got, err := dec.Decode(p)
		if got != nil {
			got.Release()
		}
		dec.Close()
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "uncompressed") {
			t.Errorf("claim %d: got %v, want ErrMalformed naming the uncompressed size", claim, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	mem := memory.NewGoAllocator()
	s, _ := NewSchema(testFields)
	enc := NewEncoder(s, mem)
	var seeds [][]byte
	for i, n := range []int{3, 0, 17} {
		rec := testBatch(f, mem, i*10, n)
		p, err := enc.Encode(rec)
		if err != nil {
			f.Fatal(err)
		}
		rec.Release()
		seeds = append(seeds, p)
		f.Add(p, false)
	}
	f.Add(seeds[1], true)
	f.Add(seeds[2], true)
	compact := NewWireEncoder(s, mem, WireOptions{Compact: true})
	for i, n := range []int{5, 40} {
		rec := testBatch(f, mem, i*100, n)
		p, err := compact.Encode(rec)
		if err != nil {
			f.Fatal(err)
		}
		rec.Release()
		f.Add(p, false)
	}

	f.Fuzz(func(t *testing.T, payload []byte, afterFirst bool) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		dec := NewDecoder(mem)
		defer dec.Close()
		if afterFirst {
			got, err := dec.Decode(seeds[0])
			if err != nil {
				t.Fatal(err)
			}
			got.Release()
		}
		before := bytes.Clone(payload)
		got, err := dec.Decode(payload)
		if !bytes.Equal(before, payload) {
			t.Fatal("Decode modified the payload")
		}
		if err != nil {
			if got != nil {
				t.Fatal("error with a record")
			}
			return
		}
		defer got.Release()
		// Everything a decoded record holds must be readable, and survive
		// a round trip.
		for r := range int(got.NumRows()) {
			for c := range int(got.NumCols()) {
				_ = Value(got.Column(c), r)
			}
			_ = AppendJSONRow(nil, got, r)
		}
		cols := make([]int, got.NumCols())
		for i := range cols {
			cols[i] = i
		}
		HashKeys(got, cols, nil)
		p, err := NewEncoder(got.Schema(), mem).Encode(got)
		if err != nil {
			t.Fatal(err)
		}
		dec2 := NewDecoder(mem)
		defer dec2.Close()
		again, err := dec2.Decode(p)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		defer again.Release()
		if !array.RecordApproxEqual(got, again, array.WithNaNsEqual(true)) {
			t.Fatal("re-encoded record differs")
		}
	})
}

func benchBatch(b *testing.B, mem memory.Allocator) arrow.RecordBatch {
	s, err := NewSchema([]Field{{Name: "id", Type: Int64}, {Name: "name", Type: String}, {Name: "price", Type: Float64}, {Name: "ts", Type: TimestampMs}})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, 26)
	for i := range names {
		names[i] = "customer-" + string(rune('a'+i)) + "-0123456789"
	}
	bld := NewBuilder(s, mem)
	defer bld.Release()
	for i := range 8192 {
		bld.Int64(0, int64(i))
		bld.String(1, names[i%26])
		bld.Float64(2, float64(i)*1.5)
		bld.TimestampMs(3, testBase+int64(i))
	}
	return bld.NewBatch()
}

func BenchmarkEncode(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec := benchBatch(b, mem)
	defer rec.Release()
	enc := NewEncoder(rec.Schema(), mem)
	p, err := enc.Encode(rec) // the schema goes out once per channel
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := enc.Encode(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// wireBenchOptions are the encodings BenchmarkAppendEncode and
// BenchmarkDecode compare.
var wireBenchOptions = []struct {
	name string
	o    WireOptions
}{{"plain", WireOptions{}}, {"compact", WireOptions{Compact: true}}}

// BenchmarkAppendEncode reuses one buffer, as a producer that copies the
// payload into its Redis command does.
func BenchmarkAppendEncode(b *testing.B) {
	for _, wo := range wireBenchOptions {
		b.Run(wo.name, func(b *testing.B) {
			mem := memory.NewGoAllocator()
			rec := benchBatch(b, mem)
			defer rec.Release()
			enc := NewWireEncoder(rec.Schema(), mem, wo.o)
			buf, err := enc.AppendEncode(nil, rec)
			if err != nil {
				b.Fatal(err)
			}
			buf, _ = enc.AppendEncode(buf[:0], rec)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if buf, err = enc.AppendEncode(buf[:0], rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, wo := range wireBenchOptions {
		b.Run(wo.name, func(b *testing.B) {
			mem := memory.NewGoAllocator()
			rec := benchBatch(b, mem)
			defer rec.Release()
			enc := NewWireEncoder(rec.Schema(), mem, wo.o)
			first, _ := enc.Encode(rec)
			p, _ := enc.Encode(rec)
			dec := NewDecoder(mem)
			defer dec.Close()
			got, err := dec.Decode(first)
			if err != nil {
				b.Fatal(err)
			}
			got.Release()
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for b.Loop() {
				got, err := dec.Decode(p)
				if err != nil {
					b.Fatal(err)
				}
				got.Release()
			}
		})
	}
}

// BenchmarkDecodeWithSchema decodes payloads that each carry the schema,
// what a decoder pays on every entry without schema-once channels.
func BenchmarkDecodeWithSchema(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec := benchBatch(b, mem)
	defer rec.Release()
	first, _ := NewEncoder(rec.Schema(), mem).Encode(rec)
	dec := NewDecoder(mem)
	defer dec.Close()
	b.SetBytes(int64(len(first)))
	b.ReportAllocs()
	for b.Loop() {
		got, err := dec.Decode(first)
		if err != nil {
			b.Fatal(err)
		}
		got.Release()
	}
}

// TestPayloadsFormArrowStream checks the documented wire format: a channel's
// payloads, concatenated and followed by the end-of-stream marker, are a
// standard Arrow IPC stream.
func TestPayloadsFormArrowStream(t *testing.T) {
	mem := newMem(t)
	enc := NewEncoder(testSchema(t), mem)
	var stream []byte
	var want [][]any
	for i := range 3 {
		rec := testBatch(t, mem, i*50, 20+i)
		p, err := enc.Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, p...)
		want = append(want, rowsOf(rec)...)
		rec.Release()
	}
	stream = append(stream, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0)
	r, err := ipc.NewReader(bytes.NewReader(stream), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var got [][]any
	for r.Next() {
		got = append(got, rowsOf(r.RecordBatch())...)
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	if len(got) != len(want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if !rowEqual(got[i], want[i]) {
			t.Fatalf("row %d: got %v, want %v", i, got[i], want[i])
		}
	}
}
