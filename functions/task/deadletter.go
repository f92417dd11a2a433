package task

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/weirstream/weir/statestore/layout"
)

// deadLetters collects a source subtask's malformed records and writes them
// to the store as JSON lines at layout.DeadLetterKey
// (jobs/<job>/deadletters/<source>/part-<subtask>-a<attempt>-<seq>.jsonl),
// one object per flush: at 1000 records, every 5 seconds, and at the end.
// Each line holds the raw record, where it came from and why it was refused.
type deadLetters struct {
	cfg      *Config
	source   string
	counters *Counters
	buf      []byte
	n        int
	seq      int
	since    time.Time
}

// DeadLetter is one line of a dead-letter file.
type DeadLetter struct {
	Source string `json:"source"`
	Origin string `json:"origin"`
	Reason string `json:"reason"`
	Raw    string `json:"raw"`
}

func newDeadLetters(cfg *Config, source string, c *Counters) *deadLetters {
	return &deadLetters{cfg: cfg, source: source, counters: c}
}

func (d *deadLetters) add(raw []byte, origin, reason string) {
	d.counters.DeadLetters.Add(1)
	line, _ := json.Marshal(DeadLetter{Source: d.source, Origin: origin, Reason: reason, Raw: string(raw)})
	if d.n == 0 {
		d.since = d.cfg.Now()
	}
	d.buf = append(append(d.buf, line...), '\n')
	d.n++
	d.cfg.Logger.Warn("malformed record sent to dead letters", "source", d.source, "origin", origin, "reason", reason)
}

func (d *deadLetters) flushDue(ctx context.Context, now time.Time) error {
	if d.n >= 1000 || (d.n > 0 && now.Sub(d.since) >= 5*time.Second) {
		return d.flush(ctx)
	}
	return nil
}

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
