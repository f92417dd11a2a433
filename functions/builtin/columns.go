package builtin

import (
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
)

// Stream is what flows on an edge (package stream): the operators map
// their input streams to an output stream.
type Stream = stream.Stream

// columnList lists a schema's columns for messages.
func columnList(s *arrow.Schema) string { return stream.ColumnList(s) }

// InputColumns returns the names of the columns of input side (0, or 1 for
// a join's right input) that operator o reads, or nil when it may read any
// (filters, selects and functions see whole rows, and a window with a late
// output passes whole rows on). The plan drops the other columns before a
// network edge, so that they are neither partitioned nor encoded nor sent.
func InputColumns(o *spec.Operator, side int, in Stream) []string {
	var cols []string
	add := func(names ...string) {
		for _, n := range names {
			if !slices.Contains(cols, n) {
				cols = append(cols, n)
			}
		}
	}
	if in.HasTime() {
		add(in.Schema.Field(in.TimeColumn).Name)
	}
	switch o.Kind() {
	case "window":
		if o.Window == nil || o.Window.LateOutput != "" {
			return nil
		}
		aggs, err := ParseAggregates("aggregate", o.Aggregate, in.Schema)
		if err != nil {
			return nil
		}
		add(o.KeyBy...)
		for _, a := range aggs {
			if a.Column != "" {
				add(a.Column)
			}
		}
		return cols
	case "join":
		j := o.Join
		prefix, keys := "left.", j.Left.KeyBy
		if side == 1 {
			prefix, keys = "right.", j.Right.KeyBy
		}
		if j.Columns == nil {
			return nil
		}
		add(keys...)
		for _, ref := range j.Columns.Values {
			if c, ok := strings.CutPrefix(strings.TrimSpace(ref), prefix); ok {
				add(c)
			}
		}
		return cols
	}
	return nil
}
