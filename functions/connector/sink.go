package connector

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

// NewSink returns the sink snk describes, consuming in, built by its
// registered type. A sink with a Rate is wrapped to write at most that
// many rows per second per subtask (task.AsTwoPhase sees through the
// wrapper).
func NewSink(snk *spec.Sink, in stream.Stream) (task.Sink, error) {
	p := fmt.Sprintf("sinks[%s]", snk.Name)
	if snk.Rate < 0 {
		return nil, spec.Errorf(p+".rate", "%g is negative", snk.Rate)
	}
	t, ok := LookupSink(snk.Type)
	if !ok {
		return nil, unknownSink(snk)
	}
	s, err := t.New(snk, in)
	if err != nil {
		return nil, err
	}
	if snk.Rate > 0 {
		s = &rateLimitedSink{Sink: s, rate: snk.Rate}
	}
	return s, nil
}

// rateLimitedSink delays each Write so that the sink writes at most rate
// rows per second. This is deliberate throttling, for backpressure tests.
type rateLimitedSink struct {
	task.Sink
	rate float64
	now  func() time.Time
	th   throttle
}

func (s *rateLimitedSink) Open(ctx *task.SinkContext) error {
	s.now = ctx.Now
	if s.now == nil {
		s.now = time.Now
	}
	s.th = throttle{rate: s.rate}
	return s.Sink.Open(ctx)
}

func (s *rateLimitedSink) Write(ctx context.Context, b arrow.RecordBatch) error {
	if d := s.th.delay(s.now(), b.NumRows()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("throttle sink: %w", ctx.Err())
		}
	}
	return s.Sink.Write(ctx, b)
}

// Unwrap returns the throttled sink (see task.AsTwoPhase).
func (s *rateLimitedSink) Unwrap() task.Sink { return s.Sink }

// throttle schedules writes at a fixed rate: a batch of n rows may be
// written once the rows before it and the batch itself have been paid for
// at rate rows per second. Time the sink spent idle is not saved up, so
// there is no burst after a pause.
type throttle struct {
	rate float64   // rows per second
	due  time.Time // when everything reserved so far is paid for
}

// delay reserves n rows at now and returns how long to wait before writing
// them.
func (t *throttle) delay(now time.Time, n int64) time.Duration {
	if t.due.Before(now) {
		t.due = now
	}
	t.due = t.due.Add(time.Duration(float64(n) * float64(time.Second) / t.rate))
	return t.due.Sub(now)
}
