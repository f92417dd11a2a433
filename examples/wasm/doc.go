// Package wasm holds weir's example functions compiled to WebAssembly, and
// the tests that run them through the host exactly as a worker does.
//
// Each example is a module built by a script into a directory of the
// caller's choice (build outputs are never committed):
//
//	examples/wasm/build-go.sh OUT_DIR   # zone-stats-go.wasm, surge-multiplier.wasm
//
// zone-stats (zone-stats/go; zone-stats/c is the same in C) counts rides
// and sums fares per zone and tumbling event-time window, and must emit
// what the built-in window with count() and sum(fare) emits.
// surge-multiplier is examples/surge ported to the Go guest SDK
// (functions/wasm/guest) and must emit what the Go function compiled into
// weir emits. Deploy a module with `weir functions deploy NAME FILE.wasm`
// and name it in a job spec like a registered function.
package wasm
