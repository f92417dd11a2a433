// Package wasm runs user functions compiled to WebAssembly, sandboxed in
// wazero, as keyed process functions: the host side of the ABI in
// docs/wasm-abi.md.
//
// Check compiles a module and verifies it against the ABI (version,
// exports, imports) and returns what it declares (Description); `weir
// functions deploy` calls it before anything is stored. An Engine, one per
// worker process, loads deployed modules from the bucket (verifying their
// SHA-256), keeps their compiled code (cached on local disk through
// wazero's compilation cache, so a second start of the same module takes
// milliseconds) and makes one Instance per subtask. An Instance drives the
// guest: Arrow IPC batches in, Arrow IPC batches out, keyed state and
// timers through host functions over a statestore.Backend, exactly like a
// Go function's (functions.Instance), so checkpoints, restores, rescales
// and `weir state dump` treat both alike.
package wasm
