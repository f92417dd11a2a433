package leader

import (
	"fmt"
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
//	new ttl=3s [renew=1s] [retry=250ms] [margin=300ms]
//	tick @ms | not-acquired @ms | renew-failed @ms | lost @ms | stop @ms
//	ended reason=word @ms
//	acquired epoch=N sent=ms @ms | renewed sent=ms @ms
//
// Each prints the decisions, then the role.
func TestTraces(t *testing.T) {
	tracetest.Run(t, "testdata", func(t *testing.T) tracetest.Func {
		var e *Elector
		return func(t *testing.T, d *datadriven.TestData) (string, error) {
			now, kv := parse(t, d)
			var ds []Decision
			switch d.Cmd {
			case "new":
				e = New(Config{TTL: dur(t, kv, "ttl"), RenewEvery: dur(t, kv, "renew"), RetryEvery: dur(t, kv, "retry"), Margin: dur(t, kv, "margin")}, now)
			case "tick":
				ds = e.Tick(now)
			case "acquired":
				epoch, err := strconv.ParseInt(kv["epoch"], 10, 64)
				if err != nil {
					t.Fatalf("acquired: epoch=%q", kv["epoch"])
				}
				ds = e.Acquired(now, at(t, kv["sent"]), epoch)
			case "not-acquired":
				ds = e.NotAcquired(now)
			case "renewed":
				ds = e.Renewed(now, at(t, kv["sent"]))
			case "renew-failed":
				ds = e.RenewFailed(now)
			case "lost":
				ds = e.Lost(now)
			case "ended":
				ds = e.Ended(now, kv["reason"])
			case "stop":
				ds = e.Stop(now)
			default:
				t.Fatalf("unknown command %q", d.Cmd)
			}
			var out []string
			for _, d := range ds {
				out = append(out, d.String())
			}
			return strings.Join(append(out, e.summary(now)), "\n"), nil
		}
	})
}

func (e *Elector) summary(now time.Time) string {
	if e.leading {
		s := fmt.Sprintf("leader epoch %d, trusted until @%d", e.epoch, e.validUntil.Sub(t0).Milliseconds())
		if !e.Leading(now) {
			s += ", not trusted now"
		}
		return s
	}
	return fmt.Sprintf("standby, next try @%d", e.nextAt.Sub(t0).Milliseconds())
}

func parse(t *testing.T, d *datadriven.TestData) (time.Time, map[string]string) {
	kv := map[string]string{}
	now := t0
	for _, w := range tracetest.Words(d) {
		if strings.HasPrefix(w, "@") {
			now = at(t, w[1:])
			continue
		}
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			t.Fatalf("%s: argument %q is not key=value or @ms", d.Cmd, w)
		}
		kv[k] = v
	}
	return now, kv
}

func at(t *testing.T, ms string) time.Time {
	n, err := strconv.Atoi(ms)
	if err != nil {
		t.Fatalf("time %q is not milliseconds", ms)
	}
	return t0.Add(time.Duration(n) * time.Millisecond)
}

func dur(t *testing.T, kv map[string]string, k string) time.Duration {
	if kv[k] == "" {
		return 0
	}
	d, err := time.ParseDuration(kv[k])
	if err != nil {
		t.Fatalf("%s=%q: %v", k, kv[k], err)
	}
	return d
}
