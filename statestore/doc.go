// Package statestore keeps the keyed state of one operator instance (one
// operator of one subtask) and its timers.
//
// State is scoped to (key group, key, namespace, state name), as in Flink:
//
//   - the key group is arrowfmt.KeyGroup of the key's hash; a subtask owns a
//     contiguous range of key groups, and rescaling moves whole key groups,
//     so everything here is partitioned by key group;
//   - the key is the encoded key (arrowfmt.KeyString over the keyBy columns);
//   - the namespace separates state of one key that lives apart, such as one
//     window's accumulator from another's ("" is the default);
//   - the state name picks a Table.
//
// Backend is the interface a keyed-state backend implements (tables,
// timers, change tracking, snapshot and restore); the list, map, reducing
// and aggregating kinds of state are built over its tables (state.go), and
// statetest is the contract suite every backend passes. Memory, the
// in-memory backend, keeps Go values, not bytes, like Flink's heap
// backend: a Get or Put costs a hash lookup and no serialisation (its
// tables are open-addressing indexes over cells, with the keys' bytes in
// an arena: cells.go; the indexes, and the cells of values without
// pointers, live outside the Go heap, which Close gives back). Each
// table is registered by name with a Codec that turns its values into
// bytes; in Memory, snapshots are the only users of codecs.
//
// # Snapshots
//
// Checkpoints upload state incrementally: only what changed since the last
// checkpoint. To make that cheap, every table and the timer service track,
// per key group, a dirty set of the scopes (entries, timers) written or
// deleted since the last snapshot (a heap table as an epoch per entry and
// a list of the keys marked in the current one: table.go). Backend.Snapshot, synchronously at the
// barrier, turns either everything (a base) or the dirty sets (a delta)
// into Arrow record batches of SnapshotSchema, one row per entry or timer
// with its key group first:
//
//	for each table:      for each dirty scope: the current encoded value, or deleted=true if absent
//	for the timers:      for each dirty timer: set, or deleted=true
//
// and clears the dirty sets. The batches own their bytes, so the runtime
// writes them out (Arrow IPC files) while processing goes on. A snapshot
// whose batches are lost after it returned (a failed upload) took the
// changes with it: the next one must be a base. Backend.Restore applies a
// base and then its deltas in order, keeping only what is asked of it
// (rows are filtered by key group before, so rescaling works on the same
// files); see snapshot.go for the columns and their meaning.
//
// A backend over a FileStore (NewStoredFiles: pebble) is checkpointed
// otherwise: its tables as the store's own files, which consecutive
// checkpoints share (storefiles.go), and only its timers as rows.
//
// Values are kept by reference. A value that is mutable (a slice, a map, a
// pointer) must be Put again after it is changed, or the change is not in
// the dirty set and an incremental snapshot misses it.
//
// A Backend and everything obtained from it is used by one goroutine, the
// task's.
package statestore
