// Package redis is the redis source and sink: JSON records in the field
// "data" of the entries of a Redis stream.
//
// The source reads a list or pattern of streams from their beginning,
// each stream a split (connector.SourceType.Splits) owned by one subtask,
// and checkpoints per stream the id of the last entry it returned. The
// sink appends one entry per row. With checkpoints it is a two-phase sink: pre-commit
// stages a transaction's entries in the list weir:txn:{<stream>}:<txn>
// (redisStagingKey), and Commit moves them to the stream with one script
// that sets the marker weir:txn:{<stream>}:done:<txn> (redisDoneKey), so a
// transaction is appended at most once. CleanStaging is the recovery
// janitor, and inspect.go reads transactions back for the CLI. The Redis
// client stays inside this package.
package redis
