package checkpoint

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/integration/tracetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestScripts runs the scripts in testdata (see integration/tracetest for
// the format). Times are milliseconds ("@1500"); a command that decides
// nothing prints (nothing). Commands:
//
//	new interval=1s timeout=5s minPause=0s retain=1 last=0 tasks=a/0,b/0 sources=a/0
//	tick @T
//	ack ID TASK @T
//	decline ID TASK reason... @T
//	fail TASK @T
//	finished TASK @T  (its final acknowledgement came)
//	abort reason... @T  (the job's failure, as the lifecycle states it)
//	written ID ok|error-text @T
//	savepoint @T
//	now @T
//	stop
//	state
//
// go test -run TestScripts -rewrite regenerates the expected output.
func TestScripts(t *testing.T) {
	tracetest.Run(t, "testdata", func(t *testing.T) tracetest.Func {
		var c *Coordinator
		return func(t *testing.T, td *datadriven.TestData) (string, error) {
			return run(&c, td.Cmd, tracetest.Words(td))
		}
	})
}

func run(cp **Coordinator, cmd string, args []string) (string, error) {
	now := time.UnixMilli(0)
	if n := len(args); n > 0 && strings.HasPrefix(args[n-1], "@") {
		ms, err := strconv.ParseInt(args[n-1][1:], 10, 64)
		if err != nil {
			return "", err
		}
		now, args = time.UnixMilli(ms), args[:n-1]
	}
	if cmd == "new" {
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
	switch cmd {
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
	case "finished":
		ds = c.Finished(now, parseTask(args[0]))
	case "abort":
		ds = c.Abort(now, strings.Join(args, " "))
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
	case "now":
		var d Decision
		d, err = c.TriggerNow(now)
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
		return "", fmt.Errorf("unknown command %q", cmd)
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
			if len(d.Finished) > 0 {
				var fs []string
				for _, t := range d.Finished {
					fs = append(fs, t.String())
				}
				lines[i] += "; finished: " + strings.Join(fs, " ")
			}
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
