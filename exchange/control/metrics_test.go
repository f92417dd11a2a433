package control_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/exchange/control"
)

type taskCollector struct{ stats control.Stats }

func (c taskCollector) Describe(ch chan<- *prometheus.Desc) { control.DescribeTasks(ch) }
func (c taskCollector) Collect(ch chan<- prometheus.Metric) {
	control.CollectTask(ch, control.TaskID{Job: "j", Vertex: "rides", Subtask: 0}, c.stats)
}

// TestChannelSeriesPerEdge: a task that feeds both inputs of a join has
// two channels to each of its subtasks; they are two series, told apart
// by edge, and the registry gathers them (the same labels twice would
// fail the whole scrape).
func TestChannelSeriesPerEdge(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(taskCollector{control.Stats{Channels: []control.ChannelStats{
		{ToVertex: "pairs", ToSubtask: 0, Edge: "evens", Bytes: 10},
		{ToVertex: "pairs", ToSubtask: 0, Edge: "oddkeys", Bytes: 20},
	}}})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range fams {
		if f.GetName() == "weir_task_channel_bytes_total" {
			n = len(f.GetMetric())
		}
	}
	if n != 2 {
		t.Errorf("%d series of weir_task_channel_bytes_total, want 2", n)
	}
}
