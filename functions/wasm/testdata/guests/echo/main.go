//go:build wasip1

// Command echo is a test guest of the host: it passes every input row
// through with the count of rows its key has seen, and sets an event-time
// timer at each row's ts that emits a row with v = -1. See README.md.
package main

import "github.com/weirstream/weir/functions/wasm/guest"

// Columns, in the order of the output.
const (
	colK = iota
	colV
	colTS
	colSeen
)

var inputs = []guest.Column{
	{Name: "k", Type: guest.String},
	{Name: "v", Type: guest.Int64},
	{Name: "ts", Type: guest.TimestampMs},
}

type echo struct {
	seen *guest.ValueState[int64]
	in   [3]int // indexes of k, v, ts in the input
}

func (e *echo) Describe() guest.Description {
	return guest.Description{
		Input:      inputs,
		Output:     append(inputs[:len(inputs):len(inputs)], guest.Column{Name: "seen", Type: guest.Int64}),
		TimeColumn: "ts",
		Doc:        "test guest: rows through with a count per key; a timer at ts emits v = -1",
	}
}

func (e *echo) Open(oc *guest.OpenContext) error {
	e.seen = guest.Value[int64](oc, "seen")
	return nil
}

func (e *echo) ProcessElement(ctx *guest.Context, row guest.Row, out *guest.Collector) error {
	for i, c := range inputs {
		e.in[i] = row.Index(c.Name)
	}
	n, _ := e.seen.Value()
	n++
	e.seen.Update(n)
	if !row.IsNullAt(e.in[colK]) {
		out.SetString(colK, row.StringAt(e.in[colK]))
	}
	if !row.IsNullAt(e.in[colV]) {
		out.SetInt64(colV, row.Int64At(e.in[colV]))
	}
	if !row.IsNullAt(e.in[colTS]) {
		ts := row.TimestampMsAt(e.in[colTS])
		out.SetTimestampMs(colTS, ts)
		ctx.Timers().RegisterEventTime(ts)
	}
	out.SetInt64(colSeen, n)
	return out.EndRow()
}

func (e *echo) OnTimer(ctx *guest.Context, t guest.Timer, out *guest.Collector) error {
	// The key is k when the operator is keyed by k alone.
	if key := ctx.Key(); len(key) == 1 {
		if k, ok := key[0].(string); ok {
			out.SetString(colK, k)
		}
	}
	n, _ := e.seen.Value()
	out.SetInt64(colV, -1)
	out.SetTimestampMs(colTS, t.Timestamp)
	out.SetInt64(colSeen, n)
	return out.EndRow()
}

func init() { guest.Register(&echo{}) }

func main() {}
