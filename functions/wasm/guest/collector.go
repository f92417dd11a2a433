package guest

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"
	"unsafe"
)

// Collector receives the function's output rows. A row is either set
// column by column (SetInt64, SetString, ..., then EndRow; a column left
// unset is null) or given whole to Emit. Rows are appended to column
// buffers; the SDK sends them to the host as one Arrow IPC payload at the
// end of the call (sooner when many rows pile up), not one per row.
type Collector struct {
	r          *runtime
	cols       []Column
	bufs       []colBuf
	rows       int
	started    bool // a Set call since the last EndRow
	set        int  // columns of the current row set so far
	schemaSent bool
	enc        *encoder
}

// flushRows is the number of buffered rows that makes EndRow send them
// without waiting for the end of the call.
const flushRows = 1 << 15

// errEmitRefused is returned once the host refused output; the host's own
// error names the problem.
var errEmitRefused = errors.New("guest: the host refused the output")

func (c *Collector) init(cols []Column) error {
	enc, err := newEncoder(cols)
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		return errors.New("the description declares no output columns")
	}
	c.cols, c.enc = cols, enc
	c.bufs = make([]colBuf, len(cols))
	for i := range c.bufs {
		c.bufs[i].kind = kindOf(cols[i].Type)
	}
	c.reset()
	return nil
}

// reset drops every buffered row.
func (c *Collector) reset() {
	for i := range c.bufs {
		c.bufs[i].reset()
	}
	c.rows, c.started, c.set = 0, false, 0
}

// Columns returns the output columns (Description.Output). The slice is
// shared: do not change it.
func (c *Collector) Columns() []Column { return c.cols }

// Len returns the number of rows buffered and not yet sent.
func (c *Collector) Len() int { return c.rows }

// column returns the buffer of column col after checking it has type
// want (any type for kindNone), and starts a row.
func (c *Collector) column(col int, want kind) *colBuf {
	if uint(col) >= uint(len(c.bufs)) || (c.bufs[col].kind != want && want != kindNone) {
		panic(columnError{c.cols, col, want, "output"})
	}
	c.started = true
	return &c.bufs[col]
}

// SetInt64 sets int64 column col of the current row.
func (c *Collector) SetInt64(col int, v int64) {
	if c.column(col, kindInt64).setFixed(c.rows, uint64(v)) {
		c.set++
	}
}

// SetFloat64 sets float64 column col of the current row.
func (c *Collector) SetFloat64(col int, v float64) {
	if c.column(col, kindFloat64).setFixed(c.rows, math.Float64bits(v)) {
		c.set++
	}
}

// SetTimestampMs sets timestamp_ms column col of the current row, in
// milliseconds since the Unix epoch.
func (c *Collector) SetTimestampMs(col int, ms int64) {
	if c.column(col, kindTimestamp).setFixed(c.rows, uint64(ms)) {
		c.set++
	}
}

// SetBool sets bool column col of the current row.
func (c *Collector) SetBool(col int, v bool) {
	var u uint64
	if v {
		u = 1
	}
	if c.column(col, kindBool).setFixed(c.rows, u) {
		c.set++
	}
}

// SetString sets string column col of the current row. s is copied.
func (c *Collector) SetString(col int, s string) {
	if c.column(col, kindString).setString(c.rows, s) {
		c.set++
	}
}

// SetBytes sets string column col of the current row to b (UTF-8). b is
// copied.
func (c *Collector) SetBytes(col int, b []byte) {
	c.SetString(col, unsafe.String(unsafe.SliceData(b), len(b)))
}

// SetNull makes column col of the current row null (as leaving it unset
// does).
func (c *Collector) SetNull(col int) {
	if c.column(col, kindNone).setNull(c.rows) {
		c.set++
	}
}

// EndRow appends the current row: the columns set since the last EndRow,
// null for the others. The error is the host's refusal of output sent
// early, to be returned by the function.
func (c *Collector) EndRow() error {
	if r := c.rows; c.set < len(c.bufs) { // else every column is set
		for i := range c.bufs {
			if b := &c.bufs[i]; !b.isSet(r) {
				b.setNull(r)
			}
		}
	}
	c.rows++
	c.started, c.set = false, 0
	if c.rows >= flushRows {
		return c.flush()
	}
	return nil
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
// and the type it wants, and appends nothing. The typed setters are faster.
func (c *Collector) Emit(values ...any) error {
	if c.started {
		return errors.New("guest: emit: a row was started with Set and not ended with EndRow")
	}
	if len(values) != len(c.cols) {
		return fmt.Errorf("guest: emit: %d values for %d output columns (%s)", len(values), len(c.cols), describeColumns(c.cols))
	}
	for i, v := range values {
		if !c.stage(i, v) {
			for j := range c.bufs {
				c.bufs[j].discard(c.rows)
			}
			c.started, c.set = false, 0
			return fmt.Errorf("guest: emit: column %q (#%d) wants %s, got %s", c.cols[i].Name, i, c.cols[i].Type, typeName(v))
		}
	}
	return c.EndRow()
}

// stage sets column col of the current row to v, if v fits its type.
func (c *Collector) stage(col int, v any) bool {
	if v == nil {
		c.SetNull(col)
		return true
	}
	switch c.cols[col].Type {
	case Int64:
		if i, ok := toInt64(v); ok {
			c.SetInt64(col, i)
			return true
		}
	case TimestampMs:
		if t, ok := v.(time.Time); ok {
			c.SetTimestampMs(col, t.UnixMilli())
			return true
		}
		if i, ok := toInt64(v); ok {
			c.SetTimestampMs(col, i)
			return true
		}
	case Float64:
		switch v := v.(type) {
		case float64:
			c.SetFloat64(col, v)
			return true
		case float32:
			c.SetFloat64(col, float64(v))
			return true
		}
		if i, ok := toInt64(v); ok {
			c.SetFloat64(col, float64(i))
			return true
		}
	case String:
		switch v := v.(type) {
		case string:
			c.SetString(col, v)
			return true
		case []byte:
			c.SetBytes(col, v)
			return true
		}
	case Bool:
		if b, ok := v.(bool); ok {
			c.SetBool(col, b)
			return true
		}
	}
	return false
}

// typeName names v's type without letting v escape, so that boxing the
// arguments of Emit stays on the caller's stack.
func typeName(v any) string { return reflect.TypeOf(v).String() }

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

// flush sends the buffered rows to the host.
func (c *Collector) flush() error {
	if c.rows == 0 {
		return nil
	}
	payload := c.enc.encode(!c.schemaSent, c.rows, c.bufs)
	c.reset()
	if c.r.h.emit(payload) != 0 {
		c.r.refused = true
		return errEmitRefused
	}
	c.schemaSent = true
	return nil
}
