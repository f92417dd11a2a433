// Package tracetest runs scripted trace tests of weir's protocol cores (the
// credit window, the watermark valve, the barrier aligner, the checkpoint
// coordinator): plain state machines that take events in and return
// decisions out, so a script of events and the decisions printed for them
// test one without Redis, S3 or sleeps.
//
// Scripts are github.com/cockroachdb/datadriven files, usually one
// directory per state machine under the package's testdata. A block is one
// or more command lines, a line "----", and what the commands print, one
// after the other; blocks are separated by blank lines and lines starting
// with # are comments:
//
//	# Two inputs: the first barrier blocks its input.
//	new 2
//	----
//	aligning - blocked -
//
//	barrier 0 1 @100
//	barrier 1 1 @150
//	----
//	block 0
//	snapshot 1 (aligned in 50ns), unblock 0
//
// A test gives Run a function that builds a fresh state machine for each
// script and returns the Func that carries out one command on it:
//
//	func TestAligner(t *testing.T) {
//		tracetest.Run(t, "testdata/aligner", func(t *testing.T) tracetest.Func {
//			var a *Aligner
//			return func(t *testing.T, td *datadriven.TestData) (string, error) {
//				switch td.Cmd {
//				case "new":
//					...
//				}
//			}
//		})
//	}
//
// go test -run TestAligner -rewrite regenerates the expected output from
// what the commands print; review the diff before committing it.
//
// The package imports only datadriven and the standard library, so any
// package's tests can use it. It sits beside testenv in integration/, where
// weir's shared test support lives.
package tracetest
