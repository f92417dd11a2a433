package arrowfmt

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

func TestKeyStringRoundTrip(t *testing.T) {
	mem := newMem(t)
	rec := testBatch(t, mem, 0, 300)
	defer rec.Release()
	cols := []int{colOK, colName, colTS, colID, colPrice}
	types := make([]Type, len(cols))
	for i, c := range cols {
		types[i] = testFields[c].Type
	}
	seen := map[string][]any{}
	for r := range int(rec.NumRows()) {
		vals := make([]any, len(cols))
		for i, c := range cols {
			vals[i] = Value(rec.Column(c), r)
		}
		k := KeyString(rec, cols, r)
		if ak := AppendKey(nil, vals...); string(ak) != k {
			t.Fatalf("row %d: AppendKey %q, KeyString %q", r, ak, k)
		}
		if rk := AppendRowKey([]byte("x"), rec, cols, r); string(rk[1:]) != k {
			t.Fatalf("row %d: AppendRowKey %q, KeyString %q", r, rk, k)
		}
		got, err := DecodeKeyString(k, types)
		if err != nil {
			t.Fatalf("row %d: %v", r, err)
		}
		if !rowEqual(got, vals) {
			t.Fatalf("row %d: decoded %#v, want %#v", r, got, vals)
		}
		if prev, ok := seen[k]; ok && !rowEqual(prev, vals) {
			t.Fatalf("rows %v and %v have the same key", prev, vals)
		}
		seen[k] = vals
	}
}

func TestKeyStringUnambiguous(t *testing.T) {
	pairs := [][2][]any{
		{{"ab", "c"}, {"a", "bc"}},
		{{"", nil}, {nil, ""}},
		{{int64(0)}, {nil}},
		{{"a\x00"}, {"a"}},
	}
	for _, p := range pairs {
		if bytes.Equal(AppendKey(nil, p[0]...), AppendKey(nil, p[1]...)) {
			t.Errorf("%#v and %#v encode equally", p[0], p[1])
		}
	}
	if string(AppendKey(nil, math.Copysign(0, -1))) != string(AppendKey(nil, 0.0)) {
		t.Error("-0 and 0 encode differently")
	}
	ts := time.UnixMilli(-5)
	if string(AppendKey(nil, ts)) != string(AppendKey(nil, int64(-5))) {
		t.Error("time.Time and its milliseconds encode differently")
	}
}

// TestKeyOrder checks fixed-width keys sort like their values.
func TestKeyOrder(t *testing.T) {
	ints := []int64{math.MinInt64, -1000, -1, 0, 1, 255, 256, math.MaxInt64}
	floats := []float64{math.Inf(-1), -1e300, -1.5, -math.SmallestNonzeroFloat64, 0, math.SmallestNonzeroFloat64, 1, 1e300, math.Inf(1)}
	check := func(keys [][]byte) {
		t.Helper()
		if !slices.IsSortedFunc(keys, bytes.Compare) {
			t.Errorf("keys not sorted: %x", keys)
		}
	}
	var ik, fk [][]byte
	for _, v := range ints {
		ik = append(ik, AppendKey(nil, v))
	}
	for _, v := range floats {
		fk = append(fk, AppendKey(nil, v))
	}
	check(ik)
	check(fk)
}

func TestDecodeKeyStringErrors(t *testing.T) {
	good := string(AppendKey(nil, "abc", int64(5), true))
	types := []Type{String, Int64, Bool}
	if _, err := DecodeKeyString(good, types); err != nil {
		t.Fatal(err)
	}
	for name, k := range map[string]string{
		"truncated":   good[:len(good)-1],
		"trailing":    good + "\x00",
		"bad tag":     "\x07" + good[1:],
		"long string": "\x01\x7fabc",
		"bad bool":    string(AppendKey(nil, "abc", int64(5))) + "\x01\x02",
	} {
		if _, err := DecodeKeyString(k, types); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func FuzzDecodeKeyString(f *testing.F) {
	f.Add(string(AppendKey(nil, "abc", int64(5), true, 1.5, nil)))
	types := []Type{String, Int64, Bool, Float64, TimestampMs}
	f.Fuzz(func(t *testing.T, k string) {
		vals, err := DecodeKeyString(k, types)
		if err != nil {
			return
		}
		// Anything that decodes re-encodes to an equal key.
		again, err := DecodeKeyString(string(AppendKey(nil, vals...)), types)
		if err != nil || !rowEqual(again, vals) {
			t.Fatalf("re-encoding %#v gives %#v, %v", vals, again, err)
		}
	})
}

func BenchmarkKeyString(b *testing.B) {
	rec := benchBatch(b, newMem(b))
	defer rec.Release()
	cols := []int{1, 0}
	m := map[string]int{}
	for r := range int(rec.NumRows()) {
		m[KeyString(rec, cols, r)] = r
	}
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		// The keyed-state lookup pattern: no allocation for existing keys.
		for r := range int(rec.NumRows()) {
			buf = AppendRowKey(buf[:0], rec, cols, r)
			if m[string(buf)] != r {
				b.Fatal("wrong key")
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rec.NumRows()), "ns/row")
}

// TestAppendKeyValues: the key columns rebuilt from the encodings of every
// row's key equal the columns they were encoded from (nulls, strings,
// timestamps, floats and bools among them), and a bad encoding is an
// error naming the column.
func TestAppendKeyValues(t *testing.T) {
	mem := newMem(t)
	rec := testBatch(t, mem, 0, 300)
	defer rec.Release()
	cols := []int{colOK, colName, colTS, colID, colPrice}
	fields := make([]arrow.Field, len(cols))
	types := make([]Type, len(cols))
	for i, c := range cols {
		fields[i] = rec.Schema().Field(c)
		types[i] = testFields[c].Type
	}
	rb := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer rb.Release()
	for r := range int(rec.NumRows()) {
		if err := AppendKeyValues(rb.Fields(), KeyString(rec, cols, r), types); err != nil {
			t.Fatalf("row %d: %v", r, err)
		}
	}
	got := rb.NewRecordBatch()
	defer got.Release()
	for i, c := range cols {
		if !array.Equal(got.Column(i), rec.Column(c)) {
			t.Errorf("column %s: rebuilt %v, want %v", fields[i].Name, got.Column(i), rec.Column(c))
		}
	}
	k := KeyString(rec, cols, 0)
	if err := AppendKeyValues(rb.Fields(), k[:len(k)-3], types); err == nil || !strings.Contains(err.Error(), "column 4") {
		t.Errorf("truncated key: %v, want an error naming column 4", err)
	}
}

// TestInt64Key: a key of one Int64 or TimestampMs column decodes to the
// value it was made from, every value of the test batch's and the ends of
// the range; a null key and a key of two columns do not.
func TestInt64Key(t *testing.T) {
	mem := newMem(t)
	rec := testBatch(t, mem, 0, 300)
	defer rec.Release()
	for _, c := range []int{colID, colTS} {
		nulls := 0
		for r := range int(rec.NumRows()) {
			v, ok := Int64Key(KeyString(rec, []int{c}, r))
			switch col := rec.Column(c); {
			case col.IsNull(r):
				if ok {
					t.Fatalf("column %d, row %d: a null key decoded to %d", c, r, v)
				}
				nulls++
			case !ok:
				t.Fatalf("column %d, row %d: the key did not decode", c, r)
			case c == colID && v != col.(*array.Int64).Value(r), c == colTS && v != int64(col.(*array.Timestamp).Value(r)):
				t.Fatalf("column %d, row %d: decoded %d, want %v", c, r, v, col.GetOneForMarshal(r))
			}
		}
		t.Logf("column %d: %d null keys", c, nulls)
	}
	for _, v := range []int64{math.MinInt64, -1, 0, 1, math.MaxInt64} {
		b := array.NewInt64Builder(mem)
		b.Append(v)
		a := b.NewArray()
		one := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{a}, 1)
		if got, ok := Int64Key(KeyString(one, []int{0}, 0)); !ok || got != v {
			t.Errorf("%d decoded to %d, %v", v, got, ok)
		}
		one.Release()
		a.Release()
		b.Release()
	}
	if _, ok := Int64Key(KeyString(rec, []int{colID, colTS}, 0)); ok {
		t.Error("a key of two columns decoded as one int64")
	}
}
