package exchange_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/exchangetest"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
)

func newRedis(t testing.TB, srv *testenv.Redis) exchange.Transport {
	t.Helper()
	tr, err := exchange.NewRedis(exchange.RedisOptions{Addr: srv.Addr})
	if err != nil {
		t.Fatalf("new redis transport: %v", err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func TestRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	exchangetest.TestTransport(t, func(t *testing.T) exchange.Transport { return newRedis(t, srv) })
}

// TestManyReadersShareThePool: a worker with many tasks has as many
// readers, each holding a connection while its XREAD blocks. With the
// default pool, 96 readers waiting at once leave their writers
// connections: every entry arrives promptly. (On 2 cores the old default
// of 20 connections took 11 s here, and let no entry through to a reader
// of BenchmarkManyChannels for 10 s.)
func TestManyReadersShareThePool(t *testing.T) {
	srv := testenv.StartRedis(t)
	tr := newRedis(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n, entries = 96, 20
	readers := make([]exchange.Reader, n)
	writers := make([]exchange.Writer, n)
	for i := range n {
		ch := exchange.Channel{Job: "pool", Attempt: 1, Edge: "src", Producer: i, ConsumerVertex: "sink", Consumer: i}
		readers[i], writers[i] = openChannel(ctx, t, tr, ch, 2)
	}
	// Every reader blocks in XREAD before anything is written.
	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	took := make([]time.Duration, n) // per reader, to its last entry
	for i := range n {
		g.Go(func() error {
			for got := range entries {
				_, e, ok, err := readers[i].Read(gctx, 20*time.Second)
				if err != nil || !ok {
					return fmt.Errorf("reader %d, entry %d: ok %t, %v (%v after the start)", i, got, ok, err, time.Since(start).Round(time.Millisecond))
				}
				if string(e.Payload) != strconv.Itoa(got) {
					return fmt.Errorf("reader %d: entry %q, want %d", i, e.Payload, got)
				}
			}
			took[i] = time.Since(start)
			return nil
		})
	}
	time.Sleep(100 * time.Millisecond)
	for i := range n {
		g.Go(func() error {
			for k := range entries {
				if err := writers[i].Write(gctx, exchange.Entry{Kind: exchange.KindData, Payload: []byte(strconv.Itoa(k))}); err != nil {
					return fmt.Errorf("writer %d, entry %d: %w", i, k, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	// Not a timing claim: a bound about 15 times what it takes here
	// (0.3 s), far below what starved connections took (11 s on 20).
	last := slices.Max(took)
	if last > 5*time.Second {
		t.Errorf("the last reader had its %d entries %v after the start, want well under 5s", entries, last.Round(time.Millisecond))
	}
	t.Logf("the last reader had its entries %v after the start", last.Round(time.Millisecond))
}

// openChannel opens both ends of ch, the reader with credits; the test's
// end closes them.
func openChannel(ctx context.Context, t *testing.T, tr exchange.Transport, ch exchange.Channel, credits int) (exchange.Reader, exchange.Writer) {
	t.Helper()
	r, err := tr.NewReader(ctx, []exchange.Channel{ch}, exchange.ReaderOptions{Credits: credits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	w, err := tr.NewWriter(ch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return r, w
}

// streamKey finds the one stream key of job.
func streamKey(t *testing.T, srv *testenv.Redis, job string) string {
	t.Helper()
	keys, err := srv.Do("KEYS", "weir:{"+job+":*:ch:*")
	if err != nil {
		t.Fatalf("list keys: %v", err)
	}
	if keys == "" || strings.Contains(keys, "\n") {
		t.Fatalf("stream keys of %s: %q, want one", job, keys)
	}
	return keys
}

func memoryUsage(t *testing.T, srv *testenv.Redis, key string) int {
	t.Helper()
	v, err := srv.Do("MEMORY", "USAGE", key, "SAMPLES", "0")
	if err != nil {
		t.Fatalf("memory usage of %s: %v", key, err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("memory usage of %s: %q", key, v)
	}
	return n
}

// TestRedisMemoryBounded: a stream never holds more than its credits'
// worth of data, whether its consumer stalls or crawls.
func TestRedisMemoryBounded(t *testing.T) {
	// Redis allocates each large entry's listpack from a jemalloc size
	// class; for 64 KiB plus a header that is 80 KiB. So the bound allows
	// a quarter on top of the payload, and a little for the stream itself.
	// Without credits the stream would grow to total*size.
	const (
		credits  = 4
		size     = 64 << 10
		total    = 40
		overhead = 8 << 10
		bound    = credits*size*5/4 + overhead
	)
	srv := testenv.StartRedis(t)
	tr := newRedis(t, srv)
	ch := exchange.Channel{Job: "membound", Edge: "src", ConsumerVertex: "sink"}
	w, err := tr.NewWriter(ch)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := tr.NewReader(context.Background(), []exchange.Channel{ch}, exchange.ReaderOptions{Credits: credits})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var written atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := range total {
			// A fresh payload per entry: the writer owns what it was given.
			p := make([]byte, size)
			p[0] = byte(i)
			if err := w.Write(ctx, exchange.Entry{Kind: exchange.KindData, Payload: p}); err != nil {
				done <- err
				return
			}
			written.Add(1)
		}
		done <- nil
	}()
	writerDone := false
	defer func() {
		cancel()
		if !writerDone {
			<-done
		}
	}()

	key := streamKey(t, srv, "membound")
	poll.Until(t, 20*time.Second, "the producer spent its credits", func() bool { return written.Load() >= credits })
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n := written.Load(); n != credits {
			t.Fatalf("stalled consumer: producer wrote %d entries, want %d", n, credits)
		}
	}
	if m := memoryUsage(t, srv, key); m > bound {
		t.Fatalf("stalled consumer: stream uses %d bytes, want at most %d", m, bound)
	} else {
		t.Logf("stalled consumer: stream uses %d bytes for %d entries of %d bytes", m, credits, size)
	}

	maxSeen := 0
	for i := range total {
		_, e, ok, err := r.Read(ctx, 10*time.Second)
		if err != nil || !ok {
			t.Fatalf("read %d: ok %t, err %v", i, ok, err)
		}
		if e.Payload[0] != byte(i) || len(e.Payload) != size {
			t.Fatalf("read %d: entry %d of %d bytes", i, e.Payload[0], len(e.Payload))
		}
		m := memoryUsage(t, srv, key)
		if m > bound {
			t.Fatalf("after reading %d: stream uses %d bytes, want at most %d", i+1, m, bound)
		}
		maxSeen = max(maxSeen, m)
	}
	t.Logf("crawling consumer: stream used at most %d bytes", maxSeen)
	err = <-done
	writerDone = true
	if err != nil {
		t.Fatalf("write: %v", err)
	}
}

// TestRedisRestart: a Redis that comes back empty makes readers and
// writers fail with ErrChannelLost, whether they were idle or waiting.
func TestRedisRestart(t *testing.T) {
	srv := testenv.StartRedis(t)
	tr := newRedis(t, srv)
	ctx := context.Background()
	chans := make([]exchange.Channel, 4)
	writers := make([]exchange.Writer, len(chans))
	for i := range chans {
		chans[i] = exchange.Channel{Job: "restart", Edge: "src", Producer: i, ConsumerVertex: "sink"}
		w, err := tr.NewWriter(chans[i])
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		writers[i] = w
	}
	r, err := tr.NewReader(ctx, chans, exchange.ReaderOptions{Credits: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Writer 0 uses up its credit, writer 1 keeps one, writer 2 only sends
	// control entries, writer 3 will be waiting for credit.
	mustWrite(t, writers[0], exchange.Entry{Kind: exchange.KindData, Payload: []byte("a")})
	mustWrite(t, writers[0], exchange.Entry{Kind: exchange.KindData, Payload: []byte("b")})
	mustWrite(t, writers[1], exchange.Entry{Kind: exchange.KindData, Payload: []byte("c")})
	mustWrite(t, writers[2], exchange.Entry{Kind: exchange.KindWatermark, Value: 1})
	mustWrite(t, writers[3], exchange.Entry{Kind: exchange.KindData, Payload: []byte("d")})
	mustWrite(t, writers[3], exchange.Entry{Kind: exchange.KindData, Payload: []byte("e")})

	waiting := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		waiting <- writers[3].Write(ctx, exchange.Entry{Kind: exchange.KindData, Payload: []byte("f")})
	}()
	poll.Until(t, 20*time.Second, "a writer waiting for credit", func() bool { return writers[3].Stats().CreditWaits > 0 })

	srv.Restart()

	if err := <-waiting; !errors.Is(err, exchange.ErrChannelLost) {
		t.Errorf("write waiting for credit across the restart = %v, want %v", err, exchange.ErrChannelLost)
	}
	for i, w := range writers[:3] {
		e := exchange.Entry{Kind: exchange.KindData, Payload: []byte("x")}
		if i == 2 {
			e = exchange.Entry{Kind: exchange.KindBarrier, Value: 1}
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := w.Write(ctx, e)
		cancel()
		if !errors.Is(err, exchange.ErrChannelLost) {
			t.Errorf("writer %d: %s write after the restart = %v, want %v", i, e.Kind, err, exchange.ErrChannelLost)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, e, ok, err := r.Read(rctx, time.Second)
		if ok {
			continue // entries fetched before the restart
		}
		if !errors.Is(err, exchange.ErrChannelLost) {
			t.Fatalf("read after the restart = %s, ok %t, err %v; want %v", e.Kind, ok, err, exchange.ErrChannelLost)
		}
		break
	}
	if _, _, _, err := r.Read(rctx, time.Second); !errors.Is(err, exchange.ErrChannelLost) {
		t.Errorf("second read after the restart = %v, want %v", err, exchange.ErrChannelLost)
	}
}

// TestRedisRestartWhileReading: a Read blocked in XREAD when Redis restarts
// fails with ErrChannelLost instead of waiting on the empty server: the
// blocked XREAD fails, go-redis retries the round trip on the new server,
// and its EXISTS check finds the keys gone.
func TestRedisRestartWhileReading(t *testing.T) {
	srv := testenv.StartRedis(t)
	tr := newRedis(t, srv)
	ctx := context.Background()
	ch := exchange.Channel{Job: "restart-read", Edge: "src", ConsumerVertex: "sink"}
	r, err := tr.NewReader(ctx, []exchange.Channel{ch}, exchange.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, e, ok, err := r.Read(ctx, 50*time.Second)
		if ok {
			err = fmt.Errorf("read %s", e.Kind)
		}
		done <- err
	}()
	poll.Until(t, 20*time.Second, "a reader blocked in redis", func() bool {
		info, err := srv.Do("INFO", "clients")
		return err == nil && !strings.Contains(info, "blocked_clients:0")
	})
	srv.Restart()
	select {
	case err := <-done:
		if !errors.Is(err, exchange.ErrChannelLost) {
			t.Fatalf("read across the restart = %v, want %v", err, exchange.ErrChannelLost)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("read blocked across the restart did not return within 20s")
	}
}

func mustWrite(t *testing.T, w exchange.Writer, e exchange.Entry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Write(ctx, e); err != nil {
		t.Fatalf("write %s: %v", e.Kind, err)
	}
}

func TestRedisOptionsValidate(t *testing.T) {
	err := exchange.RedisOptions{DB: -1, MaxBlock: 10 * time.Second, MaxRetries: -2}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"Addr", "DB is -1", "MaxBlock", "MaxRetries is -2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if err := (exchange.RedisOptions{Addr: "localhost:6379"}).Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

func TestRedisUnreachable(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	tr, err := exchange.NewRedis(exchange.RedisOptions{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	if err == nil {
		tr.Close()
		t.Fatal("no error connecting to a closed port")
	}
}

// Two clusters on one Redis: the same channel of the same job is a
// different stream in each, and deleting one cluster's attempt leaves the
// other's alone.
func TestRedisClustersShareARedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	ctx := context.Background()
	ch := exchange.Channel{Job: "same", Edge: "src", Producer: 0, ConsumerVertex: "sink"}
	readers := map[string]exchange.Reader{}
	transports := map[string]exchange.Transport{}
	for _, cluster := range []string{"blue", "green"} {
		tr, err := exchange.NewRedis(exchange.RedisOptions{Addr: srv.Addr, Cluster: cluster})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		r, err := tr.NewReader(ctx, []exchange.Channel{ch}, exchange.ReaderOptions{Credits: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		transports[cluster], readers[cluster] = tr, r
	}
	for cluster, tr := range transports {
		w, err := tr.NewWriter(ch)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, w, exchange.Entry{Kind: exchange.KindData, Payload: []byte(cluster)})
		w.Close()
	}
	if err := transports["blue"].DeleteAttempt(ctx, "same", 0); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		_, e, ok, err := readers["green"].Read(ctx, 300*time.Millisecond)
		if err != nil {
			t.Fatalf("green's reader after blue deleted its attempt: %v", err)
		}
		if !ok {
			break
		}
		got = append(got, string(e.Payload))
	}
	if len(got) != 1 || got[0] != "green" {
		t.Fatalf("green read %v, want only its own entry", got)
	}
}

// TestRedisLostTailWhileWaitingForCredit: the entries a writer waiting for
// credit wrote, and its reader has not consumed, vanish (a failover to a
// replica that had not received them). Neither end would ever hear from
// the other again; the writer notices its last entry gone under an
// unchanged credit limit and fails with ErrChannelLost.
func TestRedisLostTailWhileWaitingForCredit(t *testing.T) {
	srv := testenv.StartRedis(t)
	tr := newRedis(t, srv)
	ctx := context.Background()
	ch := exchange.Channel{Job: "lost-tail", Edge: "src", ConsumerVertex: "sink"}
	_, w := openChannel(ctx, t, tr, ch, 2)
	mustWrite(t, w, exchange.Entry{Kind: exchange.KindData, Payload: []byte("a")})
	mustWrite(t, w, exchange.Entry{Kind: exchange.KindBarrier, Value: 1})
	mustWrite(t, w, exchange.Entry{Kind: exchange.KindData, Payload: []byte("b")})
	key := streamKey(t, srv, "lost-tail")
	// A writer that merely waits long is not taken for one that lost its
	// tail.
	wctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	err := w.Write(wctx, exchange.Entry{Kind: exchange.KindData, Payload: []byte("c")})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write waiting 2.5s for credit with its entries in place = %v, want %v", err, context.DeadlineExceeded)
	}
	if _, err := srv.Do("XDEL", key, "0-2", "0-3"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wctx, cancel = context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err = w.Write(wctx, exchange.Entry{Kind: exchange.KindData, Payload: []byte("c")})
	if !errors.Is(err, exchange.ErrChannelLost) {
		t.Fatalf("write waiting for credit after its unconsumed entries vanished = %v, want %v", err, exchange.ErrChannelLost)
	}
	t.Logf("noticed after %v: %v", time.Since(start).Round(time.Millisecond), err)
}
