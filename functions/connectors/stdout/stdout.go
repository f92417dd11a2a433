package stdout

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

// SinkType is the stdout sink, for connector.RegisterSink. It has no
// fields of its own.
func SinkType() connector.SinkType {
	return connector.SinkType{
		Name:  spec.SinkStdout,
		Check: func(*spec.Sink) spec.Problems { return nil },
		New:   func(_ *spec.Sink, in stream.Stream) (task.Sink, error) { return New(in), nil },
	}
}

// stdoutMu serialises the writes of every stdout sink in the process, so
// the lines of concurrent subtasks never interleave.
var stdoutMu sync.Mutex

// stdoutSink writes each row as a JSON line to a writer, os.Stdout by
// default. A batch is written with one Write call.
type stdoutSink struct {
	w        io.Writer
	counters *task.Counters
	buf      []byte
}

var _ task.Sink = (*stdoutSink)(nil)

// Option configures New.
type Option func(*stdoutSink)

// To makes the sink write to w instead of os.Stdout. Writes to w are
// serialised with those of every other stdout sink.
func To(w io.Writer) Option {
	return func(s *stdoutSink) { s.w = w }
}

// New returns a sink that prints its input as JSON lines. A job spec's
// stdout sink is one with the defaults.
func New(_ stream.Stream, opts ...Option) task.Sink {
	s := &stdoutSink{w: os.Stdout}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *stdoutSink) Open(ctx *task.SinkContext) error {
	s.counters = ctx.Counters
	return nil
}

func (s *stdoutSink) Write(_ context.Context, b arrow.RecordBatch) error {
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	s.buf = s.buf[:0]
	for row := range n {
		s.buf = arrowfmt.AppendJSONRow(s.buf, b, row)
		s.buf = append(s.buf, '\n')
	}
	stdoutMu.Lock()
	_, err := s.w.Write(s.buf)
	stdoutMu.Unlock()
	if err != nil {
		return fmt.Errorf("write stdout sink: %w", err)
	}
	if s.counters != nil {
		s.counters.SinkRows.Add(int64(n))
	}
	return nil
}

func (s *stdoutSink) Finish(context.Context) error { return nil }

func (s *stdoutSink) Close() error {
	s.buf = nil
	return nil
}
