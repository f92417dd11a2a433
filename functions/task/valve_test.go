package task

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/integration/tracetest"
)

// TestValve runs the scripts in testdata/valve. Commands:
//
//	new <inputs>          start a new valve
//	update <input> <wm>   a watermark (a number, min or max)
//	idle <input>          the input sends IdleWatermark
//	end <input>           the input ends
//	state                 print every input
//
// Each command prints the output watermark, "advanced" when it moved and
// "idle" when the valve is idle.
func TestValve(t *testing.T) {
	tracetest.Run(t, "testdata/valve", func(t *testing.T) tracetest.Func {
		var v *Valve
		return func(t *testing.T, td *datadriven.TestData) (string, error) {
			cmd, args := td.Cmd, tracetest.Words(td)
			input := func() (int, error) {
				if len(args) < 1 {
					return 0, fmt.Errorf("%s needs an input", cmd)
				}
				i, err := strconv.Atoi(args[0])
				if err != nil || v == nil || i < 0 || i >= len(v.inputs) {
					return 0, fmt.Errorf("bad input %q (run new first)", args[0])
				}
				return i, nil
			}
			var out int64
			var advanced bool
			switch cmd {
			case "new":
				if len(args) != 1 {
					return "", fmt.Errorf("new takes the number of inputs")
				}
				n, err := strconv.Atoi(args[0])
				if err != nil {
					return "", err
				}
				v = NewValve(n)
				return valveResult(v, v.Current(), false), nil
			case "update":
				i, err := input()
				if err != nil {
					return "", err
				}
				if len(args) != 2 {
					return "", fmt.Errorf("update takes an input and a watermark")
				}
				wm, err := parseWatermark(args[1])
				if err != nil {
					return "", err
				}
				out, advanced = v.Update(i, wm)
			case "idle":
				i, err := input()
				if err != nil {
					return "", err
				}
				out, advanced = v.Update(i, IdleWatermark)
			case "end":
				i, err := input()
				if err != nil {
					return "", err
				}
				out, advanced = v.End(i)
			case "state":
				var b strings.Builder
				for i, in := range v.inputs {
					if i > 0 {
						b.WriteByte(' ')
					}
					switch {
					case in.ended:
						fmt.Fprintf(&b, "%d:ended", i)
					case in.idle:
						fmt.Fprintf(&b, "%d:idle(%s)", i, formatWatermark(in.wm))
					default:
						fmt.Fprintf(&b, "%d:%s", i, formatWatermark(in.wm))
					}
				}
				return b.String(), nil
			default:
				return "", fmt.Errorf("unknown command %q", cmd)
			}
			if out != v.Current() {
				t.Errorf("%s %v: returned %d, Current() is %d", cmd, args, out, v.Current())
			}
			return valveResult(v, out, advanced), nil
		}
	})
}

func valveResult(v *Valve, out int64, advanced bool) string {
	s := "out=" + formatWatermark(out)
	if advanced {
		s += " advanced"
	}
	if v.Idle() {
		s += " idle"
	}
	return s
}

func parseWatermark(s string) (int64, error) {
	switch s {
	case "min":
		return MinWatermark, nil
	case "max":
		return MaxWatermark, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

func formatWatermark(wm int64) string {
	switch wm {
	case MinWatermark:
		return "min"
	case MaxWatermark:
		return "max"
	}
	return strconv.FormatInt(wm, 10)
}

// TestValveRandom drives a valve with random events and checks it against
// a model kept here: the output is the highest minimum over the active
// inputs seen so far, MaxWatermark once all inputs ended, and never falls.
func TestValveRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 200 {
		n := 1 + rng.IntN(5)
		v := NewValve(n)
		wms := make([]int64, n)
		idle := make([]bool, n)
		ended := make([]bool, n)
		for i := range wms {
			wms[i] = MinWatermark
		}
		want := MinWatermark
		for step := range 100 {
			i := rng.IntN(n)
			var out int64
			var advanced bool
			var what string
			switch k := rng.IntN(10); {
			case k < 7:
				wm := int64(rng.IntN(1000))
				what = fmt.Sprintf("update %d %d", i, wm)
				out, advanced = v.Update(i, wm)
				if !ended[i] {
					idle[i] = false
					wms[i] = max(wms[i], wm)
				}
			case k < 9:
				what = fmt.Sprintf("idle %d", i)
				out, advanced = v.Update(i, IdleWatermark)
				if !ended[i] {
					idle[i] = true
				}
			default:
				what = fmt.Sprintf("end %d", i)
				out, advanced = v.End(i)
				ended[i] = true
			}
			lowest, active, allEnded, allIdle := MaxWatermark, false, true, true
			for j := range n {
				if ended[j] {
					continue
				}
				allEnded = false
				if idle[j] {
					continue
				}
				allIdle = false
				active = true
				lowest = min(lowest, wms[j])
			}
			prev := want
			switch {
			case allEnded:
				want = MaxWatermark
			case active:
				want = max(want, lowest)
			}
			if out != want || advanced != (want > prev) || v.Current() != want {
				t.Fatalf("iter %d step %d %s: got out=%d advanced=%v current=%d, want out=%d advanced=%v",
					iter, step, what, out, advanced, v.Current(), want, want > prev)
			}
			if got := v.Idle(); got != (!allEnded && allIdle) {
				t.Fatalf("iter %d step %d %s: Idle() = %v", iter, step, what, got)
			}
		}
	}
}
