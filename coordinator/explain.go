package coordinator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// CheckpointSubtask is one subtask's acknowledgement of a checkpoint.
type CheckpointSubtask struct {
	Vertex  string `json:"vertex"`
	Subtask int    `json:"subtask"`
	Worker  string `json:"worker"`
	// AckedMs is from the trigger to the acknowledgement reaching the
	// coordinator.
	AckedMs int64 `json:"ackedMs"`
	// The subtask's phases (manifest.SubtaskMetrics): from its first
	// barrier to its last (alignment), the synchronous snapshot and sink
	// pre-commit, the capture of state beside processing after the
	// barrier went on (CaptureMs, which includes SyncMs; StepMs is its
	// longest step), the upload.
	AlignMs       int64 `json:"alignMs"`
	SyncMs        int64 `json:"syncMs"`
	CaptureMs     int64 `json:"captureMs,omitempty"`
	StepMs        int64 `json:"stepMs,omitempty"`
	AsyncMs       int64 `json:"asyncMs"`
	UploadedBytes int64 `json:"uploadedBytes"`
	// LastInput is the input channel whose barrier came last (producer
	// edge and subtask, "win[1]"); empty for a source.
	LastInput string `json:"lastInput,omitempty"`
}

// CheckpointDetail is one checkpoint with every acknowledgement and the
// answer to "why did it take this long" (GET
// /api/v1/jobs/{id}/checkpoints/{n}, weir checkpoints explain).
type CheckpointDetail struct {
	CheckpointInfo
	// Subtasks are the acknowledgements, slowest first.
	Subtasks []CheckpointSubtask `json:"subtasks"`
	// Missing are the subtasks that had not acknowledged (vertex[n]).
	Missing []string `json:"missing,omitempty"`
	// Explanation says which subtask acknowledged last and where its time
	// went.
	Explanation string `json:"explanation"`
}

// maxDetailed is how many of the newest checkpoints keep their
// acknowledgements.
const maxDetailed = 32

// explain builds the detail of checkpoint h from its acknowledgements;
// tasks are the job's subtasks (vertex[n]) for those that did not
// acknowledge.
func explain(h CheckpointInfo, acks []CheckpointSubtask, tasks []string) CheckpointDetail {
	d := CheckpointDetail{CheckpointInfo: h, Subtasks: slices.Clone(acks)}
	slices.SortFunc(d.Subtasks, func(a, b CheckpointSubtask) int {
		return cmp.Or(cmp.Compare(b.AckedMs, a.AckedMs), strings.Compare(a.Vertex, b.Vertex), cmp.Compare(a.Subtask, b.Subtask))
	})
	acked := map[string]bool{}
	for _, a := range acks {
		acked[fmt.Sprintf("%s[%d]", a.Vertex, a.Subtask)] = true
	}
	for _, t := range tasks {
		if !acked[t] {
			d.Missing = append(d.Missing, t)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "checkpoint %d %s", h.ID, h.Status)
	if h.Duration > 0 {
		fmt.Fprintf(&b, " in %s", secs(int64(h.Duration*1000)))
	}
	if h.Reason != "" {
		fmt.Fprintf(&b, ": %s", h.Reason)
	}
	b.WriteString(".")
	if len(d.Missing) > 0 && h.Status != CheckpointCompleted {
		fmt.Fprintf(&b, " Not acknowledged by %s.", strings.Join(d.Missing, ", "))
	}
	if len(d.Subtasks) == 0 {
		b.WriteString(" No subtask acknowledged it.")
		d.Explanation = b.String()
		return d
	}
	last := d.Subtasks[0]
	capture := last.Capture()
	wait := max(last.AckedMs-last.AlignMs-last.SyncMs-capture-last.AsyncMs, 0)
	phases := []phase{
		{"waiting for the barrier (upstream of it, or busy before it)", wait},
		{"alignment (the barrier on every input)", last.AlignMs},
		{"snapshot and sink pre-commit (sync)", last.SyncMs},
		{"state capture beside processing", capture},
		{"upload (async)", last.AsyncMs},
	}
	top := slices.MaxFunc(phases, func(a, b phase) int { return cmp.Compare(a.ms, b.ms) })
	fmt.Fprintf(&b, " Last to acknowledge: %s[%d] on %s, %s after the trigger: waiting for the barrier %s, alignment %s, sync %s, ",
		last.Vertex, last.Subtask, last.Worker, secs(last.AckedMs), secs(wait), secs(last.AlignMs), secs(last.SyncMs))
	if capture > 0 {
		fmt.Fprintf(&b, "capture beside processing %s (longest step %s), ", secs(capture), secs(last.StepMs))
	}
	fmt.Fprintf(&b, "upload %s (%s).", secs(last.AsyncMs), humanSize(last.UploadedBytes))
	if last.LastInput != "" {
		fmt.Fprintf(&b, " Its last barrier came on input %s.", last.LastInput)
	}
	fmt.Fprintf(&b, " The longest part: %s.", top.name)
	d.Explanation = b.String()
	return d
}

// Capture is how long the subtask captured state beside processing after
// its barrier went on.
func (s CheckpointSubtask) Capture() int64 { return max(s.CaptureMs-s.SyncMs, 0) }

// phase is a part of a subtask's time to acknowledge.
type phase struct {
	name string
	ms   int64
}

func secs(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// CheckpointDetail returns checkpoint n of job id with its
// acknowledgements, for one of the newest maxDetailed checkpoints.
func (c *Coordinator) CheckpointDetail(id string, n int64) (CheckpointDetail, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.mu.jobs[id]
	if j == nil {
		return CheckpointDetail{}, fmt.Errorf("checkpoint %d of %s: %w", n, id, ErrNotFound)
	}
	h := j.ck.find(n)
	if h == nil {
		return CheckpointDetail{}, fmt.Errorf("checkpoint %d of %s: %w (this coordinator keeps the newest %d; a restarted one only its own)", n, id, ErrNotFound, maxHistory)
	}
	acks, ok := j.ck.detail[n]
	if !ok && h.Status != CheckpointInProgress {
		return CheckpointDetail{}, fmt.Errorf("checkpoint %d of %s: its acknowledgements are gone (the newest %d keep them): %w", n, id, maxDetailed, ErrNotFound)
	}
	var tasks []string
	for _, p := range j.lc.Tasks() {
		tasks = append(tasks, fmt.Sprintf("%s[%d]", p.Task.Vertex, p.Task.Subtask))
	}
	return explain(*h, acks, tasks), nil
}

// recordAck keeps a subtask's acknowledgement of checkpoint n for
// CheckpointDetail, dropping the oldest checkpoints' beyond maxDetailed.
func (k *ckpt) recordAck(n int64, a CheckpointSubtask) {
	if k.detail == nil {
		k.detail = map[int64][]CheckpointSubtask{}
	}
	k.detail[n] = append(k.detail[n], a)
	if len(k.detail) > maxDetailed {
		oldest := n
		for id := range k.detail {
			oldest = min(oldest, id)
		}
		delete(k.detail, oldest)
	}
}
