package exchange

import (
	"errors"
	"fmt"
)

// The credit protocol, shared by every transport.
//
// Entries of a channel carry sequence numbers 1, 2, 3, ... in write order,
// data and control entries alike. The consumer announces a credit limit: the
// total number of data entries the producer may have written since the
// channel began. It starts at the window (ReaderOptions.Credits) and grows
// by one for every data entry the consumer has consumed:
//
//	limit = window + consumed
//
// The producer writes a data entry only while sent < limit, so the data
// entries written and not yet consumed never exceed the window:
//
//	sent - consumed <= limit - consumed = window
//
// A limit is an absolute value, not an increment: announcing it twice (a
// retried SET after a lost reply) changes nothing, and the producer only
// ever reads it. That makes every step of the protocol idempotent, which an
// increment-and-decrement counter is not.
//
// producerWindow and consumerWindow hold the two ends' bookkeeping. They do
// no I/O, start no goroutines and are not safe for concurrent use: each is
// owned by the goroutine driving its writer or reader.

// producerWindow is the producer's view of one channel's credit.
type producerWindow struct {
	limit int64 // highest limit observed; 0 until the consumer initialised the channel
	sent  int64 // data entries written
}

// observe records a limit read from the channel; exists is false when the
// channel has no limit. Before the consumer initialised the channel that
// only means "no credit yet". After it, a missing or shrinking limit means
// the channel's state was lost, and observe returns an error wrapping
// ErrChannelLost.
func (w *producerWindow) observe(limit int64, exists bool) error {
	switch {
	case !exists && w.limit > 0:
		return fmt.Errorf("credit limit vanished (was %d): %w", w.limit, ErrChannelLost)
	case !exists:
		return nil
	case limit < w.limit:
		return fmt.Errorf("credit limit went back from %d to %d: %w", w.limit, limit, ErrChannelLost)
	case limit <= 0:
		return fmt.Errorf("invalid credit limit %d", limit)
	}
	w.limit = limit
	return nil
}

// initialised reports whether a consumer has announced a limit.
func (w *producerWindow) initialised() bool { return w.limit > 0 }

// available is the number of data entries the producer may write now.
func (w *producerWindow) available() int64 { return w.limit - w.sent }

// spend records one data entry written. It reports false, recording
// nothing, when no credit is available.
func (w *producerWindow) spend() bool {
	if w.available() <= 0 {
		return false
	}
	w.sent++
	return true
}

// errOverspent means a producer wrote more data entries than its credit
// allowed: a second writer on the channel, or a broken transport.
var errOverspent = errors.New("producer exceeded its credit")

// consumerWindow is the consumer's bookkeeping for one channel.
//
// An entry goes through three states at the consumer: received (read from
// the channel, waiting in a buffer or handed to the caller), consumed (the
// caller called Read again), and announced (its credit is part of the limit
// the producer can see, and it is trimmed from storage).
type consumerWindow struct {
	window int64 // credits granted: the bound on data entries outstanding
	batch  int64 // announce once this many consumed credits are unannounced

	received int64 // data entries received
	consumed int64 // data entries consumed
	acked    int64 // limit the producer is known to be able to see

	receivedSeq uint64 // sequence number of the last entry received
	consumedSeq uint64 // sequence number of the last entry consumed
	trimmedSeq  uint64 // entries up to this sequence number are trimmed
}

// newConsumerWindow returns the bookkeeping of a channel granted window
// credits whose consumer returns them in batches of batch (at least 1).
// The initial limit, window, counts as announced: the reader sets it when
// it initialises the channel.
func newConsumerWindow(window, batch int) consumerWindow {
	return consumerWindow{
		window: int64(window),
		batch:  int64(max(batch, 1)),
		acked:  int64(window),
	}
}

// limit is the credit limit the consumer grants now.
func (w *consumerWindow) limit() int64 { return w.window + w.consumed }

// outstanding is the number of data entries received and not consumed.
func (w *consumerWindow) outstanding() int64 { return w.received - w.consumed }

// receive records an entry read from the channel. An entry out of sequence
// means entries were lost (an error wrapping ErrChannelLost); a data entry
// beyond the window means the producer overspent.
func (w *consumerWindow) receive(seq uint64, data bool) error {
	if seq != w.receivedSeq+1 {
		return fmt.Errorf("entry %d follows entry %d: %w", seq, w.receivedSeq, ErrChannelLost)
	}
	if data && w.outstanding() >= w.window {
		return fmt.Errorf("data entry %d beyond a window of %d: %w", seq, w.window, errOverspent)
	}
	w.receivedSeq = seq
	if data {
		w.received++
	}
	return nil
}

// consume records that the caller is done with the entry seq, which must be
// the oldest received entry not yet consumed.
func (w *consumerWindow) consume(seq uint64, data bool) error {
	if seq != w.consumedSeq+1 || seq > w.receivedSeq {
		return fmt.Errorf("consume entry %d: consumed up to %d, received up to %d", seq, w.consumedSeq, w.receivedSeq)
	}
	if data && w.consumed >= w.received {
		return fmt.Errorf("consume entry %d: no data entry outstanding", seq)
	}
	w.consumedSeq = seq
	if data {
		w.consumed++
	}
	return nil
}

// due reports whether enough consumed credits are unannounced to be worth a
// round trip of their own.
func (w *consumerWindow) due() bool { return w.limit()-w.acked >= w.batch }

// pending returns what the consumer should tell the channel: the credit
// limit to announce (announce is false when the producer already sees it)
// and the first sequence number to keep (trim is false when nothing new is
// consumed). Trimming must take effect before the limit is announced, so
// the stream never holds more than window data entries.
func (w *consumerWindow) pending() (limit int64, announce bool, keepFrom uint64, trim bool) {
	return w.limit(), w.limit() > w.acked, w.consumedSeq + 1, w.consumedSeq > w.trimmedSeq
}

// announced records that the channel now holds limit and keeps entries from
// keepFrom on, as returned by pending.
func (w *consumerWindow) announced(limit int64, keepFrom uint64) {
	w.acked = max(w.acked, limit)
	w.trimmedSeq = max(w.trimmedSeq, keepFrom-1)
}
