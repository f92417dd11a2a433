package coordinator_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
)

// pipeline runs until canceled with vertices at 2, 2 and 1: in 2 shared
// slots.
const pipeline = `job: pipeline
sources:
  - {name: ticks, type: datagen, rate: 200, parallelism: 2, schema: {id: int64}}
operators:
  - {name: even, input: ticks, parallelism: 2, filter: id % 2 == 0}
sinks:
  - {name: out, input: even, parallelism: 1, type: files, path: out/pipeline/, format: jsonl}
`

// wide wants more slots than the test's workers have: it waits CREATED.
const wide = `job: wide
parallelism: 8
sources:
  - {name: ticks, type: datagen, rate: 10, schema: {id: int64}}
sinks:
  - {name: out, input: ticks, type: files, path: out/wide/, format: jsonl}
`

// TestClusterAPI checks GET /api/v1/cluster and the weir_cluster_* gauges,
// what an autoscaler of workers reads: a waiting job counts, an ended
// one does not, and a job wants its largest parallelism (the slots the
// scheduler needs: pipeline runs on the 2-slot worker's worth).
func TestClusterAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("w1", 2, workerOpts{})
	e.startWorker("w2", 3, workerOpts{})
	srv := httptest.NewServer(e.c.Handler(prometheus.NewRegistry()))
	t.Cleanup(srv.Close)
	api := apiClient{t: t, url: srv.URL}
	cluster := func(query string, want coordinator.ClusterStatus) {
		t.Helper()
		poll.UntilNil(t, 10*time.Second, "cluster "+query, func() error {
			var cs coordinator.ClusterStatus
			api.call("GET", "/api/v1/cluster"+query, "", http.StatusOK, &cs)
			if cs != want {
				return fmt.Errorf("cluster = %+v, want %+v", cs, want)
			}
			return nil
		})
	}

	cluster("", coordinator.ClusterStatus{SlotsAvailable: 5, Workers: 2, SlotsPerWorker: 2})
	p := e.submit(pipeline)
	e.waitFor(p, "pipeline flowing", func(st coordinator.JobStatus) bool { return st.Totals.SinkIn > 0 })
	cluster("", coordinator.ClusterStatus{SlotsWanted: 2, SlotsAvailable: 5, Workers: 2, SlotsPerWorker: 2, WorkersWanted: 1})

	w := e.submit(wide)
	cluster("", coordinator.ClusterStatus{SlotsWanted: 10, SlotsAvailable: 5, Workers: 2, SlotsPerWorker: 2, WorkersWanted: 5})
	cluster("?slotsPerWorker=4", coordinator.ClusterStatus{SlotsWanted: 10, SlotsAvailable: 5, Workers: 2, SlotsPerWorker: 4, WorkersWanted: 3})
	if st, _ := e.c.Status(w); st.State != coordinator.JobCreated {
		t.Fatalf("wide is %s, want CREATED (waiting for 8 slots)", st.State)
	}
	_, metrics := api.do("GET", "/metrics", "")
	for _, want := range []string{"weir_cluster_slots_wanted 10\n", "weir_cluster_slots_available 5\n", "weir_cluster_workers 2\n"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grepWeir(metrics))
		}
	}
	for _, bad := range []string{"0", "-1", "four"} {
		var apiErr coordinator.APIError
		api.call("GET", "/api/v1/cluster?slotsPerWorker="+bad, "", http.StatusBadRequest, &apiErr)
		if want := fmt.Sprintf("slotsPerWorker %q: want a whole number ≥ 1", bad); apiErr.Error != want {
			t.Errorf("error = %q, want %q", apiErr.Error, want)
		}
	}

	// Ended jobs want nothing: the workers could all go.
	for _, id := range []string{w, p} {
		if err := e.c.Cancel(e.ctx, id); err != nil {
			t.Fatalf("Cancel %s: %v", id, err)
		}
		e.wait(id, 10*time.Second)
	}
	cluster("", coordinator.ClusterStatus{SlotsAvailable: 5, Workers: 2, SlotsPerWorker: 2})
}
