package guest

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unsafe"
)

// Row is one input row. Columns are read by name or, faster, by index in
// the input (Index, Columns); asking for a column the input does not have,
// or with the accessor of another type, is a bug in the function and
// panics with a message naming the column (the SDK turns the panic into a
// task failure). A null reads as the zero value: check IsNull where nulls
// are possible.
//
// Reading a row copies nothing: String returns a string that points into
// the input batch, which the next call overwrites. A Row and the strings it
// returns are valid only during the ProcessElement call they come from;
// clone a string (strings.Clone) to keep it longer.
type Row struct {
	b *batch
	i int
}

// Columns returns the input's columns. The slice is shared: do not change
// it.
func (r Row) Columns() []Column { return r.b.cols }

// Index returns the index of column name in the input, -1 if it has none.
func (r Row) Index(name string) int { return r.b.indexOf(name) }

// Has reports whether the input has a column name.
func (r Row) Has(name string) bool { return r.b.indexOf(name) >= 0 }

func (r Row) col(name string) int {
	i := r.b.indexOf(name)
	if i < 0 {
		panic(noColumnError{r.b.cols, name})
	}
	return i
}

type noColumnError struct {
	cols []Column
	name string
}

func (e noColumnError) Error() string {
	return fmt.Sprintf("guest: row has no column %q (columns: %s)", e.name, describeColumns(e.cols))
}

// at returns column i after checking that it has type want.
func (r Row) at(i int, want kind) *colData {
	if uint(i) >= uint(len(r.b.data)) || r.b.data[i].kind != want {
		// A panic value formatted only when reported keeps the accessors
		// small enough to inline: calls are dear in Go's wasm port.
		panic(columnError{r.b.cols, i, want, "row"})
	}
	return &r.b.data[i]
}

// columnError is the panic of an accessor or setter given a column that
// does not exist or has another type.
type columnError struct {
	cols  []Column
	i     int
	want  kind
	where string // "row" or "output"
}

func (e columnError) Error() string {
	if e.i < 0 || e.i >= len(e.cols) {
		return fmt.Sprintf("guest: %s has no column #%d (columns: %s)", e.where, e.i, describeColumns(e.cols))
	}
	if e.where == "output" {
		return fmt.Sprintf("guest: output column %q (#%d) is %s, not %s", e.cols[e.i].Name, e.i, e.cols[e.i].Type, kindTypes[e.want])
	}
	return fmt.Sprintf("guest: column %q is %s, not %s", e.cols[e.i].Name, e.cols[e.i].Type, kindTypes[e.want])
}

func (r Row) fixed(i int, want kind) uint64 {
	c := r.at(i, want)
	if c.valid != nil && c.valid[r.i>>3]&(1<<(r.i&7)) == 0 {
		return 0
	}
	return le.Uint64(c.vals[8*r.i:])
}

// Int64At returns the value of int64 column i.
func (r Row) Int64At(i int) int64 { return int64(r.fixed(i, kindInt64)) }

// Float64At returns the value of float64 column i.
func (r Row) Float64At(i int) float64 { return math.Float64frombits(r.fixed(i, kindFloat64)) }

// TimestampMsAt returns the value of timestamp_ms column i in milliseconds
// since the Unix epoch.
func (r Row) TimestampMsAt(i int) int64 { return int64(r.fixed(i, kindTimestamp)) }

// StringAt returns the value of string column i (see Row on how long it
// is valid).
func (r Row) StringAt(i int) string {
	c := r.at(i, kindString)
	start, end := le.Uint32(c.vals[4*r.i:]), le.Uint32(c.vals[4*r.i+4:])
	if start == end || c.isNull(r.i) {
		return ""
	}
	return unsafe.String(&c.data[start], end-start)
}

// BytesAt returns the bytes of string column i, like StringAt. Do not
// change them.
func (r Row) BytesAt(i int) []byte {
	c := r.at(i, kindString)
	if c.isNull(r.i) {
		return nil
	}
	start, end := le.Uint32(c.vals[4*r.i:]), le.Uint32(c.vals[4*r.i+4:])
	return c.data[start:end:end]
}

// BoolAt returns the value of bool column i.
func (r Row) BoolAt(i int) bool {
	c := r.at(i, kindBool)
	return !c.isNull(r.i) && c.vals[r.i>>3]&(1<<(r.i&7)) != 0
}

// IsNullAt reports whether column i is null in this row.
func (r Row) IsNullAt(i int) bool {
	if uint(i) >= uint(len(r.b.data)) {
		panic(columnError{r.b.cols, i, kindNone, "row"})
	}
	return r.b.data[i].isNull(r.i)
}

// ValueAt returns the value of column i as a Go value: int64, float64,
// string (a copy), bool, time.Time (UTC) or nil for null. The typed
// accessors are faster.
func (r Row) ValueAt(i int) any {
	if r.IsNullAt(i) {
		return nil
	}
	switch r.b.cols[i].Type {
	case Int64:
		return r.Int64At(i)
	case Float64:
		return r.Float64At(i)
	case String:
		return strings.Clone(r.StringAt(i))
	case Bool:
		return r.BoolAt(i)
	default:
		return time.UnixMilli(r.TimestampMsAt(i)).UTC()
	}
}

// Int64 returns the value of the int64 column name.
func (r Row) Int64(name string) int64 { return r.Int64At(r.col(name)) }

// Float64 returns the value of the float64 column name.
func (r Row) Float64(name string) float64 { return r.Float64At(r.col(name)) }

// String returns the value of the string column name (see Row on how long
// it is valid).
func (r Row) String(name string) string { return r.StringAt(r.col(name)) }

// Bytes returns the bytes of the string column name, like String.
func (r Row) Bytes(name string) []byte { return r.BytesAt(r.col(name)) }

// Bool returns the value of the bool column name.
func (r Row) Bool(name string) bool { return r.BoolAt(r.col(name)) }

// TimestampMs returns the value of the timestamp_ms column name in
// milliseconds since the Unix epoch.
func (r Row) TimestampMs(name string) int64 { return r.TimestampMsAt(r.col(name)) }

// Time returns the value of the timestamp_ms column name as a UTC time.
func (r Row) Time(name string) time.Time { return time.UnixMilli(r.TimestampMs(name)).UTC() }

// IsNull reports whether column name is null in this row.
func (r Row) IsNull(name string) bool { return r.IsNullAt(r.col(name)) }

// Value returns the value of column name as ValueAt does.
func (r Row) Value(name string) any { return r.ValueAt(r.col(name)) }

func describeColumns(cols []Column) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.Name)
		b.WriteByte(' ')
		b.WriteString(string(c.Type))
	}
	return b.String()
}
