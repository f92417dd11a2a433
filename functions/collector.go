package functions

import (
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
)

// Collector receives a function's output rows. Rows are appended to column
// builders directly; the runtime turns them into batches after each input
// batch and each round of timers (and sooner when many rows pile up), not
// one batch per row.
type Collector struct {
	b     *arrowfmt.Builder
	types []arrowfmt.Type
	cells []cell
	// flush is called when the builder holds max rows.
	max   int
	flush func() error
}

// cell is one converted value, checked before anything is appended so a
// bad row leaves no partial row behind.
type cell struct {
	null bool
	i    int64
	f    float64
	s    string
	bs   []byte
	b    bool
}

// Emit appends one output row: one value per output column, in order.
// Accepted values per column type:
//
//	int64         any Go integer in range
//	float64       float64, float32 or any Go integer
//	string        string, []byte
//	bool          bool
//	timestamp_ms  time.Time, or milliseconds as any Go integer
//
// and nil for null. A wrong count or type is an error naming the column
// and the type it wants, and appends nothing.
func (c *Collector) Emit(values ...any) error {
	if len(values) != len(c.types) {
		return fmt.Errorf("functions: emit: %d values for %d output columns (%s)", len(values), len(c.types), describeColumns(c.b.Schema()))
	}
	for i, v := range values {
		if err := c.convert(i, v); err != nil {
			return err
		}
	}
	for i, t := range c.types {
		cl := &c.cells[i]
		switch {
		case cl.null:
			c.b.Null(i)
		case t == arrowfmt.Int64:
			c.b.Int64(i, cl.i)
		case t == arrowfmt.TimestampMs:
			c.b.TimestampMs(i, cl.i)
		case t == arrowfmt.Float64:
			c.b.Float64(i, cl.f)
		case t == arrowfmt.String:
			if cl.bs != nil {
				c.b.String(i, string(cl.bs))
			} else {
				c.b.String(i, cl.s)
			}
		case t == arrowfmt.Bool:
			c.b.Bool(i, cl.b)
		}
		*cl = cell{}
	}
	if c.b.Len() >= c.max {
		return c.flush()
	}
	return nil
}

func (c *Collector) convert(col int, v any) error {
	cl := &c.cells[col]
	*cl = cell{}
	t := c.types[col]
	if v == nil {
		cl.null = true
		return nil
	}
	ok := false
	switch t {
	case arrowfmt.Int64:
		cl.i, ok = toInt64(v)
	case arrowfmt.TimestampMs:
		switch v := v.(type) {
		case time.Time:
			cl.i, ok = v.UnixMilli(), true
		case arrow.Timestamp:
			cl.i, ok = int64(v), true
		default:
			cl.i, ok = toInt64(v)
		}
	case arrowfmt.Float64:
		switch v := v.(type) {
		case float64:
			cl.f, ok = v, true
		case float32:
			cl.f, ok = float64(v), true
		default:
			var i int64
			if i, ok = toInt64(v); ok {
				cl.f = float64(i)
			}
		}
	case arrowfmt.String:
		switch v := v.(type) {
		case string:
			cl.s, ok = v, true
		case []byte:
			cl.bs, ok = v, true
		}
	case arrowfmt.Bool:
		cl.b, ok = v.(bool)
	}
	if !ok {
		f := c.b.Schema().Field(col)
		return fmt.Errorf("functions: emit: column %q (#%d) wants %s, got %T %v", f.Name, col, t, v, v)
	}
	return nil
}

func toInt64(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case int32:
		return int64(v), true
	case int16:
		return int64(v), true
	case int8:
		return int64(v), true
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint:
		return int64(v), uint64(v) <= math.MaxInt64
	case uint64:
		return int64(v), v <= math.MaxInt64
	}
	return 0, false
}
