package coordinator

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/exchange/control"
)

// ClusterStatus is GET /api/v1/cluster: the slots the jobs want and the
// workers that offer them, for an autoscaler of workers (KEDA's
// metrics-api trigger reads slotsWanted; deploy/kubernetes).
type ClusterStatus struct {
	// SlotsWanted is the slots every job that has not ended needs, placed
	// or waiting to be: as schedule places them.
	SlotsWanted int `json:"slotsWanted"`
	// SlotsAvailable sums the slots of the live workers.
	SlotsAvailable int `json:"slotsAvailable"`
	// Workers counts the live workers.
	Workers int `json:"workers"`
	// WorkersWanted is SlotsWanted over SlotsPerWorker, rounded up.
	WorkersWanted int `json:"workersWanted"`
	// SlotsPerWorker is what WorkersWanted assumes: the query's
	// slotsPerWorker, else the median slots of the live workers, else a
	// worker's default (4).
	SlotsPerWorker int `json:"slotsPerWorker"`
}

// defaultSlotsPerWorker is weir worker's default --slots, assumed while no
// worker is live.
const defaultSlotsPerWorker = 4

// jobSlots is the slots a job needs: its largest parallelism. Slots are
// shared as in Flink (see schedule): slot group i holds subtask i of every
// vertex, so a job of vertices at 2, 2 and 1 runs in 2 slots, not 5.
func jobSlots(st JobStatus) int {
	n := 0
	for _, v := range st.Vertices {
		n = max(n, v.Parallelism)
	}
	return n
}

// clusterStatus computes the cluster status from the jobs (with their
// vertices) and the live workers. slotsPerWorker ≤ 0 means the median
// slots of the workers.
func clusterStatus(jobs []JobStatus, workers []control.WorkerInfo, slotsPerWorker int) ClusterStatus {
	var cs ClusterStatus
	for _, st := range jobs {
		if !lifecycle.Terminal(st.State) && st.State != JobSuspended { // a suspended job holds no slot
			cs.SlotsWanted += jobSlots(st)
		}
	}
	slots := make([]int, 0, len(workers))
	for _, w := range workers {
		cs.SlotsAvailable += w.Slots
		slots = append(slots, w.Slots)
	}
	cs.Workers = len(workers)
	cs.SlotsPerWorker = slotsPerWorker
	if cs.SlotsPerWorker <= 0 {
		cs.SlotsPerWorker = defaultSlotsPerWorker
		if len(slots) > 0 {
			slices.Sort(slots)
			// The lower median: with workers of 2 and 8 slots, plan for 2.
			cs.SlotsPerWorker = max(slots[(len(slots)-1)/2], 1)
		}
	}
	cs.WorkersWanted = (cs.SlotsWanted + cs.SlotsPerWorker - 1) / cs.SlotsPerWorker
	return cs
}

// Cluster returns the cluster status; slotsPerWorker ≤ 0 means the median
// slots of the live workers.
func (c *Coordinator) Cluster(ctx context.Context, slotsPerWorker int) (ClusterStatus, error) {
	workers, err := c.cfg.Plane.Workers(ctx)
	if err != nil {
		return ClusterStatus{}, fmt.Errorf("list workers: %w", err)
	}
	var jobs []JobStatus
	for _, st := range c.List() {
		if lifecycle.Terminal(st.State) {
			continue
		}
		full, err := c.Status(st.ID)
		if err != nil {
			continue // deleted since List
		}
		jobs = append(jobs, full)
	}
	return clusterStatus(jobs, workers, slotsPerWorker), nil
}

// clusterRoutes adds GET /api/v1/cluster to mux and, with reg, the
// weir_cluster_* gauges.
func (c *Coordinator) clusterRoutes(mux *http.ServeMux, reg *prometheus.Registry) {
	mux.HandleFunc("GET /api/v1/cluster", func(w http.ResponseWriter, r *http.Request) {
		n := 0
		if v := r.URL.Query().Get("slotsPerWorker"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 {
				writeJSON(w, http.StatusBadRequest, APIError{Error: fmt.Sprintf("slotsPerWorker %q: want a whole number ≥ 1", v)})
				return
			}
		}
		cs, err := c.Cluster(r.Context(), n)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, cs)
	})
	if reg != nil {
		reg.MustRegister(&clusterCollector{c: c})
	}
}

var (
	descSlotsWanted    = prometheus.NewDesc("weir_cluster_slots_wanted", "Slots the jobs that have not ended need (a job needs its largest parallelism).", nil, nil)
	descSlotsAvailable = prometheus.NewDesc("weir_cluster_slots_available", "Slots of the live workers.", nil, nil)
	descWorkers        = prometheus.NewDesc("weir_cluster_workers", "Live workers.", nil, nil)
)

// clusterCollector exports the cluster status as gauges.
type clusterCollector struct{ c *Coordinator }

func (cc *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSlotsWanted
	ch <- descSlotsAvailable
	ch <- descWorkers
}

func (cc *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := cc.c.Cluster(ctx, 0)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descWorkers, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descSlotsWanted, prometheus.GaugeValue, float64(cs.SlotsWanted))
	ch <- prometheus.MustNewConstMetric(descSlotsAvailable, prometheus.GaugeValue, float64(cs.SlotsAvailable))
	ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(cs.Workers))
}
