package guest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
)

// allTypes is a schema with every column type.
var allTypes = []Column{
	{Name: "id", Type: Int64},
	{Name: "name", Type: String},
	{Name: "price", Type: Float64},
	{Name: "ts", Type: TimestampMs},
	{Name: "ok", Type: Bool},
}

var base = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()

// testRow returns row i of the test data: every column has nulls, at
// different rows, and strings include empty ones.
func testRow(i int) []any {
	row := make([]any, 5)
	if i%7 != 3 {
		row[0] = int64(i)*1_000_003 - 50
	}
	if i%5 != 1 {
		names := []string{"", "a", "ünïcödé", "with \"quotes\"\n", strings.Repeat("long", 40)}
		row[1] = names[i%len(names)]
	}
	if i%11 != 2 {
		row[2] = float64(i)*0.25 - 3
	}
	if i%3 != 0 {
		row[3] = time.UnixMilli(base + int64(i)*1001 - 1e9).UTC()
	}
	if i%4 != 2 {
		row[4] = i%3 == 1
	}
	return row
}

func testRows(from, n int) [][]any {
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = testRow(from + i)
	}
	return rows
}

// valueEqual compares values as arrowfmt.Value gives them: times by
// instant, NaN equal to NaN.
func valueEqual(a, b any) bool {
	switch a := a.(type) {
	case time.Time:
		b, ok := b.(time.Time)
		return ok && a.Equal(b)
	case float64:
		b, ok := b.(float64)
		return ok && (a == b || a != a && b != b)
	}
	return a == b
}

func requireRows(t *testing.T, got, want [][]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for r := range want {
		for c := range want[r] {
			if len(got[r]) != len(want[r]) || !valueEqual(got[r][c], want[r][c]) {
				t.Fatalf("row %d: got %#v, want %#v", r, got[r], want[r])
			}
		}
	}
}

// readRows reads every cell of the decoded batch through Row, with the
// typed accessors, checking that a null reads as the zero value.
func readRows(t *testing.T, b *batch) [][]any {
	t.Helper()
	rows := make([][]any, b.rows)
	for i := range rows {
		row := Row{b: b, i: i}
		rows[i] = make([]any, len(b.cols))
		for c, col := range b.cols {
			v := row.ValueAt(c)
			rows[i][c] = v
			if got := row.IsNull(col.Name); got != (v == nil) {
				t.Fatalf("row %d column %s: IsNull %v, value %v", i, col.Name, got, v)
			}
			var typed any
			switch col.Type {
			case Int64:
				typed = row.Int64(col.Name)
			case Float64:
				typed = row.Float64(col.Name)
			case String:
				typed = row.String(col.Name)
				if string(row.Bytes(col.Name)) != typed {
					t.Fatalf("row %d column %s: Bytes %q, String %q", i, col.Name, row.Bytes(col.Name), typed)
				}
			case Bool:
				typed = row.Bool(col.Name)
			case TimestampMs:
				typed = row.Time(col.Name)
			}
			want := v
			if v == nil {
				want = map[Type]any{Int64: int64(0), Float64: 0.0, String: "", Bool: false, TimestampMs: time.UnixMilli(0).UTC()}[col.Type]
			}
			if !valueEqual(typed, want) {
				t.Fatalf("row %d column %s: typed accessor %#v, want %#v", i, col.Name, typed, want)
			}
		}
	}
	return rows
}

// TestDecodeArrowfmtPayloads: what the host's encoder writes, the guest
// reads: every type, nulls, empty strings, several batches of which only
// the first carries the schema, an empty batch.
func TestDecodeArrowfmtPayloads(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := schemaOf(t, allTypes...)
	enc := arrowfmt.NewEncoder(s, mem)
	var d decoder
	from := 0
	for i, n := range []int{100, 1, 0, 257, 8} {
		rows := testRows(from, n)
		from += n
		rec := batchOf(t, mem, s, rows...)
		payload, err := enc.Encode(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		changed, err := d.decode(payload)
		if err != nil {
			t.Fatalf("payload %d: %v", i, err)
		}
		if changed != (i == 0) {
			t.Errorf("payload %d: schema changed %v", i, changed)
		}
		if fmt.Sprint(d.batch.cols) != fmt.Sprint(allTypes) {
			t.Fatalf("schema %v, want %v", d.batch.cols, allTypes)
		}
		requireRows(t, readRows(t, &d.batch), rows)
	}
}

// TestDecodeNewSchema: a payload with a schema again replaces it.
func TestDecodeNewSchema(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var d decoder
	for i, cols := range [][]Column{allTypes, allTypes[:2], allTypes[:2], allTypes[3:]} {
		s := schemaOf(t, cols...)
		rec := batchOf(t, mem, s, make([]any, len(cols)))
		payload, err := arrowfmt.NewEncoder(s, mem).Encode(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		changed, err := d.decode(payload)
		if err != nil {
			t.Fatal(err)
		}
		if changed != (i != 2) || fmt.Sprint(d.batch.cols) != fmt.Sprint(cols) {
			t.Errorf("payload %d: changed %v, schema %v, want %v", i, changed, d.batch.cols, cols)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := schemaOf(t, allTypes...)
	enc := arrowfmt.NewEncoder(s, mem)
	rec := batchOf(t, mem, s, testRows(0, 10)...)
	defer rec.Release()
	first, _ := enc.Encode(rec)
	second, _ := enc.Encode(rec)

	var d decoder
	if _, err := d.decode(second); err == nil || !strings.Contains(err.Error(), "before any schema") {
		t.Errorf("record batch without a schema: %v", err)
	}
	for name, p := range map[string][]byte{
		"empty":            nil,
		"truncated":        first[:len(first)-100],
		"no marker":        append([]byte{1, 2, 3, 4}, first[4:]...),
		"two batches":      append(append([]byte(nil), first...), second...),
		"schema only":      first[:len(first)-len(second)],
		"huge meta length": append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, first[8:]...),
	} {
		var d decoder
		if _, err := d.decode(p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestEncodeDecodesWithArrowfmt: what the guest's encoder writes, the
// host's decoder (which verifies the flatbuffers strictly) reads to equal
// batches; only the first payload carries the schema.
func TestEncodeDecodesWithArrowfmt(t *testing.T) {
	h := newFakeHost(t)
	r := newRuntime(h, nil)
	if err := r.out.init(allTypes); err != nil {
		t.Fatal(err)
	}
	var want [][]any
	from := 0
	for i, n := range []int{100, 1, 257, 8, 3} {
		rows := testRows(from, n)
		from += n
		for _, row := range rows {
			var err error
			if i%2 == 0 {
				err = r.out.Emit(row...)
			} else {
				setRow(t, &r.out, row)
				err = r.out.EndRow()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := r.out.flush(); err != nil {
			t.Fatal(err)
		}
		want = append(want, rows...)
	}
	requireRows(t, h.out, want)

	// The guest reads what it writes, too.
	var d decoder
	var again [][]any
	for _, p := range h.payloads {
		if _, err := d.decode(p); err != nil {
			t.Fatal(err)
		}
		again = append(again, readRows(t, &d.batch)...)
	}
	requireRows(t, again, want)

	if len(h.payloads) != 5 {
		t.Fatalf("%d payloads", len(h.payloads))
	}
	fresh := arrowfmt.NewDecoder(h.mem)
	defer fresh.Close()
	if _, err := fresh.Decode(h.payloads[1]); !errors.Is(err, arrowfmt.ErrNoSchema) {
		t.Errorf("second payload decoded on its own: %v, want ErrNoSchema (the schema goes in the first only)", err)
	}
}

// setRow sets row with the typed setters, leaving nulls unset or setting
// them explicitly by turns.
func setRow(t *testing.T, c *Collector, row []any) {
	t.Helper()
	for i, v := range row {
		switch v := v.(type) {
		case nil:
			if i%2 == 0 {
				c.SetNull(i)
			}
		case int64:
			c.SetInt64(i, v)
		case float64:
			c.SetFloat64(i, v)
		case string:
			c.SetString(i, "overwritten")
			c.SetBytes(i, []byte(v))
		case bool:
			c.SetBool(i, v)
		case time.Time:
			c.SetTimestampMs(i, v.UnixMilli())
		default:
			t.Fatalf("value %T", v)
		}
	}
}

func TestEmitErrors(t *testing.T) {
	h := newFakeHost(t)
	r := newRuntime(h, nil)
	if err := r.out.init(allTypes); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		vals []any
		want string
	}{
		{[]any{1, "a"}, `guest: emit: 2 values for 5 output columns (id int64, name string, price float64, ts timestamp_ms, ok bool)`},
		{[]any{1, "a", "x", nil, true}, `guest: emit: column "price" (#2) wants float64, got string`},
		{[]any{uint64(math.MaxUint64), "a", 1.0, nil, true}, `guest: emit: column "id" (#0) wants int64, got uint64`},
		{[]any{1, 2, 1.0, nil, true}, `guest: emit: column "name" (#1) wants string, got int`},
		{[]any{1, "a", 1.0, 1.5, true}, `guest: emit: column "ts" (#3) wants timestamp_ms, got float64`},
	} {
		if err := r.out.Emit(c.vals...); err == nil || err.Error() != c.want {
			t.Errorf("Emit(%v) = %v, want %s", c.vals, err, c.want)
		}
	}
	// Nothing of the rejected rows is left; conversions are accepted.
	if err := r.out.Emit(int32(7), []byte("b"), float32(0.5), time.UnixMilli(base), nil); err != nil {
		t.Fatal(err)
	}
	if err := r.out.Emit(uint8(1), "c", 3, int64(5), false); err != nil {
		t.Fatal(err)
	}
	if err := r.out.flush(); err != nil {
		t.Fatal(err)
	}
	requireRows(t, h.out, [][]any{
		{int64(7), "b", 0.5, time.UnixMilli(base).UTC(), nil},
		{int64(1), "c", 3.0, time.UnixMilli(5).UTC(), false},
	})

	for name, f := range map[string]func(){
		"wrong setter":  func() { r.out.SetInt64(1, 1) },
		"no column":     func() { r.out.SetString(9, "x") },
		"wrong setter2": func() { r.out.SetTimestampMs(0, 1) },
	} {
		func() {
			defer func() {
				if p := recover(); p == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestBadOutputType(t *testing.T) {
	_, err := newEncoder([]Column{{Name: "x", Type: "int32"}})
	if err == nil || err.Error() != `output column "x": unknown type "int32": want one of int64, float64, string, bool, timestamp_ms` {
		t.Errorf("err = %v", err)
	}
}

// FuzzDecode: no payload makes the decoder, or reading the batch it
// accepted, panic.
func FuzzDecode(f *testing.F) {
	mem := memory.NewGoAllocator()
	s := func(cols ...Column) *arrow.Schema { return schemaOf(f, cols...) }
	for _, cols := range [][]Column{allTypes, allTypes[1:2], allTypes[4:]} {
		enc := arrowfmt.NewEncoder(s(cols...), mem)
		for _, n := range []int{0, 1, 9} {
			rows := testRows(n, n)
			for i := range rows {
				rows[i] = rows[i][:0]
				for _, c := range cols {
					for j, a := range allTypes {
						if a == c {
							rows[i] = append(rows[i], testRow(n + i)[j])
						}
					}
				}
			}
			rec := batchOf(f, mem, s(cols...), rows...)
			p, err := enc.Encode(rec)
			rec.Release()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(p)
		}
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		var d decoder
		if _, err := d.decode(p); err != nil {
			return
		}
		for i := 0; i < d.batch.rows; i++ {
			for c := range d.batch.cols {
				_ = Row{b: &d.batch, i: i}.ValueAt(c)
			}
		}
	})
}

// TestColumnLookup: names find their columns whether literal or built at
// run time, also after a new schema moved them, and across collisions in
// the lookup cache.
func TestColumnLookup(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var d decoder
	decode := func(cols []Column) {
		t.Helper()
		s := schemaOf(t, cols...)
		rec := batchOf(t, mem, s, make([]any, len(cols)))
		defer rec.Release()
		p, err := arrowfmt.NewEncoder(s, mem).Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.decode(p); err != nil {
			t.Fatal(err)
		}
	}
	var many []Column
	for i := range 40 {
		many = append(many, Column{Name: fmt.Sprint("c", i), Type: Int64})
	}
	for _, cols := range [][]Column{allTypes, {allTypes[3], allTypes[1], allTypes[0]}, many, allTypes} {
		decode(cols)
		row := Row{b: &d.batch}
		for round := range 3 {
			for want, c := range cols {
				name := c.Name
				if round == 1 {
					name = strings.Clone(name) // same bytes elsewhere
				}
				if got := row.Index(name); got != want {
					t.Fatalf("round %d: Index(%q) = %d, want %d", round, name, got, want)
				}
			}
		}
		if row.Index("price") != slices.IndexFunc(cols, func(c Column) bool { return c.Name == "price" }) || row.Has("nope") {
			t.Errorf("literal lookups wrong for %v", cols)
		}
	}
}
