package control

import (
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// The Prometheus families of a running task, from its Stats, exported by
// the worker that runs it (weir worker --metrics-addr). Names follow
// Prometheus conventions (base units, counters end in _total; rates are
// left to rate()), with Flink's meaning where Flink has the metric:
// rate(weir_task_busy_seconds_total[1m]) * 1000 is busyTimeMsPerSecond.
// Labels are job, vertex and subtask only (no per-key labels), and a task
// that ended has no series.
var (
	taskLabels = []string{"job", "vertex", "subtask"}

	descTaskIn        = prometheus.NewDesc("weir_task_records_in_total", "Records a task read (numRecordsIn).", taskLabels, nil)
	descTaskOut       = prometheus.NewDesc("weir_task_records_out_total", "Records a task emitted (numRecordsOut).", taskLabels, nil)
	descTaskBytesOut  = prometheus.NewDesc("weir_task_bytes_out_total", "Bytes a task sent through the exchange.", taskLabels, nil)
	descTaskBusy      = prometheus.NewDesc("weir_task_busy_seconds_total", "Time a task spent processing (busyTimeMsPerSecond is its rate).", taskLabels, nil)
	descTaskIdle      = prometheus.NewDesc("weir_task_idle_seconds_total", "Time a task waited for input (idleTimeMsPerSecond is its rate).", taskLabels, nil)
	descTaskBP        = prometheus.NewDesc("weir_task_backpressured_seconds_total", "Time a task waited for credit downstream (backPressuredTimeMsPerSecond is its rate).", taskLabels, nil)
	descTaskWatermark = prometheus.NewDesc("weir_task_input_watermark_timestamp_seconds", "A task's current event-time watermark (absent before the first).", taskLabels, nil)
	descTaskLate      = prometheus.NewDesc("weir_task_late_records_total", "Records behind the watermark: dropped, or sent to the late side output.", append(taskLabels, "outcome"), nil)
	descTaskDead      = prometheus.NewDesc("weir_task_dead_letters_total", "Malformed records a source task sent to the dead-letter output.", taskLabels, nil)
	descTaskSinkRows  = prometheus.NewDesc("weir_task_sink_rows_total", "Rows a sink task wrote.", taskLabels, nil)
	descTaskWindows   = prometheus.NewDesc("weir_task_windows_fired_total", "Windows a task fired.", taskLabels, nil)
	descTaskCkpts     = prometheus.NewDesc("weir_task_checkpoints_total", "Checkpoints a task acknowledged.", taskLabels, nil)
	descTaskState     = prometheus.NewDesc("weir_task_state_bytes", "Bytes of a task's state files in its latest acknowledged checkpoint, or before its first, in the checkpoint it restored and goes on from.", taskLabels, nil)
	descTaskCopied    = prometheus.NewDesc("weir_task_state_copied_rows_total", "Rows of keyed state a task's captures copied on write: keys changed after a barrier before the capture reached them.", taskLabels, nil)
	descTaskCopiedEnc = prometheus.NewDesc("weir_task_state_copied_encoded_rows_total", "Rows copied on write that waited for their state file encoded and compressed.", taskLabels, nil)
	descBacklogRecs   = prometheus.NewDesc("weir_task_source_backlog_records", "Records a source task has not read yet: events behind its rate, or a redis stream's entries after its position.", taskLabels, nil)
	descBacklogBytes  = prometheus.NewDesc("weir_task_source_backlog_bytes", "Bytes a files source task has not read yet.", taskLabels, nil)

	// One series per output channel: the consumer vertex and subtask
	// are bounded by the parallelism; edge (the producing operator) tells
	// apart two inputs of one join fed by the same task.
	channelLabels        = append(slices.Clone(taskLabels), "to_vertex", "to_subtask", "edge")
	descChanEntries      = prometheus.NewDesc("weir_task_channel_entries_total", "Entries a task wrote to an output channel, of every kind.", channelLabels, nil)
	descChanBytes        = prometheus.NewDesc("weir_task_channel_bytes_total", "Payload bytes a task wrote to an output channel.", channelLabels, nil)
	descChanCreditWaits  = prometheus.NewDesc("weir_task_channel_credit_waits_total", "Data entries that found no credit on an output channel.", channelLabels, nil)
	descChanCreditWaited = prometheus.NewDesc("weir_task_channel_credit_wait_seconds_total", "Time a task waited for credit on an output channel.", channelLabels, nil)
)

// DescribeTasks sends the task families' descriptions.
func DescribeTasks(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTaskIn, descTaskOut, descTaskBytesOut, descTaskBusy, descTaskIdle, descTaskBP,
		descTaskWatermark, descTaskLate, descTaskDead, descTaskSinkRows, descTaskWindows, descTaskCkpts, descTaskState, descTaskCopied, descTaskCopiedEnc,
		descBacklogRecs, descBacklogBytes, descChanEntries, descChanBytes, descChanCreditWaits, descChanCreditWaited} {
		ch <- d
	}
}

// CollectTask sends the metrics of task id from its counters s.
func CollectTask(ch chan<- prometheus.Metric, id TaskID, s Stats) {
	l := []string{id.Job, id.Vertex, strconv.Itoa(id.Subtask)}
	counter := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append(l, extra...)...)
	}
	counter(descTaskIn, float64(s.RecordsIn))
	counter(descTaskOut, float64(s.RecordsOut))
	counter(descTaskBytesOut, float64(s.BytesOut))
	counter(descTaskBusy, s.BusySeconds)
	counter(descTaskIdle, s.IdleSeconds)
	counter(descTaskBP, s.BackpressureSec)
	counter(descTaskLate, float64(s.LateDropped), "dropped")
	counter(descTaskLate, float64(s.LateSide), "side")
	counter(descTaskDead, float64(s.DeadLetters))
	counter(descTaskSinkRows, float64(s.SinkRows))
	counter(descTaskWindows, float64(s.WindowsFired))
	counter(descTaskCkpts, float64(s.Checkpoints))
	counter(descTaskCopied, float64(s.CopiedRows))
	counter(descTaskCopiedEnc, float64(s.CopiedEncoded))
	ch <- prometheus.MustNewConstMetric(descTaskState, prometheus.GaugeValue, float64(s.StateBytes), l...)
	switch s.BacklogUnit {
	case "records":
		ch <- prometheus.MustNewConstMetric(descBacklogRecs, prometheus.GaugeValue, float64(s.Backlog), l...)
	case "bytes":
		ch <- prometheus.MustNewConstMetric(descBacklogBytes, prometheus.GaugeValue, float64(s.Backlog), l...)
	}
	for _, c := range s.Channels {
		to := []string{c.ToVertex, strconv.Itoa(c.ToSubtask), c.Edge}
		counter(descChanEntries, float64(c.Entries), to...)
		counter(descChanBytes, float64(c.Bytes), to...)
		counter(descChanCreditWaits, float64(c.CreditWaits), to...)
		counter(descChanCreditWaited, c.CreditWaitSeconds, to...)
	}
	if s.Watermark > math.MinInt64/2 { // no watermark yet is the minimum, or next to it
		ch <- prometheus.MustNewConstMetric(descTaskWatermark, prometheus.GaugeValue, float64(s.Watermark)/1000, l...)
	}
}
