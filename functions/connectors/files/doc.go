// Package files is the files source and sink: JSON lines read from, and
// JSON lines or Parquet written to, objects under a path of the job's
// store (a directory or S3).
//
// The source lists the objects under its path at Open (skipping segments
// that start with '_' or '.', so a sink's staging area is never input).
// Each object is a split (connector.SourceType.Splits): the k-th by key is
// read by subtask k % parallelism, which checkpoints, for each object it
// has started, the byte offset of the next line and whether it is done, so
// the source restores at any parallelism.
//
// The sink rolls objects part-<subtask>-<job>-a<attempt>-<seq>.<format>.
// With checkpoints it is a two-phase sink: a transaction's objects are
// staged under <path>/_staging/<txn>/ (statestore/layout) at pre-commit, and
// Commit copies them to <path>/; the handle lists the staged and final
// keys. CleanStaging is the recovery janitor, and inspect.go reads
// transactions back for the CLI.
package files
