package stateexport

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/rows"
)

// checkField fails unless field i of state is called name: the state
// schema is not the one this package knows.
func checkField(state *arrow.Schema, i int, name string) error {
	if i >= state.NumFields() || state.Field(i).Name != name {
		return fmt.Errorf("state schema %v: want column %d to be %s", state, i, name)
	}
	return nil
}

// pick returns the fields cols of s as a schema.
func pick(s *arrow.Schema, cols []int) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = s.Field(c)
	}
	return arrow.NewSchema(fields, nil)
}

// The codes of the window state's kind column (builtin's window_state.go).
const (
	windowReplace int8 = 0
	windowWindow  int8 = 1
)

// windowColumns: the window state (builtin's window_state.go) without its
// kind column. A base holds a replace row for each key's first window and
// a window row for each further one: both are one window. The base is the
// operator's own capture, so its kind is int8 whatever the files had.
func (x *exporter) windowColumns(state *arrow.Schema) error {
	kind := 1 + len(x.n.Op.KeyBy)
	if err := checkField(state, kind, "kind"); err != nil {
		return err
	}
	var cols []int
	for i := range state.NumFields() {
		if i != kind {
			cols = append(cols, i)
		}
	}
	x.schema = pick(state, cols)
	x.project = func(rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
		kinds, ok := rec.Column(kind).(*array.Int8)
		if !ok {
			return nil, fmt.Errorf("state column kind is %s, want int8", rec.Column(kind).DataType())
		}
		var bad error
		keep := func(i int) bool {
			switch k := kinds.Value(i); k {
			case windowReplace, windowWindow:
				return true
			default: // a base has no clear rows
				if bad == nil {
					bad = fmt.Errorf("state row %d: kind %d in a base: want %d (replace) or %d (window)", i, k, windowReplace, windowWindow)
				}
				return false
			}
		}
		out, err := arrowfmt.Filter(rec, x.schema, cols, keep, mem)
		if bad != nil {
			if out != nil {
				out.Release()
			}
			return nil, bad
		}
		return out, err
	}
	return nil
}

// Join state columns (builtin's join_state.go).
const (
	joinGroup = iota
	joinEntry
	joinSide
	joinWatermark
	joinInputs
)

// joinColumns: the join state's row entries, without the entry and
// watermark columns (an expire entry only says which rows to forget, and
// a base after a restore holds none that are due).
func (x *exporter) joinColumns(state *arrow.Schema) error {
	for i, name := range []string{"key_group", "entry", "side", "watermark"} {
		if err := checkField(state, i, name); err != nil {
			return err
		}
	}
	cols := []int{joinGroup, joinSide}
	for i := joinInputs; i < state.NumFields(); i++ {
		cols = append(cols, i)
	}
	x.schema = pick(state, cols)
	x.project = func(rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
		entries, ok := rec.Column(joinEntry).(*array.String)
		if !ok {
			return nil, fmt.Errorf("state column entry is %s, want utf8", rec.Column(joinEntry).DataType())
		}
		return arrowfmt.Filter(rec, x.schema, cols, func(i int) bool { return entries.Value(i) == "row" }, mem)
	}
	return nil
}

// Snapshot columns of a function's backend (statestore.SnapshotSchema).
const (
	fnGroup = iota
	fnTable
	fnKey
	fnNamespace
	fnValue
	fnTimestamp
	fnDeleted
)

// functionColumns: the backend's rows, table entries and timers, with the
// key decoded into the keyBy columns; the watermark rows and the deleted
// column (a base deletes nothing) are left out.
func (x *exporter) functionColumns(state *arrow.Schema) error {
	in := x.n.Input
	if in == nil || len(in.KeyColumns) == 0 {
		return fmt.Errorf("the function has no keyBy: its state has no keys")
	}
	names := rows.NewNamer("key_group", "table", "namespace", "value", "timestamp")
	keyFields := make([]arrow.Field, len(in.KeyColumns))
	types := make([]arrowfmt.Type, len(in.KeyColumns))
	for i, c := range in.KeyColumns {
		f := in.Stream.Schema.Field(c)
		t, err := arrowfmt.TypeOf(f.Type)
		if err != nil {
			return fmt.Errorf("key column %s: %w", f.Name, err)
		}
		types[i] = t
		keyFields[i] = arrow.Field{Name: names.Unique(f.Name), Type: t.Arrow(), Nullable: true}
	}
	keySchema := arrow.NewSchema(keyFields, nil)
	fields := []arrow.Field{state.Field(fnGroup), state.Field(fnTable)}
	fields = append(fields, keyFields...)
	fields = append(fields, state.Field(fnNamespace), state.Field(fnValue), state.Field(fnTimestamp))
	x.schema = arrow.NewSchema(fields, nil)
	kept := []int{fnGroup, fnTable, fnKey, fnNamespace, fnValue, fnTimestamp}
	keptSchema := pick(state, kept)
	x.project = func(rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
		tables := rec.Column(fnTable).(*array.String)
		deleted := rec.Column(fnDeleted).(*array.Boolean)
		sel, err := arrowfmt.Filter(rec, keptSchema, kept, func(i int) bool {
			return tables.Value(i) != statestore.WatermarkTable && !deleted.Value(i)
		}, mem)
		if sel == nil || err != nil {
			return nil, err
		}
		defer sel.Release()
		keys := sel.Column(2).(*array.Binary)
		b := arrowfmt.NewBuilder(keySchema, mem)
		defer b.Release()
		b.Reserve(keys.Len())
		for i := range keys.Len() {
			vals, err := arrowfmt.DecodeKeyString(string(keys.Value(i)), types)
			if err != nil {
				return nil, fmt.Errorf("state row %d: key 0x%x: %w", i, keys.Value(i), err)
			}
			for c, v := range vals {
				if err := b.AppendAny(c, v); err != nil {
					return nil, fmt.Errorf("state row %d: key: %w", i, err)
				}
			}
		}
		decoded := b.NewBatch()
		defer decoded.Release()
		cols := []arrow.Array{sel.Column(0), sel.Column(1)}
		cols = append(cols, decoded.Columns()...)
		cols = append(cols, sel.Column(3), sel.Column(4), sel.Column(5))
		return array.NewRecordBatch(x.schema, cols, sel.NumRows()), nil
	}
	return nil
}
