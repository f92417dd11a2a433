package exchangetest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// leakGrace is how long RunWithoutLeaks waits for goroutines to end after
// the tests. go-redis probes a server it could not dial from a goroutine
// that sleeps a second between attempts and ends at its next attempt
// after the client is closed.
const leakGrace = 3 * time.Second

// RunWithoutLeaks runs the tests of m and then fails the run if any
// goroutine a test started is still running leakGrace later; it returns
// the exit code for TestMain.
func RunWithoutLeaks(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	deadline := time.Now().Add(leakGrace)
	for {
		err := goleak.Find()
		if err == nil {
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
}
