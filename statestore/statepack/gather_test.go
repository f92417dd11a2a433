package statepack

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

// TestGatherTraces runs the scripted traces in testdata/ (go test -rewrite
// rewrites their expected output). Times are milliseconds after t0:
//
//	new linger=5s
//	join                          prints the member's id
//	leave m=N
//	report m=N ckpt=C [files] @ms prints the batch the files went into
//	withdraw m=N seq=S
//	due @ms                       prints the batches that closed
//
// Each then prints the open batches and whom they wait for.
func TestGatherTraces(t *testing.T) {
	tracetest.Run(t, "testdata", func(t *testing.T) tracetest.Func {
		var g *gather
		return func(t *testing.T, d *datadriven.TestData) (string, error) {
			now, kv, flags := parse(t, d)
			var out []string
			switch d.Cmd {
			case "new":
				linger, err := time.ParseDuration(kv["linger"])
				if err != nil {
					t.Fatalf("new: linger=%q: %v", kv["linger"], err)
				}
				g = newGather(linger)
			case "join":
				out = append(out, fmt.Sprintf("member %d", g.join()))
			case "leave":
				g.leave(num(t, kv, "m"))
			case "report":
				if seq := g.report(num(t, kv, "m"), int64(num(t, kv, "ckpt")), flags["files"], now); seq != 0 {
					out = append(out, fmt.Sprintf("into #%d", seq))
				}
			case "withdraw":
				out = append(out, fmt.Sprintf("withdrawn: %v", g.withdraw(num(t, kv, "m"), num(t, kv, "seq"))))
			case "due":
				for _, b := range g.due(now) {
					out = append(out, fmt.Sprintf("due %v", b))
				}
			default:
				t.Fatalf("unknown command %q", d.Cmd)
			}
			return strings.Join(append(out, g.summary()), "\n"), nil
		}
	})
}

func parse(t *testing.T, d *datadriven.TestData) (time.Time, map[string]string, map[string]bool) {
	kv, flags := map[string]string{}, map[string]bool{}
	now := t0
	for _, w := range tracetest.Words(d) {
		if ms, ok := strings.CutPrefix(w, "@"); ok {
			n, err := strconv.Atoi(ms)
			if err != nil {
				t.Fatalf("time %q is not milliseconds", ms)
			}
			now = t0.Add(time.Duration(n) * time.Millisecond)
			continue
		}
		if k, v, ok := strings.Cut(w, "="); ok {
			kv[k] = v
		} else {
			flags[w] = true
		}
	}
	return now, kv, flags
}

func num(t *testing.T, kv map[string]string, k string) int {
	n, err := strconv.Atoi(kv[k])
	if err != nil {
		t.Fatalf("%s=%q is not a number", k, kv[k])
	}
	return n
}
