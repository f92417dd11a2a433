package arrowfmt

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestParseType(t *testing.T) {
	for _, typ := range allTypes {
		got, err := ParseType(string(typ))
		if err != nil || got != typ {
			t.Errorf("ParseType(%q) = %q, %v", typ, got, err)
		}
		back, err := TypeOf(typ.Arrow())
		if err != nil || back != typ {
			t.Errorf("TypeOf(%v) = %q, %v; want %q", typ.Arrow(), back, err, typ)
		}
	}
	_, err := ParseType("int")
	if !errors.Is(err, ErrUnknownType) {
		t.Fatalf("ParseType(int): got %v, want ErrUnknownType", err)
	}
	for _, want := range []string{`"int"`, "int64, float64, string, bool, timestamp_ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestTimestampType(t *testing.T) {
	ts, ok := TimestampMs.Arrow().(*arrow.TimestampType)
	if !ok || ts.Unit != arrow.Millisecond || ts.TimeZone != "UTC" {
		t.Fatalf("TimestampMs.Arrow() = %v", TimestampMs.Arrow())
	}
	for _, dt := range []arrow.DataType{
		&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
		&arrow.TimestampType{Unit: arrow.Millisecond},
		arrow.PrimitiveTypes.Int32,
		arrow.BinaryTypes.LargeString,
	} {
		if _, err := TypeOf(dt); !errors.Is(err, ErrUnknownType) {
			t.Errorf("TypeOf(%v): got %v, want ErrUnknownType", dt, err)
		}
	}
	if Type("nope").Arrow() != nil {
		t.Error("Arrow() of an unknown type is not nil")
	}
}

func TestNewSchema(t *testing.T) {
	s := testSchema(t)
	if s.NumFields() != len(testFields) {
		t.Fatalf("got %d fields", s.NumFields())
	}
	for i, f := range s.Fields() {
		if f.Name != testFields[i].Name || !arrow.TypeEqual(f.Type, testFields[i].Type.Arrow()) || !f.Nullable {
			t.Errorf("field %d = %v, want nullable %v", i, f, testFields[i])
		}
	}
	fs, err := Fields(s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fs {
		if fs[i] != testFields[i] {
			t.Errorf("Fields()[%d] = %v, want %v", i, fs[i], testFields[i])
		}
	}

	_, err = NewSchema([]Field{{Name: "a", Type: Int64}, {Name: "", Type: Int64}, {Name: "a", Type: String}, {Name: "b", Type: "int"}})
	if !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("got %v, want ErrInvalidSchema", err)
	}
	for _, want := range []string{"field 1 has an empty name", `duplicate field name "a"`, `field "b"`, `"int"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not report %s", err, want)
		}
	}
	if _, err := NewSchema(nil); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("empty schema: got %v, want ErrInvalidSchema", err)
	}
}
