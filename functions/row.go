package functions

import (
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/weirstream/weir/arrowfmt"
)

// batchView is an input batch as rows see it. Column names are resolved
// against the schema once per instance, not per row.
type batchView struct {
	schema *arrow.Schema
	index  map[string]int
	types  []arrowfmt.Type
	rec    arrow.RecordBatch
}

func newBatchView(schema *arrow.Schema) (*batchView, error) {
	types, err := arrowfmt.Types(schema)
	if err != nil {
		return nil, err
	}
	v := &batchView{schema: schema, index: make(map[string]int, len(types)), types: types}
	for i, f := range schema.Fields() {
		if _, dup := v.index[f.Name]; !dup {
			v.index[f.Name] = i
		}
	}
	return v, nil
}

// Row is one input row. Its accessors take a column name; asking for a
// column the input does not have, or with the wrong accessor for its type,
// is a bug in the function and panics with a message naming the column and
// its type (the runtime turns the panic into a task failure). A null reads
// as the zero value: check IsNull where nulls are possible.
//
// A Row is valid only during the ProcessElement call it is given to.
type Row struct {
	b *batchView
	i int
}

func (r Row) col(name string, want arrowfmt.Type) arrow.Array {
	i, ok := r.b.index[name]
	if !ok {
		panic(fmt.Sprintf("functions: row has no column %q (columns: %s)", name, describeColumns(r.b.schema)))
	}
	if want != "" && r.b.types[i] != want {
		panic(fmt.Sprintf("functions: column %q is %s, not %s", name, r.b.types[i], want))
	}
	return r.b.rec.Column(i)
}

// Int64 returns the value of the int64 column name.
func (r Row) Int64(name string) int64 {
	return r.col(name, arrowfmt.Int64).(*array.Int64).Value(r.i)
}

// Float64 returns the value of the float64 column name.
func (r Row) Float64(name string) float64 {
	return r.col(name, arrowfmt.Float64).(*array.Float64).Value(r.i)
}

// String returns the value of the string column name.
func (r Row) String(name string) string {
	return r.col(name, arrowfmt.String).(*array.String).Value(r.i)
}

// Bool returns the value of the bool column name.
func (r Row) Bool(name string) bool {
	return r.col(name, arrowfmt.Bool).(*array.Boolean).Value(r.i)
}

// TimestampMs returns the value of the timestamp_ms column name in
// milliseconds since the Unix epoch.
func (r Row) TimestampMs(name string) int64 {
	return int64(r.col(name, arrowfmt.TimestampMs).(*array.Timestamp).Value(r.i))
}

// Time returns the value of the timestamp_ms column name as a UTC time.
func (r Row) Time(name string) time.Time {
	return time.UnixMilli(r.TimestampMs(name)).UTC()
}

// IsNull reports whether column name is null in this row.
func (r Row) IsNull(name string) bool { return r.col(name, "").IsNull(r.i) }

// Value returns the value of column name as a Go value: int64, float64,
// string, bool, time.Time or nil for null. The typed accessors are faster.
func (r Row) Value(name string) any { return arrowfmt.Value(r.col(name, ""), r.i) }

// Has reports whether the input has a column name.
func (r Row) Has(name string) bool {
	_, ok := r.b.index[name]
	return ok
}

// Schema returns the input schema.
func (r Row) Schema() *arrow.Schema { return r.b.schema }

func describeColumns(s *arrow.Schema) string {
	var b strings.Builder
	for i, f := range s.Fields() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Name)
		b.WriteByte(' ')
		if t, err := arrowfmt.TypeOf(f.Type); err == nil {
			b.WriteString(string(t))
		} else {
			b.WriteString(f.Type.String())
		}
	}
	return b.String()
}
