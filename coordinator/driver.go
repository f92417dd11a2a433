package coordinator

import (
	"context"
	"time"

	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/exchange/control"
)

// apply records one task event and carries out what the job's state
// machines decide about it.
func (c *Coordinator) apply(ctx context.Context, e control.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.mu.jobs[e.Task.Job]
	if j == nil || e.Task.Attempt != j.lc.Attempt() {
		return
	}
	t := lifecycle.Task{Vertex: e.Task.Vertex, Subtask: e.Task.Subtask}
	if _, state, ok := j.lc.Task(t); !ok || lifecycle.Terminal(state) {
		return // terminal task states are final; late metrics are dropped
	}
	info := j.tasks[t]
	if info == nil {
		info = &taskInfo{}
		j.tasks[t] = info
	}
	info.errMsg = e.Error
	if !e.Stats.IsZero() { // a state change may carry no metrics
		at := e.Time
		if at.IsZero() {
			at = c.now()
		}
		info.observe(e.Stats, at)
	}
	if e.Ack != nil && j.lc.AcceptsAcks() {
		c.onAckLocked(ctx, j, e)
	}
	c.exec(ctx, j, j.lc.TaskState(c.now(), t, e.State, e.Error, e.Worker, e.CorruptCheckpoint))
}

// tick passes time to every job's state machines.
func (c *Coordinator) tick(ctx context.Context, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, j := range c.mu.jobs {
		if k := j.ck; k.sm != nil && j.lc.CanCheckpoint() {
			c.triggerSavepointLocked(ctx, j, now)
			c.execLocked(ctx, j, k.sm.Tick(now))
		}
		c.exec(ctx, j, j.lc.Tick(now))
		c.autoscaleLocked(ctx, j, now)
		c.wakeLocked(j, now)
	}
}

// checkWorkers tells every job which workers' heartbeats lapsed.
func (c *Coordinator) checkWorkers(ctx context.Context) {
	workers, err := c.cfg.Plane.Workers(ctx)
	if err != nil {
		return
	}
	live := map[string]bool{}
	for _, w := range workers {
		live[w.ID] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, j := range c.mu.jobs {
		c.exec(ctx, j, j.lc.WorkersLost(c.now(), func(w string) bool { return live[w] }))
	}
}

// exec carries out lifecycle decisions, in order.
func (c *Coordinator) exec(ctx context.Context, j *job, ds []lifecycle.Decision) {
	if len(ds) == 0 {
		return
	}
	k := j.ck
	for _, d := range ds {
		switch d.Kind {
		case lifecycle.CancelTasks:
			for _, p := range d.Tasks {
				id := control.TaskID{Job: j.id, Attempt: d.Attempt, Vertex: p.Task.Vertex, Subtask: p.Task.Subtask}
				if err := c.send(ctx, p.Worker, control.Command{Kind: control.CmdCancel, Task: id}); err != nil {
					c.cfg.Logger.Warn("send cancel failed", "task", id, "worker", p.Worker, "err", err)
				}
			}
		case lifecycle.CancelStragglers:
			c.cancelStragglers(ctx, j, d)
		case lifecycle.StartCheckpoints:
			c.startCheckpointsLocked(j)
		case lifecycle.AbortCheckpoints:
			if k.sm != nil {
				if _, ok := k.sm.InFlight(); ok {
					c.execLocked(ctx, j, k.sm.Abort(c.now(), d.Message))
				}
				k.sm = nil
			}
			clear(k.acks)
			clear(k.finals)
		case lifecycle.FailSavepoints:
			k.failWaitsLocked(d.Message)
		case lifecycle.Recover:
			c.recoverLocked(j, d)
		case lifecycle.Finalize:
			c.finalizeLocked(j)
		case lifecycle.End:
			c.endLocked(ctx, j, d.State, d.Message)
		}
	}
	c.notifyLocked()
}

// endLocked carries out the end of a job: its checkpoints stop, its
// commit sinks close, its status is stored and its channels deleted.
func (c *Coordinator) endLocked(ctx context.Context, j *job, state, msg string) {
	j.ck.sm = nil
	if err := j.ck.closeSinks(); err != nil {
		c.cfg.Logger.Warn("close sinks failed", "job", j.id, "err", err)
	}
	if err := c.storeStatus(ctx, j.id, c.statusLocked(j)); err != nil {
		c.cfg.Logger.Warn("store job status failed", "job", j.id, "err", err)
	}
	if c.cfg.Transport != nil {
		// Every attempt's, not only the last one's: a task of an earlier
		// attempt that opened its reader after recovery had deleted that
		// attempt's channels made them again, and nothing else would
		// delete them (TestChaosWorkerKills, on a slow machine).
		if err := c.cfg.Transport.DeleteAttempt(ctx, j.id, -1); err != nil {
			c.cfg.Logger.Warn("delete job channels failed", "job", j.id, "err", err)
		}
	}
	if state == JobFailed {
		c.cfg.Logger.Error("job failed", "job", j.id, "err", msg)
	}
	c.cfg.Logger.Info("job ended", "job", j.id, "state", state)
}
