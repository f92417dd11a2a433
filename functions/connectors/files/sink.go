package files

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/arrowfmt/parquetfmt"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// When a files sink writes out what it buffered.
const (
	// SinkJSONLBytes is the size at which a JSON-lines object is
	// written.
	SinkJSONLBytes = 64 << 20
	// SinkParquetRows is the row count at which a Parquet object is
	// written.
	SinkParquetRows = 1 << 20
	// SinkRollAfter bounds how long a row stays buffered when rows
	// keep coming: a Write after that writes the buffer out. Finish writes
	// out the rest.
	SinkRollAfter = 30 * time.Second
)

// fileSink writes its input as objects under a path of the job's store:
//
//	<path>/part-<subtask>-a<attempt>-<seq>.<jsonl|parquet>
//
// with seq counting from 000000 per subtask and attempt, so subtasks and
// attempts never overwrite each other. It buffers rows and writes an object
// when the buffer is full (SinkJSONLBytes, SinkParquetRows), when a
// Write comes SinkRollAfter after the oldest buffered row, and at
// Finish. An object is written whole: a reader never sees part of one.
//
// After EnableTransactions it writes nothing until PreCommit: a full buffer
// is encoded into an object kept in memory, and PreCommit writes every
// object of the transaction as
//
//	<path>/_staging/<txnID>/part-<subtask>-a<attempt>-<seq>.<jsonl|parquet>
//
// which Commit copies to the same name directly under <path>. So memory
// holds the encoded output of one checkpoint interval; rolling to staging
// before PreCommit would need the transaction id when it begins.
type fileSink struct {
	node   string
	path   string
	format string
	in     stream.Stream

	bucket   blob.Bucket
	counters *task.Counters
	now      func() time.Time
	part     string // part-<subtask>-a<attempt>-
	seq      int
	maxBytes int   // SinkJSONLBytes; smaller in tests
	maxRows  int64 // SinkParquetRows; smaller in tests

	jsonl   []byte              // buffered JSON lines
	batches []arrow.RecordBatch // buffered batches (parquet), retained
	rows    int64               // rows buffered
	oldest  time.Time           // when the oldest buffered row came

	txn        bool           // EnableTransactions was called
	sealed     []sealedObject // txn: objects encoded at a roll, written at PreCommit
	sealedRows int64
}

// sealedObject is an encoded object waiting for PreCommit.
type sealedObject struct {
	name string // part-<subtask>-a<attempt>-<seq>.<ext>
	data []byte
}

// fileTxnHandle is a files sink's transaction handle (version 1): the
// staged objects and where Commit puts them, both keys of the job's store.
type fileTxnHandle struct {
	V       int             `json:"v"`
	Txn     string          `json:"txn"`
	Objects []fileTxnObject `json:"objects"`
}

type fileTxnObject struct {
	Staged string `json:"staged"`
	Final  string `json:"final"`
}

var _ task.Sink = (*fileSink)(nil)

func newFileSink(node string, cfg SinkConfig, in stream.Stream) *fileSink {
	return &fileSink{node: node, path: strings.TrimRight(cfg.Path, "/"), format: cfg.Format, in: in,
		maxBytes: SinkJSONLBytes, maxRows: SinkParquetRows}
}

func (s *fileSink) Open(ctx *task.SinkContext) error {
	if ctx.Bucket == nil {
		return fmt.Errorf("open files sink %s: the job has no store to write %q to", s.node, s.path)
	}
	s.bucket, s.counters, s.now = ctx.Bucket, ctx.Counters, ctx.Now
	if s.now == nil {
		s.now = time.Now
	}
	// Object names are unique per job, attempt and subtask: a job
	// restored from another's savepoint may write to the same path, and
	// a commit never overwrites an object that exists.
	s.part = fmt.Sprintf("part-%d-a%d-", ctx.Subtask, ctx.Attempt)
	if ctx.Job != "" {
		s.part = fmt.Sprintf("part-%d-%s-a%d-", ctx.Subtask, ctx.Job, ctx.Attempt)
	}
	return nil
}

// EnableTransactions makes Write buffer for PreCommit; see TwoPhaseSink.
func (s *fileSink) EnableTransactions() { s.txn = true }

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
	if s.txn {
		// PreCommit, not the clock, bounds how long rows wait.
		if full {
			return s.seal()
		}
		return nil
	}
	if full || now.Sub(s.oldest) >= SinkRollAfter {
		return s.flush(ctx)
	}
	return nil
}

// Finish writes out what is buffered. In transactional mode it keeps it
// for the last PreCommit.
func (s *fileSink) Finish(ctx context.Context) error {
	if s.txn {
		return nil
	}
	return s.flush(ctx)
}

// objectName is the name of object seq, below the path.
func (s *fileSink) objectName(seq int) string {
	return fmt.Sprintf("%s%06d.%s", s.part, seq, s.format)
}

// encode returns the buffer as an object. A JSON-lines object is the
// buffer itself: it is valid until reset.
func (s *fileSink) encode(name string) ([]byte, error) {
	if s.format != spec.FormatParq {
		return s.jsonl, nil
	}
	var buf bytes.Buffer
	if err := parquetfmt.Write(&buf, s.in.Schema, s.batches); err != nil {
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// seal encodes the buffer into the next object of the transaction.
func (s *fileSink) seal() error {
	if s.rows == 0 {
		return nil
	}
	name := s.objectName(s.seq)
	data, err := s.encode(name)
	if err != nil {
		return err
	}
	if s.format != spec.FormatParq {
		s.jsonl = nil // the sealed object owns it now
	}
	s.sealed = append(s.sealed, sealedObject{name: name, data: data})
	s.sealedRows += s.rows
	s.seq++
	s.reset()
	return nil
}

func (s *fileSink) flush(ctx context.Context) error {
	if s.rows == 0 {
		return nil
	}
	key := layout.SinkObjectKey(s.path, s.objectName(s.seq))
	data, err := s.encode(key)
	if err != nil {
		return err
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

// PreCommit writes the transaction's objects under
// <path>/_staging/<txnID>/; see TwoPhaseSink. Writing a staged object twice
// (a retried PreCommit) replaces it with the same bytes.
func (s *fileSink) PreCommit(ctx context.Context, txnID string) (json.RawMessage, error) {
	if err := connector.ValidateTxnID(txnID); err != nil {
		return nil, fmt.Errorf("pre-commit files sink %s: %w", s.node, err)
	}
	if !s.txn {
		return nil, fmt.Errorf("pre-commit files sink %s: transactions are not enabled: call EnableTransactions before the first Write", s.node)
	}
	if err := s.seal(); err != nil {
		return nil, fmt.Errorf("pre-commit files sink %s: %w", s.node, err)
	}
	h := fileTxnHandle{V: connector.TxnHandleVersion, Txn: txnID, Objects: make([]fileTxnObject, 0, len(s.sealed))}
	for _, o := range s.sealed {
		obj := fileTxnObject{Staged: layout.StagedKey(s.path, txnID, o.name), Final: layout.SinkObjectKey(s.path, o.name)}
		if err := s.bucket.Put(ctx, obj.Staged, o.data); err != nil {
			// The sealed objects stay for the next PreCommit; what was
			// staged here is garbage for Abort or CleanStaging.
			return nil, fmt.Errorf("pre-commit files sink %s: stage %s: %w", s.node, obj.Staged, err)
		}
		h.Objects = append(h.Objects, obj)
	}
	handle, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("pre-commit files sink %s: %w", s.node, err)
	}
	if s.counters != nil {
		s.counters.SinkRows.Add(s.sealedRows)
	}
	clear(s.sealed)
	s.sealed, s.sealedRows = s.sealed[:0], 0
	return handle, nil
}

// Seal closes transaction txnID on the task goroutine and returns the
// function that stages it, which the runtime calls on its uploader while
// the sink goes on writing (task.StagedSink). The sealed objects own their
// bytes, so later writes cannot touch them.
func (s *fileSink) Seal(txnID string) (func(context.Context) (json.RawMessage, error), error) {
	if err := connector.ValidateTxnID(txnID); err != nil {
		return nil, fmt.Errorf("seal files sink %s: %w", s.node, err)
	}
	if !s.txn {
		return nil, fmt.Errorf("seal files sink %s: transactions are not enabled: call EnableTransactions before the first Write", s.node)
	}
	if err := s.seal(); err != nil {
		return nil, fmt.Errorf("seal files sink %s: %w", s.node, err)
	}
	objs, rows := s.sealed, s.sealedRows
	s.sealed, s.sealedRows = nil, 0
	bucket, path, node, counters := s.bucket, s.path, s.node, s.counters
	return func(ctx context.Context) (json.RawMessage, error) {
		h := fileTxnHandle{V: connector.TxnHandleVersion, Txn: txnID, Objects: make([]fileTxnObject, 0, len(objs))}
		for _, o := range objs {
			obj := fileTxnObject{Staged: layout.StagedKey(path, txnID, o.name), Final: layout.SinkObjectKey(path, o.name)}
			if err := bucket.Put(ctx, obj.Staged, o.data); err != nil {
				return nil, fmt.Errorf("stage files sink %s: %s: %w", node, obj.Staged, err)
			}
			h.Objects = append(h.Objects, obj)
		}
		handle, err := json.Marshal(h)
		if err != nil {
			return nil, fmt.Errorf("stage files sink %s: %w", node, err)
		}
		if counters != nil {
			counters.SinkRows.Add(rows)
		}
		return handle, nil
	}, nil
}

// decodeHandle decodes a handle and checks that its keys are this sink's.
func (s *fileSink) decodeHandle(op string, handle json.RawMessage) (fileTxnHandle, error) {
	var h fileTxnHandle
	if s.bucket == nil {
		return h, fmt.Errorf("%s files sink %s: not open", op, s.node)
	}
	if err := connector.DecodeHandle("files", handle, &h, &h.V); err != nil {
		return h, fmt.Errorf("%s files sink %s: %w", op, s.node, err)
	}
	if err := connector.ValidateTxnID(h.Txn); err != nil {
		return h, fmt.Errorf("%s files sink %s: %w", op, s.node, err)
	}
	dir := layout.StagedTxnPrefix(s.path, h.Txn)
	for _, o := range h.Objects {
		name, ok := strings.CutPrefix(o.Staged, dir)
		if !ok || strings.Contains(name, "/") || o.Final != layout.SinkObjectKey(s.path, name) {
			return h, fmt.Errorf("%s files sink %s: transaction %s: object %q -> %q is not a staged object of path %q",
				op, s.node, h.Txn, o.Staged, o.Final, s.path)
		}
	}
	return h, nil
}

// Commit copies each staged object to its final key unless it is there
// already, then deletes the staged one. A crash at any point leaves each
// object staged, final, or both, and a rerun finishes the job; concurrent
// Commits of one handle are safe too (PutIfAbsent lets one copy win).
func (s *fileSink) Commit(ctx context.Context, handle json.RawMessage) error {
	h, err := s.decodeHandle("commit", handle)
	if err != nil {
		return err
	}
	for _, o := range h.Objects {
		if err := commitStaged(ctx, s.bucket, o); err != nil {
			return fmt.Errorf("commit files sink %s: transaction %s: %w", s.node, h.Txn, err)
		}
	}
	return nil
}

// commitStaged makes one staged object visible and removes the staged copy.
func commitStaged(ctx context.Context, b blob.Bucket, o fileTxnObject) error {
	if err := copyStaged(ctx, b, o); err != nil {
		return err
	}
	if err := b.Delete(ctx, o.Staged); err != nil {
		return fmt.Errorf("delete staged object: %w", err)
	}
	return nil
}

// copyStaged copies a staged object to its final key, on the store's side
// (the bytes do not pass through the committer). A copy again is harmless:
// a final key names one attempt's object, so it only ever receives the
// same bytes. A missing staged object is fine when the final one exists
// (an earlier Commit finished this object).
func copyStaged(ctx context.Context, b blob.Bucket, o fileTxnObject) error {
	err := b.Copy(ctx, o.Staged, o.Final)
	if errors.Is(err, blob.ErrNotFound) {
		if _, serr := b.Stat(ctx, o.Final); serr == nil {
			return nil
		} else if !errors.Is(serr, blob.ErrNotFound) {
			return fmt.Errorf("check committed object: %w", serr)
		}
		return fmt.Errorf("staged object %s and committed object %s are both missing (aborted or cleaned?): %w", o.Staged, o.Final, err)
	}
	if err != nil {
		return fmt.Errorf("copy staged object: %w", err)
	}
	return nil
}

// Abort deletes the transaction's staged objects. Aborting a committed
// transaction deletes nothing that is visible.
func (s *fileSink) Abort(ctx context.Context, handle json.RawMessage) error {
	h, err := s.decodeHandle("abort", handle)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range h.Objects {
		if err := s.bucket.Delete(ctx, o.Staged); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("abort files sink %s: transaction %s: %w", s.node, h.Txn, errors.Join(errs...))
	}
	return nil
}

// Close drops what is still buffered (Finish or PreCommit writes it out).
// It is safe to call twice.
func (s *fileSink) Close() error {
	s.reset()
	s.jsonl = nil
	clear(s.sealed)
	s.sealed, s.sealedRows = nil, 0
	return nil
}

var _ task.StagedSink = (*fileSink)(nil)
