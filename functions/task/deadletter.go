package task

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/statestore/layout"
)

// deadLetters collects a source subtask's malformed records.
//
// Without checkpoints it writes them to the store as JSON lines at
// layout.DeadLetterKey
// (jobs/<job>/deadletters/<source>/part-<subtask>-a<attempt>-<seq>.jsonl),
// one object per flush: at 1000 records, every 5 seconds, and at the end.
//
// With checkpoints and SourceHead.DeadLetters, they are part of the
// checkpointed output instead: the letters since the last barrier go to
// that two-phase sink at the barrier, and its transaction is announced
// with the checkpoint like a chained sink's (see checkpointer.preCommit).
// The coordinator commits it when the checkpoint completes; an attempt that
// fails before that leaves it staged and the restored source reads the
// records again. The count (Counters.DeadLetters) is part of the source's
// checkpointed position, so it is the total over all attempts.
//
// Each line holds the raw record, where it came from and why it was refused.
type deadLetters struct {
	cfg      *Config
	source   string
	counters *Counters

	// direct writing
	buf   []byte
	n     int
	seq   int
	since time.Time

	// transactional writing
	write   Sink         // SourceHead.DeadLetters, nil without checkpoints
	txn     TwoPhaseSink // the two-phase sink inside write
	opened  bool
	pending []DeadLetter // since the last barrier
}

// DeadLetter is one line of a dead-letter file.
type DeadLetter struct {
	Source string `json:"source"`
	Origin string `json:"origin"`
	Reason string `json:"reason"`
	Raw    string `json:"raw"`
}

// DeadLetterSchema is the schema of the batches a source's dead-letter
// sink (SourceHead.DeadLetters) receives: the fields of DeadLetter, in
// order, so that a JSON-lines sink writes DeadLetter lines.
var DeadLetterSchema = arrow.NewSchema([]arrow.Field{
	{Name: "source", Type: arrow.BinaryTypes.String},
	{Name: "origin", Type: arrow.BinaryTypes.String},
	{Name: "reason", Type: arrow.BinaryTypes.String},
	{Name: "raw", Type: arrow.BinaryTypes.String},
}, nil)

func newDeadLetters(cfg *Config, source string, c *Counters) *deadLetters {
	return &deadLetters{cfg: cfg, source: source, counters: c}
}

// open opens the dead-letter sink for transactional writing: the letters
// then wait for the next barrier instead of a flush.
func (d *deadLetters) open(snk Sink, base Context) error {
	tp, ok := AsTwoPhase(snk)
	if !ok {
		return fmt.Errorf("open dead letters of %s[%d]: the dead-letter sink has no transactions", d.source, d.cfg.Subtask)
	}
	c := base
	c.Node = d.source
	// Its own counters: dead letters are not rows of the job's sinks.
	c.Counters = new(Counters)
	sc := &SinkContext{Context: c, Bucket: d.cfg.Bucket, RedisAddr: d.cfg.RedisAddr, Attempt: d.cfg.Attempt}
	if err := snk.Open(sc); err != nil {
		return fmt.Errorf("open dead letters of %s[%d]: %w", d.source, d.cfg.Subtask, err)
	}
	d.write, d.txn, d.opened = snk, tp, true
	tp.EnableTransactions()
	return nil
}

func (d *deadLetters) add(raw []byte, origin, reason string) {
	d.counters.DeadLetters.Add(1)
	l := DeadLetter{Source: d.source, Origin: origin, Reason: reason, Raw: string(raw)}
	d.cfg.Logger.Warn("malformed record sent to dead letters", "source", d.source, "origin", origin, "reason", reason)
	if d.txn != nil {
		d.pending = append(d.pending, l)
		return
	}
	line, _ := json.Marshal(l)
	if d.n == 0 {
		d.since = d.cfg.Now()
	}
	d.buf = append(append(d.buf, line...), '\n')
	d.n++
}

// writePending writes the letters since the last barrier to the
// dead-letter sink as one batch, for the transaction sealed next; it
// reports whether there were any.
func (d *deadLetters) writePending(ctx context.Context, mem memory.Allocator) (bool, error) {
	if len(d.pending) == 0 {
		return false, nil
	}
	b := array.NewRecordBuilder(mem, DeadLetterSchema)
	defer b.Release()
	for _, l := range d.pending {
		for i, v := range [...]string{l.Source, l.Origin, l.Reason, l.Raw} {
			b.Field(i).(*array.StringBuilder).Append(v)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := d.write.Write(ctx, rec); err != nil {
		return true, fmt.Errorf("write dead letters of %s[%d]: %w", d.source, d.cfg.Subtask, err)
	}
	clear(d.pending)
	d.pending = d.pending[:0]
	return true, nil
}

func (d *deadLetters) flushDue(ctx context.Context, now time.Time) error {
	if d.n >= 1000 || (d.n > 0 && now.Sub(d.since) >= 5*time.Second) {
		return d.flush(ctx)
	}
	return nil
}

// flush writes the buffered letters directly. Transactional letters are
// not flushed: they go out with the next checkpoint, or are read again
// after a restore.
func (d *deadLetters) flush(ctx context.Context) error {
	if d.n == 0 {
		return nil
	}
	if d.cfg.Bucket == nil {
		d.buf, d.n = d.buf[:0], 0
		return nil
	}
	key := layout.DeadLetterKey(d.cfg.Job, d.source, d.cfg.Subtask, d.cfg.Attempt, d.seq)
	if err := d.cfg.Bucket.Put(ctx, key, d.buf); err != nil {
		return fmt.Errorf("write dead letters %s: %w", key, err)
	}
	d.seq++
	d.buf, d.n = d.buf[:0], 0
	return nil
}

// close closes the dead-letter sink (what it holds unsealed is dropped).
func (d *deadLetters) close() error {
	if !d.opened {
		return nil
	}
	d.opened = false
	if err := d.write.Close(); err != nil {
		return fmt.Errorf("close dead letters of %s[%d]: %w", d.source, d.cfg.Subtask, err)
	}
	return nil
}
