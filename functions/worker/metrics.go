package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/exchange/control"
)

// Collector exports the worker's slots and, for every task it runs, the
// task families of control.CollectTask. A task that ended has no series:
// the collector reads the running tasks at each scrape.
func (w *Worker) Collector() prometheus.Collector { return workerCollector{w} }

type workerCollector struct{ w *Worker }

var (
	descSlots = prometheus.NewDesc("weir_worker_slots", "Subtasks the worker runs at once.", []string{"worker"}, nil)
	descTasks = prometheus.NewDesc("weir_worker_tasks", "Subtasks the worker runs now.", []string{"worker"}, nil)
	// Packing: files ÷ objects is how many state files a checkpoint's
	// object carries (statestore/statepack).
	descStateObjects = prometheus.NewDesc("weir_worker_state_objects_total", "State objects the worker's tasks wrote: one per checkpoint and job attempt, holding their state files.", []string{"worker"}, nil)
	descStateFiles   = prometheus.NewDesc("weir_worker_state_files_packed_total", "State files written packed into the worker's state objects.", []string{"worker"}, nil)
)

func (c workerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSlots
	ch <- descTasks
	ch <- descStateObjects
	ch <- descStateFiles
	control.DescribeTasks(ch)
}

func (c workerCollector) Collect(ch chan<- prometheus.Metric) {
	w := c.w
	// One series per job, vertex and subtask: an old attempt's task still
	// stopping beside the new one is left out.
	type key struct {
		job, vertex string
		subtask     int
	}
	newest := map[key]control.TaskID{}
	snaps := map[control.TaskID]control.Stats{}
	w.mu.Lock()
	running := len(w.mu.tasks)
	for id, r := range w.mu.tasks {
		k := key{id.Job, id.Vertex, id.Subtask}
		if old, ok := newest[k]; ok {
			if old.Attempt > id.Attempt {
				continue
			}
			delete(snaps, old)
		}
		newest[k] = id
		snaps[id] = r.task.Stats().Snapshot()
	}
	w.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(w.cfg.Slots), w.cfg.ID)
	ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(running), w.cfg.ID)
	ch <- prometheus.MustNewConstMetric(descStateObjects, prometheus.CounterValue, float64(w.stateObjects.Load()), w.cfg.ID)
	ch <- prometheus.MustNewConstMetric(descStateFiles, prometheus.CounterValue, float64(w.stateFiles.Load()), w.cfg.ID)
	for id, s := range snaps {
		control.CollectTask(ch, id, s)
	}
}
