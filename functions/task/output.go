package task

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/exchange"
)

// Partitioning says how an edge spreads rows over consumer subtasks.
type Partitioning int

const (
	// Forward sends everything to the consumer subtask with the producer's
	// index (equal parallelism, not chained).
	Forward Partitioning = iota
	// Hash sends each row to the subtask owning its key group.
	Hash
	// Rebalance spreads whole batches round-robin.
	Rebalance
)

// Batching bounds output buffers: a buffer is flushed into one channel entry
// when it holds Rows rows or Bytes bytes, when its oldest row has waited
// Timeout, and always before a control entry.
type Batching struct {
	Rows    int
	Bytes   int
	Timeout time.Duration
}

// EdgeOut is one outgoing network edge of a task.
type EdgeOut struct {
	// Channels has one channel per consumer subtask, indexed by consumer
	// subtask (for Forward only the producer's own index is used).
	Channels     []exchange.Channel
	Partitioning Partitioning
	// KeyColumns are the key columns for Hash.
	KeyColumns []int
	// Project, if set, lists the columns that go over the edge, in the
	// order of ProjectSchema: the consumer reads no others. Hashing sees
	// the whole batch.
	Project       []int
	ProjectSchema *arrow.Schema
}

// netOutput writes one edge: it partitions, buffers and encodes batches
// and writes them to the edge's channels.
type netOutput struct {
	t        *runner
	edge     EdgeOut
	subtask  int
	writers  []exchange.Writer // by consumer subtask; nil where unused
	encoders []*arrowfmt.Encoder
	scratch  []byte // payload buffer, reused when the transport allows
	bufs     []outBuf
	rr       int // round-robin cursor
	hashes   []uint64
	targets  []int32
}

type outBuf struct {
	recs  []arrow.RecordBatch
	rows  int
	bytes int
	since time.Time
}

func newNetOutput(t *runner, e EdgeOut) (*netOutput, error) {
	n := len(e.Channels)
	o := &netOutput{t: t, edge: e, subtask: t.cfg.Subtask, rr: t.cfg.Subtask,
		writers: make([]exchange.Writer, n), encoders: make([]*arrowfmt.Encoder, n), bufs: make([]outBuf, n)}
	for i, ch := range e.Channels {
		if e.Partitioning == Forward && i != t.cfg.Subtask {
			continue
		}
		w, err := t.cfg.Transport.NewWriter(ch)
		if err != nil {
			o.close()
			return nil, fmt.Errorf("open channel %s: %w", ch, err)
		}
		o.writers[i] = w
		t.stats.addChannel(ch, w)
	}
	return o, nil
}

// Emit partitions b into the edge's buffers and flushes full buffers.
func (o *netOutput) Emit(b arrow.RecordBatch) error {
	if b.NumRows() == 0 {
		return nil
	}
	switch o.edge.Partitioning {
	case Forward, Rebalance:
		if o.edge.Project != nil {
			b = o.project(b)
			defer b.Release()
		}
		if o.edge.Partitioning == Forward {
			return o.add(o.subtask, b)
		}
		o.rr = (o.rr + 1) % len(o.writers)
		return o.add(o.rr, b)
	}
	n := int(b.NumRows())
	o.hashes = arrowfmt.HashKeys(b, o.edge.KeyColumns, o.hashes[:0])
	if o.edge.Project != nil {
		b = o.project(b)
		defer b.Release()
	}
	if cap(o.targets) < n {
		o.targets = make([]int32, n)
	}
	o.targets = o.targets[:n]
	maxP, p := o.t.cfg.MaxParallelism, len(o.writers)
	first, same := int32(-1), true
	for i, h := range o.hashes {
		tgt := int32(arrowfmt.SubtaskForKeyGroup(arrowfmt.KeyGroup(h, maxP), maxP, p))
		o.targets[i] = tgt
		if first < 0 {
			first = tgt
		} else if tgt != first {
			same = false
		}
	}
	if same {
		return o.add(int(first), b)
	}
	parts := arrowfmt.Partition(b, o.targets, p, o.t.mem)
	var err error
	for i, part := range parts {
		if part == nil {
			continue
		}
		if err == nil {
			err = o.add(i, part)
		}
		part.Release()
	}
	return err
}

// project returns the edge's columns of b (no copy); release it.
func (o *netOutput) project(b arrow.RecordBatch) arrow.RecordBatch {
	cols := make([]arrow.Array, len(o.edge.Project))
	for i, c := range o.edge.Project {
		cols[i] = b.Column(c)
	}
	return array.NewRecordBatch(o.edge.ProjectSchema, cols, b.NumRows())
}

func (o *netOutput) add(i int, b arrow.RecordBatch) error {
	buf := &o.bufs[i]
	b.Retain()
	if len(buf.recs) == 0 {
		buf.since = o.t.now()
	}
	buf.recs = append(buf.recs, b)
	buf.rows += int(b.NumRows())
	buf.bytes += int(recordBytes(b))
	if buf.rows >= o.t.cfg.Batching.Rows || buf.bytes >= o.t.cfg.Batching.Bytes {
		return o.flush(i)
	}
	return nil
}

// flush writes buffer i as one data entry.
func (o *netOutput) flush(i int) error {
	buf := &o.bufs[i]
	if len(buf.recs) == 0 {
		return nil
	}
	rec, err := arrowfmt.Concat(buf.recs, o.t.mem)
	for _, r := range buf.recs {
		r.Release()
	}
	rows := buf.rows
	*buf = outBuf{recs: buf.recs[:0]}
	if err != nil {
		return fmt.Errorf("concat output: %w", err)
	}
	defer rec.Release()
	if o.encoders[i] == nil {
		wire := o.t.cfg.Wire
		if exchange.InProcess(o.t.cfg.Transport) {
			wire = arrowfmt.WireOptions{} // the consumer reads the same memory
		}
		o.encoders[i] = arrowfmt.NewWireEncoder(rec.Schema(), o.t.mem, wire)
	}
	var payload []byte
	if exchange.InProcess(o.t.cfg.Transport) {
		payload, err = o.encoders[i].Encode(rec) // the consumer keeps it
	} else {
		// The transport is done with the payload when Write returns: one
		// buffer serves every entry, with no copy and no garbage.
		payload, err = o.encoders[i].AppendEncode(o.scratch[:0], rec)
		o.scratch = payload[:0]
	}
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	w := o.writers[i]
	before := w.Stats().CreditWait
	if err := w.Write(o.t.ctx, exchange.Entry{Kind: exchange.KindData, Payload: payload}); err != nil {
		return fmt.Errorf("write %s: %w", o.edge.Channels[i], err)
	}
	o.t.stats.addBackpressure(w.Stats().CreditWait - before)
	o.t.stats.RecordsOut.Add(int64(rows))
	o.t.stats.BytesOut.Add(int64(len(payload)))
	return nil
}

// flushDue flushes buffers whose oldest row has waited the buffer timeout
// and returns when the next one falls due (zero if none is pending).
func (o *netOutput) flushDue(now time.Time) (time.Time, error) {
	var next time.Time
	for i := range o.bufs {
		if len(o.bufs[i].recs) == 0 {
			continue
		}
		due := o.bufs[i].since.Add(o.t.cfg.Batching.Timeout)
		if !now.Before(due) {
			if err := o.flush(i); err != nil {
				return time.Time{}, err
			}
			continue
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next, nil
}

// idle tells every writer of the edge that nothing is being written now
// (exchange.Writer.Idle): one idle for a while looks whether its channel
// lost what it wrote.
func (o *netOutput) idle(now time.Time) error {
	for i, w := range o.writers {
		if w == nil {
			continue
		}
		if err := w.Idle(o.t.ctx, now); err != nil {
			return fmt.Errorf("channel %s: %w", o.edge.Channels[i], err)
		}
	}
	return nil
}

// control flushes every buffer, then writes e to every channel of the
// edge, so that a control entry never overtakes data.
func (o *netOutput) control(ctx context.Context, e exchange.Entry) error {
	for i, w := range o.writers {
		if w == nil {
			continue
		}
		if err := o.flush(i); err != nil {
			return err
		}
		if err := w.Write(ctx, e); err != nil {
			return fmt.Errorf("write %s to %s: %w", e.Kind, o.edge.Channels[i], err)
		}
	}
	return nil
}

func (o *netOutput) close() error {
	var errs []error
	for i, w := range o.writers {
		for _, r := range o.bufs[i].recs {
			r.Release()
		}
		o.bufs[i] = outBuf{}
		if w != nil {
			if err := w.Close(); err != nil {
				errs = append(errs, err)
			}
			o.writers[i] = nil
		}
	}
	return errors.Join(errs...)
}

// recordBytes estimates a batch's size from its buffers.
func recordBytes(b arrow.RecordBatch) int64 {
	var n int64
	for _, c := range b.Columns() {
		for _, buf := range c.Data().Buffers() {
			if buf != nil {
				n += int64(buf.Len())
			}
		}
	}
	return n
}

// fanout is an Output that passes each batch to several targets.
type fanout []Output

func (f fanout) Emit(b arrow.RecordBatch) error {
	for _, o := range f {
		if err := o.Emit(b); err != nil {
			return err
		}
	}
	return nil
}

// discard drops what it is given (a side output nobody reads).
type discard struct{}

func (discard) Emit(arrow.RecordBatch) error { return nil }
