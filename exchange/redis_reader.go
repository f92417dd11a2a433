package exchange

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisReader is the Redis consumer end. Read keeps a buffer per input of
// entries fetched and not yet returned; when no unpaused input has one it
// makes one round trip (see roundTrip) that settles credits and fetches
// more.
type redisReader struct {
	t       *redisTransport
	name    string
	inputs  []Channel
	streams []string
	credits []string
	keys    []string       // streams then credits: all must exist
	index   map[string]int // stream key to input
	count   int64          // XREAD COUNT

	closed bool
	err    error // sticky: a channel is lost or broke the protocol
	wins   []consumerWindow
	bufs   [][]bufferedEntry // per input: received, not yet returned
	paused []bool
	next   int       // input to look at first, so inputs take turns
	prev   heldEntry // entry returned by the last Read, if any
	timer  *time.Timer

	xreadArgs []string
	sets      []*redis.BoolCmd
	announce  []announcement
}

type bufferedEntry struct {
	seq uint64
	e   Entry
}

// announcement is what one round trip tells one channel.
type announcement struct {
	input int
	limit int64
	set   bool // limit is new
	keep  uint64
}

func (r *redisReader) Read(ctx context.Context, timeout time.Duration) (int, Entry, bool, error) {
	if r.closed || r.t.closed.Load() {
		return 0, Entry{}, false, ErrClosed
	}
	if r.err != nil {
		return 0, Entry{}, false, r.err
	}
	if p := r.prev; p.valid {
		r.prev = heldEntry{}
		if err := r.wins[p.input].consume(p.seq, p.data); err != nil {
			return 0, Entry{}, false, r.fail(ctx, err)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		if r.ready() {
			if r.due() {
				if _, err := r.roundTrip(ctx, false, 0); err != nil {
					return 0, Entry{}, false, r.fail(ctx, err)
				}
			}
			i, be := r.pop()
			r.prev = heldEntry{valid: true, input: i, seq: be.seq, data: be.e.Kind == KindData}
			return i, be.e, true, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, Entry{}, false, err
		}
		remaining := time.Until(deadline)
		if !r.anyActive() {
			// Every input is paused: settle credits, then wait out the timeout.
			if _, err := r.roundTrip(ctx, false, 0); err != nil {
				return 0, Entry{}, false, r.fail(ctx, err)
			}
			if remaining > 0 {
				if err := r.sleep(ctx, remaining); err != nil {
					return 0, Entry{}, false, err
				}
			}
			return 0, Entry{}, false, nil
		}
		block := min(max(remaining, 0), r.t.opts.MaxBlock)
		if d, ok := ctx.Deadline(); ok {
			// Leave the network read room to finish before ctx's deadline.
			block = min(block, time.Until(d)/2)
		}
		n, err := r.roundTrip(ctx, true, block)
		if err != nil {
			return 0, Entry{}, false, r.fail(ctx, err)
		}
		if n == 0 && !time.Now().Before(deadline) {
			return 0, Entry{}, false, nil
		}
	}
}

func (r *redisReader) fail(ctx context.Context, err error) error {
	err = r.t.mapErr(ctx, err)
	if errors.Is(err, ErrChannelLost) || errors.Is(err, errOverspent) || errors.Is(err, errCorrupt) {
		r.err = err
	}
	return err
}

func (r *redisReader) sleep(ctx context.Context, d time.Duration) error {
	if r.timer == nil {
		r.timer = time.NewTimer(d)
	} else {
		r.timer.Reset(d)
	}
	select {
	case <-r.timer.C:
		return nil
	case <-ctx.Done():
		r.timer.Stop()
		return ctx.Err()
	}
}

// ready reports whether an input that is not paused has a buffered entry.
func (r *redisReader) ready() bool {
	for i, b := range r.bufs {
		if len(b) > 0 && !r.paused[i] {
			return true
		}
	}
	return false
}

func (r *redisReader) anyActive() bool {
	for _, p := range r.paused {
		if !p {
			return true
		}
	}
	return false
}

func (r *redisReader) due() bool {
	for i := range r.wins {
		if r.wins[i].due() {
			return true
		}
	}
	return false
}

// pop takes the oldest buffered entry of the next ready input, in turn.
func (r *redisReader) pop() (int, bufferedEntry) {
	n := len(r.bufs)
	for k := range n {
		i := (r.next + k) % n
		if r.paused[i] || len(r.bufs[i]) == 0 {
			continue
		}
		be := r.bufs[i][0]
		r.bufs[i][0] = bufferedEntry{}
		r.bufs[i] = r.bufs[i][1:]
		if len(r.bufs[i]) == 0 {
			r.bufs[i] = r.bufs[i][:0:0] // let the drained array go
		}
		r.next = (i + 1) % n
		return i, be
	}
	panic("exchange: pop without a ready input")
}

// roundTrip is one pipeline: check that every key still exists, trim
// consumed entries, announce credit limits, and, when fetch is set, read
// new entries of every input that is not paused, blocking up to block. It
// returns the number of entries read.
//
// A master of a Redis Cluster that turns into a replica (a failover)
// unblocks its blocked XREADs with an UNBLOCKED error, which go-redis does
// not retry. Nothing of the round trip took effect that a second one would
// repeat differently (its trims and limits are idempotent; no entry was
// taken), so it is sent again, to the new master, a few times.
func (r *redisReader) roundTrip(ctx context.Context, fetch bool, block time.Duration) (int, error) {
	for try := 1; ; try++ {
		n, err := r.roundTripOnce(ctx, fetch, block)
		if err == nil || try == 3 || !isUnblocked(err) || ctx.Err() != nil {
			return n, err
		}
	}
}

// isUnblocked reports whether err is a server's UNBLOCKED error.
func isUnblocked(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "UNBLOCKED ")
}

func (r *redisReader) roundTripOnce(ctx context.Context, fetch bool, block time.Duration) (int, error) {
	pipe := r.t.client.Pipeline()
	exists := pipe.Exists(ctx, r.keys...)
	r.announce = r.announce[:0]
	for i := range r.wins {
		limit, announce, keep, trim := r.wins[i].pending()
		if trim {
			pipe.XTrimMinID(ctx, r.streams[i], entryID(keep))
		}
		if announce || trim {
			r.announce = append(r.announce, announcement{input: i, limit: limit, set: announce, keep: keep})
		}
	}
	// Limits go after every trim: a stream never holds more than the
	// window of data entries.
	r.sets = r.sets[:0]
	for _, a := range r.announce {
		if a.set {
			r.sets = append(r.sets, pipe.SetXX(ctx, r.credits[a.input], a.limit, 0))
		}
	}
	var xread *redis.XStreamSliceCmd
	if fetch {
		r.xreadArgs = r.xreadArgs[:0]
		for i, s := range r.streams {
			if !r.paused[i] {
				r.xreadArgs = append(r.xreadArgs, s)
			}
		}
		for i := range r.streams {
			if !r.paused[i] {
				r.xreadArgs = append(r.xreadArgs, entryID(r.wins[i].receivedSeq))
			}
		}
		args := &redis.XReadArgs{Streams: r.xreadArgs, Count: r.count, Block: -1}
		if block > 0 {
			// BLOCK takes whole milliseconds, and 0 would mean forever.
			args.Block = max(block, time.Millisecond)
		}
		xread = pipe.XRead(ctx, args)
	}
	cmds, _ := pipe.Exec(ctx)
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("read %s: %w", r.name, r.t.mapErr(ctx, err))
		}
	}
	if exists.Val() != int64(len(r.keys)) {
		// Either the coordinator ended this attempt and deleted its keys
		// (this task is fenced: a newer attempt does its work, nothing is
		// lost), or Redis lost its data (the job restarts from its latest
		// checkpoint). The reader cannot tell which; say both.
		return 0, fmt.Errorf("read %s: %d of its %d stream and credit keys are gone: this attempt was ended by the coordinator (the task is fenced; a newer attempt has its work) or Redis lost its data (the job restarts from its latest checkpoint): %w",
			r.name, int64(len(r.keys))-exists.Val(), len(r.keys), ErrChannelLost)
	}
	for _, s := range r.sets {
		if !s.Val() {
			return 0, fmt.Errorf("read %s: credit key %s vanished: %w", r.name, s.Args()[1], ErrChannelLost)
		}
	}
	for _, a := range r.announce {
		r.wins[a.input].announced(a.limit, a.keep)
	}
	if xread == nil {
		return 0, nil
	}
	n := 0
	for _, s := range xread.Val() {
		i, ok := r.index[s.Stream]
		if !ok {
			return 0, fmt.Errorf("read %s: reply names stream %q it did not ask for", r.name, s.Stream)
		}
		for _, m := range s.Messages {
			seq, e, err := decodeEntry(m.ID, m.Values)
			if err != nil {
				return n, fmt.Errorf("read %s: %w", r.inputs[i], err)
			}
			if err := r.wins[i].receive(seq, e.Kind == KindData); err != nil {
				return n, fmt.Errorf("read %s: %w", r.inputs[i], err)
			}
			r.bufs[i] = append(r.bufs[i], bufferedEntry{seq: seq, e: e})
			n++
		}
	}
	return n, nil
}

func (r *redisReader) Pause(input int)  { r.paused[input] = true }
func (r *redisReader) Resume(input int) { r.paused[input] = false }

func (r *redisReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.bufs = nil
	if r.timer != nil {
		r.timer.Stop()
	}
	return nil
}
