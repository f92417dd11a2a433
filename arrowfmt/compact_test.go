package arrowfmt

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/integration/tracetest"
)

// TestCompactTraces runs testdata/compact.txt, the width and base a
// compact column takes batch by batch. Commands:
//
//	new             a new column
//	batch <lo> <hi> a batch whose valid values span [lo, hi]
//	skip <n>        n batches that fit without a change
func TestCompactTraces(t *testing.T) {
	tracetest.Run(t, "testdata/compact.txt", func(t *testing.T) tracetest.Func {
		c := newCompactCol(0)
		n := 0
		return func(t *testing.T, td *datadriven.TestData) (string, error) {
			args := tracetest.Words(td)
			num := func(s string) int64 {
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatalf("bad number %q in trace", s)
				}
				return v
			}
			switch td.Cmd {
			case "new":
				c, n = newCompactCol(0), 0
				return "ok", nil
			case "skip":
				k := int(num(args[0]))
				for range k {
					// A batch at the column's base fits any width.
					if c.fit(c.base, c.base, n) {
						t.Fatalf("batch %d at the base changed the column", n)
					}
					n++
				}
				return "ok", nil
			case "batch":
				changed := c.fit(num(args[0]), num(args[1]), n)
				n++
				out := fmt.Sprintf("width=%d base=%d", c.width, c.base)
				if changed {
					out += " changed"
				}
				return out, nil
			}
			t.Fatalf("unknown command %q", td.Cmd)
			return "", nil
		}
	})
}

// compactBatch builds a batch of the test schema whose id and ts columns
// are given, with nulls where valid is false.
func compactBatch(t testing.TB, mem memory.Allocator, ids, ts []int64, valid []bool) arrow.RecordBatch {
	t.Helper()
	b := NewBuilder(testSchema(t), mem)
	defer b.Release()
	for i := range ids {
		row := []any{ids[i], "n", 1.5, time.UnixMilli(ts[i]).UTC(), true}
		if valid != nil && !valid[i] {
			row[colID], row[colTS] = nil, nil
		}
		for c, v := range row {
			if err := b.AppendAny(c, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.NewBatch()
}

// TestCompactRoundTrip: batches of every shape a channel may send (small
// and huge ranges, drifting timestamps, nulls, the int64 extremes, empty
// batches, slices) decode to what was encoded, with compression or
// without, and a decoder that joins late reads a channel from its next
// schema.
func TestCompactRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type shape struct {
		name string
		gen  func(i, batch int) (id, ts int64)
	}
	shapes := []shape{
		{"small keys, drifting time", func(i, b int) (int64, int64) { return rng.Int64N(10_000), testBase + int64(b*8+i/1000) }},
		{"full range", func(i, b int) (int64, int64) { return int64(rng.Uint64()), int64(rng.Uint64()) }},
		{"extremes", func(i, b int) (int64, int64) {
			v := []int64{math.MinInt64, math.MaxInt64, math.MinInt64 + 1, math.MaxInt64 - 3}[i%4]
			return v, v
		}},
		{"near the lowest", func(i, b int) (int64, int64) { return math.MinInt64 + int64(i%300), math.MinInt64 + int64(b) }},
		{"near the highest", func(i, b int) (int64, int64) { return math.MaxInt64 - int64(i%70000), math.MaxInt64 - int64(b) }},
		{"outliers", func(i, b int) (int64, int64) {
			if b%17 == 3 && i == 5 {
				return 1 << 40, -1 << 40
			}
			return int64(i % 100), testBase - int64(b)
		}},
	}
	for _, c := range []Compression{CompressNone, CompressLZ4} {
		for _, sh := range shapes {
			t.Run(c.String()+"/"+sh.name, func(t *testing.T) {
				mem := newMem(t)
				enc := NewWireEncoder(testSchema(t), mem, WireOptions{Compression: c, Compact: true})
				dec := NewDecoder(mem)
				defer dec.Close()
				for b := range 40 {
					n := []int{500, 0, 1, 3000}[b%4]
					ids, ts := make([]int64, n), make([]int64, n)
					valid := make([]bool, n)
					for i := range n {
						ids[i], ts[i] = sh.gen(i, b)
						valid[i] = b%3 != 1 || i%5 != 0
					}
					rec := compactBatch(t, mem, ids, ts, valid)
					if b%5 == 4 && n > 10 {
						s := rec.NewSlice(3, int64(n-2))
						rec.Release()
						rec = s
					}
					p, err := enc.Encode(rec)
					if err != nil {
						t.Fatal(err)
					}
					got, err := dec.Decode(p)
					if err != nil {
						t.Fatalf("batch %d: %v", b, err)
					}
					if !got.Schema().Equal(rec.Schema()) {
						t.Fatalf("batch %d: schema %v, want %v", b, got.Schema(), rec.Schema())
					}
					if !array.RecordEqual(got, rec) {
						t.Fatalf("batch %d: decoded %v, want %v", b, got, rec)
					}
					requireRows(t, got, rowsOf(rec))
					for _, col := range []int{colID, colTS} {
						a := got.Column(col)
						vals := int64Values(a.Data())
						for i := range a.Len() {
							if a.IsNull(i) && vals[i] != 0 {
								t.Fatalf("batch %d column %d row %d: null slot holds %d, want 0", b, col, i, vals[i])
							}
						}
					}
					got.Release()
					rec.Release()
				}
			})
		}
	}
}

// TestCompactSavesBytes: keys below 10,000 and timestamps a few
// milliseconds apart take 2 bytes each instead of 8, and a long channel
// of drifting timestamps sends its schema again only rarely.
func TestCompactSavesBytes(t *testing.T) {
	mem := newMem(t)
	plain := NewEncoder(testSchema(t), mem)
	compact := NewWireEncoder(testSchema(t), mem, WireOptions{Compact: true})
	rng := rand.New(rand.NewPCG(3, 4))
	var plainBytes, compactBytes, schemas int
	const batches, rows = 500, 4096
	for b := range batches {
		ids, ts := make([]int64, rows), make([]int64, rows)
		for i := range rows {
			// 1M events/s of event time, a little out of order.
			ids[i], ts[i] = rng.Int64N(10_000), testBase+int64(b*rows+i)/1000-rng.Int64N(50)
		}
		rec := compactBatch(t, mem, ids, ts, nil)
		p, err := plain.Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		q, err := compact.Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
		plainBytes += len(p)
		compactBytes += len(q)
		msgs, err := splitMessages(nil, q, msgRules{})
		if err != nil {
			t.Fatal(err)
		}
		if msgs[0].typ == ipc.MessageSchema {
			schemas++
		}
	}
	// Of each row's 8+8 bytes of id and ts, 2+2 remain; the rest of the
	// row (a string, a float, a bool) is as it was.
	saved := plainBytes - compactBytes
	if want := batches * rows * 12 * 95 / 100; saved < want {
		t.Errorf("compact payloads saved %d bytes of %d, want at least %d", saved, plainBytes, want)
	}
	// 2 s of event time in two-byte timestamps: 65 s a base.
	if schemas > 3 {
		t.Errorf("%d of %d payloads carried a schema, want at most 3", schemas, batches)
	}
	t.Logf("plain %d bytes, compact %d (%.2f), %d schema messages", plainBytes, compactBytes, float64(compactBytes)/float64(plainBytes), schemas)
}

// TestCompactPlainColumns: a compact encoder leaves columns whose values
// need 8 bytes as they are, and a schema without int64 or timestamp
// columns is sent as is.
func TestCompactPlainColumns(t *testing.T) {
	mem := newMem(t)
	rec := compactBatch(t, mem, []int64{math.MinInt64, math.MaxInt64}, []int64{0, 1}, nil)
	defer rec.Release()
	p, err := NewWireEncoder(testSchema(t), mem, WireOptions{Compact: true}).Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := splitMessages(nil, p, msgRules{})
	if err != nil {
		t.Fatal(err)
	}
	r, q, err := newMessageReader(bytes.Clone(msgs[0].meta), mem)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Release()
	defer r.Release()
	ws := r.Schema()
	if ws.Field(colID).Type.ID() != arrow.INT64 || ws.Field(colTS).Type.ID() != arrow.UINT8 {
		t.Errorf("wire schema %v: want id as int64, ts as uint8", ws)
	}
}

// TestDecodeRefusesBadCompactSchema: a compact column that claims a type
// that is not int64 or timestamp_ms, is not uint8/16/32, or has no base
// or a bad one is refused with an error naming the field and the value.
func TestDecodeRefusesBadCompactSchema(t *testing.T) {
	cases := []struct {
		typ        arrow.DataType
		keys, vals []string
		want       string
	}{
		{arrow.PrimitiveTypes.Uint8, []string{metaWeirType, metaWeirBase}, []string{"float64", "0"}, `"float64"`},
		{arrow.PrimitiveTypes.Uint64, []string{metaWeirType, metaWeirBase}, []string{"int64", "0"}, "uint64"},
		{arrow.PrimitiveTypes.Uint16, []string{metaWeirType}, []string{"int64"}, "without weir.base"},
		{arrow.PrimitiveTypes.Uint16, []string{metaWeirType, metaWeirBase}, []string{"int64", "9223372036854775808"}, `"9223372036854775808"`},
		{arrow.PrimitiveTypes.Uint32, []string{metaWeirType, metaWeirBase}, []string{"timestamp_ms", "x"}, `"x"`},
	}
	for i, c := range cases {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			mem := newMem(t)
			s := arrow.NewSchema([]arrow.Field{{Name: "k", Type: c.typ, Nullable: true, Metadata: arrow.NewMetadata(c.keys, c.vals)}}, nil)
			b := array.NewRecordBuilder(mem, s)
			defer b.Release()
			rec := b.NewRecordBatch()
			defer rec.Release()
			var buf bytes.Buffer
			w := ipc.NewWriter(&buf, ipc.WithSchema(s), ipc.WithAllocator(mem))
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			dec := NewDecoder(mem)
			defer dec.Close()
			got, err := dec.Decode(buf.Bytes())
			if got != nil {
				got.Release()
			}
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), `"k"`) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want ErrMalformed naming field \"k\" and %s", err, c.want)
			}
		})
	}
}

// TestRecycledColumns: once a decoded record is released, the next batch
// of the channel widens into the buffers it held; with poisoning on, a
// buffer given back is overwritten at once, so a read after release
// cannot pass for the batch's values.
func TestRecycledColumns(t *testing.T) {
	defer func(p func() bool) { poisonFreed = p }(poisonFreed)
	poisonFreed = func() bool { return true }
	mem := newMem(t)
	enc := NewWireEncoder(testSchema(t), mem, WireOptions{Compact: true})
	dec := NewDecoder(mem)
	defer dec.Close()
	decode := func(from int) arrow.RecordBatch {
		ids, ts := make([]int64, 1000), make([]int64, 1000)
		for i := range ids {
			ids[i], ts[i] = int64(from+i), testBase+int64(from+i)
		}
		rec := compactBatch(t, mem, ids, ts, nil)
		defer rec.Release()
		p, err := enc.Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dec.Decode(p)
		if err != nil {
			t.Fatal(err)
		}
		if !array.RecordEqual(got, rec) {
			t.Fatalf("decoded %v, want %v", got, rec)
		}
		return got
	}
	first := decode(0)
	stale := int64Values(first.Column(colID).Data())
	held := first.Column(colTS)
	held.Retain() // a consumer that keeps a column keeps its buffer
	first.Release()
	if want := int64(-6510615555426900571); stale[0] != want || stale[999] != want {
		t.Errorf("a released column reads %d, %d: want the poison %d", stale[0], stale[999], want)
	}
	if got := held.(*array.Timestamp).Value(999); int64(got) != testBase+999 {
		t.Errorf("a retained column reads %d after its record's release, want %d", got, testBase+999)
	}
	second := decode(1000)
	defer second.Release()
	if &int64Values(second.Column(colID).Data())[0] != &stale[0] {
		t.Error("the second batch did not reuse the released batch's buffer")
	}
	held.Release()
}
