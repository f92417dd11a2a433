package exchange

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisWriter is the Redis producer end: one XADD per entry, with a GET of
// the credit limit when the credit it knows of runs out.
type redisWriter struct {
	t              *redisTransport
	ch             Channel
	stream, credit string

	closed bool
	err    error // sticky: the channel is lost
	win    producerWindow
	seq    uint64 // sequence number of the last entry written
	vals   []any
	timer  *time.Timer

	stats writerStats
}

func (w *redisWriter) Write(ctx context.Context, e Entry) error {
	if err := validateEntry(e); err != nil {
		return err
	}
	if w.closed || w.t.closed.Load() {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	if e.Kind == KindData && w.win.available() <= 0 {
		if err := w.awaitCredit(ctx); err != nil {
			return w.fail(ctx, err)
		}
	}
	if err := w.append(ctx, e); err != nil {
		return w.fail(ctx, err)
	}
	return nil
}

func (w *redisWriter) fail(ctx context.Context, err error) error {
	err = w.t.mapErr(ctx, err)
	if errors.Is(err, ErrChannelLost) {
		w.err = err
	}
	return err
}

// tailCheckEvery is how long a writer waits for credit between two looks
// at whether its last entry is still in the stream.
const tailCheckEvery = time.Second

// hasEntryScript returns 1 if the stream KEYS[1] holds the entry ARGV[1],
// else 0: the entry's payload stays in Redis.
var hasEntryScript = redis.NewScript(`return #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])`)

// awaitCredit returns once a data entry may be written.
//
// While it waits it looks, every tailCheckEvery, for the last entry it
// wrote. A consumer trims an entry only after consuming it, and raises
// the limit in the same pipeline, before the writer could see the trim;
// so a missing last entry under an unchanged limit, twice in a row, means
// the stream lost its tail: a failover to a replica that had not received
// it (or a restart that kept the keys). Without this both ends would wait
// for each other for ever: the consumer for entries that are gone, the
// writer for credit they would have returned.
func (w *redisWriter) awaitCredit(ctx context.Context) error {
	backoff := w.t.opts.MinCreditBackoff
	var start, nextCheck time.Time
	missing := 0
	defer func() {
		if !start.IsZero() {
			w.stats.creditWait.Add(int64(time.Since(start)))
		}
	}()
	for {
		limit, err := w.t.client.Get(ctx, w.credit).Int64()
		exists := !errors.Is(err, redis.Nil)
		if err != nil && exists {
			return fmt.Errorf("read credit of %s: %w", w.ch, w.t.mapErr(ctx, err))
		}
		if err := w.win.observe(limit, exists); err != nil {
			return fmt.Errorf("write %s: %w", w.ch, err)
		}
		if w.win.available() > 0 {
			return nil
		}
		if start.IsZero() {
			start = time.Now()
			nextCheck = start.Add(tailCheckEvery)
			w.stats.creditWaits.Add(1)
		}
		if w.seq > 0 && !time.Now().Before(nextCheck) {
			nextCheck = time.Now().Add(tailCheckEvery / 4)
			n, err := hasEntryScript.Run(ctx, w.t.client, []string{w.stream}, entryID(w.seq)).Int()
			if err != nil {
				return fmt.Errorf("look for entry %d of %s: %w", w.seq, w.ch, w.t.mapErr(ctx, err))
			}
			if missing = missing + 1; n > 0 {
				missing = 0
				nextCheck = time.Now().Add(tailCheckEvery)
			}
			if missing >= 2 {
				return fmt.Errorf("write %s: entry %d, written and not consumed (the credit limit is still %d), is gone from the stream: %w", w.ch, w.seq, w.win.limit, ErrChannelLost)
			}
		}
		if w.timer == nil {
			w.timer = time.NewTimer(backoff)
		} else {
			w.timer.Reset(backoff)
		}
		select {
		case <-w.timer.C:
		case <-ctx.Done():
			w.timer.Stop()
			return ctx.Err()
		}
		backoff = min(2*backoff, w.t.opts.MaxCreditBackoff)
	}
}

// append adds e to the stream. A data entry must have credit.
func (w *redisWriter) append(ctx context.Context, e Entry) error {
	seq := w.seq + 1
	w.vals = appendEntryValues(w.vals[:0], e)
	args := &redis.XAddArgs{
		Stream: w.stream,
		// Once the reader has initialised the channel the stream must
		// exist: never recreate one that vanished.
		NoMkStream: w.win.initialised(),
		ID:         entryID(seq),
		Values:     w.vals,
	}
	// Look at the credit limit in the same round trip when this entry
	// spends the last credit seen, or the reader's arrival is unknown.
	refresh := !w.win.initialised() || e.Kind == KindData && w.win.available() == 1
	var (
		add   *redis.StringCmd
		limit *redis.StringCmd
	)
	if refresh {
		pipe := w.t.client.Pipeline()
		add = pipe.XAdd(ctx, args)
		limit = pipe.Get(ctx, w.credit)
		_, _ = pipe.Exec(ctx)
	} else {
		add = w.t.client.XAdd(ctx, args)
	}
	clear(w.vals) // drop the reference to the payload
	switch err := add.Err(); {
	case errors.Is(err, redis.Nil):
		return fmt.Errorf("write %s: stream vanished: %w", w.ch, ErrChannelLost)
	case err != nil && strings.Contains(err.Error(), "equal or smaller"):
		return fmt.Errorf("write %s: entry %d is already in the stream (a second writer on the channel, or a retried write that had succeeded): %w", w.ch, seq, err)
	case err != nil:
		return fmt.Errorf("write %s: %w", w.ch, w.t.mapErr(ctx, err))
	}
	w.seq = seq
	if e.Kind == KindData && !w.win.spend() {
		panic("exchange: data entry written without credit")
	}
	w.stats.wrote(e)
	if refresh {
		n, err := limit.Int64()
		exists := !errors.Is(err, redis.Nil)
		if err != nil && exists {
			return fmt.Errorf("read credit of %s: %w", w.ch, w.t.mapErr(ctx, err))
		}
		if err := w.win.observe(n, exists); err != nil {
			return fmt.Errorf("write %s: %w", w.ch, err)
		}
	}
	return nil
}

func (w *redisWriter) Stats() WriterStats { return w.stats.snapshot() }

func (w *redisWriter) Close() error {
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	return nil
}
