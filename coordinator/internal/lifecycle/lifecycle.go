// Package lifecycle is the job lifecycle's protocol core: a pure state
// machine that follows one job from CREATED through RUNNING, RESTARTING and
// CANCELING to FINISHED, FAILED or CANCELED.
//
// Like package checkpoint beside it, it does no I/O and reads no clock:
// events come in as method calls with the time, decisions come out as
// values, and one goroutine (the coordinator's loop) owns it and carries
// the decisions out. Deploying tasks, recovering from a checkpoint and
// writing the final manifest are I/O, so the machine asks for them
// (Recover, Finalize) and hears back (Recovered, RecoveryFailed,
// Finalized); everything it decided meanwhile is in its state, so every
// path — a task failing while a manifest is written, a worker lost during
// recovery, a coordinator restarted in any state — is a scripted trace
// (testdata/*.txt).
//
//	ds := j.TaskState(now, task, FAILED, "boom", 0)   // CancelTasks, AbortCheckpoints, ...
//	ds  = j.Tick(now)                                // Recover, once the backoff passed
//	ds  = j.Recovered(now, 7, false)                 // CancelStragglers; WantsDeploy() is true
//	ds  = j.Deployed(now, placement)                 // the new attempt's tasks
//	ds  = j.TaskState(now, task, RUNNING, "", 0)     // StartCheckpoints, once every task runs
package lifecycle

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// Job and task states, as the API shows them.
const (
	Created    = "CREATED"
	Running    = "RUNNING"
	Restarting = "RESTARTING"
	Canceling  = "CANCELING"
	// Suspended: the job's sources were idle, so its tasks were canceled;
	// it holds no slot and waits for Wake (not a final state).
	Suspended = "SUSPENDED"
	Finished  = "FINISHED"
	Failed    = "FAILED"
	Canceled  = "CANCELED"
)

// Terminal reports whether a job or task state is final.
func Terminal(s string) bool { return s == Finished || s == Failed || s == Canceled }

// RestartedMessage is the reason recorded for a job that was running when
// the coordinator stopped.
const RestartedMessage = "coordinator restarted while the job ran"

// retryDelay is how long a failed recovery or finalization waits before it
// is tried again.
const retryDelay = time.Second

// Task names one subtask.
type Task struct {
	Vertex  string `json:"vertex"`
	Subtask int    `json:"subtask"`
}

func (t Task) String() string { return fmt.Sprintf("%s[%d]", t.Vertex, t.Subtask) }

// Restart is the restart strategy: up to Attempts restarts (for ever if
// Attempts is negative), the n-th after Backoff·2ⁿ⁻¹ (at most
// MaxBackoff), or with Immediate the first at once and the n-th after
// Backoff·2ⁿ⁻²; a job that ran for ResetAfter counts from zero again.
type Restart struct {
	Attempts   int
	Backoff    time.Duration
	MaxBackoff time.Duration
	ResetAfter time.Duration
	Immediate  bool
}

// Unlimited reports whether the strategy restarts for ever.
func (r Restart) Unlimited() bool { return r.Attempts < 0 }

// first is the delay before the first restart after a stable run.
func (r Restart) first() time.Duration {
	if r.Immediate {
		return 0
	}
	return r.Backoff
}

// next is the delay after d.
func (r Restart) next(d time.Duration) time.Duration {
	if d == 0 {
		return min(r.Backoff, r.MaxBackoff)
	}
	return min(2*d, r.MaxBackoff)
}

// ExceptionHistory is how many failures a job remembers.
const ExceptionHistory = 16

// Exception is one failure of a job: one that restarted it or failed it.
type Exception struct {
	Time    time.Time `json:"time"`
	Attempt int       `json:"attempt"`        // the attempt that failed
	Task    *Task     `json:"task,omitempty"` // the subtask that failed, if one did
	Error   string    `json:"error"`
}

// Config describes a job to the machine.
type Config struct {
	// Tasks is every subtask of the plan.
	Tasks []Task
	// Checkpointing: the job has a checkpoint section, so its end is a
	// final manifest (Finalize) and its output commits through it.
	Checkpointing bool
	Restart       Restart
	// CancelTimeout is how long a cancel waits for the tasks to confirm.
	CancelTimeout time.Duration
}

// Recovery is one restart of a job.
type Recovery struct {
	Attempt  int       `json:"attempt"` // the attempt it started
	Reason   string    `json:"reason"`
	Detected time.Time `json:"detected"`
	// Running is when every task of the new attempt ran again (zero while
	// it has not).
	Running      time.Time `json:"running,omitzero"`
	Seconds      float64   `json:"seconds,omitempty"` // Running - Detected
	RestoredFrom int64     `json:"restoredFrom"`      // checkpoint id, 0 for the beginning
}

// Kind is what a Decision asks the driver to do.
type Kind int

const (
	// CancelTasks: tell the workers of Tasks (this attempt's, not ended)
	// to cancel them.
	CancelTasks Kind = iota + 1
	// CancelStragglers: tell every live worker to cancel Tasks of
	// Attempt (after a coordinator restart nobody knows where they run).
	CancelStragglers
	// StartCheckpoints: every task runs; periodic checkpoints begin.
	StartCheckpoints
	// AbortCheckpoints: the attempt failed (Message says how, naming the
	// subtask if one failed) or finishes; abort the checkpoint in flight
	// (its manifest may still be being written) and forget acks.
	AbortCheckpoints
	// FailSavepoints: the savepoints callers wait for failed: Reason.
	FailSavepoints
	// Recover: find the checkpoint to restore (skipping Bad ones), clean
	// up Attempt's leftovers and report Recovered or RecoveryFailed.
	Recover
	// Finalize: every task finished; write the final manifest, commit the
	// sinks' last transactions, and report Finalized.
	Finalize
	// End: the job reached State (with Message): stop its checkpoints,
	// store its status and delete its channels.
	End
)

var kindNames = map[Kind]string{CancelTasks: "cancel-tasks", CancelStragglers: "cancel-stragglers",
	StartCheckpoints: "start-checkpoints", AbortCheckpoints: "abort-checkpoints",
	FailSavepoints: "fail-savepoints", Recover: "recover", Finalize: "finalize", End: "end"}

// Decision is one thing the driver must do, in order.
type Decision struct {
	Kind    Kind
	Attempt int
	Tasks   []Placed       // CancelTasks, CancelStragglers
	Bad     map[int64]bool // Recover: checkpoints known unusable
	State   string         // End
	Message string         // End, FailSavepoints, AbortCheckpoints (the reason)
}

// Placed is a task of an attempt and the worker it was deployed to ("" if
// unknown).
type Placed struct {
	Task   Task
	Worker string
}

func (d Decision) String() string {
	var b strings.Builder
	b.WriteString(kindNames[d.Kind])
	switch d.Kind {
	case CancelTasks, CancelStragglers:
		fmt.Fprintf(&b, " attempt %d:", d.Attempt)
		for _, p := range d.Tasks {
			b.WriteString(" " + p.Task.String())
			if p.Worker != "" {
				b.WriteString("@" + p.Worker)
			}
		}
	case Recover:
		fmt.Fprintf(&b, " from attempt %d", d.Attempt)
		if len(d.Bad) > 0 {
			ids := slices.Sorted(maps.Keys(d.Bad))
			fmt.Fprintf(&b, " skipping %v", ids)
		}
	case End:
		b.WriteString(" " + d.State)
		if d.Message != "" {
			b.WriteString(": " + d.Message)
		}
	case FailSavepoints, AbortCheckpoints:
		if d.Message != "" {
			b.WriteString(": " + d.Message)
		}
	}
	return b.String()
}

type taskState struct {
	worker string
	state  string
}

// Job is one job's lifecycle. It is not safe for concurrent use: one
// goroutine (or one lock) owns it.
type Job struct {
	cfg     Config
	state   string
	errMsg  string
	attempt int
	started time.Time // the current attempt ran (RUNNING)
	ended   time.Time

	// tasks are the current attempt's, placed; nil while it waits to be
	// deployed.
	tasks map[Task]*taskState

	// Restarts: restarts counts those since the last stable run, total
	// every one (carried through Resume); exceptions are the newest
	// ExceptionHistory failures, oldest first.
	restarts   int
	total      int
	exceptions []Exception
	backoff    time.Duration
	restartAt  time.Time
	recovering bool // a Recover is under way
	// recovered: the restart's recovery is done; a failure now needs
	// another restart.
	recovered  bool
	deploy     bool // the attempt waits to be deployed
	bad        map[int64]bool
	committed  int64 // newest checkpoint whose output is all committed
	recoveries []Recovery

	// writing counts manifest writes in flight: recovery waits for them,
	// since a checkpoint completing now is the one to restore.
	writing    int
	finalizing bool
	finishing  bool // Finalize is under way
	retryAt    time.Time

	cancelAt  time.Time
	stoppedAt string // savepoint of a stop-with-savepoint
}

// New returns the lifecycle of a submitted job: CREATED, attempt 1,
// waiting to be deployed.
func New(cfg Config) *Job {
	return &Job{cfg: cfg, state: Created, attempt: 1, deploy: true, bad: map[int64]bool{}, backoff: cfg.Restart.first()}
}

// Stored is what the bucket keeps of a job's lifecycle (its status).
type Stored struct {
	State, Message string
	Attempt        int
	Started, Ended time.Time
	Restarts       int
	Exceptions     []Exception
}

// Resume returns the lifecycle of a job a restarted coordinator found in
// the bucket. A job that had not ended restarts from its latest checkpoint
// as a new attempt (if its restart strategy allows restarts; otherwise it
// FAILED); an ended one stays as it was.
func Resume(cfg Config, now time.Time, st Stored) *Job {
	j := &Job{cfg: cfg, state: st.State, errMsg: st.Message, attempt: max(st.Attempt, 1), started: st.Started, ended: st.Ended,
		bad: map[int64]bool{}, backoff: cfg.Restart.first(), total: st.Restarts}
	for _, e := range st.Exceptions {
		j.except(e)
	}
	if Terminal(j.state) && !(j.state == Failed && j.errMsg == RestartedMessage) {
		return j
	}
	if j.state == Suspended {
		// It waits for Wake as before; its old tasks, should one still
		// run somewhere, are canceled everywhere when it wakes.
		j.tasks = map[Task]*taskState{}
		for _, t := range cfg.Tasks {
			j.tasks[t] = &taskState{state: Canceled}
		}
		return j
	}
	j.except(Exception{Time: now, Attempt: j.attempt, Error: RestartedMessage})
	if cfg.Restart.Attempts == 0 {
		j.state, j.errMsg = Failed, RestartedMessage
		return j
	}
	j.state, j.errMsg = Restarting, ""
	j.total++
	j.recover(Recovery{Attempt: j.attempt + 1, Reason: RestartedMessage, Detected: now})
	// The old attempt's tasks may still run somewhere: they are canceled
	// everywhere once recovery is done.
	j.tasks = map[Task]*taskState{}
	for _, t := range cfg.Tasks {
		j.tasks[t] = &taskState{state: Canceled}
	}
	return j
}

// State is the job's state; Message why it failed or ended, once it did
// (a failure it restarted from is in Exceptions, not here).
func (j *Job) State() string   { return j.state }
func (j *Job) Message() string { return j.errMsg }

// Restarts is how many times the job restarted since it was submitted.
func (j *Job) Restarts() int { return j.total }

// Exceptions lists the newest ExceptionHistory failures, oldest first.
func (j *Job) Exceptions() []Exception { return slices.Clone(j.exceptions) }

// except records a failure in the bounded history.
func (j *Job) except(e Exception) {
	if len(j.exceptions) == ExceptionHistory {
		j.exceptions = slices.Delete(j.exceptions, 0, 1)
	}
	j.exceptions = append(j.exceptions, e)
}

// maxRecoveries bounds the recoveries a job lists: with unlimited
// restarts they would grow for ever.
const maxRecoveries = 100

func (j *Job) recover(r Recovery) {
	if len(j.recoveries) == maxRecoveries {
		j.recoveries = slices.Delete(j.recoveries, 0, 1)
	}
	j.recoveries = append(j.recoveries, r)
}

// Attempt is the current attempt.
func (j *Job) Attempt() int { return j.attempt }

// Started and Ended are when the current attempt ran, and when the job
// ended (zero if not).
func (j *Job) Started() time.Time { return j.started }
func (j *Job) Ended() time.Time   { return j.ended }

// Recoveries lists the job's restarts, oldest first.
func (j *Job) Recoveries() []Recovery { return slices.Clone(j.recoveries) }

// WantsDeploy reports whether the attempt waits for its tasks to be placed
// (Deployed) on free slots.
func (j *Job) WantsDeploy() bool {
	return j.deploy && (j.state == Created || j.state == Restarting)
}

// AcceptsAcks reports whether checkpoint acknowledgements of the current
// attempt count: not once the job ended, nor while it restarts.
func (j *Job) AcceptsAcks() bool {
	return !Terminal(j.state) && !(j.state == Restarting && !j.recovered) && j.state != Suspended
}

// Writing reports whether a manifest write or the finalization is under
// way (a savepoint waits for it).
func (j *Job) Writing() bool { return j.writing > 0 || j.finishing }

// CanCheckpoint reports whether a checkpoint or savepoint may start now.
func (j *Job) CanCheckpoint() bool {
	return j.state == Running && !j.finalizing
}

// Task returns a current task's worker and state (ok=false if the
// attempt has no such task placed).
func (j *Job) Task(t Task) (worker, state string, ok bool) {
	ts := j.tasks[t]
	if ts == nil {
		return "", "", false
	}
	return ts.worker, ts.state, true
}

// Tasks returns the current attempt's placed tasks, sorted.
func (j *Job) Tasks() []Placed {
	var out []Placed
	for t, ts := range j.tasks {
		out = append(out, Placed{Task: t, Worker: ts.worker})
	}
	sortPlaced(out)
	return out
}

func sortPlaced(ps []Placed) {
	sort.Slice(ps, func(a, b int) bool {
		if ps[a].Task.Vertex != ps[b].Task.Vertex {
			return ps[a].Task.Vertex < ps[b].Task.Vertex
		}
		return ps[a].Task.Subtask < ps[b].Task.Subtask
	})
}

// Deployed records that the attempt's tasks were sent to the workers of
// placement (one entry per task of the plan). Their state is CREATED
// until they report.
func (j *Job) Deployed(now time.Time, placement map[Task]string) []Decision {
	j.deploy = false
	j.tasks = map[Task]*taskState{}
	for t, w := range placement {
		j.tasks[t] = &taskState{worker: w, state: Created}
	}
	return nil
}

// DeployFailed: a deploy command could not be sent.
func (j *Job) DeployFailed(now time.Time, msg string) []Decision {
	return j.failOrRestart(now, nil, msg, 0)
}

// TaskState records a current task's report. corrupt names the checkpoint
// whose state the task could not restore (0: none).
func (j *Job) TaskState(now time.Time, t Task, state, msg, worker string, corrupt int64) []Decision {
	ts := j.tasks[t]
	if ts == nil || Terminal(ts.state) {
		return nil // terminal task states are final; late reports are dropped
	}
	ts.state = state
	if j.state == Restarting && !j.recovered || j.state == Suspended {
		return nil // the old attempt winding down
	}
	switch {
	case state == Failed && !Terminal(j.state) && j.state != Canceling:
		return j.failOrRestart(now, &t, fmt.Sprintf("%s on worker %s: %s", t, worker, msg), corrupt)
	case state == Canceled && !Terminal(j.state) && j.state != Canceling:
		// Nobody asked: the worker is shutting down, and the job cannot
		// complete without the task.
		return j.failOrRestart(now, &t, fmt.Sprintf("%s was stopped by worker %s (shutting down)", t, worker), 0)
	case j.state == Canceling:
		if j.allTerminal() {
			return j.end(now, Canceled, "")
		}
		return nil
	case Terminal(j.state):
		return nil
	}
	running, finished := 0, 0
	for _, ts := range j.tasks {
		switch ts.state {
		case Running:
			running++
		case Finished:
			finished++
		}
	}
	// Checkpoints go on while some tasks have finished (the checkpoint
	// coordinator leaves them out); once all have, the final manifest
	// commits what is left.
	var ds []Decision
	if finished == len(j.tasks) {
		if j.cfg.Checkpointing {
			j.finalizing = true // the final manifest commits the output; Tick starts it
			return ds
		}
		return append(ds, j.end(now, Finished, "")...)
	}
	if (j.state == Created || j.state == Restarting) && running+finished == len(j.tasks) {
		if j.state == Restarting {
			if n := len(j.recoveries); n > 0 {
				r := &j.recoveries[n-1]
				r.Running = now
				r.Seconds = now.Sub(r.Detected).Seconds()
			}
		}
		j.state, j.started = Running, now
		if j.cfg.Checkpointing {
			ds = append(ds, Decision{Kind: StartCheckpoints})
		}
	}
	return ds
}

// WorkersLost: the workers whose heartbeat lapsed. A task on one of them
// fails the attempt, unless the attempt is ending anyway.
func (j *Job) WorkersLost(now time.Time, live func(worker string) bool) []Decision {
	if Terminal(j.state) {
		return nil
	}
	var ds []Decision
	for _, p := range j.Tasks() {
		ts := j.tasks[p.Task]
		if Terminal(ts.state) || live(ts.worker) {
			continue
		}
		if j.state == Canceling || j.state == Restarting && !j.recovered || j.state == Suspended {
			ts.state = Canceled
			continue
		}
		ds = j.failOrRestart(now, &p.Task, fmt.Sprintf("worker %s running %s was lost (its connection to Redis closed or its heartbeat lapsed)", ts.worker, p.Task), 0)
		break
	}
	if j.state == Canceling && j.allTerminal() {
		ds = append(ds, j.end(now, Canceled, "")...)
	}
	return ds
}

// Cancel asks the job to stop at once. It reports false if the job has
// ended already.
func (j *Job) Cancel(now time.Time) ([]Decision, bool) {
	if Terminal(j.state) {
		return nil, false
	}
	if j.state == Canceling {
		return nil, true
	}
	if j.state == Suspended {
		j.errMsg = ""
	}
	j.state, j.cancelAt = Canceling, now
	ds := j.cancelTasks()
	if j.allTerminal() {
		ds = append(ds, j.end(now, Canceled, "")...)
	}
	return ds, true
}

// StoppedWithSavepoint cancels the job after savepoint key was taken: it
// ends FINISHED (not CANCELED), and its end message names the savepoint.
func (j *Job) StoppedWithSavepoint(now time.Time, key string) ([]Decision, bool) {
	j.stoppedAt = key
	return j.Cancel(now)
}

// Rescale restarts a running job at once as a new attempt of tasks (the
// plan at its new parallelism), restored from its latest checkpoint with
// key groups redistributed. It is no failure: it is not counted as a
// restart, adds no exception and waits for no backoff, but it is a
// Recovery (with reason), so the time it took is in the history. It
// reports false, changing nothing, unless the job is RUNNING and not
// finishing.
func (j *Job) Rescale(now time.Time, tasks []Task, reason string) ([]Decision, bool) {
	if j.state != Running || j.finalizing {
		return nil, false
	}
	j.cfg.Tasks = slices.Clone(tasks)
	msg := "rescale: " + reason
	ds := []Decision{{Kind: AbortCheckpoints, Message: msg}, {Kind: FailSavepoints, Message: msg}}
	j.state = Restarting
	j.recovered, j.deploy = false, false
	j.restartAt = now // recovery starts at the next Tick, once no manifest is being written
	j.recover(Recovery{Attempt: j.attempt + 1, Reason: msg, Detected: now})
	return append(ds, j.cancelTasks()...), true
}

// Suspend cancels a running job's tasks and leaves it SUSPENDED, holding
// no slot, because its sources were idle (reason says how long). Its
// output is committed up to its latest checkpoint, which Wake restores.
// It reports false, changing nothing, unless the job is RUNNING and not
// finishing.
func (j *Job) Suspend(now time.Time, reason string) ([]Decision, bool) {
	if j.state != Running || j.finalizing {
		return nil, false
	}
	msg := "suspended: " + reason
	ds := []Decision{{Kind: AbortCheckpoints, Message: msg}, {Kind: FailSavepoints, Message: msg}}
	ds = append(ds, j.cancelTasks()...)
	j.state, j.errMsg = Suspended, msg
	return ds, true
}

// Wake restarts a SUSPENDED job at once as a new attempt restored from
// its latest checkpoint (reason: what arrived). Like a rescale it is no
// failure: no restart counted, no backoff, a recovery with its reason.
// It reports false unless the job is SUSPENDED.
func (j *Job) Wake(now time.Time, reason string) ([]Decision, bool) {
	if j.state != Suspended {
		return nil, false
	}
	j.state, j.errMsg = Restarting, ""
	j.recovered, j.deploy = false, false
	j.restartAt = now
	j.recover(Recovery{Attempt: j.attempt + 1, Reason: "woken: " + reason, Detected: now})
	return nil, true
}

// ManifestWriting and ManifestWritten bracket a checkpoint manifest write;
// allCommitted reports that every transaction it lists committed, so an
// older checkpoint can no longer replace it.
func (j *Job) ManifestWriting() { j.writing++ }

func (j *Job) ManifestWritten(now time.Time, id int64, ok, allCommitted bool) []Decision {
	j.writing = max(j.writing-1, 0)
	if ok && allCommitted {
		j.committed = max(j.committed, id)
	}
	return j.Tick(now)
}

// Tick passes time: a pending restart's backoff, a finalization's retry
// and a cancel's timeout.
func (j *Job) Tick(now time.Time) []Decision {
	switch {
	case j.state == Restarting && !j.recovered && !j.recovering && j.writing == 0 && !now.Before(j.restartAt):
		j.recovering = true
		return []Decision{{Kind: Recover, Attempt: j.attempt, Bad: maps.Clone(j.bad)}}
	case j.state == Canceling && now.Sub(j.cancelAt) > j.cfg.CancelTimeout:
		return j.end(now, Canceled, "workers did not confirm the cancel in time")
	case j.finalizing && !j.finishing && j.writing == 0 && !now.Before(j.retryAt):
		j.finishing = true
		return []Decision{{Kind: AbortCheckpoints, Message: "the job finishes with its final manifest"}, {Kind: Finalize}}
	}
	return nil
}

// Recovered: recovery found checkpoint restored (0: start from scratch)
// and cleaned up. final: that checkpoint is the job's final one, so the
// job had finished and its output is committed.
func (j *Job) Recovered(now time.Time, restored int64, final bool) []Decision {
	j.recovering = false
	if j.state != Restarting {
		return nil // canceled meanwhile
	}
	old := make([]Placed, 0, len(j.tasks))
	for _, p := range j.Tasks() {
		old = append(old, Placed{Task: p.Task})
	}
	ds := []Decision{{Kind: CancelStragglers, Attempt: j.attempt, Tasks: old}}
	j.attempt++
	if final {
		j.finalizing = false
		return append(ds, j.end(now, Finished, "")...)
	}
	j.tasks, j.deploy, j.recovered = nil, true, true
	if n := len(j.recoveries); n > 0 {
		j.recoveries[n-1].RestoredFrom = restored
	}
	return ds
}

// RecoveryFailed: recovery could not be done. fatal: restoring would break
// exactly-once (no usable checkpoint, a manifest from a newer weir), so
// the job fails; otherwise it is tried again shortly.
func (j *Job) RecoveryFailed(now time.Time, msg string, fatal bool) []Decision {
	j.recovering = false
	if j.state != Restarting {
		return nil
	}
	if fatal {
		j.except(Exception{Time: now, Attempt: j.attempt, Error: msg})
		return j.fail(now, msg)
	}
	j.restartAt = now.Add(retryDelay)
	return nil
}

// Finalized reports the final manifest's outcome: the job FINISHED, or the
// finalization is tried again shortly.
func (j *Job) Finalized(now time.Time, ok bool) []Decision {
	j.finishing = false
	if !j.finalizing {
		return nil
	}
	if !ok {
		j.retryAt = now.Add(retryDelay)
		return nil
	}
	j.finalizing = false
	return j.end(now, Finished, "")
}

// failOrRestart handles a failure of the current attempt (of task, if one
// failed): a restart after a backoff if the strategy allows one, else
// FAILED. Either way the failure goes into the history; one while a
// restart is pending already belongs to that restart and does not.
func (j *Job) failOrRestart(now time.Time, task *Task, msg string, corrupt int64) []Decision {
	r := j.cfg.Restart
	failed := func(msg string) []Decision {
		j.except(Exception{Time: now, Attempt: j.attempt, Task: task, Error: msg})
		return j.fail(now, msg)
	}
	if r.Attempts == 0 {
		return failed(msg)
	}
	if corrupt > 0 {
		if corrupt <= j.committed {
			// Its output is visible: restoring an older checkpoint would
			// produce it again.
			return failed(fmt.Sprintf("%s; checkpoint %d's output is committed, so no older checkpoint can replace it", msg, corrupt))
		}
		j.bad[corrupt] = true
	}
	if j.state == Restarting && !j.recovered {
		return nil // a restart is pending already
	}
	if j.state == Running && now.Sub(j.started) >= r.ResetAfter {
		j.backoff, j.restarts = r.first(), 0
	}
	j.restarts++
	if !r.Unlimited() && j.restarts > r.Attempts {
		return failed(fmt.Sprintf("%s (gave up after %d restarts)", msg, r.Attempts))
	}
	j.except(Exception{Time: now, Attempt: j.attempt, Task: task, Error: msg})
	j.total++
	ds := []Decision{{Kind: AbortCheckpoints, Message: msg}, {Kind: FailSavepoints, Message: msg}}
	j.state, j.errMsg = Restarting, ""
	j.recovered, j.deploy, j.finalizing = false, false, false
	j.restartAt = now.Add(j.backoff)
	j.backoff = r.next(j.backoff)
	j.recover(Recovery{Attempt: j.attempt + 1, Reason: msg, Detected: now})
	return append(ds, j.cancelTasks()...)
}

// fail fails the job and cancels its other tasks.
func (j *Job) fail(now time.Time, msg string) []Decision {
	return append(j.cancelTasks(), j.end(now, Failed, msg)...)
}

func (j *Job) cancelTasks() []Decision {
	var ps []Placed
	for t, ts := range j.tasks {
		if !Terminal(ts.state) {
			ps = append(ps, Placed{Task: t, Worker: ts.worker})
		}
	}
	if len(ps) == 0 {
		return nil
	}
	sortPlaced(ps)
	return []Decision{{Kind: CancelTasks, Attempt: j.attempt, Tasks: ps}}
}

func (j *Job) end(now time.Time, state, msg string) []Decision {
	if j.stoppedAt != "" && state == Canceled {
		// Stopped with a savepoint: the job ends FINISHED, as Flink's
		// stop-with-savepoint does, even if a worker did not confirm
		// the cancel (the savepoint is whole either way).
		state = Finished
		msg = strings.TrimSuffix("stopped with savepoint "+j.stoppedAt+"; "+msg, "; ")
	}
	j.state, j.errMsg, j.ended = state, msg, now
	j.finalizing, j.deploy = false, false
	return []Decision{
		{Kind: FailSavepoints, Message: "the job ended " + state},
		{Kind: End, State: state, Message: msg},
	}
}

func (j *Job) allTerminal() bool {
	for _, ts := range j.tasks {
		if !Terminal(ts.state) {
			return false
		}
	}
	return true
}

// Finalizing reports whether the job waits for its final manifest.
func (j *Job) Finalizing() bool { return j.finalizing }
