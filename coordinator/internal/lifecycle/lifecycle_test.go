package lifecycle

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/integration/tracetest"
)

// TestTraces runs the scripted traces in testdata/ (go test -rewrite
// rewrites their expected output). Commands:
//
//	new tasks=v/0,w/1 [checkpointing] [restart=attempts,backoff,max,reset] [immediate] [cancel-timeout=10s]
//	resume <state> attempt=N [msg=...|msg=restarted] @ms  (a restarted coordinator; and the args of new)
//	deploy @ms v/0=w1 w/1=w2 | deploy-failed @ms msg=...
//	task v/0 <STATE> @ms [worker=w1] [msg=...] [corrupt=N]
//	lost w1 [w2...] @ms | tick @ms | cancel @ms | stop-savepoint key @ms
//	rescale tasks=v/0,v/1,w/0 reason=... @ms | suspend reason=... @ms | wake reason=... @ms
//	writing | written N ok|failed [committed] @ms
//	recovered N [final] @ms | recovery-failed [fatal] msg=... @ms | finalized ok|failed @ms
//	restart-coordinator @ms  (this job's status stored, and resumed by a new coordinator)
//	exceptions  (the job's exception history)
//
// Each prints the decisions, a failure it recorded in the exception
// history, then the job's state (summary has no blank line, which would
// end a block).
func TestTraces(t *testing.T) {
	tracetest.Run(t, "testdata", func(t *testing.T) tracetest.Func {
		var j *Job
		return func(t *testing.T, d *datadriven.TestData) (string, error) {
			a := parseArgs(t, d)
			var ds []Decision
			var before []Exception
			if j != nil {
				before = j.Exceptions()
			}
			switch d.Cmd {
			case "new":
				j = New(a.config(t))
				return j.summary(), nil
			case "resume":
				msg := a.kv["msg"]
				if msg == "restarted" {
					msg = RestartedMessage
				}
				j = Resume(a.config(t), a.now, Stored{State: a.word(t, 0), Message: msg, Attempt: a.int(t, "attempt")})
				return j.summary(), nil
			case "restart-coordinator":
				j = Resume(j.cfg, a.now, Stored{State: j.State(), Message: j.Message(), Attempt: j.Attempt(),
					Started: j.Started(), Ended: j.Ended(), Restarts: j.Restarts(), Exceptions: j.Exceptions()})
				return j.summary(), nil
			case "exceptions":
				var b strings.Builder
				for _, e := range j.Exceptions() {
					b.WriteString(e.line() + "\n")
				}
				return b.String() + j.summary(), nil
			case "deploy":
				placement := map[Task]string{}
				for _, w := range a.words {
					k, v, _ := strings.Cut(w, "=")
					placement[parseTask(t, k)] = v
				}
				ds = j.Deployed(a.now, placement)
			case "deploy-failed":
				ds = j.DeployFailed(a.now, a.kv["msg"])
			case "task":
				ds = j.TaskState(a.now, parseTask(t, a.word(t, 0)), a.word(t, 1), a.kv["msg"], a.kv["worker"], int64(a.intOr(t, "corrupt", 0)))
			case "lost":
				lost := map[string]bool{}
				for _, w := range a.words {
					lost[w] = true
				}
				ds = j.WorkersLost(a.now, func(w string) bool { return !lost[w] })
			case "tick":
				ds = j.Tick(a.now)
			case "cancel":
				var ok bool
				if ds, ok = j.Cancel(a.now); !ok {
					return "refused: the job has ended\n" + j.summary(), nil
				}
			case "rescale":
				var tasks []Task
				for _, w := range strings.Split(a.kv["tasks"], ",") {
					tasks = append(tasks, parseTask(t, w))
				}
				var ok bool
				if ds, ok = j.Rescale(a.now, tasks, a.kv["reason"]); !ok {
					return "refused: the job is not running\n" + j.summary(), nil
				}
			case "suspend":
				var ok bool
				if ds, ok = j.Suspend(a.now, a.kv["reason"]); !ok {
					return "refused: the job is not running\n" + j.summary(), nil
				}
			case "wake":
				var ok bool
				if ds, ok = j.Wake(a.now, a.kv["reason"]); !ok {
					return "refused: the job is not suspended\n" + j.summary(), nil
				}
			case "stop-savepoint":
				var ok bool
				if ds, ok = j.StoppedWithSavepoint(a.now, a.word(t, 0)); !ok {
					return "refused: the job has ended\n" + j.summary(), nil
				}
			case "writing":
				j.ManifestWriting()
			case "written":
				id, _ := strconv.ParseInt(a.word(t, 0), 10, 64)
				ds = j.ManifestWritten(a.now, id, a.word(t, 1) == "ok", a.has("committed"))
			case "recovered":
				id, _ := strconv.ParseInt(a.word(t, 0), 10, 64)
				ds = j.Recovered(a.now, id, a.has("final"))
			case "recovery-failed":
				ds = j.RecoveryFailed(a.now, a.kv["msg"], a.has("fatal"))
			case "finalized":
				ds = j.Finalized(a.now, a.word(t, 0) == "ok")
			default:
				t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			}
			var b strings.Builder
			for _, d := range ds {
				b.WriteString(d.String() + "\n")
			}
			if ex := j.Exceptions(); len(ex) > 0 && (len(before) == 0 || ex[len(ex)-1] != before[len(before)-1]) {
				b.WriteString("exception " + ex[len(ex)-1].line() + "\n")
			}
			return b.String() + j.summary(), nil
		}
	})
}

// summary is the state a trace shows after each step.
func (j *Job) summary() string {
	s := fmt.Sprintf("state: %s attempt %d", j.state, j.attempt)
	if j.errMsg != "" {
		s += " (" + j.errMsg + ")"
	}
	if j.total > 0 {
		s += fmt.Sprintf(", restarts %d", j.total)
	}
	if j.WantsDeploy() {
		s += ", waits to deploy"
	}
	if j.finalizing {
		s += ", finalizing"
	}
	return s + "\n"
}

// line is an exception as a trace shows it: @ms attempt N [task]: error.
func (e Exception) line() string {
	s := fmt.Sprintf("@%d attempt %d", e.Time.UnixMilli(), e.Attempt)
	if e.Task != nil {
		s += " " + e.Task.String()
	}
	return s + ": " + e.Error
}

type args struct {
	now   time.Time
	words []string // bare arguments, in order
	kv    map[string]string
}

func parseArgs(t *testing.T, d *datadriven.TestData) args {
	a := args{kv: map[string]string{}}
	for _, c := range d.CmdArgs {
		switch {
		case strings.HasPrefix(c.Key, "@"):
			ms, err := strconv.ParseInt(c.Key[1:], 10, 64)
			if err != nil {
				t.Fatalf("%s: time %q: %v", d.Pos, c.Key, err)
			}
			a.now = time.UnixMilli(ms).UTC()
		case len(c.Vals) == 0:
			a.words = append(a.words, c.Key)
		case strings.Contains(c.Key, "/"): // deploy v/0=w1
			a.words = append(a.words, c.Key+"="+c.Vals[0])
		default:
			a.kv[c.Key] = strings.Join(c.Vals, ",")
		}
	}
	return a
}

func (a args) word(t *testing.T, i int) string {
	if i >= len(a.words) {
		t.Fatalf("argument %d missing", i+1)
	}
	return a.words[i]
}

func (a args) has(w string) bool {
	for _, x := range a.words {
		if x == w {
			return true
		}
	}
	return false
}

func (a args) int(t *testing.T, k string) int {
	n, err := strconv.Atoi(a.kv[k])
	if err != nil {
		t.Fatalf("%s=%q: %v", k, a.kv[k], err)
	}
	return n
}

func (a args) intOr(t *testing.T, k string, def int) int {
	if _, ok := a.kv[k]; !ok {
		return def
	}
	return a.int(t, k)
}

func (a args) config(t *testing.T) Config {
	cfg := Config{Checkpointing: a.has("checkpointing"), CancelTimeout: 10 * time.Second}
	cfg.Restart.Immediate = a.has("immediate")
	for _, s := range strings.Split(a.kv["tasks"], ",") {
		cfg.Tasks = append(cfg.Tasks, parseTask(t, s))
	}
	if v := a.kv["restart"]; v != "" {
		p := strings.Split(v, ",")
		if len(p) != 4 {
			t.Fatalf("restart=%q: want attempts,backoff,maxBackoff,resetAfter", v)
		}
		n, err := strconv.Atoi(p[0])
		if err != nil {
			t.Fatal(err)
		}
		cfg.Restart = Restart{Attempts: n, Backoff: dur(t, p[1]), MaxBackoff: dur(t, p[2]), ResetAfter: dur(t, p[3]), Immediate: cfg.Restart.Immediate}
	}
	if v := a.kv["cancel-timeout"]; v != "" {
		cfg.CancelTimeout = dur(t, v)
	}
	return cfg
}

func dur(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func parseTask(t *testing.T, s string) Task {
	v, n, ok := strings.Cut(s, "/")
	i, err := strconv.Atoi(n)
	if !ok || err != nil {
		t.Fatalf("task %q: want vertex/subtask", s)
	}
	return Task{Vertex: v, Subtask: i}
}
