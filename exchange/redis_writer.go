package exchange

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirstream/weir/exchange/internal/redisconn"
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
	seq    uint64    // sequence number of the last entry written
	active time.Time // the last write, or the last look while idle
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
			if n > 0 {
				missing = 0
				nextCheck = time.Now().Add(tailCheckEvery)
			} else if missing++; missing >= 2 {
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

// lastIDScript returns the ID of the last entry the stream KEYS[1] was
// given: its newest entry, or, when the reader has consumed and trimmed
// them all, XINFO's last-generated-id (which a trim leaves as it was);
// nil when the stream does not exist. Only IDs leave Redis.
var lastIDScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #top > 0 then return top[1][1] end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
for i = 1, #info, 2 do
  if info[i] == 'last-generated-id' then return info[i + 1] end
end
return redis.error_reply('XINFO STREAM ' .. KEYS[1] .. ' has no last-generated-id')
`)

// Idle looks, once the writer has not written for tailCheckEvery and
// then every tailCheckEvery, for the last entry it wrote: the stream's
// last ID must be at least its. The reader trims only what it consumed
// and a trim keeps the last ID, so a lower one means the stream lost its
// tail (a failover to a replica that had not received it); the reader,
// which never saw those entries, would wait for them for ever. A look
// that fails (the cluster changing) is returned as is.
func (w *redisWriter) Idle(ctx context.Context, now time.Time) error {
	if w.closed || w.t.closed.Load() {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	if w.seq == 0 || now.Sub(w.active) < tailCheckEvery {
		return nil
	}
	w.active = now
	last, err := lastIDScript.Run(ctx, w.t.client, []string{w.stream}).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return w.fail(ctx, fmt.Errorf("write %s: stream vanished after entry %d: %w", w.ch, w.seq, ErrChannelLost))
	case err != nil:
		return fmt.Errorf("look for entry %d of %s: %w", w.seq, w.ch, w.t.mapErr(ctx, err))
	}
	ms, seqText, ok := strings.Cut(last, "-")
	seq, perr := strconv.ParseUint(seqText, 10, 64)
	if !ok || ms != "0" || perr != nil {
		return w.fail(ctx, fmt.Errorf("write %s: the stream's last id is %q, want 0-<seq>: %w", w.ch, last, errCorrupt))
	}
	if seq < w.seq {
		return w.fail(ctx, fmt.Errorf("write %s: the stream's last entry is %d but entry %d was written: the entries after it are gone: %w", w.ch, seq, w.seq, ErrChannelLost))
	}
	return nil
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
		add        *redis.StringCmd
		limit      *redis.StringCmd
		replicated error
	)
	switch cc, ok := w.t.client.(*redis.ClusterClient); {
	case ok && e.Kind == KindEnd:
		add, replicated = w.addReplicated(ctx, cc, args)
		refresh = false
	case refresh:
		pipe := w.t.client.Pipeline()
		add = pipe.XAdd(ctx, args)
		limit = pipe.Get(ctx, w.credit)
		_, _ = pipe.Exec(ctx)
	default:
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
	w.active = time.Now()
	if e.Kind == KindData && !w.win.spend() {
		panic("exchange: data entry written without credit")
	}
	w.stats.wrote(e)
	if replicated != nil {
		return replicated
	}
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

// endReplicaWait bounds how long an end entry waits for a replica.
const endReplicaWait = 2 * time.Second

// addReplicated adds an end entry on a Redis Cluster and waits until a
// replica of the stream's master has it (WAIT, on the connection that
// wrote it: a pipeline of the master's own client). A loss of any other
// entry shows at the reader as a gap once a later entry arrives, or at a
// writer waiting for credit (awaitCredit); an end entry lost in a failover
// is followed by nothing, and its reader would wait for ever. add is the
// XADD; err, when add succeeded, says the entry may not survive a
// failover (no replica acknowledged it in time): the task fails, and the
// job restarts from its checkpoint rather than risk waiting for ever. A
// master without replicas is not waited for.
func (w *redisWriter) addReplicated(ctx context.Context, cc *redis.ClusterClient, args *redis.XAddArgs) (add *redis.StringCmd, err error) {
	for try := 1; ; try++ {
		master, err := cc.MasterForKey(ctx, w.stream)
		if err != nil {
			return cc.XAdd(ctx, args), fmt.Errorf("write %s: find the master of its stream: %w", w.ch, err)
		}
		// ROLE: "master", its offset, and the replicas connected to it.
		role, err := master.Do(ctx, "ROLE").Slice()
		if err == nil && len(role) == 3 && role[0] == "master" {
			if replicas, _ := role[2].([]any); len(replicas) == 0 {
				return cc.XAdd(ctx, args), nil
			}
		}
		pipe := master.Pipeline()
		add = pipe.XAdd(ctx, args)
		acks := pipe.Do(ctx, "WAIT", 1, endReplicaWait.Milliseconds())
		_, _ = pipe.Exec(ctx)
		if err := add.Err(); err != nil {
			var re redis.Error
			if try < 3 && errors.As(err, &re) && strings.HasPrefix(err.Error(), "MOVED ") {
				// The slot map is stale (a failover): the XADD was not
				// applied. Learn the new map and write there.
				cc.ReloadState(ctx)
				if err := sleepCtx(ctx, 300*time.Millisecond); err != nil {
					return add, nil
				}
				continue
			}
			return add, nil
		}
		if n, err := acks.Int64(); err != nil || n < 1 {
			return add, fmt.Errorf("write %s: end entry not acknowledged by a replica of %s within %s (WAIT: %d, %v): it might not survive a failover", w.ch, redisconn.NodeAddr(master), endReplicaWait, n, err)
		}
		return add, nil
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *redisWriter) Stats() WriterStats { return w.stats.snapshot() }

func (w *redisWriter) Close() error {
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	return nil
}
