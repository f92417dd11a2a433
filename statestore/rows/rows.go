package rows

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
)

// KeyGroupField is the first field of every state batch: the key group
// (int32) of the row's key (as task.StateKeyGroupField).
const KeyGroupField = "key_group"

// BatchRows caps the rows of one state batch.
const BatchRows = 1 << 16

// Namer hands out column names that no earlier column took: a name taken
// already gets the first free one of <name>_2, <name>_3, ...
type Namer struct{ taken map[string]bool }

// NewNamer returns a Namer with names reserved (the operator's fixed
// columns, which keep their names).
func NewNamer(reserved ...string) *Namer {
	n := &Namer{taken: map[string]bool{}}
	for _, name := range reserved {
		n.taken[name] = true
	}
	return n
}

// Unique returns name, or the first free <name>_<i> if it is taken, and
// takes it.
func (n *Namer) Unique(name string) string {
	if !n.taken[name] {
		n.taken[name] = true
		return name
	}
	for i := 2; ; i++ {
		if c := name + "_" + strconv.Itoa(i); !n.taken[c] {
			n.taken[c] = true
			return c
		}
	}
}

// Layout is the schema of an operator's state batches, key_group first.
type Layout struct {
	Schema *arrow.Schema
	Names  []string // the column names, in order
	// RowBytes estimates the bytes of a row in a batch: the width of
	// each fixed-width column, and for each other column its offset and
	// varBytes.
	RowBytes int
}

// varBytes is what a row's value of a variable-length column is taken to
// take in RowBytes.
const varBytes = 16

// NewLayout returns the layout of fields; the first must be KeyGroupField
// (int32), which is a bug in the caller otherwise.
func NewLayout(fields []arrow.Field) *Layout {
	if len(fields) == 0 || fields[0].Name != KeyGroupField || fields[0].Type.ID() != arrow.INT32 {
		panic(fmt.Sprintf("rows: the first state column must be %s int32", KeyGroupField))
	}
	l := &Layout{Schema: arrow.NewSchema(fields, nil)}
	for _, f := range fields {
		l.Names = append(l.Names, f.Name)
		if fw, ok := f.Type.(arrow.FixedWidthDataType); ok {
			l.RowBytes += (fw.BitWidth() + 7) / 8
		} else {
			l.RowBytes += 4 + varBytes
		}
	}
	return l
}

// Check reports whether s is the layout's schema, naming the first column
// that differs.
func (l *Layout) Check(s *arrow.Schema) error {
	if s.NumFields() != l.Schema.NumFields() {
		return fmt.Errorf("%d columns (%s), want %d (%s)", s.NumFields(), columnList(s), l.Schema.NumFields(), columnList(l.Schema))
	}
	for i, want := range l.Schema.Fields() {
		if got := s.Field(i); got.Name != want.Name || !arrow.TypeEqual(got.Type, want.Type) {
			return fmt.Errorf("column %d is %s %v, want %s %v (state columns: %s)", i, got.Name, got.Type, want.Name, want.Type, columnList(l.Schema))
		}
	}
	return nil
}

// columnList lists the fields of s as "name type", comma-separated.
func columnList(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name + " " + f.Type.String()
	}
	return strings.Join(names, ", ")
}

// CheckKeyGroup returns the key group of row r of a state batch's first
// column, or why it cannot be restored by a subtask owning key groups
// [start, end).
func (l *Layout) CheckKeyGroup(groups *array.Int32, r, start, end int) (int, error) {
	if groups.IsNull(r) {
		return 0, fmt.Errorf("column %s: null, want the key group", l.Names[0])
	}
	kg := int(groups.Value(r))
	if kg < start || kg >= end {
		return 0, fmt.Errorf("column %s: key group %d is outside this subtask's key groups [%d, %d)", l.Names[0], kg, start, end)
	}
	return kg, nil
}

// DescribeKey describes the key of row r of state batch b, whose key
// columns are cols, for an error: name=value of every key column.
func (l *Layout) DescribeKey(b arrow.RecordBatch, cols []int, r int) string {
	var sb strings.Builder
	for i, c := range cols {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(l.Names[c])
		sb.WriteByte('=')
		switch v := arrowfmt.Value(b.Column(c), r).(type) {
		case nil:
			sb.WriteString("null")
		case string:
			sb.WriteString(strconv.Quote(v))
		default:
			fmt.Fprint(&sb, v)
		}
	}
	return sb.String()
}

// ChangeLog lists what changed since the last snapshot (or restore), in
// the order it was added. It is off until the first Reset: an operator
// that is never checkpointed keeps no list, and its first snapshot, base
// or not, must then write everything (the state was empty at Open).
type ChangeLog[T any] struct {
	on    bool
	items []T
}

// On reports whether changes are being listed.
func (c *ChangeLog[T]) On() bool { return c.on }

// Add lists v if changes are being listed.
func (c *ChangeLog[T]) Add(v T) {
	if c.on {
		c.items = append(c.items, v)
	}
}

// Items returns what was listed since the last Reset; Reset reuses it.
func (c *ChangeLog[T]) Items() []T { return c.items }

// Reset forgets the changes so far and lists changes from now on.
func (c *ChangeLog[T]) Reset() {
	clear(c.items) // drop pointers
	c.items = c.items[:0]
	c.on = true
}

// Take hands out what was listed since the last Reset or Take and lists
// changes from now on into spare's room (a slice an earlier Take handed
// out, done with; nil for none).
func (c *ChangeLog[T]) Take(spare []T) []T {
	items := c.items
	clear(spare) // drop pointers
	c.items = spare[:0]
	c.on = true
	return items
}

// Pause stops listing until Resume, for state that counts as unchanged
// (restored rows).
func (c *ChangeLog[T]) Pause() { c.on = false }

// Resume lists changes again after Pause.
func (c *ChangeLog[T]) Resume() { c.on = true }

// Writer gathers the rows of one snapshot, each described by a T, and
// builds them into batches of at most BatchRows rows: build appends the
// rows of one batch to the builder's columns, once per batch. The
// batches' buffers are their own: nothing of them points into the
// operator's state.
type Writer[T any] struct {
	rb    *array.RecordBuilder
	build func(rb *array.RecordBuilder, rows []T)
	rows  []T
	built int // rows of the next batch already in rb
	out   []arrow.RecordBatch
}

// NewWriter returns a writer of batches of schema, allocated from mem.
// Release it when done.
func NewWriter[T any](mem memory.Allocator, schema *arrow.Schema, build func(rb *array.RecordBuilder, rows []T)) *Writer[T] {
	return &Writer[T]{rb: array.NewRecordBuilder(mem, schema), build: build}
}

// Add adds a row, building a batch once BatchRows are gathered.
func (w *Writer[T]) Add(row T) {
	w.rows = append(w.rows, row)
	if w.built+len(w.rows) == BatchRows {
		w.flush()
	}
}

// Build appends the rows gathered so far to the next batch's columns now,
// so that the state they describe may change afterwards (a capture in
// steps builds before the operator goes on). Add cuts the batch as
// before, once it holds BatchRows rows.
func (w *Writer[T]) Build() {
	n := len(w.rows)
	if n == 0 {
		return
	}
	w.rb.Reserve(n)
	w.build(w.rb, w.rows)
	w.built += n
	clear(w.rows) // drop pointers into the state
	w.rows = w.rows[:0]
}

func (w *Writer[T]) flush() {
	w.Build()
	if w.built == 0 {
		return
	}
	w.out = append(w.out, w.rb.NewRecordBatch())
	w.built = 0
}

// Finish builds what is gathered and hands out the batches: the caller
// owns them, the writer no longer does. No rows gives nil.
func (w *Writer[T]) Finish() []arrow.RecordBatch {
	w.flush()
	out := w.out
	w.out = nil
	return out
}

// Release releases the builder and any batch not handed out (after a
// failure).
func (w *Writer[T]) Release() {
	w.rb.Release()
	for _, b := range w.out {
		b.Release()
	}
	w.out = nil
}
