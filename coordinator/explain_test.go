package coordinator

import (
	"strings"
	"testing"
	"time"
)

func TestExplainNamesTheSlowSubtaskAndPhase(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := CheckpointInfo{ID: 7, Status: CheckpointCompleted, Triggered: t0, Duration: 1.9}
	acks := []CheckpointSubtask{
		{Vertex: "src", Subtask: 0, Worker: "w1", AckedMs: 20, SyncMs: 5, AsyncMs: 10},
		{Vertex: "win", Subtask: 1, Worker: "w2", AckedMs: 1850, AlignMs: 10, SyncMs: 1600, AsyncMs: 200, UploadedBytes: 3 << 20, LastInput: "src[1]"},
		{Vertex: "win", Subtask: 0, Worker: "w1", AckedMs: 90, AlignMs: 5, SyncMs: 40, AsyncMs: 30},
	}
	d := explain(h, acks, []string{"src[0]", "win[0]", "win[1]"})
	if d.Subtasks[0].Vertex != "win" || d.Subtasks[0].Subtask != 1 || d.Subtasks[2].Vertex != "src" {
		t.Errorf("subtasks not slowest first: %+v", d.Subtasks)
	}
	for _, want := range []string{"checkpoint 7 COMPLETED in 1.9s.", "Last to acknowledge: win[1] on w2, 1.85s after the trigger",

		"waiting for the barrier 40ms, alignment 10ms, sync 1.6s, upload 200ms (3.0 MiB). Its last barrier came on input src[1].", "The longest part: snapshot and sink pre-commit (sync)."} {
		if !strings.Contains(d.Explanation, want) {
			t.Errorf("explanation lacks %q:\n%s", want, d.Explanation)
		}
	}
	if len(d.Missing) != 0 {
		t.Errorf("missing %v of a completed checkpoint", d.Missing)
	}

	// A checkpoint that timed out: who never acknowledged, and the
	// slowest of those that did, whose time went before its barrier came.
	h = CheckpointInfo{ID: 8, Status: CheckpointFailed, Triggered: t0, Reason: "timed out after 10s"}
	acks = []CheckpointSubtask{{Vertex: "src", Subtask: 0, Worker: "w1", AckedMs: 30}, {Vertex: "win", Subtask: 0, Worker: "w1", AckedMs: 9000, AlignMs: 20, SyncMs: 10, AsyncMs: 20}}
	d = explain(h, acks, []string{"src[0]", "win[0]", "win[1]"})
	for _, want := range []string{"checkpoint 8 FAILED: timed out after 10s.", "Not acknowledged by win[1].", "Last to acknowledge: win[0]",
		"The longest part: waiting for the barrier"} {
		if !strings.Contains(d.Explanation, want) {
			t.Errorf("explanation lacks %q:\n%s", want, d.Explanation)
		}
	}
	// State captured in steps beside processing: its own phase, not
	// counted as waiting.
	acks = []CheckpointSubtask{{Vertex: "win", Subtask: 0, Worker: "w1", AckedMs: 2500, AlignMs: 10, SyncMs: 3, CaptureMs: 2203, StepMs: 6, AsyncMs: 250}}
	d = explain(CheckpointInfo{ID: 10, Status: CheckpointCompleted, Duration: 2.5}, acks, []string{"win[0]"})
	for _, want := range []string{"waiting for the barrier 37ms, alignment 10ms, sync 3ms, capture beside processing 2.2s (longest step 6ms), upload 250ms",
		"The longest part: state capture beside processing."} {
		if !strings.Contains(d.Explanation, want) {
			t.Errorf("explanation lacks %q:\n%s", want, d.Explanation)
		}
	}
	if d := explain(CheckpointInfo{ID: 9, Status: CheckpointInProgress}, nil, []string{"a[0]"}); !strings.Contains(d.Explanation, "No subtask acknowledged it.") || len(d.Missing) != 1 {
		t.Errorf("no acks: %+v", d)
	}
}
