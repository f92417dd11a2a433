package stream

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/functions/spec"
)

// Stream describes what flows on an edge: the schema and which column, if
// any, carries event time.
type Stream struct {
	Schema *arrow.Schema
	// TimeColumn is the index of the timestamp_ms column holding event
	// time, or -1 when the stream has none.
	TimeColumn int
	// TimeOffset is added to the time column's value to get a row's event
	// time. Window results carry window_end and offset -1: a result belongs
	// to the last millisecond of its window, as in Flink.
	TimeOffset int64
}

// HasTime reports whether the stream carries event time.
func (s Stream) HasTime() bool { return s.TimeColumn >= 0 }

// Columns returns the indexes of the named columns, or an error naming the
// first missing one and the columns there are.
func (s Stream) Columns(field string, names []string) ([]int, error) {
	idx := make([]int, len(names))
	for i, n := range names {
		j := s.Schema.FieldIndices(n)
		if len(j) == 0 {
			return nil, spec.Errorf(field, "%q is not a column of the input (columns: %s)", n, ColumnList(s.Schema))
		}
		idx[i] = j[0]
	}
	return idx, nil
}

// ColumnList lists a schema's columns with their types for messages:
// "id int64, zone utf8".
func ColumnList(s *arrow.Schema) string {
	out := ""
	for i, f := range s.Fields() {
		if i > 0 {
			out += ", "
		}
		out += f.Name + " " + f.Type.String()
	}
	return out
}
