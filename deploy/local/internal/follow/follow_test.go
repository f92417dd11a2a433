package follow

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/integration/tracetest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestTraces runs the scripted traces in testdata/ (go test -rewrite
// rewrites their expected output). Times are milliseconds after t0:
//
//	new min=N max=N slots=N delay=10s
//	tick @ms wanted=N [ID=TASKS | ID=starting | ID=? | ID=stopping ...]
//
// A worker ID=3 is registered and runs 3 tasks; ID=? is registered but has
// sent no heartbeat yet; ID=starting is not registered yet; ID=stopping is
// being stopped. Workers are listed oldest first. tick prints the decision.
func TestTraces(t *testing.T) {
	tracetest.Run(t, "testdata", func(t *testing.T) tracetest.Func {
		var f *Follower
		return func(t *testing.T, d *datadriven.TestData) (string, error) {
			switch d.Cmd {
			case "new":
				cfg := Config{SlotsPerWorker: 1}
				for _, w := range tracetest.Words(d) {
					k, v, _ := strings.Cut(w, "=")
					switch k {
					case "min":
						cfg.Min = atoi(t, v)
					case "max":
						cfg.Max = atoi(t, v)
					case "slots":
						cfg.SlotsPerWorker = atoi(t, v)
					case "delay":
						var err error
						if cfg.ScaleDownDelay, err = time.ParseDuration(v); err != nil {
							t.Fatalf("new: delay=%q", v)
						}
					default:
						t.Fatalf("new: unknown argument %q", w)
					}
				}
				if err := cfg.Validate(); err != nil {
					return "", err
				}
				f = New(cfg)
				return "", nil
			case "tick":
				in := Input{Now: t0}
				for _, w := range tracetest.Words(d) {
					if ms, ok := strings.CutPrefix(w, "@"); ok {
						in.Now = t0.Add(time.Duration(atoi(t, ms)) * time.Millisecond)
						continue
					}
					k, v, _ := strings.Cut(w, "=")
					if k == "wanted" {
						in.SlotsWanted = atoi(t, v)
						continue
					}
					wk := Worker{ID: k, Registered: true, Tasks: -1}
					switch v {
					case "starting":
						wk.Registered = false
					case "stopping":
						wk.Stopping = true
					case "?":
					default:
						wk.Tasks = atoi(t, v)
					}
					in.Workers = append(in.Workers, wk)
				}
				return f.Decide(in).String(), nil
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return "", nil
		}
	})
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: want a number", s)
	}
	return n
}
