package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/manifest"
)

// commitAll commits every transaction in m and returns the ids committed.
// A failure is logged; the transaction stays pending and commits with
// the next checkpoint or on recovery.
func (c *Coordinator) commitAll(ctx context.Context, j *job, m *manifest.Manifest) (_ []string, crashed bool) {
	if err := c.checkFence(ctx, j.id); err != nil {
		c.cfg.Logger.Warn("not committing the sink transactions of checkpoint", "job", j.id, "checkpoint", m.Checkpoint, "err", err)
		return nil, false
	}
	var ok []string
	for _, v := range m.Vertices {
		for _, st := range v.Subtasks {
			for _, t := range st.SinkTransactions {
				if err := c.commitTxn(ctx, j, t); err != nil {
					c.cfg.Logger.Warn("commit sink transaction failed", "job", j.id, "txn", t.ID, "err", err)
					continue
				}
				if c.crash("txn-committed") {
					return nil, true
				}
				ok = append(ok, t.ID)
			}
		}
	}
	return ok, false
}

func (c *Coordinator) commitTxn(ctx context.Context, j *job, t manifest.Txn) error {
	s, err := c.sink(j, t.Sink)
	if err != nil {
		return err
	}
	return s.Commit(ctx, t.Handle)
}

// sink returns the job's two-phase sink name, opened for commits.
func (c *Coordinator) sink(j *job, name string) (task.TwoPhaseSink, error) {
	k := j.ck
	k.sinkMu.Lock()
	defer k.sinkMu.Unlock()
	if s := k.sinks[name]; s != nil {
		return s, nil
	}
	// A sink's transactions, or a source's dead letters (plan.TxnSink).
	tp, err := j.plan.TxnSink(j.id, name)
	if err != nil {
		return nil, err
	}
	sc := &task.SinkContext{Context: task.Context{Job: j.id, Node: name, Parallelism: 1, MaxParallelism: j.plan.Job.MaxParallelism,
		Logger: c.cfg.Logger, Now: time.Now, Counters: new(task.Counters)}, Bucket: c.cfg.Bucket, RedisAddr: c.cfg.RedisAddr, Attempt: j.lc.Attempt()}
	if err := tp.Open(sc); err != nil {
		return nil, fmt.Errorf("open sink %s to commit: %w", name, err)
	}
	k.sinks[name] = tp
	return tp, nil
}

func (k *ckpt) closeSinks() error {
	k.sinkMu.Lock()
	defer k.sinkMu.Unlock()
	var errs []error
	for n, s := range k.sinks {
		if err := s.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close sink %s: %w", n, err))
		}
		delete(k.sinks, n)
	}
	return errors.Join(errs...)
}

// finalizeLocked completes a checkpointing job whose every task finished:
// it writes the final manifest with the sinks' last transactions, commits
// them, cleans the staging areas and ends the job FINISHED.
func (c *Coordinator) finalizeLocked(j *job) {
	k := j.ck
	id := k.maxID + 1
	k.maxID = id
	m := c.buildManifest(j, id, c.now(), nil, true, false)
	n := len(j.lc.Tasks())
	k.addHistory(CheckpointInfo{ID: id, Attempt: j.lc.Attempt(), Status: CheckpointInProgress, Final: true, Triggered: c.now(), Tasks: n, Acks: n})
	c.goAsync(time.Minute, func(ctx context.Context) func(context.Context) {
		err := c.putManifest(ctx, m)
		var committed []string
		if err == nil {
			committed, _ = c.commitAll(ctx, j, m)
			if len(committed) < len(txnIDs(m)) {
				err = errors.New("some transactions did not commit")
			}
		}
		if err == nil {
			err = c.cleanStaging(ctx, j, func(string) bool { return false })
		}
		return func(ctx context.Context) {
			if !j.lc.Finalizing() {
				c.exec(ctx, j, j.lc.Finalized(c.now(), false)) // canceled meanwhile
				return
			}
			h := k.find(id)
			if err != nil {
				c.cfg.Logger.Warn("final checkpoint failed; retrying", "job", j.id, "err", err)
				if h != nil {
					h.Status, h.Reason = CheckpointFailed, err.Error()
				}
			} else {
				if h != nil {
					h.Status, h.Duration = CheckpointCompleted, c.now().Sub(h.Triggered).Seconds()
				}
				k.latest = id
			}
			c.exec(ctx, j, j.lc.Finalized(c.now(), err == nil))
		}
	})
}

func txnIDs(m *manifest.Manifest) []string {
	var ids []string
	for _, v := range m.Vertices {
		for _, st := range v.Subtasks {
			for _, t := range st.SinkTransactions {
				ids = append(ids, t.ID)
			}
		}
	}
	return ids
}
