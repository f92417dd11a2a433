package arrowfmt

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestTake(t *testing.T) {
	mem := newMem(t)
	rec := testBatch(t, mem, 0, 50)
	defer rec.Release()
	// From a slice, to exercise array offsets.
	sl := rec.NewSlice(10, 40)
	defer sl.Release()
	idx := []int32{29, 0, 0, 7, 3, 15, 29}
	got := Take(sl, idx, mem)
	defer got.Release()
	all := rowsOf(sl)
	var want [][]any
	for _, i := range idx {
		want = append(want, all[i])
	}
	requireRows(t, got, want)

	none := Take(rec, nil, mem)
	defer none.Release()
	if none.NumRows() != 0 {
		t.Errorf("Take(nil) has %d rows", none.NumRows())
	}
}

func TestConcat(t *testing.T) {
	mem := newMem(t)
	var recs []arrow.RecordBatch
	var want [][]any
	for i, n := range []int{7, 0, 30, 1} {
		rec := testBatch(t, mem, i*100, n)
		defer rec.Release()
		recs = append(recs, rec)
		want = append(want, rowsOf(rec)...)
	}
	got, err := Concat(recs, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	requireRows(t, got, want)

	one, err := Concat(recs[:1], mem)
	if err != nil {
		t.Fatal(err)
	}
	if one != recs[0] {
		t.Error("Concat of one batch copied it")
	}
	one.Release()

	if _, err := Concat(nil, mem); err == nil {
		t.Error("Concat(nil) succeeded")
	}
	other, _ := NewSchema([]Field{{Name: "k", Type: String}})
	b := NewBuilder(other, mem)
	defer b.Release()
	orec := b.NewBatch()
	defer orec.Release()
	if _, err := Concat([]arrow.RecordBatch{recs[0], orec}, mem); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("got %v, want ErrSchemaMismatch", err)
	}
}

func TestValueOtherTypes(t *testing.T) {
	mem := newMem(t)
	b := array.NewInt32Builder(mem)
	defer b.Release()
	b.Append(5)
	b.AppendNull()
	arr := b.NewArray()
	defer arr.Release()
	if v := Value(arr, 0); v != int32(5) {
		t.Errorf("Value = %#v", v)
	}
	if v := Value(arr, 1); v != nil {
		t.Errorf("Value of null = %#v", v)
	}
}

// TestFilter keeps runs of rows and some columns, gives nil when no row
// is kept, and rec itself when it keeps all of it.
func TestFilter(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: "b", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range 7 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(string(rune('a' + i)))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	onlyB := arrow.NewSchema(schema.Fields()[1:], nil)
	for _, c := range []struct {
		keep func(int) bool
		want string
	}{
		{func(i int) bool { return i != 2 && i != 3 && i != 6 }, "abef"},
		{func(i int) bool { return i >= 5 }, "fg"},
		{nil, "abcdefg"},
		{func(int) bool { return false }, ""},
	} {
		out, err := Filter(rec, onlyB, []int{1}, c.keep, mem)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if out != nil {
			col := out.Column(0).(*array.String)
			for i := range col.Len() {
				got += col.Value(i)
			}
			if !out.Schema().Equal(onlyB) {
				t.Errorf("schema %v", out.Schema())
			}
			out.Release()
		} else if c.want != "" {
			t.Errorf("nil, want %q", c.want)
		}
		if got != c.want {
			t.Errorf("kept %q, want %q", got, c.want)
		}
	}
	all, err := Filter(rec, nil, nil, nil, mem)
	if err != nil || all != rec {
		t.Errorf("keeping every row and column: %v, %v; want rec", all, err)
	}
	all.Release()
}
