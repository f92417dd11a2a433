// Package registry keeps the Wasm functions deployed into a bucket: the
// modules, content-addressed by SHA-256, and a numbered record per version
// with the limits it was deployed with and what the module declared
// (docs/wasm-abi.md, "Where things are in the bucket"; the keys are in
// statestore/layout).
//
// Deploy checks a module (wasm.Check) and stores it with the next version;
// Resolve turns a job spec's reference (NAME or NAME@VERSION) into a
// Version; Pin records, in every function operator of a job that does not
// name a Go function of this binary, the module it runs (spec.Module), so
// that restarts, recoveries and rescales run the same code; Module reads a
// pinned module back and verifies its hash.
//
// Every write is create-only (blob.Bucket.PutIfAbsent): of concurrent
// deploys of one name each gets its own version, and a record, once
// written, never changes. The package keeps nothing in memory: the bucket
// is the truth, so a coordinator, the CLI on a store and an embedded run
// all see the same functions.
package registry
