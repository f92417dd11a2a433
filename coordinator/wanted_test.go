package coordinator

import (
	"testing"

	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/plan"
)

func TestClusterStatus(t *testing.T) {
	job := func(state string, par ...int) JobStatus {
		st := JobStatus{State: state}
		for _, p := range par {
			st.Vertices = append(st.Vertices, VertexStatus{VertexInfo: plan.VertexInfo{Parallelism: p}})
		}
		return st
	}
	workers := func(slots ...int) []control.WorkerInfo {
		var ws []control.WorkerInfo
		for _, s := range slots {
			ws = append(ws, control.WorkerInfo{Slots: s})
		}
		return ws
	}
	for _, tc := range []struct {
		name           string
		jobs           []JobStatus
		workers        []control.WorkerInfo
		slotsPerWorker int
		want           ClusterStatus
	}{
		{name: "nothing", want: ClusterStatus{SlotsPerWorker: defaultSlotsPerWorker}},
		{
			// Slots are shared: a job wants its largest parallelism;
			// ended jobs want none, waiting and restarting ones do.
			name: "jobs",
			jobs: []JobStatus{job(JobRunning, 2, 2, 1), job(JobCreated, 8), job(JobRestarting, 3),
				job(JobCanceling, 1), job(JobFinished, 4), job(JobFailed, 4), job(JobCanceled, 4)},
			workers: workers(4, 4, 2),
			want:    ClusterStatus{SlotsWanted: 14, SlotsAvailable: 10, Workers: 3, SlotsPerWorker: 4, WorkersWanted: 4},
		},
		{
			name: "lower median", jobs: []JobStatus{job(JobRunning, 5)}, workers: workers(8, 2),
			want: ClusterStatus{SlotsWanted: 5, SlotsAvailable: 10, Workers: 2, SlotsPerWorker: 2, WorkersWanted: 3},
		},
		{
			name: "asked slots per worker", jobs: []JobStatus{job(JobRunning, 5)}, workers: workers(8, 2), slotsPerWorker: 8,
			want: ClusterStatus{SlotsWanted: 5, SlotsAvailable: 10, Workers: 2, SlotsPerWorker: 8, WorkersWanted: 1},
		},
		{
			name: "no workers yet", jobs: []JobStatus{job(JobCreated, 9)},
			want: ClusterStatus{SlotsWanted: 9, SlotsPerWorker: 4, WorkersWanted: 3},
		},
		{
			name: "idle", jobs: []JobStatus{job(JobFinished, 9)}, workers: workers(4),
			want: ClusterStatus{SlotsAvailable: 4, Workers: 1, SlotsPerWorker: 4},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := clusterStatus(tc.jobs, tc.workers, tc.slotsPerWorker); got != tc.want {
				t.Errorf("clusterStatus = %+v\nwant          %+v", got, tc.want)
			}
		})
	}
}
