package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spf13/viper"

	"github.com/weirstream/weir/coordinator"
)

// weir jobs status shows the restart count and the newest exceptions,
// newest first, apart from the state: a running job shows no error.
func TestPrintStatusExceptions(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 3, 1, 10, 0, s, 0, time.UTC) }
	st := coordinator.JobStatus{ID: "j-1", Name: "rides", State: coordinator.JobRunning, Attempt: 5, Restarts: 4}
	for i, msg := range []string{"a", "b", "c", "d"} {
		st.Exceptions = append(st.Exceptions, coordinator.Exception{Time: at(i), Attempt: i + 1, Error: "src[0] on worker w1: " + msg})
	}
	var out bytes.Buffer
	a := &app{v: viper.New(), stdout: &out}
	a.printStatus(st)
	want := `job j-1 (rides): RUNNING, attempt 5, restarts 4
exceptions (newest 3 of 4):
  2026-03-01T10:00:03Z attempt 4: src[0] on worker w1: d
  2026-03-01T10:00:02Z attempt 3: src[0] on worker w1: c
  2026-03-01T10:00:01Z attempt 2: src[0] on worker w1: b
events in 0,`
	if got := out.String(); !strings.HasPrefix(got, want) {
		t.Errorf("status printed\n%s\nwant it to start\n%s", got, want)
	}
}
