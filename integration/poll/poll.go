package poll

import (
	"errors"
	"testing"
	"time"
)

// maxInterval bounds the pause between two calls of a condition. Pauses
// start at a millisecond and double, so a short wait ends soon after its
// condition holds and a long one costs at most 50 calls a second.
const maxInterval = 20 * time.Millisecond

// errNotYet is what a false condition of Until counts as.
var errNotYet = errors.New("not yet")

// Until calls cond until it returns true. If it has not within timeout, it
// fails the test with t.Fatalf, naming what it waited for, so it must be
// called from the test's goroutine. The test fails only after a call of
// cond that ended past the deadline returned false.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := wait(timeout, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}); err != nil {
		t.Fatalf("%s: not reached within %s", what, timeout)
	}
}

// UntilNil calls cond until it returns nil, like Until; the failure also
// reports the last error cond returned.
func UntilNil(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := wait(timeout, cond); err != nil {
		t.Fatalf("%s: not reached within %s: %v", what, timeout, err)
	}
}

// wait calls cond until it returns nil or timeout has passed, and returns
// its last error.
func wait(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, maxInterval)
	}
}
