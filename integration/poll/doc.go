// Package poll waits in tests for a condition to come true, with a
// deadline, instead of sleeping for a guessed time: Until for a condition
// that is true or false, UntilNil for one that explains itself with an
// error, whose last value the failure reports.
//
//	poll.Until(t, 10*time.Second, "the worker registered", func() bool {
//		ws, err := plane.Workers(ctx)
//		return err == nil && len(ws) > 0
//	})
//
// It is for waits only. A loop that checks that something stays true for a
// while, or that does work on every pass with a deadline as a backstop, is
// not a wait and keeps its own loop.
//
// The package imports only the standard library, so any test can use it,
// including the exchange contract suite, which must not pull in aws, redis
// or arrow as testenv does. It sits beside testenv in integration/, where
// weir's shared test support lives.
package poll
