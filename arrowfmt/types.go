package arrowfmt

import (
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Type names a column type of a weir schema. Job specs spell types with these
// names; each maps to exactly one Arrow type.
type Type string

// The column types weir supports.
const (
	Int64       Type = "int64"
	Float64     Type = "float64"
	String      Type = "string"
	Bool        Type = "bool"
	TimestampMs Type = "timestamp_ms" // milliseconds since the Unix epoch, UTC
)

// allTypes lists every supported type in the order error messages name them.
var allTypes = []Type{Int64, Float64, String, Bool, TimestampMs}

// Sentinel errors; match them with errors.Is.
var (
	ErrUnknownType    = errors.New("arrowfmt: unknown type")
	ErrInvalidSchema  = errors.New("arrowfmt: invalid schema")
	ErrSchemaMismatch = errors.New("arrowfmt: schema mismatch")
	ErrNoSchema       = errors.New("arrowfmt: no schema")
	ErrMalformed      = errors.New("arrowfmt: malformed payload")
)

func typeNames() string {
	names := make([]string, len(allTypes))
	for i, t := range allTypes {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// ParseType returns the Type spelled s. The error names s and the accepted
// names.
func ParseType(s string) (Type, error) {
	t := Type(s)
	if t.valid() {
		return t, nil
	}
	return "", fmt.Errorf("%w %q: want one of %s", ErrUnknownType, s, typeNames())
}

func (t Type) valid() bool {
	switch t {
	case Int64, Float64, String, Bool, TimestampMs:
		return true
	}
	return false
}

// Arrow returns the Arrow type of t, or nil if t is not a supported type.
func (t Type) Arrow() arrow.DataType {
	switch t {
	case Int64:
		return arrow.PrimitiveTypes.Int64
	case Float64:
		return arrow.PrimitiveTypes.Float64
	case String:
		return arrow.BinaryTypes.String
	case Bool:
		return arrow.FixedWidthTypes.Boolean
	case TimestampMs:
		return arrow.FixedWidthTypes.Timestamp_ms
	}
	return nil
}

// TypeOf returns the Type whose Arrow type is dt. Timestamps must have
// millisecond unit and the "UTC" time zone.
func TypeOf(dt arrow.DataType) (Type, error) {
	switch dt := dt.(type) {
	case *arrow.Int64Type:
		return Int64, nil
	case *arrow.Float64Type:
		return Float64, nil
	case *arrow.StringType:
		return String, nil
	case *arrow.BooleanType:
		return Bool, nil
	case *arrow.TimestampType:
		if dt.Unit == arrow.Millisecond && dt.TimeZone == "UTC" {
			return TimestampMs, nil
		}
	}
	return "", fmt.Errorf("%w: arrow type %v: want one of %s (timestamps in ms, UTC)", ErrUnknownType, dt, typeNames())
}

// Field is one named, typed column.
type Field struct {
	Name string
	Type Type
}

// NewSchema returns the Arrow schema of fields. Every field is nullable.
// It reports every problem at once: no fields, empty or duplicate names,
// unknown types.
func NewSchema(fields []Field) (*arrow.Schema, error) {
	var errs []error
	if len(fields) == 0 {
		errs = append(errs, fmt.Errorf("%w: no fields", ErrInvalidSchema))
	}
	seen := make(map[string]bool, len(fields))
	afs := make([]arrow.Field, len(fields))
	for i, f := range fields {
		switch {
		case f.Name == "":
			errs = append(errs, fmt.Errorf("%w: field %d has an empty name", ErrInvalidSchema, i))
		case seen[f.Name]:
			errs = append(errs, fmt.Errorf("%w: duplicate field name %q", ErrInvalidSchema, f.Name))
		}
		seen[f.Name] = true
		if !f.Type.valid() {
			errs = append(errs, fmt.Errorf("%w: field %q: %w %q: want one of %s", ErrInvalidSchema, f.Name, ErrUnknownType, f.Type, typeNames()))
		}
		afs[i] = arrow.Field{Name: f.Name, Type: f.Type.Arrow(), Nullable: true}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return arrow.NewSchema(afs, nil), nil
}

// Fields returns the weir fields of schema, the inverse of NewSchema.
func Fields(schema *arrow.Schema) ([]Field, error) {
	fs := make([]Field, schema.NumFields())
	for i, f := range schema.Fields() {
		t, err := TypeOf(f.Type)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		fs[i] = Field{Name: f.Name, Type: t}
	}
	return fs, nil
}

// Types returns the column types of schema in order.
func Types(schema *arrow.Schema) ([]Type, error) {
	fs, err := Fields(schema)
	if err != nil {
		return nil, err
	}
	ts := make([]Type, len(fs))
	for i, f := range fs {
		ts[i] = f.Type
	}
	return ts, nil
}
