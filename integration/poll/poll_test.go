package poll

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

func TestUntilHolds(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	Until(r, time.Second, "the third call", func() bool { calls++; return calls == 3 })
	if r.fatal != "" || calls != 3 {
		t.Errorf("after %d calls: failed with %q, want success after 3", calls, r.fatal)
	}
}

func TestUntilTimesOut(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	calls := 0
	Until(r, 50*time.Millisecond, "the impossible", func() bool { calls++; return false })
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("gave up after %s, before the timeout", d)
	}
	if want := "the impossible: not reached within 50ms"; r.fatal != want {
		t.Errorf("failed with %q, want %q", r.fatal, want)
	}
	if calls < 2 {
		t.Errorf("cond called %d times, want it polled", calls)
	}
}

func TestUntilNil(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	UntilNil(r, time.Second, "ready", func() error {
		if calls++; calls < 2 {
			return errors.New("starting")
		}
		return nil
	})
	if r.fatal != "" || calls != 2 {
		t.Errorf("after %d calls: failed with %q, want success after 2", calls, r.fatal)
	}

	r = &recorder{TB: t}
	calls = 0
	UntilNil(r, 20*time.Millisecond, "ready", func() error {
		calls++
		return fmt.Errorf("attempt %d refused", calls)
	})
	if want := fmt.Sprintf("ready: not reached within 20ms: attempt %d refused", calls); r.fatal != want {
		t.Errorf("failed with %q, want %q (the last error)", r.fatal, want)
	}
}
