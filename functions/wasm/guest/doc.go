// Package guest is the Go SDK for weir functions compiled to WebAssembly:
// the guest side of the ABI in docs/wasm-abi.md, for modules built with
// the standard Go toolchain (no TinyGo):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o fn.wasm ./fn
//
// A module holds one function. Its package main registers it in init (a
// c-shared module is a reactor: the host runs package initialisation
// through _initialize and never calls main, which stays empty):
//
//	type counter struct{ n *guest.ValueState[int64] }
//
//	func (c *counter) Describe() guest.Description {
//		return guest.Description{
//			Input:  []guest.Column{{Name: "user", Type: guest.String}},
//			Output: []guest.Column{{Name: "user", Type: guest.String}, {Name: "n", Type: guest.Int64}},
//		}
//	}
//
//	func (c *counter) Open(oc *guest.OpenContext) error {
//		c.n = guest.Value[int64](oc, "n")
//		return nil
//	}
//
//	func (c *counter) ProcessElement(ctx *guest.Context, row guest.Row, out *guest.Collector) error {
//		n, _ := c.n.Value()
//		c.n.Update(n + 1)
//		out.SetString(0, row.String("user"))
//		out.SetInt64(1, n+1)
//		return out.EndRow()
//	}
//
//	func init() { guest.Register(&counter{}) }
//
//	func main() {}
//
// The package exports every function of the ABI (weir_process and the
// rest carry //go:wasmexport here, which works outside package main), so
// importing it and calling Register is all a module needs.
//
// The API follows the Go SDK a function compiled into weir uses (package
// functions): state declared in Open (Value, List, Map) and scoped to the
// key of the row or timer being processed, with a namespace form (ValueNS,
// UpdateNS, ...) for state per window; a Context with the key, event time,
// watermark and timers; a Row with typed column access; a Collector for
// output rows. What crosses the boundary is what the ABI says: an input
// batch arrives as Arrow IPC, is decoded once, and rows read straight from
// its bytes; output rows are appended to column buffers and sent as one
// Arrow IPC payload per call; state and timers are host calls on the key
// handle of the current row. Nothing on that path allocates per row (state
// of types other than int64, float64, string, []byte and bool is encoded
// with encoding/json, which does; give such state a Codec).
//
// # Speed
//
// Code compiled by Go's wasm port runs several times slower than native
// code, and calls and loop iterations are what cost most (more so under a
// host that checks for its call deadline at every loop header). The SDK's
// hot paths are written for that; a function helps by reading columns by
// index (Row.Index once, then Int64At and the like) or by literal names
// (found by address, not compared), emitting with the typed setters rather
// than Emit, and giving struct state a Codec of fixed layout.
//
// Values stay in the host: a ValueState read returns a decoded copy, and a
// change is kept only once written back with Update. What a function keeps
// in its own variables is lost when the task restarts, as for a Go
// function's struct fields.
//
// An error a function returns, or a panic, fails the call: the SDK
// reports it to the host (naming the row or timer) and the task restarts
// from its last checkpoint.
//
// Only the files with the wasip1 build constraint touch the ABI; the IPC
// codec, key decoding and the runtime build everywhere and are tested on
// the host's platform against a fake host.
package guest
