package builtin

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
)

// When a files sink writes out what it buffered.
const (
	// FileSinkJSONLBytes is the size at which a JSON-lines object is
	// written.
	FileSinkJSONLBytes = 64 << 20
	// FileSinkParquetRows is the row count at which a Parquet object is
	// written.
	FileSinkParquetRows = 1 << 20
	// FileSinkRollAfter bounds how long a row stays buffered when rows
	// keep coming: a Write after that writes the buffer out. Finish writes
	// out the rest.
	FileSinkRollAfter = 30 * time.Second
)

// fileSink writes its input as objects under a path of the job's store:
//
//	<path>/part-<subtask>-a<attempt>-<seq>.<jsonl|parquet>
//
// with seq counting from 000000 per subtask and attempt, so subtasks and
// attempts never overwrite each other. It buffers rows and writes an object
// when the buffer is full (FileSinkJSONLBytes, FileSinkParquetRows), when a
// Write comes FileSinkRollAfter after the oldest buffered row, and at
// Finish. An object is written whole: a reader never sees part of one.
type fileSink struct {
	node   string
	path   string
	format string
	in     Stream

	bucket   blob.Bucket
	counters *task.Counters
	now      func() time.Time
	prefix   string // <path>/part-<subtask>-a<attempt>-
	seq      int
	maxBytes int   // FileSinkJSONLBytes; smaller in tests
	maxRows  int64 // FileSinkParquetRows; smaller in tests

	jsonl   []byte              // buffered JSON lines
	batches []arrow.RecordBatch // buffered batches (parquet), retained
	rows    int64               // rows buffered
	oldest  time.Time           // when the oldest buffered row came
}

var _ task.Sink = (*fileSink)(nil)

func newFileSink(snk *spec.Sink, in Stream) *fileSink {
	return &fileSink{node: snk.Name, path: strings.TrimRight(snk.Path, "/"), format: snk.Format, in: in,
		maxBytes: FileSinkJSONLBytes, maxRows: FileSinkParquetRows}
}

func (s *fileSink) Open(ctx *task.SinkContext) error {
	if ctx.Bucket == nil {
		return fmt.Errorf("open files sink %s: the job has no store to write %q to", s.node, s.path)
	}
	s.bucket, s.counters, s.now = ctx.Bucket, ctx.Counters, ctx.Now
	if s.now == nil {
		s.now = time.Now
	}
	s.prefix = fmt.Sprintf("%s/part-%d-a%d-", s.path, ctx.Subtask, ctx.Attempt)
	return nil
}

// Write buffers b and writes an object if the buffer is full or old.
func (s *fileSink) Write(ctx context.Context, b arrow.RecordBatch) error {
	n := b.NumRows()
	if n == 0 {
		return nil
	}
	now := s.now()
	if s.rows == 0 {
		s.oldest = now
	}
	s.rows += n
	var full bool
	if s.format == spec.FormatParq {
		b.Retain()
		s.batches = append(s.batches, b)
		full = s.rows >= s.maxRows
	} else {
		for row := range int(n) {
			s.jsonl = arrowfmt.AppendJSONRow(s.jsonl, b, row)
			s.jsonl = append(s.jsonl, '\n')
		}
		full = len(s.jsonl) >= s.maxBytes
	}
	if full || now.Sub(s.oldest) >= FileSinkRollAfter {
		return s.flush(ctx)
	}
	return nil
}

// Finish writes out what is buffered.
func (s *fileSink) Finish(ctx context.Context) error { return s.flush(ctx) }

func (s *fileSink) flush(ctx context.Context) error {
	if s.rows == 0 {
		return nil
	}
	key := fmt.Sprintf("%s%06d.%s", s.prefix, s.seq, s.format)
	data := s.jsonl
	if s.format == spec.FormatParq {
		var buf bytes.Buffer
		if err := arrowfmt.WriteParquet(&buf, s.in.Schema, s.batches); err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		data = buf.Bytes()
	}
	if err := s.bucket.Put(ctx, key, data); err != nil {
		return fmt.Errorf("write files sink %s: %w", s.node, err)
	}
	s.seq++
	if s.counters != nil {
		s.counters.SinkRows.Add(s.rows)
	}
	s.reset()
	return nil
}

// reset drops the buffer.
func (s *fileSink) reset() {
	for _, b := range s.batches {
		b.Release()
	}
	clear(s.batches)
	s.batches = s.batches[:0]
	if cap(s.jsonl) > 2*s.maxBytes {
		s.jsonl = nil
	}
	s.jsonl = s.jsonl[:0]
	s.rows = 0
}

// Close drops what is still buffered (Finish writes it out). It is safe
// to call twice.
func (s *fileSink) Close() error {
	s.reset()
	s.jsonl = nil
	return nil
}
