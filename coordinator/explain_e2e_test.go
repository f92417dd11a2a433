package coordinator_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

// slowPreCommit is how long subtask 1 of a coord-test-slow-precommit sink
// takes to pre-commit: the synchronous part of its snapshot.
const slowPreCommit = 900 * time.Millisecond

// slowSink is a transactional sink that drops its rows and whose subtask 1
// is slow to pre-commit, so that every checkpoint waits for it.
type slowSink struct{ subtask int }

func (s *slowSink) Open(ctx *task.SinkContext) error               { s.subtask = ctx.Subtask; return nil }
func (s *slowSink) Write(context.Context, arrow.RecordBatch) error { return nil }
func (s *slowSink) Finish(context.Context) error                   { return nil }
func (s *slowSink) Close() error                                   { return nil }
func (s *slowSink) EnableTransactions()                            {}
func (s *slowSink) Commit(context.Context, json.RawMessage) error  { return nil }
func (s *slowSink) Abort(context.Context, json.RawMessage) error   { return nil }
func (s *slowSink) PreCommit(ctx context.Context, _ string) (json.RawMessage, error) {
	if s.subtask == 1 {
		select {
		case <-time.After(slowPreCommit):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return json.RawMessage(`{}`), nil
}

func init() {
	connector.RegisterSink(connector.SinkType{
		Name:  "coord-test-slow-precommit",
		Check: func(*spec.Sink) spec.Problems { return nil },
		New:   func(*spec.Sink, stream.Stream) (task.Sink, error) { return &slowSink{}, nil },
	})
}

// TestExplainNamesADeliberatelySlowSubtask runs a job whose sink subtask 1
// takes 900ms to snapshot: the explanation of a completed checkpoint names
// that subtask, the synchronous phase, and the input its last barrier came
// on.
func TestExplainNamesADeliberatelySlowSubtask(t *testing.T) {
	e := newEnv(t)
	e.startWorker("w1", 4, workerOpts{})
	id := e.submit(`
job: slow-snapshot
parallelism: 2
checkpoint: {interval: 200ms, timeout: 10s}
sources:
  - name: gen
    type: datagen
    rate: 2000
    schema: {k: int64}
    datagen: {fields: {k: {min: 0, max: 99}}}
operators:
  - {name: byk, input: gen, keyBy: [k], select: {k: k}}
sinks:
  - {name: out, input: byk, type: coord-test-slow-precommit}
`)
	st := e.waitForWithin(id, "two completed checkpoints", 30*time.Second, func(st coordinator.JobStatus) bool {
		return st.Checkpoints != nil && st.Checkpoints.Completed >= 2
	})
	list, err := e.c.Checkpoints(id)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range list {
		if c.Status == coordinator.CheckpointCompleted {
			n = c.ID
			break
		}
	}
	d, err := e.c.CheckpointDetail(id, n)
	if err != nil {
		t.Fatalf("CheckpointDetail(%d): %v (status %+v)", n, err, st.Checkpoints)
	}
	slow := d.Subtasks[0]
	if !strings.HasPrefix(slow.Vertex, "byk") || slow.Subtask != 1 {
		t.Fatalf("slowest subtask is %s[%d], want the sink's vertex, subtask 1; explanation: %s", slow.Vertex, slow.Subtask, d.Explanation)
	}
	if slow.SyncMs < slowPreCommit.Milliseconds() {
		t.Errorf("sync %dms, want at least the %s pre-commit", slow.SyncMs, slowPreCommit)
	}
	if slow.LastInput != "gen[0]" && slow.LastInput != "gen[1]" {
		t.Errorf("last input %q, want gen[0] or gen[1]", slow.LastInput)
	}
	for _, want := range []string{"Last to acknowledge: " + slow.Vertex + "[1] on w1", "Its last barrier came on input " + slow.LastInput + ".",
		"The longest part: snapshot and sink pre-commit (sync)."} {
		if !strings.Contains(d.Explanation, want) {
			t.Errorf("explanation lacks %q:\n%s", want, d.Explanation)
		}
	}
	t.Logf("checkpoint %d: %s", n, d.Explanation)
	if err := e.c.Cancel(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	e.wait(id, 20*time.Second)
}
