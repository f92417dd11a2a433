package task

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// rewrite regenerates the golden output of the scripted tests under
// testdata instead of comparing with it.
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of scripted tests in testdata")

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
	files, err := filepath.Glob("testdata/valve/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/valve")
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			var v *Valve
			runScript(t, path, func(cmd string, args []string) (string, error) {
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
			})
		})
	}
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

// runScript runs a scripted test in the style of pebble's datadriven
// package. A script is a series of blocks separated by blank lines; a block
// is one or more command lines, a line "----", and the expected output, one
// line per command. Lines starting with # outside blocks are comments. run
// executes one command and returns its output (no trailing newline); an
// error is printed as "error: ...". With -rewrite the expected output in the
// file is replaced with what the commands print.
func runScript(t *testing.T, path string, run func(cmd string, args []string) (string, error)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out     bytes.Buffer // the file as rewritten
		sc      = bufio.NewScanner(bytes.NewReader(data))
		lineNo  int
		failed  bool
		cmds    []string
		cmdLine int
	)
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		lineNo++
		return sc.Text(), true
	}
	for {
		line, ok := next()
		if !ok {
			break
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		// A block: commands up to "----", then the expected output up to a
		// blank line or the end of the file.
		cmds, cmdLine = cmds[:0], lineNo
		for ok && line != "----" {
			cmds = append(cmds, line)
			line, ok = next()
		}
		if !ok {
			t.Fatalf("%s:%d: block without ----", path, cmdLine)
		}
		var want []string
		sep, hasSep := "", false // the blank line that ends the block
		for {
			l, ok := next()
			if !ok {
				break
			}
			if strings.TrimSpace(l) == "" {
				sep, hasSep = l, true
				break
			}
			want = append(want, l)
		}
		var got []string
		for _, c := range cmds {
			fields := strings.Fields(c)
			res, err := run(fields[0], fields[1:])
			if err != nil {
				res = "error: " + err.Error()
			}
			got = append(got, strings.Split(res, "\n")...)
		}
		for _, c := range cmds {
			out.WriteString(c + "\n")
		}
		out.WriteString("----\n")
		for _, g := range got {
			out.WriteString(g + "\n")
		}
		if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w && !*rewrite {
			failed = true
			t.Errorf("%s:%d:\n%s\ngot:\n%s\nwant:\n%s", path, cmdLine, strings.Join(cmds, "\n"), g, w)
		}
		if hasSep {
			out.WriteString(sep + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if *rewrite {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if failed {
		t.Log("run with -rewrite to accept the new output")
	}
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
