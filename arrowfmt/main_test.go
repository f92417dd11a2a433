package arrowfmt

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newMem returns an allocator that fails the test if anything allocated
// from it is still held when the test ends.
func newMem(t testing.TB) *memory.CheckedAllocator {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// Columns of testSchema.
const (
	colID = iota
	colName
	colPrice
	colTS
	colOK
)

var testFields = []Field{
	{Name: "id", Type: Int64},
	{Name: "name", Type: String},
	{Name: "price", Type: Float64},
	{Name: "ts", Type: TimestampMs},
	{Name: "ok", Type: Bool},
}

func testSchema(t testing.TB) *arrow.Schema {
	t.Helper()
	s, err := NewSchema(testFields)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testBase = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()

// testRow returns the values of row i of testBatch, as Value returns them.
// Every column has nulls, at different rows.
func testRow(i int) []any {
	row := make([]any, 5)
	if i%7 != 3 {
		row[colID] = int64(i) - 50
	}
	if i%5 != 1 {
		names := []string{"", "a", "ünïcödé", "with \"quotes\"\n", "name"}
		row[colName] = fmt.Sprintf("%s-%d", names[i%len(names)], i%13)
	}
	if i%11 != 2 {
		row[colPrice] = float64(i)*0.25 - 3
	}
	if i%3 != 0 {
		row[colTS] = time.UnixMilli(testBase + int64(i)*1001).UTC()
	}
	if i%4 != 2 {
		row[colOK] = i%3 == 1
	}
	return row
}

// testBatch builds rows [from, from+n) of the test data.
func testBatch(t testing.TB, mem memory.Allocator, from, n int) arrow.RecordBatch {
	t.Helper()
	b := NewBuilder(testSchema(t), mem)
	defer b.Release()
	for i := from; i < from+n; i++ {
		for c, v := range testRow(i) {
			if err := b.AppendAny(c, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.NewBatch()
}

// rowsOf returns every row of rec as Go values.
func rowsOf(rec arrow.RecordBatch) [][]any {
	rows := make([][]any, rec.NumRows())
	for r := range rows {
		rows[r] = make([]any, rec.NumCols())
		for c := range rows[r] {
			rows[r][c] = Value(rec.Column(c), r)
		}
	}
	return rows
}

func requireRows(t *testing.T, rec arrow.RecordBatch, want [][]any) {
	t.Helper()
	got := rowsOf(rec)
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for r := range want {
		if !rowEqual(got[r], want[r]) {
			t.Fatalf("row %d: got %#v, want %#v", r, got[r], want[r])
		}
	}
}

func rowEqual(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !valueEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// valueEqual compares Go values as Value returns them: same type and value,
// times by instant, NaN equal to NaN.
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
