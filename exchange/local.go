package exchange

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// NewLocal returns an in-process transport for the embedded single-process
// mode. It keeps the Redis transport's semantics (per-channel order,
// credits, control entries that never wait, pause, DeleteAttempt) but passes
// payloads by reference: a reader gets the very slice its writer wrote.
//
// One mutex guards all channels; waiters park on one-slot wake-up channels,
// so nothing polls.
func NewLocal() Transport {
	t := &localTransport{done: make(chan struct{})}
	t.mu.chans = make(map[Channel]*localChan)
	return t
}

// InProcess reports whether t carries entries within this process (the
// embedded mode's transport): its consumers read the payload the producer
// encoded, so compressing it only costs CPU.
func InProcess(t Transport) bool {
	_, ok := t.(*localTransport)
	return ok
}

type localTransport struct {
	done chan struct{} // closed by Close

	mu struct {
		sync.Mutex
		closed bool
		chans  map[Channel]*localChan
	}
}

var _ Transport = (*localTransport)(nil)

// localChan is one channel. Its fields are guarded by localTransport.mu.
type localChan struct {
	q          []localEntry  // written, not yet read
	limit      int64         // credit limit set by the reader; 0 before it
	hasReader  bool          // a reader initialised the channel
	lost       bool          // removed by DeleteAttempt
	writerWake chan struct{} // one slot; signalled when limit grows or the channel is lost
	readerWake chan struct{} // the reader's wake-up channel; nil without an open reader
}

type localEntry struct {
	seq uint64
	e   Entry
}

// wake signals a one-slot wake-up channel without blocking; a signal already
// pending is enough, as the waiter re-checks all state after waking.
func wake(c chan struct{}) {
	if c == nil {
		return
	}
	select {
	case c <- struct{}{}:
	default:
	}
}

// channel returns ch's state, creating it. t.mu must be held.
func (t *localTransport) channel(ch Channel) *localChan {
	c := t.mu.chans[ch]
	if c == nil {
		c = &localChan{writerWake: make(chan struct{}, 1)}
		t.mu.chans[ch] = c
	}
	return c
}

func (t *localTransport) NewWriter(ch Channel) (Writer, error) {
	if err := ch.validate(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return nil, ErrClosed
	}
	return &localWriter{t: t, name: ch, ch: t.channel(ch)}, nil
}

func (t *localTransport) NewReader(ctx context.Context, inputs []Channel, opts ReaderOptions) (Reader, error) {
	if err := validateInputs(inputs); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return nil, ErrClosed
	}
	for _, ch := range inputs {
		if c := t.mu.chans[ch]; c != nil && c.hasReader {
			return nil, errReaderExists(ch)
		}
	}
	r := &localReader{
		t:      t,
		inputs: inputs,
		chans:  make([]*localChan, len(inputs)),
		wins:   make([]consumerWindow, len(inputs)),
		paused: make([]bool, len(inputs)),
		wake:   make(chan struct{}, 1),
	}
	for i, ch := range inputs {
		c := t.channel(ch)
		c.hasReader = true
		c.readerWake = r.wake
		c.limit = int64(opts.Credits)
		wake(c.writerWake)
		r.chans[i] = c
		// Returning credit costs nothing here, so return it at once.
		r.wins[i] = newConsumerWindow(opts.Credits, 1)
	}
	return r, nil
}

func (t *localTransport) DeleteAttempt(ctx context.Context, job string, attempt int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return ErrClosed
	}
	for ch, c := range t.mu.chans {
		if ch.Job == job && (attempt < 0 || ch.Attempt == attempt) {
			c.lost = true
			c.q = nil
			wake(c.writerWake)
			wake(c.readerWake)
			delete(t.mu.chans, ch)
		}
	}
	return nil
}

// CountKeys counts what a Redis transport would store for the job's attempt
// (attempt < 0: every attempt): a stream per channel and a credit limit per
// channel with a reader. Tests use it to check DeleteAttempt.
func (t *localTransport) CountKeys(ctx context.Context, job string, attempt int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for ch, c := range t.mu.chans {
		if ch.Job == job && (attempt < 0 || ch.Attempt == attempt) {
			n++
			if c.hasReader {
				n++
			}
		}
	}
	return n, nil
}

func (t *localTransport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.mu.closed {
		t.mu.closed = true
		close(t.done)
	}
	return nil
}

type localWriter struct {
	t    *localTransport
	name Channel
	ch   *localChan

	nextLook time.Time // Idle's; only the writer's goroutine uses it

	// Guarded by t.mu.
	closed bool
	win    producerWindow
	seq    uint64

	stats writerStats
}

// Idle reports a deleted channel, looking once a second (the transport's
// lock is shared by every channel): an in-process channel loses nothing
// otherwise.
func (w *localWriter) Idle(ctx context.Context, now time.Time) error {
	if now.Before(w.nextLook) {
		return nil
	}
	w.nextLook = now.Add(time.Second)
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	switch {
	case w.closed || w.t.mu.closed:
		return ErrClosed
	case w.ch.lost:
		return fmt.Errorf("write %s: %w", w.name, ErrChannelLost)
	}
	return nil
}

func (w *localWriter) Write(ctx context.Context, e Entry) error {
	if err := validateEntry(e); err != nil {
		return err
	}
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	var waitStart time.Time
	defer func() {
		if !waitStart.IsZero() {
			w.stats.creditWait.Add(int64(time.Since(waitStart)))
		}
	}()
	for {
		switch {
		case w.closed || t.mu.closed:
			return ErrClosed
		case w.ch.lost:
			return fmt.Errorf("write %s: %w", w.name, ErrChannelLost)
		}
		if e.Kind != KindData {
			break
		}
		if err := w.win.observe(w.ch.limit, w.ch.hasReader); err != nil {
			return fmt.Errorf("write %s: %w", w.name, err)
		}
		if w.win.spend() {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if waitStart.IsZero() {
			waitStart = time.Now()
			w.stats.creditWaits.Add(1)
		}
		t.mu.Unlock()
		select {
		case <-w.ch.writerWake:
		case <-ctx.Done():
		case <-t.done:
		}
		t.mu.Lock()
	}
	w.seq++
	w.ch.q = append(w.ch.q, localEntry{seq: w.seq, e: e})
	wake(w.ch.readerWake)
	w.stats.wrote(e)
	return nil
}

func (w *localWriter) Stats() WriterStats { return w.stats.snapshot() }

func (w *localWriter) Close() error {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	w.closed = true
	return nil
}

type localReader struct {
	t      *localTransport
	inputs []Channel
	wake   chan struct{}

	// Guarded by t.mu.
	chans  []*localChan
	wins   []consumerWindow
	paused []bool
	closed bool
	next   int       // input to look at first, so inputs take turns
	prev   heldEntry // entry returned by the last Read, if any
}

// heldEntry is the entry a reader handed out last; the next Read consumes it.
type heldEntry struct {
	valid bool
	input int
	seq   uint64
	data  bool
}

func (r *localReader) Read(ctx context.Context, timeout time.Duration) (int, Entry, bool, error) {
	t := r.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.closed || t.mu.closed {
		return 0, Entry{}, false, ErrClosed
	}
	if err := r.consumePrev(); err != nil {
		return 0, Entry{}, false, err
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		switch {
		case r.closed || t.mu.closed:
			return 0, Entry{}, false, ErrClosed
		case r.anyLost():
			return 0, Entry{}, false, fmt.Errorf("read %s: %w", r.inputs[0], ErrChannelLost)
		}
		if i, le, ok := r.pop(); ok {
			if err := r.wins[i].receive(le.seq, le.e.Kind == KindData); err != nil {
				return 0, Entry{}, false, fmt.Errorf("read %s: %w", r.inputs[i], err)
			}
			r.prev = heldEntry{valid: true, input: i, seq: le.seq, data: le.e.Kind == KindData}
			return i, le.e, true, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, Entry{}, false, err
		}
		if timeout <= 0 {
			return 0, Entry{}, false, nil
		}
		if timer == nil {
			timer = time.NewTimer(timeout)
		}
		t.mu.Unlock()
		timedOut := false
		select {
		case <-r.wake:
		case <-ctx.Done():
		case <-t.done:
		case <-timer.C:
			timedOut = true
		}
		t.mu.Lock()
		if timedOut {
			timeout = 0 // one last look, then report the timeout
		}
	}
}

// consumePrev marks the entry returned by the last Read consumed and gives
// its credit back. t.mu must be held.
func (r *localReader) consumePrev() error {
	p := r.prev
	if !p.valid {
		return nil
	}
	r.prev = heldEntry{}
	if err := r.wins[p.input].consume(p.seq, p.data); err != nil {
		return err
	}
	limit, announce, keep, _ := r.wins[p.input].pending()
	if c := r.chans[p.input]; announce && !c.lost {
		c.limit = limit
		wake(c.writerWake)
	}
	r.wins[p.input].announced(limit, keep)
	return nil
}

func (r *localReader) anyLost() bool {
	for _, c := range r.chans {
		if c.lost {
			return true
		}
	}
	return false
}

// pop takes the oldest entry of the next input, in turn, that is not paused
// and has one. t.mu must be held.
func (r *localReader) pop() (int, localEntry, bool) {
	n := len(r.chans)
	for k := range n {
		i := (r.next + k) % n
		c := r.chans[i]
		if r.paused[i] || len(c.q) == 0 {
			continue
		}
		le := c.q[0]
		c.q[0] = localEntry{}
		c.q = c.q[1:]
		r.next = (i + 1) % n
		return i, le, true
	}
	return 0, localEntry{}, false
}

func (r *localReader) Pause(input int)  { r.setPaused(input, true) }
func (r *localReader) Resume(input int) { r.setPaused(input, false) }

func (r *localReader) setPaused(input int, paused bool) {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	r.paused[input] = paused
}

func (r *localReader) Close() error {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	for _, c := range r.chans {
		if c.readerWake == r.wake {
			c.readerWake = nil
		}
	}
	return nil
}

// writerStats are a writer's counters, readable from any goroutine.
type writerStats struct {
	entries     atomic.Int64
	bytes       atomic.Int64
	creditWaits atomic.Int64
	creditWait  atomic.Int64 // nanoseconds
}

func (s *writerStats) wrote(e Entry) {
	s.entries.Add(1)
	s.bytes.Add(int64(len(e.Payload)))
}

func (s *writerStats) snapshot() WriterStats {
	return WriterStats{
		Entries:     s.entries.Load(),
		Bytes:       s.bytes.Load(),
		CreditWaits: s.creditWaits.Load(),
		CreditWait:  time.Duration(s.creditWait.Load()),
	}
}
