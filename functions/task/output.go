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
	idx      []int32 // row numbers by target
	starts   []int   // target t's rows are idx[starts[t]:starts[t+1]]
}

// outBuf is one channel's output buffer: its rows are copied in as they
// come (once: no batch per target, no concatenation) and encoded from
// there when it flushes.
type outBuf struct {
	rows  *arrowfmt.RowBuffer // nil until the first rows
	since time.Time
}

func (b *outBuf) empty() bool { return b.rows == nil || b.rows.Rows() == 0 }

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
			return o.add(o.subtask, b, nil)
		}
		o.rr = (o.rr + 1) % len(o.writers)
		return o.add(o.rr, b, nil)
	}
	n := int(b.NumRows())
	o.hashes = arrowfmt.HashKeys(b, o.edge.KeyColumns, o.hashes[:0])
	if o.edge.Project != nil {
		b = o.project(b)
		defer b.Release()
	}
	if cap(o.targets) < n {
		o.targets = make([]int32, n)
		o.idx = make([]int32, n)
	}
	o.targets, o.idx = o.targets[:n], o.idx[:n]
	maxP, p := o.t.cfg.MaxParallelism, len(o.writers)
	if cap(o.starts) < p+1 {
		o.starts = make([]int, p+1)
	}
	starts := o.starts[:p+1]
	clear(starts)
	for i, h := range o.hashes {
		tgt := int32(arrowfmt.SubtaskForKeyGroup(arrowfmt.KeyGroup(h, maxP), maxP, p))
		o.targets[i] = tgt
		starts[tgt+1]++
	}
	for t := range p {
		if starts[t+1] == n {
			return o.add(t, b, nil) // every row goes there
		}
		starts[t+1] += starts[t]
	}
	// A counting sort of the row numbers by target: each target's rows
	// are then one run of idx, in order.
	next := starts[:p] // advanced to the ends, and put back below
	for row, tgt := range o.targets {
		o.idx[next[tgt]] = int32(row)
		next[tgt]++
	}
	copy(starts[1:], starts[:p])
	starts[0] = 0
	for t := range p {
		if starts[t] == starts[t+1] {
			continue
		}
		if err := o.add(t, b, o.idx[starts[t]:starts[t+1]]); err != nil {
			return err
		}
	}
	return nil
}

// project returns the edge's columns of b (no copy); release it.
func (o *netOutput) project(b arrow.RecordBatch) arrow.RecordBatch {
	cols := make([]arrow.Array, len(o.edge.Project))
	for i, c := range o.edge.Project {
		cols[i] = b.Column(c)
	}
	return array.NewRecordBatch(o.edge.ProjectSchema, cols, b.NumRows())
}

// add puts the rows idx of b (all of them if idx is nil) in buffer i, and
// flushes it once full. A whole batch that fills an empty buffer by itself
// is written as it is, with no copy.
func (o *netOutput) add(i int, b arrow.RecordBatch, idx []int32) error {
	buf := &o.bufs[i]
	lim := o.t.cfg.Batching
	if idx == nil && buf.empty() && (int(b.NumRows()) >= lim.Rows || int(recordBytes(b)) >= lim.Bytes) {
		return o.write(i, b)
	}
	if buf.rows == nil {
		rows, err := arrowfmt.NewRowBuffer(b.Schema())
		if err != nil {
			return fmt.Errorf("output buffer of %s: %w", o.edge.Channels[i], err)
		}
		buf.rows = rows
	}
	if buf.rows.Rows() == 0 {
		buf.since = o.t.now()
	}
	if err := buf.rows.Append(b, idx); err != nil {
		return fmt.Errorf("output buffer of %s: %w", o.edge.Channels[i], err)
	}
	if buf.rows.Rows() >= lim.Rows || buf.rows.Bytes() >= lim.Bytes {
		return o.flush(i)
	}
	return nil
}

// flush writes buffer i as one data entry.
func (o *netOutput) flush(i int) error {
	buf := &o.bufs[i]
	if buf.empty() {
		return nil
	}
	rec := buf.rows.Batch() // the buffer's memory: encoded before it is reused
	err := o.write(i, rec)
	rec.Release()
	buf.rows.Reset()
	return err
}

// write encodes rec and writes it to channel i as one data entry.
func (o *netOutput) write(i int, rec arrow.RecordBatch) error {
	rows := rec.NumRows()
	if o.encoders[i] == nil {
		wire := o.t.cfg.Wire
		if exchange.InProcess(o.t.cfg.Transport) {
			wire = arrowfmt.WireOptions{} // the consumer reads the same memory
		}
		o.encoders[i] = arrowfmt.NewWireEncoder(rec.Schema(), o.t.mem, wire)
	}
	var payload []byte
	var err error
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
	o.t.stats.RecordsOut.Add(rows)
	o.t.stats.BytesOut.Add(int64(len(payload)))
	return nil
}

// flushDue flushes buffers whose oldest row has waited the buffer timeout
// and returns when the next one falls due (zero if none is pending).
func (o *netOutput) flushDue(now time.Time) (time.Time, error) {
	var next time.Time
	for i := range o.bufs {
		if o.bufs[i].empty() {
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
