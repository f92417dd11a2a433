package lifecycle

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRandomInvariants drives the machine with random events, in any
// order a driver could deliver them (late reports, failures during
// recovery, cancels at any time, writes completing whenever), and checks
// what must always hold:
//   - at most one Recover or Finalize is outstanding, and never both;
//   - no Recover is asked while a manifest write is in flight;
//   - a terminal state comes with one End decision, and an ended job
//     decides nothing more;
//   - the attempt only grows, by one per recovery;
//   - a job never goes on after more restarts than its strategy allows;
//   - the message is set only once the job ended, the restart count only
//     grows, and the exception history holds at most ExceptionHistory.
func TestRandomInvariants(t *testing.T) {
	tasks := []Task{{"src", 0}, {"src", 1}, {"win", 0}, {"sink", 0}}
	workers := []string{"w1", "w2", "w3"}
	states := []string{Running, Running, Running, Finished, Failed, Canceled}
	for seed := uint64(0); seed < 500; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		cfg := Config{Tasks: tasks, Checkpointing: rng.IntN(2) == 0, CancelTimeout: time.Second,
			Restart: Restart{Attempts: rng.IntN(5) - 1, Backoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond, ResetAfter: 2 * time.Second,
				Immediate: rng.IntN(2) == 0}}
		var j *Job
		now := time.UnixMilli(0)
		if rng.IntN(3) == 0 {
			j = Resume(cfg, now, Stored{State: []string{Running, Restarting, Created}[rng.IntN(3)], Attempt: 1 + rng.IntN(3)})
		} else {
			j = New(cfg)
		}
		var (
			recovering, finalizing bool
			writes                 int
			ended                  bool
			recoveries             int
		)
		ended = Terminal(j.State()) // resumed without a restart strategy: FAILED at once
		fail := func(step int, format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d step %d (%s attempt %d): %s", seed, step, j.state, j.attempt, fmt.Sprintf(format, args...))
		}
		for step := 0; step < 200; step++ {
			now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
			attempt, restarts := j.Attempt(), j.Restarts()
			var ds []Decision
			switch r := rng.IntN(12); {
			case r < 4 && len(j.tasks) > 0:
				ts := j.Tasks()
				p := ts[rng.IntN(len(ts))]
				ds = j.TaskState(now, p.Task, states[rng.IntN(len(states))], "x", p.Worker, int64(rng.IntN(3)))
			case r < 5 && j.WantsDeploy():
				placement := map[Task]string{}
				for _, tk := range tasks {
					placement[tk] = workers[rng.IntN(len(workers))]
				}
				ds = j.Deployed(now, placement)
			case r < 6:
				lost := workers[rng.IntN(len(workers))]
				ds = j.WorkersLost(now, func(w string) bool { return w != lost })
			case r < 7:
				ds, _ = j.Cancel(now)
			case r < 8 && !ended && rng.IntN(3) == 0:
				j.ManifestWriting()
				writes++
			case r < 9 && writes > 0:
				writes--
				ds = j.ManifestWritten(now, int64(step), rng.IntN(4) > 0, rng.IntN(2) == 0)
			case r < 10 && recovering:
				recovering = false
				if rng.IntN(4) == 0 {
					ds = j.RecoveryFailed(now, "x", rng.IntN(3) == 0)
				} else {
					before, restarting := j.Attempt(), j.State() == Restarting
					ds = j.Recovered(now, int64(rng.IntN(5)), rng.IntN(6) == 0)
					if want := before + map[bool]int{true: 1}[restarting]; j.Attempt() != want {
						fail(step, "recovered from attempt %d to %d", before, j.Attempt())
					}
				}
			case r < 11 && finalizing:
				finalizing = false
				ds = j.Finalized(now, rng.IntN(3) > 0)
			default:
				ds = j.Tick(now)
			}
			if j.Attempt() < attempt {
				fail(step, "attempt went back from %d", attempt)
			}
			for _, d := range ds {
				if ended && d.Kind != FailSavepoints {
					fail(step, "decided %s after the end", d)
				}
				switch d.Kind {
				case Recover:
					if recovering || finalizing {
						fail(step, "recover while recovering=%v finalizing=%v", recovering, finalizing)
					}
					if writes > 0 {
						fail(step, "recover with %d manifest writes in flight", writes)
					}
					recovering = true
					recoveries++
				case Finalize:
					if recovering || finalizing {
						fail(step, "finalize while recovering=%v finalizing=%v", recovering, finalizing)
					}
					finalizing = true
				case End:
					if ended {
						fail(step, "second end: %s", d)
					}
					ended = true
					if d.State != j.State() || !Terminal(d.State) {
						fail(step, "end %s but the state is %s", d.State, j.State())
					}
				}
			}
			if ended {
				// Outstanding I/O still reports back, and must change
				// nothing.
				recovering, finalizing = false, false
			}
			if Terminal(j.State()) && !ended {
				fail(step, "state %s without an End decision", j.State())
			}
			if j.Restarts() < restarts {
				fail(step, "restart count went back from %d to %d", restarts, j.Restarts())
			}
			if j.Message() != "" && !Terminal(j.State()) {
				fail(step, "message %q while %s", j.Message(), j.State())
			}
			if n := len(j.Exceptions()); n > ExceptionHistory {
				fail(step, "%d exceptions kept", n)
			}
			if !cfg.Restart.Unlimited() && j.restarts > cfg.Restart.Attempts && !Terminal(j.State()) {
				fail(step, "%d restarts with a strategy of %d, and still %s", j.restarts, cfg.Restart.Attempts, j.State())
			}
		}
	}
}
