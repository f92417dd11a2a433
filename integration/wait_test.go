package integration

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
)

// TestCLIWaits drives a cluster with the commands that wait for a job:
// `weir deploy --wait` exits 0 when the job FINISHED and 1 when it FAILED,
// `weir stop --wait` returns once the drained job FINISHED, `weir jobs
// cancel --wait` once it is CANCELED; `weir workers list` lists the
// workers; an unknown subcommand fails (exit 2) naming it.
func TestCLIWaits(t *testing.T) {
	c := startCluster(t, 2, 2)

	bounded := writeSpec(t, `
job: bounded
sources:
  - {name: gen, type: datagen, count: 2000, rate: 4000, schema: {k: int64}}
sinks:
  - {name: out, input: gen, type: files, path: waits/bounded/, format: jsonl}
`)
	out, err := c.weir("deploy", "--wait", bounded)
	if err != nil || !strings.Contains(out, "FINISHED: 2000 events in, 2000 rows to sinks") {
		t.Fatalf("deploy --wait of a bounded job: %v\n%s", err, out)
	}

	port := testenv.FreePort(t) // nothing listens there
	failing := writeSpec(t, `
job: fails
sources:
  - {name: in, type: redis, addr: "127.0.0.1:`+strconv.Itoa(port)+`", stream: s, schema: {id: int64}}
sinks:
  - {name: out, input: in, type: stdout}
`)
	out, err = c.weir("deploy", "--wait", failing)
	if code := exitCode(err); code != 1 || !strings.Contains(out, "FAILED") || !strings.Contains(err.Error(), "in[0]") {
		t.Errorf("deploy --wait of a failing job: exit %d, %q, %v; want 1 naming the failed subtask", code, out, err)
	}

	long := writeSpec(t, `
job: long
sources:
  - {name: gen, type: datagen, count: 1000000, rate: 200, schema: {k: int64}}
sinks:
  - {name: out, input: gen, type: files, path: waits/long/, format: jsonl}
`)
	for _, stop := range [][]string{{"stop", "--wait"}, {"jobs", "stop", "--wait"}, {"jobs", "cancel", "--wait"}} {
		id := c.deploy(long)
		c.waitState(id, coordinator.JobRunning, time.Minute)
		want := coordinator.JobFinished
		if stop[len(stop)-2] == "cancel" {
			want = coordinator.JobCanceled
		}
		if want == coordinator.JobFinished && stop[0] == "stop" {
			// While it runs, the status has per-second rates: the source
			// reads about its 200 rows a second.
			poll.UntilNil(t, 30*time.Second, "per-second rates", func() error {
				st, err := c.status(id)
				if err != nil {
					return err
				}
				for _, v := range st.Vertices {
					for _, tk := range v.Tasks {
						if r := tk.Rates; r != nil && r.RecordsOutPerSecond > 100 && r.RecordsOutPerSecond < 400 && r.BusyMsPerSecond+r.IdleMsPerSecond+r.BackPressuredMsPerSecond > 0 {
							return nil
						}
					}
				}
				return fmt.Errorf("no source rates near 200/s yet: %+v", st.Vertices)
			})
			if out, err := c.weir("jobs", "status", id); err != nil || !strings.Contains(out, "BUSY ms/s") {
				t.Errorf("jobs status: %v\n%s", err, out)
			}

		}
		start := time.Now()
		out, err := c.weir(append(stop, id)...)
		if err != nil || !strings.Contains(out, id+" "+want) {
			t.Errorf("weir %s: %v\n%s", strings.Join(stop, " "), err, out)
		}
		// It returned once the job ended, not before.
		if st, err := c.status(id); err != nil || st.State != want {
			t.Errorf("after weir %s returned, the job is %s (%v), want %s", strings.Join(stop, " "), st.State, err, want)
		}
		t.Logf("weir %s: %s after %v", strings.Join(stop, " "), strings.TrimSpace(out), time.Since(start).Round(time.Millisecond))
	}

	// A checkpointed job's savepoints are listed from the store, newest
	// first, with the key weir deploy --from-savepoint takes.
	ckpt := writeSpec(t, `
job: saved
checkpoint: {interval: 500ms}
sources:
  - {name: gen, type: datagen, count: 1000000, rate: 200, schema: {k: int64}}
sinks:
  - {name: out, input: gen, type: files, path: waits/saved/, format: jsonl}
`)
	sid := c.deploy(ckpt)
	c.waitState(sid, coordinator.JobRunning, time.Minute)
	var keys []string
	for range 2 {
		key, err := c.weir("savepoint", sid)
		if err != nil {
			t.Fatalf("savepoint: %v", err)
		}
		keys = append(keys, strings.TrimSpace(key))
	}
	out, err = c.weir("savepoints", "list", sid)
	if err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, "CHECKPOINT") ||
		!strings.Contains(out, keys[1]) || strings.Index(out, keys[0]) < strings.Index(out, keys[1]) {
		t.Errorf("savepoints list after savepoints %v (want both, newest first): %v\n%s", keys, err, out)
	}
	// One stop command: with --savepoint it prints the savepoint, waits,
	// and the job ends FINISHED like Flink's stop-with-savepoint.
	out, err = c.weir("jobs", "stop", "--savepoint", "--wait", sid)
	if err != nil || !strings.Contains(out, "/savepoints/") || !strings.Contains(out, "job "+sid+" FINISHED") {
		t.Errorf("jobs stop --savepoint --wait: %v\n%s", err, out)
	}
	if st, err := c.status(sid); err != nil || st.State != coordinator.JobFinished || !strings.HasPrefix(st.Message, "stopped with savepoint ") {
		t.Errorf("after jobs stop --savepoint: %s %q (%v), want FINISHED, stopped with savepoint", st.State, st.Message, err)
	}

	out, err = c.weir("workers", "list")
	if err != nil || !strings.Contains(out, "worker-1") || !strings.Contains(out, "worker-2") {
		t.Errorf("workers list: %v\n%s", err, out)
	}
	out, err = c.weir("jobs", "sclae", "x=1")
	if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), `unknown command "sclae" for "weir jobs"`) {
		t.Errorf("an unknown subcommand: exit %d, %q, %v; want 2 naming it", code, out, err)
	}
}

// TestStatusWatchInTmux runs `weir jobs status --watch` in a tmux pane
// and reads the screen: one live table that redraws itself while the job
// runs and ends on its final state.
func TestStatusWatchInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("no tmux on PATH: `make deps` installs it")
	}
	c := startCluster(t, 1, 4)
	long := writeSpec(t, `
job: watched
sources:
  - {name: gen, type: datagen, count: 1000000, rate: 500, schema: {k: int64}}
sinks:
  - {name: out, input: gen, type: files, path: watch/, format: jsonl}
`)
	id := c.deploy(long)
	c.waitState(id, coordinator.JobRunning, time.Minute)
	sock := "weir-test-" + strconv.Itoa(os.Getpid())
	tm := func(args ...string) string {
		out, err := exec.Command(tmux, append([]string{"-L", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-L", sock, "kill-server").Run() })
	tm("new-session", "-d", "-s", "watch", "-x", "160", "-y", "50",
		weirBin+" --coordinator "+c.api+" jobs status "+id+" --watch; sleep 60")
	screen := func() string { return tm("capture-pane", "-p", "-t", "watch") }
	var first string
	poll.UntilNil(t, 30*time.Second, "the live table on screen", func() error {
		first = screen()
		if !strings.Contains(first, "job "+id) || !strings.Contains(first, "RUNNING") || !strings.Contains(first, "BUSY ms/s") {
			return fmt.Errorf("screen:\n%s", first)
		}
		return nil
	})
	if n := strings.Count(first, "job "+id); n != 1 {
		t.Errorf("the screen shows the status %d times, want one table redrawn in place:\n%s", n, first)
	}
	poll.UntilNil(t, 20*time.Second, "the table redrawn", func() error {
		if s := screen(); s == first {
			return fmt.Errorf("unchanged")
		}
		return nil
	})
	if out, err := c.weir("stop", "--wait", id); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	poll.UntilNil(t, 20*time.Second, "the final state on screen", func() error {
		s := screen()
		if !strings.Contains(s, "FINISHED") {
			return fmt.Errorf("screen:\n%s", s)
		}
		return nil
	})
	t.Logf("the last frame:\n%s", screen())
}
