package checkpoint

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the scripted tests in testdata")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestScripts runs testdata/*.txt. Each file is a sequence of blocks:
//
//	command args...
//	----
//	expected output
//
// separated by blank lines. Times are milliseconds ("@1500"). Commands:
//
//	new interval=1s timeout=5s minPause=0s retain=1 last=0 tasks=a/0,b/0 sources=a/0
//	tick @T
//	ack ID TASK @T
//	decline ID TASK reason... @T
//	fail TASK @T
//	written ID ok|error-text @T
//	savepoint @T
//	stop
//	state
//
// go test -run TestScripts -rewrite regenerates the expected output.
func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts in testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScript(t, f) })
	}
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c *Coordinator
	var out strings.Builder
	blocks := strings.Split(strings.TrimSpace(string(data)), "\n\n")
	for _, blk := range blocks {
		cmd, want, _ := strings.Cut(blk, "\n----")
		var comments []string
		var line string
		for _, l := range strings.Split(cmd, "\n") {
			if strings.HasPrefix(l, "#") {
				comments = append(comments, l)
			} else {
				line = l
			}
		}
		got, err := run(&c, line)
		if err != nil {
			got = "error: " + err.Error()
		}
		if got == "" {
			got = "(nothing)"
		}
		want = strings.TrimPrefix(want, "\n")
		if !*rewrite && got != want {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", path, line, got, want)
		}
		for _, cm := range comments {
			out.WriteString(cm + "\n")
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n\n", line, got)
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func run(cp **Coordinator, line string) (string, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return "", errors.New("empty command")
	}
	now := time.UnixMilli(0)
	args := f[1:]
	if n := len(args); n > 0 && strings.HasPrefix(args[n-1], "@") {
		ms, err := strconv.ParseInt(args[n-1][1:], 10, 64)
		if err != nil {
			return "", err
		}
		now, args = time.UnixMilli(ms), args[:n-1]
	}
	if f[0] == "new" {
		c, err := newFromArgs(args)
		*cp = c
		if err != nil {
			return "", err
		}
		return "ok", nil
	}
	c := *cp
	if c == nil {
		return "", errors.New("no coordinator: start with new")
	}
	var ds []Decision
	var err error
	switch f[0] {
	case "tick":
		ds = c.Tick(now)
	case "ack":
		id, _ := strconv.ParseInt(args[0], 10, 64)
		ds, err = c.Ack(now, id, Ack{Task: parseTask(args[1])})
	case "decline":
		id, _ := strconv.ParseInt(args[0], 10, 64)
		ds = c.Decline(now, id, parseTask(args[1]), strings.Join(args[2:], " "))
	case "fail":
		ds = c.TaskFailed(now, parseTask(args[0]))
	case "written":
		id, _ := strconv.ParseInt(args[0], 10, 64)
		var werr error
		if msg := strings.Join(args[1:], " "); msg != "ok" {
			werr = errors.New(msg)
		}
		ds = c.ManifestWritten(now, id, werr)
	case "savepoint":
		var d Decision
		d, err = c.TriggerSavepoint(now)
		if err == nil {
			ds = []Decision{d}
		}
	case "stop":
		c.Stop()
	case "state":
		id, ok := c.InFlight()
		if !ok {
			return fmt.Sprintf("in flight: none; completed: %v", c.Completed()), nil
		}
		return fmt.Sprintf("in flight: %d; completed: %v", id, c.Completed()), nil
	default:
		return "", fmt.Errorf("unknown command %q", f[0])
	}
	if err != nil {
		return "", err
	}
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
		if d.Kind == WriteManifest {
			var ts []string
			for _, a := range d.Acks {
				ts = append(ts, a.Task.String())
			}
			lines[i] += ": " + strings.Join(ts, " ")
		}
	}
	return strings.Join(lines, "\n"), nil
}

func newFromArgs(args []string) (*Coordinator, error) {
	var cfg Config
	var tasks, sources []Task
	var last int64
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		var err error
		switch k {
		case "interval":
			cfg.Interval, err = time.ParseDuration(v)
		case "timeout":
			cfg.Timeout, err = time.ParseDuration(v)
		case "minPause":
			cfg.MinPause, err = time.ParseDuration(v)
		case "retain":
			cfg.Retain, err = strconv.Atoi(v)
		case "last":
			last, err = strconv.ParseInt(v, 10, 64)
		case "tasks":
			for _, s := range strings.Split(v, ",") {
				tasks = append(tasks, parseTask(s))
			}
		case "sources":
			for _, s := range strings.Split(v, ",") {
				sources = append(sources, parseTask(s))
			}
		default:
			return nil, fmt.Errorf("unknown argument %q", a)
		}
		if err != nil {
			return nil, err
		}
	}
	return New(cfg, tasks, sources, last)
}

func parseTask(s string) Task {
	v, n, _ := strings.Cut(s, "/")
	i, _ := strconv.Atoi(n)
	return Task{Vertex: v, Subtask: i}
}
