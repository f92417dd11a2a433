// Package functions is the Go SDK for user functions: what a user writes
// against to add a keyed process function to weir, and the Go builder for
// job specs.
//
// A function is tiny: ProcessElement is called for each input row with the
// row's key current; optional OnTimer, Open and Close methods add timers,
// state declarations and cleanup. The runtime wraps it (package builtin):
// it routes rows by key, scopes state and timers to the current key, builds
// output batches, fires timers, snapshots state, and turns a panic in user
// code into a task failure.
//
//	type counter struct{ n *functions.ValueState[int64] }
//
//	func (c *counter) Open(oc *functions.OpenContext) error {
//		c.n = functions.Value[int64](oc, "n")
//		return nil
//	}
//
//	func (c *counter) ProcessElement(ctx *functions.Context, row functions.Row, out *functions.Collector) error {
//		n, _ := c.n.Value()
//		c.n.Update(n + 1)
//		return out.Emit(row.String("user"), n+1)
//	}
//
//	func init() {
//		functions.Register("count-per-user", functions.Definition{
//			New: func(map[string]any) (functions.ProcessFunction, error) { return &counter{}, nil },
//			Output: func(in *arrow.Schema) ([]arrowfmt.Field, error) {
//				return []arrowfmt.Field{{Name: "user", Type: arrowfmt.String}, {Name: "n", Type: arrowfmt.Int64}}, nil
//			},
//		})
//	}
//
// A job spec uses it by name (`function: count-per-user` with `keyBy`).
// Functions are compiled into the weir binary (or a user's build of it) and
// registered in init, like database/sql drivers.
//
// # Keys, state and time
//
// State is declared in Open with Value, List and Map and is scoped to the
// key of the row (or timer) being processed: the same ValueState reads a
// different value for each key. Values are kept as Go values; a mutable
// value (a slice, a map) read from state must be written back with Update
// after it is changed, or the change is not checkpointed.
//
// Event time is a row's time column (Context.Timestamp); the watermark
// (Context.Watermark) says that no row older than it is expected. An
// event-time timer fires once the watermark reaches it, a processing-time
// timer once the wall clock does. At the end of a bounded input the
// watermark jumps to MaxWatermark, which fires every event-time timer, also
// those registered while firing: a function that always registers a later
// timer from OnTimer must stop doing so when Watermark() is MaxWatermark.
//
// Everything a function is given is used from one goroutine, and a Row,
// Context or Collector only during the call it is passed to.
package functions
