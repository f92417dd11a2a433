package exchange

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Kind says what an entry carries.
type Kind uint8

const (
	// KindData carries an Arrow IPC payload and spends one credit.
	KindData Kind = 1 + iota
	// KindWatermark carries an event-time watermark in Value (ms since epoch).
	KindWatermark
	// KindBarrier carries a checkpoint id in Value.
	KindBarrier
	// KindEnd marks the end of a channel: the producer will write nothing more.
	KindEnd
)

func (k Kind) String() string {
	switch k {
	case KindData:
		return "data"
	case KindWatermark:
		return "watermark"
	case KindBarrier:
		return "barrier"
	case KindEnd:
		return "end"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Entry is one element of a channel.
type Entry struct {
	Kind Kind
	// Value is the watermark (ms) of a watermark entry or the checkpoint id of
	// a barrier entry; zero otherwise.
	Value int64
	// Payload is the Arrow IPC payload of a data entry. A writer takes
	// ownership of it (the caller must not modify it after Write), except
	// that a transport that crosses processes (not InProcess) is done with
	// it when Write returns: the caller may reuse its buffer then. A
	// reader's payload is valid until the next Read on the same Reader.
	Payload []byte
}

// Channel names one stream: the data flowing on one edge from one producer
// subtask to one consumer subtask of one attempt of one job.
type Channel struct {
	Job     string
	Attempt int
	// Edge names the edge among the consumer vertex's inputs (e.g. the
	// producing vertex's name). Together with Producer it is unique per
	// consumer subtask.
	Edge           string
	Producer       int
	ConsumerVertex string
	Consumer       int
}

func (c Channel) String() string {
	return fmt.Sprintf("%s/%d %s[%d]->%s[%d]", c.Job, c.Attempt, c.Edge, c.Producer, c.ConsumerVertex, c.Consumer)
}

// validate reports every problem with c at once.
func (c Channel) validate() error {
	var errs []error
	if c.Job == "" {
		errs = append(errs, errors.New("job is empty"))
	}
	if c.Attempt < 0 {
		errs = append(errs, fmt.Errorf("attempt is %d, want >= 0", c.Attempt))
	}
	if c.Edge == "" {
		errs = append(errs, errors.New("edge is empty"))
	}
	if c.Producer < 0 {
		errs = append(errs, fmt.Errorf("producer is %d, want >= 0", c.Producer))
	}
	if c.ConsumerVertex == "" {
		errs = append(errs, errors.New("consumer vertex is empty"))
	}
	if c.Consumer < 0 {
		errs = append(errs, fmt.Errorf("consumer is %d, want >= 0", c.Consumer))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid channel %s: %w", c, errors.Join(errs...))
	}
	return nil
}

// validateInputs checks the inputs of one reader: at least one, each valid,
// no duplicates, all of one consumer subtask of one attempt.
func validateInputs(inputs []Channel) error {
	if len(inputs) == 0 {
		return errors.New("invalid reader inputs: none given")
	}
	first := inputs[0]
	seen := make(map[Channel]bool, len(inputs))
	for i, ch := range inputs {
		if err := ch.validate(); err != nil {
			return fmt.Errorf("invalid reader input %d: %w", i, err)
		}
		if ch.Job != first.Job || ch.Attempt != first.Attempt ||
			ch.ConsumerVertex != first.ConsumerVertex || ch.Consumer != first.Consumer {
			return fmt.Errorf("invalid reader input %d: %s is not an input of %s/%d %s[%d] like input 0",
				i, ch, first.Job, first.Attempt, first.ConsumerVertex, first.Consumer)
		}
		if seen[ch] {
			return fmt.Errorf("invalid reader input %d: %s given twice", i, ch)
		}
		seen[ch] = true
	}
	return nil
}

func errReaderExists(ch Channel) error {
	return fmt.Errorf("new reader: channel %s already has a reader in this attempt", ch)
}

// validateEntry checks an entry before it is written.
func validateEntry(e Entry) error {
	switch e.Kind {
	case KindData:
		return nil
	case KindWatermark, KindBarrier, KindEnd:
		if len(e.Payload) > 0 {
			return fmt.Errorf("invalid entry: a %s entry carries no payload, got %d bytes", e.Kind, len(e.Payload))
		}
		return nil
	}
	return fmt.Errorf("invalid entry: kind %d, want %d (data) to %d (end)", uint8(e.Kind), uint8(KindData), uint8(KindEnd))
}

// Errors returned by transports.
var (
	// ErrClosed is returned by operations on a closed writer, reader or transport.
	ErrClosed = errors.New("exchange: closed")
	// ErrChannelLost means a channel's data vanished underneath it (Redis
	// restarted empty or evicted the key, or DeleteAttempt removed it): the
	// attempt cannot continue and must be restarted. Once a reader or writer
	// has returned it, it returns it from every later call.
	ErrChannelLost = errors.New("exchange: channel lost")
)

// ReaderOptions configure the consumer end of a set of channels.
type ReaderOptions struct {
	// Credits is the number of data entries the reader lets each input
	// channel have outstanding (written but not yet consumed). Default 4.
	Credits int
}

func (o ReaderOptions) withDefaults() ReaderOptions {
	if o.Credits <= 0 {
		o.Credits = 4
	}
	return o
}

// Transport creates the two ends of channels. Implementations: Redis
// streams (NewRedis) and in-process (NewLocal); both pass the contract suite
// in exchangetest.
type Transport interface {
	// NewWriter returns the producer end of ch. It does not block on the
	// consumer's existence.
	NewWriter(ch Channel) (Writer, error)
	// NewReader returns the consumer end of inputs, which must share Job,
	// Attempt, ConsumerVertex and Consumer. It grants each input
	// opts.Credits credits before returning. A channel has at most one
	// reader in its attempt's life: a second NewReader on it fails, even
	// after the first reader was closed (a restarted consumer runs in a new
	// attempt).
	NewReader(ctx context.Context, inputs []Channel, opts ReaderOptions) (Reader, error)
	// DeleteAttempt removes every channel and credit of one attempt of a job
	// (attempt < 0: of every attempt). Readers and writers still open on
	// them see ErrChannelLost or ErrClosed afterwards (a reader may first
	// return entries it had already fetched).
	DeleteAttempt(ctx context.Context, job string, attempt int) error
	// Close releases the transport's connections; it is safe to call twice.
	Close() error
}

// Writer is the producer end of one channel. One goroutine uses it (Stats
// excepted). A channel has one writer.
type Writer interface {
	// Write appends e. A data entry spends one credit and blocks until one
	// is available or ctx is done (returning ctx.Err()); control entries
	// (watermark, barrier, end) never wait for credit and carry no payload.
	// It returns ErrChannelLost when the channel vanished and ErrClosed
	// after Close (of the writer or the transport).
	Write(ctx context.Context, e Entry) error
	// Idle tells the writer that its owner has nothing to write at now;
	// the owner calls it often while it has nothing to write (a call
	// that is not due costs a comparison). A writer idle for a while
	// looks, about once a second, whether the channel still has what it
	// wrote, and returns ErrChannelLost if it does not: a Redis failover
	// to a replica that missed the writer's last entries (or a restart
	// that kept older keys) leaves its reader waiting for entries that are
	// gone, and with no later write nothing else would notice. It also
	// returns ErrChannelLost when the channel was deleted with its
	// attempt, and ErrClosed after Close.
	Idle(ctx context.Context, now time.Time) error
	// Stats reports what the writer has done so far. It may be called from
	// any goroutine.
	Stats() WriterStats
	// Close releases the writer; it does not write an end entry. Safe to
	// call twice.
	Close() error
}

// WriterStats are cumulative counters of one writer.
type WriterStats struct {
	Entries     int64         // entries written, of every kind
	Bytes       int64         // payload bytes written
	CreditWaits int64         // times a data entry found no credit
	CreditWait  time.Duration // total time blocked waiting for credit
}

// Reader is the consumer end of a set of input channels of one consumer
// subtask. One goroutine uses it.
type Reader interface {
	// Read returns the next entry of any input that is not paused, in
	// per-channel order; input is the entry's index in the reader's inputs.
	// It blocks until one is available, timeout passes (ok=false, err=nil;
	// a timeout <= 0 only polls), or ctx is done (ctx.Err()). Inputs with
	// entries ready take turns.
	//
	// Calling Read marks the entry returned by the previous Read as
	// consumed, whatever this call returns: its credit goes back to its
	// producer and it is trimmed from storage, so its Payload must not be
	// used any more. A transport may return credits in small batches but
	// never holds a consumed entry's credit past the moment it waits for
	// more entries.
	//
	// It returns ErrChannelLost when an input vanished and ErrClosed after
	// Close (of the reader or the transport).
	Read(ctx context.Context, timeout time.Duration) (input int, e Entry, ok bool, err error)
	// Pause stops Read from returning entries of input (barrier
	// alignment); its entries stay queued in the channel, holding their
	// credits. Resume undoes it. Both take effect at the next Read.
	Pause(input int)
	Resume(input int)
	// Close releases the reader. Entries not yet consumed stay in their
	// channels with their credits spent; nothing is written. Safe to call
	// twice.
	Close() error
}
