package statefile_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/manifest"
	"github.com/weirstream/weir/statestore/statefile"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key_group", Type: arrow.PrimitiveTypes.Int32},
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

func testBatch(mem memory.Allocator, groups []int32) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, testSchema)
	defer b.Release()
	for i, g := range groups {
		b.Field(0).(*array.Int32Builder).Append(g)
		b.Field(1).(*array.StringBuilder).Append(string(rune('a' + i%26)))
		b.Field(2).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

// groupsMod returns n key groups cycling through 0..m-1.
func groupsMod(n, m int) []int32 {
	groups := make([]int32, n)
	for i := range groups {
		groups[i] = int32(i % m)
	}
	return groups
}

func encode(t testing.TB, f manifest.File, batches ...arrow.RecordBatch) (manifest.File, []byte) {
	t.Helper()
	f, data, err := statefile.Encode(f, testSchema, batches, memory.DefaultAllocator, arrowfmt.CompressZstd)
	if err != nil {
		t.Fatal(err)
	}
	return f, data
}

func TestRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := testBatch(mem, []int32{0, 5, 5, 9, 1, 7})
	defer rec.Release()
	name := manifest.File{Key: "jobs/j-1/state/win/0-64/3-a1-base.arrow", Kind: manifest.KindBase, Operator: "win", KeyGroupEnd: 64}
	f, data, err := statefile.Encode(name, testSchema, []arrow.RecordBatch{rec, rec}, mem, arrowfmt.CompressZstd)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := name
	want.Size, want.SHA256 = int64(len(data)), hex.EncodeToString(sum[:])
	if f != want {
		t.Errorf("Encode returned %+v, want %+v", f, want)
	}
	if !bytes.HasPrefix(data, []byte("ARROW1")) || !bytes.HasSuffix(data, []byte("ARROW1")) {
		t.Error("not an Arrow IPC file")
	}
	schema, got, err := statefile.Decode(data, testSchema, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, b := range got {
			b.Release()
		}
	}()
	if !schema.Equal(testSchema) || len(got) != 2 || !array.RecordEqual(got[0], rec) || !array.RecordEqual(got[1], rec) {
		t.Fatalf("decoded %s with %d batches, want 2 equal to the input", schema, len(got))
	}
	// Without a schema to check, any schema is read.
	schema, any, err := statefile.Decode(data, nil, mem)
	if err != nil || !schema.Equal(testSchema) || len(any) != 2 {
		t.Fatalf("Decode(nil schema) = %v, %d batches, %v", schema, len(any), err)
	}
	for _, b := range any {
		b.Release()
	}
}

// TestNarrowedRoundTrip: a file in a schema that narrows the count
// column says Narrowed, is smaller, and decodes to the batches in the
// operator's schema, which Decode checks it against.
func TestNarrowedRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := testBatch(mem, groupsMod(1000, 64))
	defer rec.Release()
	file := arrowfmt.NarrowSchema(testSchema, []arrowfmt.Range{2: {Lo: 0, Hi: 999, Set: true}})
	if !arrowfmt.Narrowed(file) || arrowfmt.Narrowed(testSchema) {
		t.Fatalf("Narrowed(%s) = false, or Narrowed of the state schema true", file)
	}
	name := manifest.File{Key: "jobs/j-1/state/win/0-64/3-a1-base.arrow", Kind: manifest.KindBase, Operator: "win", KeyGroupEnd: 64}
	f, data, err := statefile.Encode(name, file, []arrow.RecordBatch{rec}, mem, arrowfmt.CompressNone)
	if err != nil {
		t.Fatal(err)
	}
	plain, plainData, err := statefile.Encode(name, testSchema, []arrow.RecordBatch{rec}, mem, arrowfmt.CompressNone)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Narrowed || plain.Narrowed || len(data) >= len(plainData) {
		t.Fatalf("narrowed: %+v (%d bytes); plain: %+v (%d bytes): want the first narrowed and smaller", f, len(data), plain, len(plainData))
	}
	schema, got, err := statefile.Decode(data, testSchema, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, b := range got {
			b.Release()
		}
	}()
	if !schema.Equal(testSchema) || len(got) != 1 || !array.RecordEqual(got[0], rec) {
		t.Fatalf("decoded %s with %d batches, want 1 equal to the input", schema, len(got))
	}
	// A sliced batch is Arrow's writer's, which does not narrow: refused.
	sliced := rec.NewSlice(1, 10)
	defer sliced.Release()
	if _, _, err := statefile.Encode(name, file, []arrow.RecordBatch{sliced}, mem, arrowfmt.CompressNone); !errors.Is(err, arrowfmt.ErrNotWritable) {
		t.Errorf("a sliced batch into a narrowed file: %v, want ErrNotWritable", err)
	}
}

// TestCodecs encodes compressible batches with each codec: every file
// decodes to the input, holds the frames of its codec (LZ4 frames start
// 04 22 4d 18, zstd frames 28 b5 2f fd) and not the other's, and the
// compressed files are smaller than the plain one.
// TestCodecs: each codec's files hold frames of that codec only, are
// smaller compressed, and decode to what was encoded, whether WriteFile
// writes them (flat batches) or Arrow's IPC writer (a sliced batch).
func TestCodecs(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := testBatch(mem, groupsMod(5000, 3))
	defer rec.Release()
	sliced := rec.NewSlice(3, 4000)
	defer sliced.Release()
	if arrowfmt.FileWritable(testSchema, []arrow.RecordBatch{sliced}) == nil {
		t.Fatal("a sliced batch is FileWritable: this test would not reach Arrow's writer")
	}
	lz4Magic, zstdMagic := []byte{0x04, 0x22, 0x4d, 0x18}, []byte{0x28, 0xb5, 0x2f, 0xfd}
	for _, in := range []struct {
		name string
		rec  arrow.RecordBatch
	}{{"flat", rec}, {"sliced", sliced}} {
		sizes := map[arrowfmt.Compression]int{}
		for _, c := range []struct {
			codec      arrowfmt.Compression
			has, hasNo [][]byte
		}{
			{arrowfmt.CompressNone, nil, [][]byte{lz4Magic, zstdMagic}},
			{arrowfmt.CompressLZ4, [][]byte{lz4Magic}, [][]byte{zstdMagic}},
			{arrowfmt.CompressZstd, [][]byte{zstdMagic}, [][]byte{lz4Magic}},
		} {
			_, data, err := statefile.Encode(manifest.File{}, testSchema, []arrow.RecordBatch{in.rec}, mem, c.codec)
			if err != nil {
				t.Fatalf("%s, %v: %v", in.name, c.codec, err)
			}
			sizes[c.codec] = len(data)
			for _, m := range c.has {
				if !bytes.Contains(data, m) {
					t.Errorf("%s, %v: no frame of its codec (% x) in the file", in.name, c.codec, m)
				}
			}
			for _, m := range c.hasNo {
				if bytes.Contains(data, m) {
					t.Errorf("%s, %v: a frame of another codec (% x) in the file", in.name, c.codec, m)
				}
			}
			_, got, err := statefile.Decode(data, testSchema, mem)
			if err != nil {
				t.Fatalf("%s, %v: decode: %v", in.name, c.codec, err)
			}
			if len(got) != 1 || !array.RecordEqual(got[0], in.rec) {
				t.Errorf("%s, %v: decoded %d batches, want 1 equal to the input", in.name, c.codec, len(got))
			}
			for _, b := range got {
				b.Release()
			}
		}
		if sizes[arrowfmt.CompressLZ4] >= sizes[arrowfmt.CompressNone] || sizes[arrowfmt.CompressZstd] >= sizes[arrowfmt.CompressNone] {
			t.Errorf("%s: sizes %v: want the compressed files smaller than the plain one", in.name, sizes)
		}
	}
}

// TestStandardArrow: what Encode writes is a plain Arrow IPC file with
// zstd buffers, which any Arrow implementation reads.
func TestStandardArrow(t *testing.T) {
	rec := testBatch(memory.DefaultAllocator, []int32{1, 2, 3})
	defer rec.Release()
	_, data := encode(t, manifest.File{}, rec)
	rd, err := ipc.NewFileReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if rd.NumRecords() != 1 || !rd.Schema().Equal(testSchema) {
		t.Fatalf("%d batches of %s", rd.NumRecords(), rd.Schema())
	}
	got, err := rd.RecordBatch(0)
	if err != nil || !array.RecordEqual(got, rec) {
		t.Fatalf("batch 0: %v", err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := testBatch(mem, []int32{0, 1, 2, 3, 4, 5, 6, 7})
	_, data := encode(t, manifest.File{}, rec, rec)
	rec.Release()
	other := arrow.NewSchema([]arrow.Field{{Name: "key_group", Type: arrow.PrimitiveTypes.Int32}}, nil)
	if _, _, err := statefile.Decode(data, other, mem); err == nil || !strings.Contains(err.Error(), "state schema") {
		t.Errorf("a state file of another schema: %v", err)
	}
	// Every truncation is an error, not a panic.
	for n := 0; n < len(data); n += max(1, len(data)/200) {
		if _, bs, err := statefile.Decode(data[:n], testSchema, mem); err == nil {
			for _, b := range bs {
				b.Release()
			}
			t.Fatalf("a state file truncated to %d of %d bytes was accepted", n, len(data))
		}
	}
}

// TestDecodeBound: a file that decodes to far more than MaxExpansion times
// its size is refused, not allocated.
func TestDecodeBound(t *testing.T) {
	zeros := arrow.NewSchema([]arrow.Field{{Name: "key_group", Type: arrow.PrimitiveTypes.Int32}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	const rows = 1 << 20 // 12 MiB decoded, a few KiB compressed
	b := array.NewRecordBuilder(memory.DefaultAllocator, zeros)
	b.Field(0).(*array.Int32Builder).AppendValues(make([]int32, rows), nil)
	b.Field(1).(*array.Int64Builder).AppendValues(make([]int64, rows), nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	_, data, err := statefile.Encode(manifest.File{}, zeros, []arrow.RecordBatch{rec}, memory.DefaultAllocator, arrowfmt.CompressZstd)
	if err != nil {
		t.Fatal(err)
	}
	if bound := int64(len(data))*statefile.MaxExpansion + 1<<20; bound >= rows*12 {
		t.Fatalf("the file has %d bytes: its bound %d does not refuse %d rows", len(data), bound, rows)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	if _, bs, err := statefile.Decode(data, nil, mem); err == nil {
		for _, b := range bs {
			b.Release()
		}
		t.Fatalf("a %d-byte file decoding to %d rows was accepted", len(data), rows)
	}
	// Within the bound it decodes.
	small := rec.NewSlice(0, 1000)
	defer small.Release()
	_, data, err = statefile.Encode(manifest.File{}, zeros, []arrow.RecordBatch{small}, memory.DefaultAllocator, arrowfmt.CompressZstd)
	if err != nil {
		t.Fatal(err)
	}
	_, bs, err := statefile.Decode(data, zeros, mem)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		b.Release()
	}
}

func TestVerifyAndRead(t *testing.T) {
	ctx := context.Background()
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec := testBatch(memory.DefaultAllocator, []int32{1, 2})
	defer rec.Release()
	f, data := encode(t, manifest.File{Key: "jobs/j-1/state/win/0-64/3-a1-base.arrow"}, rec)
	if err := statefile.Verify(f, data); err != nil {
		t.Fatalf("Verify of the encoded file: %v", err)
	}
	if _, err := statefile.Read(ctx, b, f); !errors.Is(err, blob.ErrNotFound) || !strings.Contains(err.Error(), "read state file "+f.Key) {
		t.Errorf("Read of a missing file: %v", err)
	}
	if err := b.Put(ctx, f.Key, data); err != nil {
		t.Fatal(err)
	}
	if got, err := statefile.Read(ctx, b, f); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Read = %d bytes, %v", len(got), err)
	}

	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 0x40
	sum := sha256.Sum256(flipped)
	for _, tc := range []struct {
		name string
		data []byte
		want statefile.MismatchError
		msg  string
	}{
		{"truncated", data[:len(data)-1], statefile.MismatchError{Key: f.Key, WantSize: f.Size, GotSize: f.Size - 1},
			"state file " + f.Key + " has " + itoa(f.Size-1) + " bytes, the manifest says " + itoa(f.Size)},
		{"flipped", flipped, statefile.MismatchError{Key: f.Key, WantSize: f.Size, GotSize: f.Size, WantSHA256: f.SHA256, GotSHA256: hex.EncodeToString(sum[:])},
			"state file " + f.Key + " has SHA-256 " + hex.EncodeToString(sum[:]) + ", the manifest says " + f.SHA256},
	} {
		if err := b.Put(ctx, f.Key, tc.data); err != nil {
			t.Fatal(err)
		}
		for _, err := range []error{statefile.Verify(f, tc.data), func() error { _, err := statefile.Read(ctx, b, f); return err }()} {
			var mm *statefile.MismatchError
			if !errors.As(err, &mm) || *mm != tc.want || err.Error() != tc.msg {
				t.Errorf("%s: %v (%+v), want %q", tc.name, err, mm, tc.msg)
			}
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// FuzzDecode: any bytes decode to batches of the schema or to an error;
// never a panic or an allocation beyond the file's bound.
func FuzzDecode(f *testing.F) {
	rec := testBatch(memory.DefaultAllocator, []int32{0, 1, 2, 3})
	_, data := encode(f, manifest.File{}, rec)
	rec.Release()
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte("ARROW1\x00\x00"))
	// A file narrowing the count column to a byte.
	rec = testBatch(memory.DefaultAllocator, []int32{0, 1, 2, 3})
	_, narrow, err := statefile.Encode(manifest.File{}, arrowfmt.NarrowSchema(testSchema, []arrowfmt.Range{2: {Lo: 0, Hi: 3, Set: true}}), []arrow.RecordBatch{rec}, memory.DefaultAllocator, arrowfmt.CompressLZ4)
	rec.Release()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(narrow)
	f.Fuzz(func(t *testing.T, b []byte) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		_, bs, err := statefile.Decode(b, testSchema, mem)
		if err == nil {
			for _, r := range bs {
				if !r.Schema().Equal(testSchema) {
					t.Fatalf("decoded a batch of schema %s", r.Schema())
				}
				r.Release()
			}
		}
	})
}
