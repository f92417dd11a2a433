package arrowfmt

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestBuilderTypedAppenders(t *testing.T) {
	mem := newMem(t)
	b := NewBuilder(testSchema(t), mem)
	defer b.Release()
	ts := time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC)
	b.Int64(colID, 7)
	b.String(colName, "x")
	b.Float64(colPrice, 2.5)
	b.TimestampMs(colTS, ts.UnixMilli())
	b.Bool(colOK, true)
	for c := range testFields {
		b.Null(c)
	}
	if b.Len() != 2 {
		t.Fatalf("Len() = %d, want 2", b.Len())
	}
	rec := b.NewBatch()
	defer rec.Release()
	if b.Len() != 0 {
		t.Errorf("Len() after NewBatch = %d", b.Len())
	}
	requireRows(t, rec, [][]any{{int64(7), "x", 2.5, ts, true}, {nil, nil, nil, nil, nil}})
}

func TestBuilderWrongTypePanics(t *testing.T) {
	mem := newMem(t)
	b := NewBuilder(testSchema(t), mem)
	defer b.Release()
	defer func() {
		p := recover()
		if p == nil || !strings.Contains(p.(string), `"name"`) {
			t.Errorf("got panic %v, want one naming the column", p)
		}
	}()
	b.Int64(colName, 1)
}

func TestAppendAny(t *testing.T) {
	mem := newMem(t)
	ts := time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC)
	good := []struct {
		col  int
		in   any
		want any
	}{
		{colID, int64(-3), int64(-3)},
		{colID, 42, int64(42)},
		{colID, int32(5), int64(5)},
		{colID, uint8(5), int64(5)},
		{colID, uint64(math.MaxInt64), int64(math.MaxInt64)},
		{colID, 3.0, int64(3)},
		{colID, json.Number("12"), int64(12)},
		{colID, json.Number("1.2e1"), int64(12)},
		{colID, json.Number("-9223372036854775808"), int64(math.MinInt64)},
		{colPrice, 1.25, 1.25},
		{colPrice, float32(0.5), 0.5},
		{colPrice, 7, 7.0},
		{colPrice, uint64(1 << 63), float64(1 << 63)},
		{colPrice, json.Number("1e-3"), 0.001},
		{colName, "s", "s"},
		{colName, []byte("b"), "b"},
		{colOK, false, false},
		{colTS, ts, ts},
		{colTS, ts.UnixMilli(), ts},
		{colTS, "2024-01-02T04:04:05.006+01:00", ts},
		{colTS, json.Number("1704164645006"), ts},
		{colTS, nil, nil},
	}
	for _, c := range good {
		b := NewBuilder(testSchema(t), mem)
		if err := b.AppendAny(c.col, c.in); err != nil {
			t.Errorf("AppendAny(%s, %#v): %v", testFields[c.col].Name, c.in, err)
			b.Release()
			continue
		}
		for col := range testFields {
			if col != c.col {
				b.Null(col)
			}
		}
		rec := b.NewBatch()
		if got := Value(rec.Column(c.col), 0); !valueEqual(got, c.want) {
			t.Errorf("AppendAny(%s, %#v) stored %#v, want %#v", testFields[c.col].Name, c.in, got, c.want)
		}
		rec.Release()
		b.Release()
	}

	bad := []struct {
		col  int
		in   any
		want string // in the error
	}{
		{colID, 1.5, "not an integral number"},
		{colID, "7", "want int64"},
		{colID, uint64(math.MaxUint64), "out of range"},
		{colID, json.Number("1e19"), "out of int64 range"},
		{colID, json.Number("abc"), "not a number"},
		{colID, 1e300, "out of range"},
		{colPrice, "1.5", "want float64"},
		{colPrice, json.Number("1e999"), "want float64"},
		{colName, 5, "want string"},
		{colOK, "true", "want bool"},
		{colTS, "yesterday", "RFC 3339"},
		{colTS, 1.5, "not an integral number"},
	}
	b := NewBuilder(testSchema(t), mem)
	defer b.Release()
	for _, c := range bad {
		err := b.AppendAny(c.col, c.in)
		var re *RecordError
		if !errors.As(err, &re) || !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("AppendAny(%s, %#v): got %v, want a *RecordError", testFields[c.col].Name, c.in, err)
			continue
		}
		if re.Field != testFields[c.col].Name || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AppendAny(%s, %#v): error %q does not name the field and say %q", testFields[c.col].Name, c.in, err, c.want)
		}
		if b.Len() != 0 {
			t.Fatalf("a rejected value was appended")
		}
	}
}

func BenchmarkBuilder(b *testing.B) {
	mem := newMem(b)
	rec := benchBatch(b, mem)
	rec.Release()
	b.ReportMetric(0, "ns/op")
	for b.Loop() {
		rec := benchBatch(b, mem)
		rec.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/8192, "ns/row")
}
