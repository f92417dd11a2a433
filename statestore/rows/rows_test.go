package rows

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNamer(t *testing.T) {
	n := NewNamer(KeyGroupField, "kind")
	var got []string
	for _, name := range []string{"kind", "x", "x", "kind", "x_2"} {
		got = append(got, n.Unique(name))
	}
	if want := "kind_2 x x_2 kind_3 x_2_2"; strings.Join(got, " ") != want {
		t.Errorf("names %q, want %q", strings.Join(got, " "), want)
	}
}

func layout() *Layout {
	return NewLayout([]arrow.Field{
		{Name: KeyGroupField, Type: arrow.PrimitiveTypes.Int32},
		{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true},
	})
}

func TestLayoutCheck(t *testing.T) {
	l := layout()
	if err := l.Check(l.Schema); err != nil {
		t.Errorf("Check(own schema): %v", err)
	}
	other := arrow.NewSchema([]arrow.Field{{Name: KeyGroupField, Type: arrow.PrimitiveTypes.Int32}, {Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if err := l.Check(other); err == nil || !strings.Contains(err.Error(), "column 1 is k int64, want k utf8") {
		t.Errorf("Check(other type) = %v", err)
	}
	if err := l.Check(arrow.NewSchema(other.Fields()[:1], nil)); err == nil || !strings.Contains(err.Error(), "1 columns (key_group int32), want 2") {
		t.Errorf("Check(fewer columns) = %v", err)
	}
}

// TestWriter checks that rows are cut into batches of at most BatchRows,
// built once per batch, and that nothing leaks either way.
func TestWriter(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	l := layout()
	builds := 0
	build := func(rb *array.RecordBuilder, rs []int) {
		builds++
		for _, r := range rs {
			rb.Field(0).(*array.Int32Builder).Append(int32(r % 7))
			rb.Field(1).(*array.StringBuilder).Append("k")
		}
	}
	w := NewWriter(mem, l.Schema, build)
	for i := range BatchRows + 3 {
		w.Add(i)
	}
	out := w.Finish()
	w.Release()
	if builds != 2 || len(out) != 2 || out[0].NumRows() != BatchRows || out[1].NumRows() != 3 {
		t.Errorf("%d builds, %d batches; want 2 batches of %d and 3 rows", builds, len(out), BatchRows)
	}
	for _, b := range out {
		b.Release()
	}

	// Build appends what is gathered at once; batches are still cut at
	// BatchRows, and the rows come out in order.
	w = NewWriter(mem, l.Schema, build)
	builds = 0
	for i := range BatchRows + 5 {
		w.Add(i)
		if i%3 == 0 {
			w.Build()
		}
	}
	out = w.Finish()
	w.Release()
	if len(out) != 2 || out[0].NumRows() != BatchRows || out[1].NumRows() != 5 {
		t.Errorf("with Build: %d batches; want 2 batches of %d and 5 rows", len(out), BatchRows)
	} else if builds < (BatchRows+5)/3 {
		t.Errorf("with Build: %d builds, want one per Build at least", builds)
	}
	for i, b := range out {
		kg := b.Column(0).(*array.Int32)
		for r := range int(b.NumRows()) {
			if want := int32((i*BatchRows + r) % 7); kg.Value(r) != want {
				t.Fatalf("with Build: batch %d row %d has %d, want %d", i, r, kg.Value(r), want)
			}
		}
		b.Release()
	}

	// Released before Finish (a failed snapshot): the batches built go too.
	w = NewWriter(mem, l.Schema, build)
	for i := range BatchRows {
		w.Add(i)
	}
	w.Release()

	w = NewWriter(mem, l.Schema, build)
	if out := w.Finish(); out != nil {
		t.Errorf("no rows gave %d batches", len(out))
	}
	w.Release()
}

func TestKeyGroupAndDescribe(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	l := layout()
	rb := array.NewRecordBuilder(mem, l.Schema)
	defer rb.Release()
	rb.Field(0).(*array.Int32Builder).AppendValues([]int32{3, 9}, nil)
	rb.Field(0).(*array.Int32Builder).AppendNull()
	rb.Field(1).(*array.StringBuilder).AppendValues([]string{"a", "b", ""}, []bool{true, true, false})
	b := rb.NewRecordBatch()
	defer b.Release()
	groups := b.Column(0).(*array.Int32)
	if kg, err := l.CheckKeyGroup(groups, 0, 0, 4); kg != 3 || err != nil {
		t.Errorf("row 0: %d, %v", kg, err)
	}
	if _, err := l.CheckKeyGroup(groups, 1, 0, 4); err == nil || !strings.Contains(err.Error(), "key group 9 is outside this subtask's key groups [0, 4)") {
		t.Errorf("row 1: %v", err)
	}
	if _, err := l.CheckKeyGroup(groups, 2, 0, 4); err == nil || !strings.Contains(err.Error(), "null, want the key group") {
		t.Errorf("row 2: %v", err)
	}
	if got := l.DescribeKey(b, []int{1}, 0); got != `k="a"` {
		t.Errorf("DescribeKey(row 0) = %s", got)
	}
	if got := l.DescribeKey(b, []int{1}, 2); got != "k=null" {
		t.Errorf("DescribeKey(row 2) = %s", got)
	}
}

func TestChangeLog(t *testing.T) {
	var c ChangeLog[int]
	c.Add(1) // off until the first Reset
	if c.On() || len(c.Items()) != 0 {
		t.Fatalf("a new change log lists: on=%v %v", c.On(), c.Items())
	}
	c.Reset()
	c.Add(2)
	c.Pause()
	c.Add(3)
	c.Resume()
	c.Add(4)
	if got := c.Items(); len(got) != 2 || got[0] != 2 || got[1] != 4 {
		t.Errorf("Items() = %v, want [2 4]", got)
	}
	c.Reset()
	if len(c.Items()) != 0 || !c.On() {
		t.Errorf("after Reset: on=%v %v", c.On(), c.Items())
	}
}
