package worker

import (
	"time"

	"github.com/weirstream/weir/exchange/control"
)

// usageMeter turns the process's cumulative CPU time into the usage a
// heartbeat carries: CPU over the interval since the last one.
type usageMeter struct {
	lastAt  time.Time
	lastCPU float64
}

// sample returns the usage now of a worker running tasks tasks.
func (m *usageMeter) sample(now time.Time, tasks int) control.WorkerUsage {
	cpu, rss := processUsage()
	u := control.WorkerUsage{At: now, Tasks: tasks, CPUSeconds: cpu, RSSBytes: rss}
	if !m.lastAt.IsZero() {
		if d := now.Sub(m.lastAt).Seconds(); d > 0 {
			u.CPUCores = max(cpu-m.lastCPU, 0) / d
		}
	}
	m.lastAt, m.lastCPU = now, cpu
	return u
}

// taskCount is how many tasks the worker runs now.
func (w *Worker) taskCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.mu.tasks)
}
