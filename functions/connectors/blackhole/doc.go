// Package blackhole is the blackhole sink, for benchmarks: it discards
// what it receives, counts the rows and measures how long after its event
// time each row arrived. With a path it writes a LatencySummary per
// subtask to the store at the end, which the Nexmark benchmark reads.
package blackhole
