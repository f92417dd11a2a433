package connector

import (
	"testing"
	"time"
)

// TestFileSinkRateSchedule checks the throttle's schedule: never more than
// rate rows by any moment, and no burst after an idle period.
func TestFileSinkRateSchedule(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	th := throttle{rate: 100}
	steps := []struct {
		at   time.Duration // since t0
		rows int64
		want time.Duration
	}{
		{0, 50, 500 * time.Millisecond},                       // 50 rows take 0.5s
		{500 * time.Millisecond, 100, time.Second},            // on schedule: 1s more
		{600 * time.Millisecond, 10, 1000 * time.Millisecond}, // early: waits for the backlog too
		{10 * time.Second, 10, 100 * time.Millisecond},        // idle time is not saved up
		{10*time.Second + 100*time.Millisecond, 1, 10 * time.Millisecond},
	}
	for i, s := range steps {
		if got := th.delay(t0.Add(s.at), s.rows); got != s.want {
			t.Errorf("step %d: delay(%v, %d) = %v, want %v", i, s.at, s.rows, got, s.want)
		}
	}
}
