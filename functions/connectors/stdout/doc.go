// Package stdout is the stdout sink: it prints every row it receives as a
// JSON line to the process's standard output (weir run, weir demo). It has
// no transactions: with checkpoints, what it printed before a failure is
// printed again after the restart.
package stdout
