// Package exchangetest is the contract suite of exchange.Transport: every
// implementation runs TestTransport and so keeps the same semantics.
package exchangetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/integration/poll"
)

// KeyCounter is implemented by every transport under test. CountKeys
// counts what the transport stores for a job's attempt (attempt < 0: for
// every attempt of the job); the suite uses it to check DeleteAttempt.
type KeyCounter interface {
	CountKeys(ctx context.Context, job string, attempt int) (int, error)
}

// TestTransport runs the contract suite. newTransport returns a fresh
// transport for one subtest and closes it when the subtest ends; subtests
// use distinct job names, so transports may share a server.
func TestTransport(t *testing.T, newTransport func(t *testing.T) exchange.Transport) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, exchange.Transport)
	}{
		{"Order", testOrder},
		{"ManyToMany", testManyToMany},
		{"ControlWithoutCredit", testControlWithoutCredit},
		{"WriteBeforeReader", testWriteBeforeReader},
		{"Backpressure", testBackpressure},
		{"CreditReturnedWhileWaiting", testCreditReturnedWhileWaiting},
		{"PauseResume", testPauseResume},
		{"InputsTakeTurns", testInputsTakeTurns},
		{"ReadTimeout", testReadTimeout},
		{"DeleteAttempt", testDeleteAttempt},
		{"IdleWriter", testIdleWriter},
		{"Closed", testClosed},
		{"InvalidArguments", testInvalidArguments},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newTransport(t))
		})
	}
}

// Helpers.

const (
	waitLong = 20 * time.Second       // bound on anything that should happen
	readWait = 100 * time.Millisecond // Read timeout while waiting for an entry
)

// jobName is unique per subtest; the '/' in it also exercises escaping.
func jobName(t *testing.T) string { return "weir-test/" + t.Name() }

func channel(job string, attempt int, producer, consumer int) exchange.Channel {
	return exchange.Channel{
		Job: job, Attempt: attempt,
		Edge: "src", Producer: producer,
		ConsumerVertex: "sink", Consumer: consumer,
	}
}

// workers runs a test's background goroutines and waits for them when the
// test ends, even when it fails.
type workers struct {
	t      *testing.T
	ctx    context.Context
	cancel context.CancelFunc
	g      *errgroup.Group
}

func newWorkers(t *testing.T) *workers {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	g, gctx := errgroup.WithContext(ctx)
	w := &workers{t: t, ctx: gctx, cancel: cancel, g: g}
	t.Cleanup(func() {
		cancel()
		_ = g.Wait()
	})
	return w
}

func (w *workers) Go(fn func(ctx context.Context) error) { w.g.Go(func() error { return fn(w.ctx) }) }

// wait waits for the workers and fails the test if one failed.
func (w *workers) wait() {
	w.t.Helper()
	if err := w.g.Wait(); err != nil {
		w.t.Fatalf("worker: %v", err)
	}
}

// fatalf stops the workers and fails the test, reporting a worker's error.
func (w *workers) fatalf(format string, args ...any) {
	w.t.Helper()
	w.cancel()
	err := w.g.Wait()
	w.t.Fatalf("%s (workers: %v)", fmt.Sprintf(format, args...), err)
}

// holds checks that cond holds throughout d.
func holds(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !cond() {
			t.Fatalf("%s: stopped holding", what)
		}
	}
}

// read returns the next entry, with its payload copied, waiting up to
// waitLong.
func read(ctx context.Context, r exchange.Reader) (int, exchange.Entry, error) {
	deadline := time.Now().Add(waitLong)
	for time.Now().Before(deadline) {
		i, e, ok, err := r.Read(ctx, readWait)
		if err != nil {
			return 0, exchange.Entry{}, err
		}
		if ok {
			e.Payload = bytes.Clone(e.Payload)
			return i, e, nil
		}
	}
	return 0, exchange.Entry{}, fmt.Errorf("no entry within %s", waitLong)
}

func mustRead(t *testing.T, r exchange.Reader) (int, exchange.Entry) {
	t.Helper()
	i, e, err := read(context.Background(), r)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return i, e
}

func mustWrite(t *testing.T, w exchange.Writer, e exchange.Entry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := w.Write(ctx, e); err != nil {
		t.Fatalf("write %s entry: %v", e.Kind, err)
	}
}

func mustWriter(t *testing.T, tr exchange.Transport, ch exchange.Channel) exchange.Writer {
	t.Helper()
	w, err := tr.NewWriter(ch)
	if err != nil {
		t.Fatalf("new writer: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func mustReader(t *testing.T, tr exchange.Transport, credits int, inputs ...exchange.Channel) exchange.Reader {
	t.Helper()
	r, err := tr.NewReader(context.Background(), inputs, exchange.ReaderOptions{Credits: credits})
	if err != nil {
		t.Fatalf("new reader: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func data(s string) exchange.Entry {
	return exchange.Entry{Kind: exchange.KindData, Payload: []byte(s)}
}

func control(k exchange.Kind, v int64) exchange.Entry { return exchange.Entry{Kind: k, Value: v} }

func entryString(e exchange.Entry) string {
	if e.Kind == exchange.KindData {
		return fmt.Sprintf("data(%q)", e.Payload)
	}
	return fmt.Sprintf("%s(%d)", e.Kind, e.Value)
}

func expectRead(t *testing.T, r exchange.Reader, input int, want exchange.Entry) {
	t.Helper()
	i, e := mustRead(t, r)
	if i != input || entryString(e) != entryString(want) {
		t.Fatalf("read input %d %s, want input %d %s", i, entryString(e), input, entryString(want))
	}
}

// expectNothing checks that a Read of timeout d returns nothing.
func expectNothing(t *testing.T, r exchange.Reader, d time.Duration) {
	t.Helper()
	i, e, ok, err := r.Read(context.Background(), d)
	if err != nil || ok {
		t.Fatalf("read = input %d %s, ok %t, err %v; want nothing", i, entryString(e), ok, err)
	}
}

func isLostOrClosed(err error) bool {
	return errors.Is(err, exchange.ErrChannelLost) || errors.Is(err, exchange.ErrClosed)
}

// Cases.

// testOrder: one channel keeps the order of every kind of entry, and the
// writer's stats count them.
func testOrder(t *testing.T, tr exchange.Transport) {
	ch := channel(jobName(t), 1, 0, 0)
	w := mustWriter(t, tr, ch)
	r := mustReader(t, tr, 4, ch)

	var want []exchange.Entry
	var payloadBytes int64
	for i := range 500 {
		switch {
		case i%100 == 99:
			want = append(want, control(exchange.KindBarrier, int64(i/100+1)))
		case i%5 == 0:
			want = append(want, control(exchange.KindWatermark, int64(1_700_000_000_000+i)))
		default:
			e := data(fmt.Sprintf("entry %d", i))
			payloadBytes += int64(len(e.Payload))
			want = append(want, e)
		}
	}
	want = append(want, control(exchange.KindEnd, 0))

	wk := newWorkers(t)
	wk.Go(func(ctx context.Context) error {
		for _, e := range want {
			if err := w.Write(ctx, e); err != nil {
				return fmt.Errorf("write %s: %w", entryString(e), err)
			}
		}
		return nil
	})
	for n, e := range want {
		i, got, err := read(wk.ctx, r)
		if err != nil {
			wk.fatalf("read entry %d: %v", n, err)
		}
		if i != 0 || entryString(got) != entryString(e) {
			wk.fatalf("entry %d: read input %d %s, want input 0 %s", n, i, entryString(got), entryString(e))
		}
	}
	wk.wait()
	expectNothing(t, r, 50*time.Millisecond)
	if s := w.Stats(); s.Entries != int64(len(want)) || s.Bytes != payloadBytes {
		t.Errorf("stats: %d entries, %d bytes; want %d, %d", s.Entries, s.Bytes, len(want), payloadBytes)
	}
}

// payload encodes (producer, consumer, seq) plus filler derived from them,
// so a consumer can check every byte it gets.
func payload(p, c, seq int) []byte {
	b := make([]byte, 12, 12+64)
	binary.BigEndian.PutUint32(b[0:], uint32(p))
	binary.BigEndian.PutUint32(b[4:], uint32(c))
	binary.BigEndian.PutUint32(b[8:], uint32(seq))
	for i := range 64 {
		b = append(b, byte(p*31+c*17+seq+i))
	}
	return b
}

// testManyToMany: producers and consumers with several inputs each, all
// running at once, deliver every entry exactly once and in channel order.
func testManyToMany(t *testing.T, tr exchange.Transport) {
	const (
		producers = 4
		consumers = 3
		perChan   = 300 // data entries per channel
		credits   = 3
	)
	job := jobName(t)
	wk := newWorkers(t)
	readers := make([]exchange.Reader, consumers)
	for c := range consumers {
		var inputs []exchange.Channel
		for p := range producers {
			inputs = append(inputs, channel(job, 0, p, c))
		}
		readers[c] = mustReader(t, tr, credits, inputs...)
	}
	for p := range producers {
		writers := make([]exchange.Writer, consumers)
		for c := range consumers {
			writers[c] = mustWriter(t, tr, channel(job, 0, p, c))
		}
		wk.Go(func(ctx context.Context) error {
			for seq := range perChan {
				for c, w := range writers {
					if err := w.Write(ctx, exchange.Entry{Kind: exchange.KindData, Payload: payload(p, c, seq)}); err != nil {
						return fmt.Errorf("producer %d: write %d to %d: %w", p, seq, c, err)
					}
					if seq%50 == 49 {
						if err := w.Write(ctx, control(exchange.KindWatermark, int64(seq))); err != nil {
							return fmt.Errorf("producer %d: write watermark to %d: %w", p, c, err)
						}
					}
				}
			}
			for c, w := range writers {
				if err := w.Write(ctx, control(exchange.KindEnd, 0)); err != nil {
					return fmt.Errorf("producer %d: write end to %d: %w", p, c, err)
				}
			}
			return nil
		})
	}
	for c, r := range readers {
		wk.Go(func(ctx context.Context) error {
			next := make([]int, producers)  // next data seq per input
			marks := make([]int, producers) // watermarks seen per input
			ended := 0
			for ended < producers {
				p, e, err := read(ctx, r)
				if err != nil {
					return fmt.Errorf("consumer %d: read: %w", c, err)
				}
				if next[p] < 0 {
					return fmt.Errorf("consumer %d: input %d: %s after end", c, p, entryString(e))
				}
				switch e.Kind {
				case exchange.KindData:
					if want := payload(p, c, next[p]); !bytes.Equal(e.Payload, want) {
						return fmt.Errorf("consumer %d: input %d: entry %d is %x, want %x", c, p, next[p], e.Payload, want)
					}
					next[p]++
				case exchange.KindWatermark:
					if want := int64(50*marks[p] + 49); e.Value != want || next[p] != int(want)+1 {
						return fmt.Errorf("consumer %d: input %d: watermark %d after %d entries, want %d after %d",
							c, p, e.Value, next[p], want, want+1)
					}
					marks[p]++
				case exchange.KindEnd:
					if next[p] != perChan {
						return fmt.Errorf("consumer %d: input %d: end after %d entries, want %d", c, p, next[p], perChan)
					}
					next[p] = -1
					ended++
				default:
					return fmt.Errorf("consumer %d: input %d: unexpected %s", c, p, entryString(e))
				}
			}
			return nil
		})
	}
	wk.wait()
	for _, r := range readers {
		expectNothing(t, r, 50*time.Millisecond)
	}
}

// testControlWithoutCredit: watermarks, barriers and end pass a writer
// that has no credit left.
func testControlWithoutCredit(t *testing.T, tr exchange.Transport) {
	ch := channel(jobName(t), 0, 0, 0)
	w := mustWriter(t, tr, ch)
	r := mustReader(t, tr, 1, ch)

	mustWrite(t, w, data("only credit"))
	// No credit left: a data entry waits until ctx gives up.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := w.Write(ctx, data("no credit")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("data write without credit = %v, want %v", err, context.DeadlineExceeded)
	}
	start := time.Now()
	mustWrite(t, w, control(exchange.KindWatermark, 7))
	mustWrite(t, w, control(exchange.KindBarrier, 1))
	mustWrite(t, w, control(exchange.KindEnd, 0))
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("control entries took %s without credit", d)
	}
	expectRead(t, r, 0, data("only credit"))
	expectRead(t, r, 0, control(exchange.KindWatermark, 7))
	expectRead(t, r, 0, control(exchange.KindBarrier, 1))
	expectRead(t, r, 0, control(exchange.KindEnd, 0))
	expectNothing(t, r, 50*time.Millisecond)
}

// testWriteBeforeReader: a writer does not wait for its reader to exist;
// control entries written before are delivered, data waits for credit.
func testWriteBeforeReader(t *testing.T, tr exchange.Transport) {
	ch := channel(jobName(t), 0, 0, 0)
	w := mustWriter(t, tr, ch)
	mustWrite(t, w, control(exchange.KindWatermark, 1))
	mustWrite(t, w, control(exchange.KindBarrier, 2))

	var wrote atomic.Bool
	wk := newWorkers(t)
	wk.Go(func(ctx context.Context) error {
		if err := w.Write(ctx, data("after reader")); err != nil {
			return err
		}
		wrote.Store(true)
		return nil
	})
	holds(t, 200*time.Millisecond, "data write waits for a reader", func() bool { return !wrote.Load() })

	r := mustReader(t, tr, 2, ch)
	expectRead(t, r, 0, control(exchange.KindWatermark, 1))
	expectRead(t, r, 0, control(exchange.KindBarrier, 2))
	expectRead(t, r, 0, data("after reader"))
	wk.wait()
}

// testBackpressure: a producer whose consumer reads nothing blocks after
// exactly Credits data entries, and goes on when the consumer consumes.
func testBackpressure(t *testing.T, tr exchange.Transport) {
	const credits = 3
	ch := channel(jobName(t), 0, 0, 0)
	w := mustWriter(t, tr, ch)
	r := mustReader(t, tr, credits, ch)

	var written atomic.Int64
	const total = credits + 3
	wk := newWorkers(t)
	wk.Go(func(ctx context.Context) error {
		for i := range total {
			if err := w.Write(ctx, data(fmt.Sprint(i))); err != nil {
				return err
			}
			written.Add(1)
		}
		return nil
	})
	poll.Until(t, waitLong, "writing the first entries", func() bool { return written.Load() >= credits })
	holds(t, 300*time.Millisecond, fmt.Sprintf("producer blocked after %d entries", credits),
		func() bool { return written.Load() == credits })

	// Reading entry 0 consumes nothing; reading entry 1 consumes entry 0,
	// whose credit lets the producer write one more.
	expectRead(t, r, 0, data("0"))
	holds(t, 100*time.Millisecond, "producer blocked while entry 0 is held",
		func() bool { return written.Load() == credits })
	expectRead(t, r, 0, data("1"))
	poll.Until(t, waitLong, "producer going on after one entry consumed", func() bool { return written.Load() == credits+1 })
	holds(t, 100*time.Millisecond, "producer blocked again", func() bool { return written.Load() == credits+1 })

	for i := 2; i < total; i++ {
		expectRead(t, r, 0, data(fmt.Sprint(i)))
	}
	wk.wait()
	if s := w.Stats(); s.CreditWaits < 2 || s.CreditWait <= 0 {
		t.Errorf("stats: %d credit waits for %s; want at least 2 waits, some time", s.CreditWaits, s.CreditWait)
	}
}

// testCreditReturnedWhileWaiting: with one credit, the credit of the entry
// just read comes back when the reader waits for the next one; a reader
// that only ever holds one entry never deadlocks its producer.
func testCreditReturnedWhileWaiting(t *testing.T, tr exchange.Transport) {
	ch := channel(jobName(t), 0, 0, 0)
	w := mustWriter(t, tr, ch)
	r := mustReader(t, tr, 1, ch)
	wk := newWorkers(t)
	wk.Go(func(ctx context.Context) error {
		for i := range 20 {
			if err := w.Write(ctx, data(fmt.Sprint(i))); err != nil {
				return err
			}
		}
		return nil
	})
	for i := range 20 {
		expectRead(t, r, 0, data(fmt.Sprint(i)))
	}
	wk.wait()
}

// testPauseResume: a paused input's entries, even ones already fetched,
// wait until Resume; other inputs go on.
func testPauseResume(t *testing.T, tr exchange.Transport) {
	job := jobName(t)
	ch0, ch1 := channel(job, 0, 0, 0), channel(job, 0, 1, 0)
	w0, w1 := mustWriter(t, tr, ch0), mustWriter(t, tr, ch1)
	r := mustReader(t, tr, 4, ch0, ch1)

	mustWrite(t, w0, data("a0"))
	mustWrite(t, w0, control(exchange.KindBarrier, 1))
	mustWrite(t, w0, data("a1"))
	mustWrite(t, w0, data("a2"))
	for i := range 3 {
		mustWrite(t, w1, data(fmt.Sprintf("b%d", i)))
	}

	// Read input 0 up to its barrier, then pause it.
	var fromB []string
	for {
		i, e := mustRead(t, r)
		if i == 1 {
			fromB = append(fromB, string(e.Payload))
			continue
		}
		if e.Kind == exchange.KindBarrier {
			break
		}
		if string(e.Payload) != "a0" {
			t.Fatalf("input 0: read %s before the barrier, want a0", entryString(e))
		}
	}
	r.Pause(0)
	mustWrite(t, w0, control(exchange.KindWatermark, 5))
	for len(fromB) < 3 {
		i, e := mustRead(t, r)
		if i != 1 {
			t.Fatalf("read %s from paused input %d", entryString(e), i)
		}
		fromB = append(fromB, string(e.Payload))
	}
	if !slices.Equal(fromB, []string{"b0", "b1", "b2"}) {
		t.Fatalf("input 1 gave %q", fromB)
	}
	expectNothing(t, r, 200*time.Millisecond)

	// Pausing every input makes Read wait out its timeout.
	r.Pause(1)
	mustWrite(t, w1, data("b3"))
	expectNothing(t, r, 100*time.Millisecond)

	r.Resume(0)
	expectRead(t, r, 0, data("a1"))
	expectRead(t, r, 0, data("a2"))
	expectRead(t, r, 0, control(exchange.KindWatermark, 5))
	expectNothing(t, r, 100*time.Millisecond)
	r.Resume(1)
	expectRead(t, r, 1, data("b3"))
}

// testInputsTakeTurns: inputs with entries ready alternate.
func testInputsTakeTurns(t *testing.T, tr exchange.Transport) {
	job := jobName(t)
	ch0, ch1 := channel(job, 0, 0, 0), channel(job, 0, 1, 0)
	w0, w1 := mustWriter(t, tr, ch0), mustWriter(t, tr, ch1)
	r := mustReader(t, tr, 4, ch0, ch1)
	for i := range 3 {
		mustWrite(t, w0, data(fmt.Sprintf("a%d", i)))
		mustWrite(t, w1, data(fmt.Sprintf("b%d", i)))
	}
	var inputs []int
	for range 6 {
		i, _ := mustRead(t, r)
		inputs = append(inputs, i)
	}
	for k := 1; k < len(inputs); k++ {
		if inputs[k] == inputs[k-1] {
			t.Fatalf("inputs read in order %v, want them alternating", inputs)
		}
	}
}

// testReadTimeout: Read gives up after its timeout, or when ctx ends.
func testReadTimeout(t *testing.T, tr exchange.Transport) {
	ch := channel(jobName(t), 0, 0, 0)
	r := mustReader(t, tr, 4, ch)

	start := time.Now()
	expectNothing(t, r, 300*time.Millisecond)
	if d := time.Since(start); d < 290*time.Millisecond || d > 5*time.Second {
		t.Errorf("read with a 300ms timeout returned after %s", d)
	}

	start = time.Now()
	expectNothing(t, r, 0)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("read with no timeout returned after %s", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, _, ok, err := r.Read(ctx, time.Minute); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("read past ctx deadline = ok %t, err %v; want %v", ok, err, context.DeadlineExceeded)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("read returned %s after ctx's deadline", d)
	}

	ctx, cancel = context.WithCancel(context.Background())
	stop := time.AfterFunc(200*time.Millisecond, cancel)
	defer stop.Stop()
	start = time.Now()
	if _, _, ok, err := r.Read(ctx, time.Minute); ok || !errors.Is(err, context.Canceled) {
		t.Errorf("read with ctx cancelled = ok %t, err %v; want %v", ok, err, context.Canceled)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("read returned %s after ctx was cancelled", d)
	}

	// The reader still works.
	w := mustWriter(t, tr, ch)
	mustWrite(t, w, data("x"))
	expectRead(t, r, 0, data("x"))
}

// testDeleteAttempt: DeleteAttempt removes everything of one attempt (or
// every attempt) of one job and nothing else, open ends fail afterwards,
// and they do not bring deleted keys back.
func testDeleteAttempt(t *testing.T, tr exchange.Transport) {
	kc, ok := tr.(KeyCounter)
	if !ok {
		t.Fatalf("transport %T does not implement exchangetest.KeyCounter", tr)
	}
	ctx := context.Background()
	count := func(job string, attempt int) int {
		t.Helper()
		n, err := kc.CountKeys(ctx, job, attempt)
		if err != nil {
			t.Fatalf("count keys of %s/%d: %v", job, attempt, err)
		}
		return n
	}
	base := jobName(t)
	// The other jobs' names would match a sloppy pattern for base.
	a, aColon, aDash := base, base+":1", base+"-x"
	type end struct {
		w exchange.Writer
		r exchange.Reader
	}
	ends := map[string]end{}
	open := func(job string, attempt int) {
		ch := channel(job, attempt, 0, 0)
		w := mustWriter(t, tr, ch)
		r := mustReader(t, tr, 4, ch)
		mustWrite(t, w, data("x"))
		mustWrite(t, w, control(exchange.KindWatermark, 1))
		mustRead(t, r)
		mustRead(t, r)
		ends[fmt.Sprint(job, attempt)] = end{w, r}
	}
	open(a, 1)
	open(a, 2)
	open(aColon, 0)
	open(aDash, 1)
	before := map[string]int{"a1": count(a, 1), "a2": count(a, 2), "aColon": count(aColon, -1), "aDash": count(aDash, -1)}
	for k, n := range before {
		if n == 0 {
			t.Fatalf("count of %s is 0 before any delete", k)
		}
	}
	if n := count(a, -1); n != before["a1"]+before["a2"] {
		t.Fatalf("count of every attempt is %d, want %d", n, before["a1"]+before["a2"])
	}

	if err := tr.DeleteAttempt(ctx, a, 1); err != nil {
		t.Fatalf("delete attempt: %v", err)
	}
	check := func(what string, got, want int) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %d keys, want %d", what, got, want)
		}
	}
	check("deleted attempt", count(a, 1), 0)
	check("other attempt", count(a, 2), before["a2"])
	check("job with ':' in its name", count(aColon, -1), before["aColon"])
	check("job with the same prefix", count(aDash, -1), before["aDash"])

	// Open ends of the deleted attempt fail, and leave nothing behind.
	e := ends[fmt.Sprint(a, 1)]
	wctx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	if err := e.w.Write(wctx, data("y")); !isLostOrClosed(err) {
		t.Errorf("data write after delete = %v, want %v or %v", err, exchange.ErrChannelLost, exchange.ErrClosed)
	}
	if err := e.w.Write(wctx, control(exchange.KindWatermark, 2)); !isLostOrClosed(err) {
		t.Errorf("watermark write after delete = %v, want %v or %v", err, exchange.ErrChannelLost, exchange.ErrClosed)
	}
	if _, _, _, err := e.r.Read(wctx, readWait); !isLostOrClosed(err) {
		t.Errorf("read after delete = %v, want %v or %v", err, exchange.ErrChannelLost, exchange.ErrClosed)
	}
	check("deleted attempt after using its open ends", count(a, 1), 0)

	if err := tr.DeleteAttempt(ctx, a, -1); err != nil {
		t.Fatalf("delete every attempt: %v", err)
	}
	check("every attempt deleted", count(a, -1), 0)
	check("job with ':' in its name", count(aColon, -1), before["aColon"])
	check("job with the same prefix", count(aDash, -1), before["aDash"])
	if _, _, _, err := ends[fmt.Sprint(a, 2)].r.Read(wctx, readWait); !isLostOrClosed(err) {
		t.Errorf("read after deleting every attempt = %v, want %v or %v", err, exchange.ErrChannelLost, exchange.ErrClosed)
	}

	// The untouched jobs still work.
	e = ends[fmt.Sprint(aColon, 0)]
	mustWrite(t, e.w, data("z"))
	expectRead(t, e.r, 0, data("z"))

	if err := tr.DeleteAttempt(ctx, base+"-none", 3); err != nil {
		t.Errorf("delete attempt of an unknown job: %v", err)
	}
}

// testClosed: every end fails with ErrClosed after Close, and Close is safe
// to call twice.
func testClosed(t *testing.T, tr exchange.Transport) {
	job := jobName(t)
	ch := channel(job, 0, 0, 0)
	w := mustWriter(t, tr, ch)
	r := mustReader(t, tr, 4, ch)
	ctx := context.Background()

	mustWrite(t, w, data("x"))
	expectRead(t, r, 0, data("x"))

	w2 := mustWriter(t, tr, channel(job, 0, 1, 0))
	if err := w2.Close(); err != nil {
		t.Fatalf("close writer: %v", err)
	}
	if err := w2.Close(); err != nil {
		t.Fatalf("close writer twice: %v", err)
	}
	if err := w2.Write(ctx, control(exchange.KindEnd, 0)); !errors.Is(err, exchange.ErrClosed) {
		t.Errorf("write to a closed writer = %v, want %v", err, exchange.ErrClosed)
	}
	r2 := mustReader(t, tr, 4, channel(job, 0, 1, 0))
	if err := r2.Close(); err != nil {
		t.Fatalf("close reader: %v", err)
	}
	if err := r2.Close(); err != nil {
		t.Fatalf("close reader twice: %v", err)
	}
	if _, _, _, err := r2.Read(ctx, readWait); !errors.Is(err, exchange.ErrClosed) {
		t.Errorf("read from a closed reader = %v, want %v", err, exchange.ErrClosed)
	}

	if err := tr.Close(); err != nil {
		t.Fatalf("close transport: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("close transport twice: %v", err)
	}
	if err := w.Write(ctx, data("y")); !errors.Is(err, exchange.ErrClosed) {
		t.Errorf("write after closing the transport = %v, want %v", err, exchange.ErrClosed)
	}
	if _, _, _, err := r.Read(ctx, readWait); !errors.Is(err, exchange.ErrClosed) {
		t.Errorf("read after closing the transport = %v, want %v", err, exchange.ErrClosed)
	}
	if _, err := tr.NewWriter(channel(job, 0, 2, 0)); !errors.Is(err, exchange.ErrClosed) {
		t.Errorf("new writer on a closed transport = %v, want %v", err, exchange.ErrClosed)
	}
	if _, err := tr.NewReader(ctx, []exchange.Channel{channel(job, 0, 2, 0)}, exchange.ReaderOptions{}); !errors.Is(err, exchange.ErrClosed) {
		t.Errorf("new reader on a closed transport = %v, want %v", err, exchange.ErrClosed)
	}
}

// testIdleWriter: an idle writer whose channel holds what it wrote, read
// or not, and trimmed after it was consumed, finds nothing wrong, however
// long it has been idle; once the attempt is deleted it finds the channel
// lost, and after Close it is closed. (A channel that lost its tail in a
// Redis failover is TestRedisClusterCrashLosesIdleTail's.)
func testIdleWriter(t *testing.T, tr exchange.Transport) {
	job := jobName(t)
	ch := channel(job, 0, 0, 0)
	ctx := context.Background()
	w := mustWriter(t, tr, ch)
	later := time.Now()
	idle := func() error {
		t.Helper()
		later = later.Add(time.Minute) // idle long enough to look
		return w.Idle(ctx, later)
	}
	if err := idle(); err != nil {
		t.Fatalf("idle before any write: %v", err)
	}
	r := mustReader(t, tr, 4, ch)
	mustWrite(t, w, data("a"))
	mustWrite(t, w, control(exchange.KindWatermark, 5))
	mustWrite(t, w, data("b"))
	if err := idle(); err != nil {
		t.Fatalf("idle with its entries unread: %v", err)
	}
	expectRead(t, r, 0, data("a"))
	expectRead(t, r, 0, control(exchange.KindWatermark, 5))
	if err := idle(); err != nil {
		t.Fatalf("idle with its entries partly read: %v", err)
	}
	expectRead(t, r, 0, data("b"))
	expectNothing(t, r, readWait) // consumes b: the channel is trimmed empty
	if err := idle(); err != nil {
		t.Fatalf("idle with every entry read and trimmed: %v", err)
	}
	if err := w.Idle(ctx, time.Now()); err != nil {
		t.Fatalf("idle, not for long: %v", err)
	}
	if err := tr.DeleteAttempt(ctx, job, 0); err != nil {
		t.Fatalf("delete attempt: %v", err)
	}
	if err := idle(); !errors.Is(err, exchange.ErrChannelLost) {
		t.Fatalf("idle after its attempt was deleted = %v, want %v", err, exchange.ErrChannelLost)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close writer: %v", err)
	}
	if err := idle(); !errors.Is(err, exchange.ErrClosed) {
		t.Fatalf("idle after close = %v, want %v", err, exchange.ErrClosed)
	}
}

// testInvalidArguments: bad channels, inputs and entries are refused.
func testInvalidArguments(t *testing.T, tr exchange.Transport) {
	job := jobName(t)
	ctx := context.Background()
	ok := channel(job, 0, 0, 0)

	bad := ok
	bad.Job, bad.Edge, bad.Attempt = "", "", -1
	if _, err := tr.NewWriter(bad); err == nil {
		t.Error("new writer on an invalid channel: no error")
	}
	other := ok
	other.Consumer = 1
	for name, inputs := range map[string][]exchange.Channel{
		"no inputs":          nil,
		"invalid input":      {ok, bad},
		"two consumers":      {ok, other},
		"duplicate channels": {ok, ok},
	} {
		if _, err := tr.NewReader(ctx, inputs, exchange.ReaderOptions{}); err == nil {
			t.Errorf("new reader with %s: no error", name)
		}
	}

	mustReader(t, tr, 4, ok)
	if _, err := tr.NewReader(ctx, []exchange.Channel{ok}, exchange.ReaderOptions{}); err == nil {
		t.Error("second reader on a channel: no error")
	}

	w := mustWriter(t, tr, ok)
	for _, e := range []exchange.Entry{
		{Kind: 0},
		{Kind: exchange.KindEnd + 1},
		{Kind: exchange.KindWatermark, Payload: []byte("x")},
	} {
		if err := w.Write(ctx, e); err == nil {
			t.Errorf("write %s entry with %d payload bytes: no error", e.Kind, len(e.Payload))
		}
	}
}
