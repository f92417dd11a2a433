// Package datagen is the datagen source: it generates rows of the schema
// its spec gives, each value a pure function of (seed, column, event
// index), so the generated set does not depend on parallelism and a
// restored source regenerates exactly what it produced before. Its
// position is the index of the next event a subtask generates. Tests
// recompute a job's input with Row.
package datagen
