package ctest

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
)

// needClang fails the test without clang: like Redis and MinIO for the
// integration tests, make test installs it (make deps), and a test never
// passes by skipping.
func needClang(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("clang"); err != nil {
		t.Fatal("clang is not on PATH; the C guest SDK's tests need it (make deps installs it)")
	}
}

// buildNative runs test/run.sh, which builds the native test programs and
// runs the SDK's own tests, and returns the directory of the programs.
func buildNative(t *testing.T) string {
	t.Helper()
	needClang(t)
	dir := t.TempDir()
	out, err := exec.Command("bash", filepath.Join("..", "test", "run.sh"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("test/run.sh: %v\n%s", err, out)
	}
	t.Logf("test/run.sh:\n%s", out)
	return dir
}

// TestC runs the C SDK's native tests, then the cross-checks against
// arrowfmt with the same build.
func TestC(t *testing.T) {
	bin := filepath.Join(buildNative(t), "sdk_test")
	t.Run("Echo", func(t *testing.T) { testEcho(t, bin) })
	t.Run("Keys", func(t *testing.T) { testKeys(t, bin) })
	t.Run("Refuses", func(t *testing.T) { testRefuses(t, bin) })
}

var echoFields = []arrowfmt.Field{
	{Name: "i", Type: arrowfmt.Int64}, {Name: "f", Type: arrowfmt.Float64}, {Name: "s", Type: arrowfmt.String},
	{Name: "b", Type: arrowfmt.Bool}, {Name: "t", Type: arrowfmt.TimestampMs},
}

// otherFields is an input the C echo reads by name: reordered, with an
// extra column.
var otherFields = []arrowfmt.Field{
	{Name: "t", Type: arrowfmt.TimestampMs}, {Name: "extra", Type: arrowfmt.String}, {Name: "s", Type: arrowfmt.String},
	{Name: "i", Type: arrowfmt.Int64}, {Name: "b", Type: arrowfmt.Bool}, {Name: "f", Type: arrowfmt.Float64},
}

func mustSchema(t *testing.T, fs []arrowfmt.Field) *arrow.Schema {
	t.Helper()
	s, err := arrowfmt.NewSchema(fs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// randomBatch makes rows of schema: extreme and ordinary values, empty,
// long and non-ASCII strings, and per column no nulls, some or only nulls.
func randomBatch(t *testing.T, rng *rand.Rand, schema *arrow.Schema, rows int, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	ints := []int64{0, 1, -1, math.MinInt64, math.MaxInt64, 1_700_000_000_000}
	floats := []float64{0, math.Copysign(0, -1), 1.5, math.NaN(), math.Inf(1), math.Inf(-1), 5e-324, math.MaxFloat64}
	strs := []string{"", "a", "zone-7", "héllo", "🚕 taxi", "nul\x00inside", strings.Repeat("long", 300)}
	b := arrowfmt.NewBuilder(schema, mem)
	defer b.Release()
	fs, err := arrowfmt.Fields(schema)
	if err != nil {
		t.Fatal(err)
	}
	nullRate := make([]float64, len(fs))
	for c := range fs {
		nullRate[c] = []float64{0, 0.3, 1}[rng.IntN(3)]
	}
	for range rows {
		for c, f := range fs {
			if rng.Float64() < nullRate[c] {
				b.Null(c)
				continue
			}
			switch f.Type {
			case arrowfmt.Int64:
				if rng.IntN(2) == 0 {
					b.Int64(c, ints[rng.IntN(len(ints))])
				} else {
					b.Int64(c, int64(rng.Uint64()))
				}
			case arrowfmt.Float64:
				if rng.IntN(2) == 0 {
					b.Float64(c, floats[rng.IntN(len(floats))])
				} else {
					b.Float64(c, rng.NormFloat64()*1e6)
				}
			case arrowfmt.String:
				b.String(c, strs[rng.IntN(len(strs))])
			case arrowfmt.Bool:
				b.Bool(c, rng.IntN(2) == 0)
			case arrowfmt.TimestampMs:
				b.TimestampMs(c, rng.Int64N(4_000_000_000_000)-1_000_000_000_000)
			}
		}
	}
	return b.NewBatch()
}

// render prints a value as sdk_test does.
func render(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case int64:
		return fmt.Sprint(v)
	case float64:
		return fmt.Sprintf("f:%016x", math.Float64bits(v))
	case string:
		return "s:" + hex.EncodeToString([]byte(v))
	case bool:
		return fmt.Sprint(v)
	case time.Time:
		return fmt.Sprintf("t:%d", v.UnixMilli())
	}
	return fmt.Sprintf("unexpected %T", v)
}

// rowsOf renders the rows of rec over the columns cols (all for nil).
func rowsOf(rec arrow.RecordBatch, cols []string) []string {
	idx := make([]int, 0, rec.NumCols())
	if cols == nil {
		for c := range int(rec.NumCols()) {
			idx = append(idx, c)
		}
	}
	for _, name := range cols {
		idx = append(idx, rec.Schema().FieldIndices(name)[0])
	}
	rows := make([]string, rec.NumRows())
	for r := range rows {
		vals := make([]string, len(idx))
		for i, c := range idx {
			vals[i] = render(arrowfmt.Value(rec.Column(c), r))
		}
		rows[r] = strings.Join(vals, " ")
	}
	return rows
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return []string{}
	}
	return strings.Split(s, "\n")
}

func equalRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("%s: row %d:\n got %s\nwant %s", what, i, got[i], want[i])
			return
		}
	}
}

// testEcho: payloads from arrowfmt.NewEncoder decode in C to the same
// values, and what C's echo emits decodes strictly to them again.
func testEcho(t *testing.T, bin string) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()

	var want [][]string // per input payload, its rows over all its columns
	var echoed []string // every row, over the echo columns
	n := 0
	for _, part := range []struct {
		fields []arrowfmt.Field
		sizes  []int
	}{
		{echoFields, []int{5, 0, 1, 100, 2000, 64}},
		{otherFields, []int{7, 300}}, // a new encoder: the payload carries a new schema
	} {
		schema := mustSchema(t, part.fields)
		enc := arrowfmt.NewEncoder(schema, mem)
		for k, size := range part.sizes {
			rec := randomBatch(t, rng, schema, size, mem)
			if k == 4 { // a slice: arrow-go's writer rebases offsets and bitmaps
				s := rec.NewSlice(3, int64(size-5))
				rec.Release()
				rec = s
			}
			p, err := enc.Encode(rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("in-%03d.bin", n)), p, 0o644); err != nil {
				t.Fatal(err)
			}
			want = append(want, rowsOf(rec, nil))
			echoed = append(echoed, rowsOf(rec, []string{"i", "f", "s", "b", "t"})...)
			rec.Release()
			n++
		}
	}

	if out, err := exec.Command(bin, "echo", dir, fmt.Sprint(n)).CombinedOutput(); err != nil {
		t.Fatalf("sdk_test echo: %v\n%s", err, out)
	}
	for i := range n {
		equalRows(t, fmt.Sprintf("payload %d as C decoded it", i), lines(t, filepath.Join(dir, fmt.Sprintf("in-%03d.txt", i))), want[i])
	}

	dec := arrowfmt.NewDecoder(mem)
	defer dec.Close()
	outs, err := filepath.Glob(filepath.Join(dir, "out-*.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, path := range outs {
		p, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := dec.Decode(p)
		if err != nil {
			t.Fatalf("decode %s (what C emitted): %v", filepath.Base(path), err)
		}
		got = append(got, rowsOf(rec, nil)...)
		rec.Release()
	}
	if !dec.Schema().Equal(mustSchema(t, echoFields)) {
		t.Errorf("C's output schema %v, want %v", dec.Schema(), mustSchema(t, echoFields))
	}
	equalRows(t, "what C emitted", got, echoed)
}

// testKeys: C decodes keys from arrowfmt.AppendKey as DecodeKeyString
// does, and refuses what it refuses, random bytes included.
func testKeys(t *testing.T, bin string) {
	rng := rand.New(rand.NewPCG(3, 4))
	types := []arrowfmt.Type{arrowfmt.Int64, arrowfmt.Float64, arrowfmt.String, arrowfmt.Bool, arrowfmt.TimestampMs}
	letters := map[arrowfmt.Type]byte{arrowfmt.Int64: 'i', arrowfmt.Float64: 'f', arrowfmt.String: 's', arrowfmt.Bool: 'b', arrowfmt.TimestampMs: 't'}
	value := func(typ arrowfmt.Type) any {
		if rng.IntN(6) == 0 {
			return nil
		}
		switch typ {
		case arrowfmt.Int64:
			return []int64{0, -1, math.MinInt64, math.MaxInt64, int64(rng.Uint64())}[rng.IntN(5)]
		case arrowfmt.Float64:
			return []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(-1), -2.5, rng.NormFloat64()}[rng.IntN(6)]
		case arrowfmt.String:
			return []string{"", "zone", "é🚕", strings.Repeat("x", 200)}[rng.IntN(4)]
		case arrowfmt.Bool:
			return rng.IntN(2) == 0
		default:
			return time.UnixMilli(rng.Int64N(1e13) - 5e12)
		}
	}
	type tc struct {
		types []arrowfmt.Type
		key   []byte
	}
	var cases []tc
	for range 500 {
		ts := make([]arrowfmt.Type, 1+rng.IntN(4))
		vals := make([]any, len(ts))
		for i := range ts {
			ts[i] = types[rng.IntN(len(types))]
			vals[i] = value(ts[i])
		}
		key := arrowfmt.AppendKey(nil, vals...)
		cases = append(cases, tc{ts, key})
		cases = append(cases, tc{ts, key[:rng.IntN(len(key))]}) // truncated
		cases = append(cases, tc{ts, append(bytes.Clone(key), 0)})
		junk := make([]byte, rng.IntN(12))
		for i := range junk {
			junk[i] = []byte{0, 1, 2, 0x80, 0xff, byte(rng.Uint32())}[rng.IntN(6)]
		}
		cases = append(cases, tc{ts, junk})
	}
	var in strings.Builder
	want := make([]string, len(cases))
	for i, c := range cases {
		var letters1 []byte
		for _, typ := range c.types {
			letters1 = append(letters1, letters[typ])
		}
		fmt.Fprintf(&in, "%s %s\n", letters1, hex.EncodeToString(c.key))
		vals, err := arrowfmt.DecodeKeyString(string(c.key), c.types)
		if err != nil {
			want[i] = "error"
			continue
		}
		r := make([]string, len(vals))
		for j, v := range vals {
			r[j] = render(v)
		}
		want[i] = strings.Join(r, " ")
	}
	path := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(path, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "keys", path).Output()
	if err != nil {
		t.Fatalf("sdk_test keys: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d results for %d keys", len(got), len(want))
	}
	errs := 0
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("key %x of %v: C gives %s, arrowfmt %s", cases[i].key, cases[i].types, got[i], want[i])
		}
		if want[i] == "error" {
			errs++
		}
	}
	if errs < len(cases)/4 {
		t.Errorf("only %d of %d keys were malformed", errs, len(cases))
	}
}

// payload writes rec with arrow-go's IPC writer (options as given) and
// returns the messages without the end-of-stream marker.
func payload(t *testing.T, rec arrow.RecordBatch, opts ...ipc.Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, append(opts, ipc.WithSchema(rec.Schema()))...)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	p := bytes.Clone(buf.Bytes())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// testRefuses: C decodes only the Arrow types weir has, and refuses
// compressed and dictionary-encoded batches.
func testRefuses(t *testing.T, bin string) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	one := func(dt arrow.DataType, appendOne func(array.Builder)) arrow.RecordBatch {
		schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: dt, Nullable: true}}, nil)
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		appendOne(b.Field(0))
		b.Field(0).AppendNull()
		return b.NewRecordBatch()
	}
	null := func(b array.Builder) { b.AppendNull() }
	weirTypes := one(arrow.PrimitiveTypes.Int64, func(b array.Builder) { b.(*array.Int64Builder).Append(7) })
	defer weirTypes.Release()

	cases := []struct {
		name string
		p    []byte
		ok   bool
	}{
		{"int64", payload(t, weirTypes), true},
		{"zstd", payload(t, weirTypes, ipc.WithZstd()), false},
		{"lz4", payload(t, weirTypes, ipc.WithLZ4()), false},
	}
	for _, c := range []struct {
		name string
		dt   arrow.DataType
	}{
		{"int32", arrow.PrimitiveTypes.Int32},
		{"uint64", arrow.PrimitiveTypes.Uint64},
		{"float32", arrow.PrimitiveTypes.Float32},
		{"timestamp s", &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}},
		{"timestamp ms Paris", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"}},
		{"timestamp ms naive", &arrow.TimestampType{Unit: arrow.Millisecond}},
		{"binary", arrow.BinaryTypes.Binary},
		{"large string", arrow.BinaryTypes.LargeString},
		{"date32", arrow.FixedWidthTypes.Date32},
		{"list", arrow.ListOf(arrow.PrimitiveTypes.Int64)},
		{"dictionary", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}},
	} {
		rec := one(c.dt, null)
		cases = append(cases, struct {
			name string
			p    []byte
			ok   bool
		}{c.name, payload(t, rec), false})
		rec.Release()
	}
	dir := t.TempDir()
	for _, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".bin")
		if err := os.WriteFile(path, c.p, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "decode", path).Output()
		if err != nil {
			t.Fatalf("sdk_test decode: %v", err)
		}
		got := strings.TrimSpace(string(out))
		if c.ok != strings.HasPrefix(got, "ok") {
			t.Errorf("%s: C says %q", c.name, got)
		}
		t.Logf("%s: %s", c.name, got)
	}
}
