package coordinator

import (
	"context"
	"fmt"
	"sort"

	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/exchange/control"
)

// schedule places the subtasks of every job whose attempt waits to be
// deployed, if the live workers have enough free slots.
//
// Slots are shared as in Flink: slot group i holds subtask i of every
// vertex, so a job needs as many slots as its largest parallelism, and a
// pipeline's subtasks sit together on one worker. Groups are spread: the
// worker with the most free slots takes the next group.
func (c *Coordinator) schedule(ctx context.Context) {
	workers, err := c.cfg.Plane.Workers(ctx)
	if err != nil {
		c.cfg.Logger.Warn("list workers failed", "err", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	used := map[string]int{} // worker -> slot groups in use
	var waiting []*job
	for _, j := range c.mu.jobs {
		groups := map[string]map[int]bool{}
		for _, p := range j.lc.Tasks() {
			if _, state, _ := j.lc.Task(p.Task); lifecycle.Terminal(state) {
				continue
			}
			if groups[p.Worker] == nil {
				groups[p.Worker] = map[int]bool{}
			}
			groups[p.Worker][p.Task.Subtask] = true
		}
		for w, g := range groups {
			used[w] += len(g)
		}
		if j.lc.WantsDeploy() {
			waiting = append(waiting, j)
		}
	}
	sort.Slice(waiting, func(a, b int) bool { return waiting[a].created.Before(waiting[b].created) })
	for _, j := range waiting {
		need := 0
		for _, v := range j.plan.Vertices {
			need = max(need, v.Parallelism)
		}
		free := 0
		for _, w := range workers {
			free += max(w.Slots-used[w.ID], 0)
		}
		if free < need {
			c.cfg.Logger.Debug("job waits for slots", "job", j.id, "need", need, "free", free)
			continue
		}
		slotWorker := make([]string, need) // slot group -> worker
		for g := range slotWorker {
			best := -1
			for i, w := range workers {
				if best < 0 || w.Slots-used[w.ID] > workers[best].Slots-used[workers[best].ID] {
					best = i
				}
			}
			slotWorker[g] = workers[best].ID
			used[workers[best].ID]++
		}
		placement := map[lifecycle.Task]string{}
		for _, v := range j.plan.Vertices {
			for s := 0; s < v.Parallelism; s++ {
				placement[lifecycle.Task{Vertex: v.Name, Subtask: s}] = slotWorker[s]
			}
		}
		c.exec(ctx, j, j.lc.Deployed(c.now(), placement))
		j.tasks = map[lifecycle.Task]*taskInfo{} // the new attempt's reports fill it
		c.deployLocked(ctx, j)
		c.cfg.Logger.Info("job scheduled", "job", j.id, "attempt", j.lc.Attempt(), "tasks", len(placement), "slots", need, "workers", len(workers))
	}
}

// deployLocked sends the attempt's deploy commands; the first that cannot
// be sent fails the attempt.
func (c *Coordinator) deployLocked(ctx context.Context, j *job) {
	for _, v := range j.plan.Vertices {
		for s := 0; s < v.Parallelism; s++ {
			t := lifecycle.Task{Vertex: v.Name, Subtask: s}
			wid, _, _ := j.lc.Task(t)
			cmd := control.Command{Kind: control.CmdDeploy, Task: j.taskID(t), Spec: j.specJSON, Restore: j.ck.restoreKey}
			if err := c.send(ctx, wid, cmd); err != nil {
				c.exec(ctx, j, j.lc.DeployFailed(c.now(), fmt.Sprintf("deploy %s[%d] to worker %s: %v", t.Vertex, t.Subtask, wid, err)))
				return
			}
		}
	}
}
