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
// The in-memory Backend keeps Go values, not bytes, like Flink's heap
// backend: a Get or Put costs a map operation and no serialisation. Each
// table is registered by name with a Codec that turns its values into bytes;
// snapshots are the only users of codecs.
//
// # Snapshots (to come)
//
// Checkpoints upload state incrementally: only what changed since the last
// checkpoint. To make that cheap, every table and the timer service track,
// per key group, a dirty set of the scopes (entries, timers) written or
// deleted since the last TakeDirty. A snapshot will, synchronously at the
// barrier,
//
//	for each table:      for each scope in TakeDirty(): encode the current value, or a tombstone if absent
//	for the timers:      for each timer in TakeDirty(): record it as set or deleted
//
// and write those deltas (Arrow IPC files, partitioned by key group) while
// processing goes on; every so often it writes a full base instead (Range
// over every key group). A snapshot that fails after TakeDirty must not lose
// the taken changes: the next one then writes a full base.
//
// Values are kept by reference. A value that is mutable (a slice, a map, a
// pointer) must be Put again after it is changed, or the change is not in
// the dirty set and an incremental snapshot misses it.
//
// A Backend and everything obtained from it is used by one goroutine, the
// task's.
package statestore
