// Package datagen is the datagen source: it generates rows of the schema
// its spec gives, each value a pure function of (seed, column, event
// index), so the generated set does not depend on parallelism and a
// restored source regenerates exactly what it produced before. It is a
// source of splits (connector.SourceType.Splits): event i is in split
// i % K, a subtask generates the splits it owns in increasing event index
// (splitseq), and its position is the next event of each of them, so it
// rescales. Tests recompute a job's input with Row.
package datagen
