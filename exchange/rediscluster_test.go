package exchange_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/exchangetest"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
)

func newRedisCluster(t testing.TB, c *testenv.RedisCluster) exchange.Transport {
	t.Helper()
	tr, err := exchange.NewRedis(exchange.RedisOptions{Addr: c.Addr()})
	if err != nil {
		t.Fatalf("new redis transport on %s: %v", c.Addr(), err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// TestRedisCluster runs the contract suite on a Redis Cluster of three
// masters with a replica each.
func TestRedisCluster(t *testing.T) {
	c := testenv.StartRedisCluster(t, 3, 1)
	exchangetest.TestTransport(t, func(t *testing.T) exchange.Transport { return newRedisCluster(t, c) })
}

// clusterKeys counts the keys matching pattern on every node that is a
// master now, asking each node itself.
func clusterKeys(t *testing.T, c *testenv.RedisCluster, pattern string) (total int, perShard []int) {
	t.Helper()
	perShard = make([]int, c.Shards())
	for s := range c.Shards() {
		keys, err := testenv.Dial(c.Master(s), "KEYS", pattern)
		if err != nil {
			t.Fatalf("keys on %s: %v", c.Master(s), err)
		}
		if keys != "" {
			perShard[s] = strings.Count(keys, "\n") + 1
		}
		total += perShard[s]
	}
	return total, perShard
}

// TestRedisClusterAttemptAcrossShards: the consumers of one job spread
// over every master, each reading its inputs in one XREAD (one hash tag
// per consumer), and DeleteAttempt and CountKeys reach every master.
func TestRedisClusterAttemptAcrossShards(t *testing.T) {
	c := testenv.StartRedisCluster(t, 3, 1)
	tr := newRedisCluster(t, c)
	kc := tr.(exchangetest.KeyCounter)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const (
		job       = "spread"
		producers = 3
		consumers = 12
	)
	type pair struct {
		r exchange.Reader
		w []exchange.Writer
	}
	pairs := make([]pair, consumers)
	for cons := range consumers {
		var inputs []exchange.Channel
		for p := range producers {
			inputs = append(inputs, exchange.Channel{Job: job, Attempt: 3, Edge: "src", Producer: p, ConsumerVertex: "sink", Consumer: cons})
		}
		r, err := tr.NewReader(ctx, inputs, exchange.ReaderOptions{Credits: 4})
		if err != nil {
			t.Fatalf("reader of consumer %d: %v", cons, err)
		}
		defer r.Close()
		pairs[cons].r = r
		for _, ch := range inputs {
			w, err := tr.NewWriter(ch)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			pairs[cons].w = append(pairs[cons].w, w)
			mustWrite(t, w, exchange.Entry{Kind: exchange.KindData, Payload: []byte(ch.String())})
		}
	}
	for cons, p := range pairs {
		seen := map[int]bool{}
		for len(seen) < producers {
			i, e, ok, err := p.r.Read(ctx, time.Second)
			if err != nil {
				t.Fatalf("consumer %d: read: %v", cons, err)
			}
			if !ok {
				t.Fatalf("consumer %d: no entry within 1s, got inputs %v", cons, seen)
			}
			if string(e.Payload) != (exchange.Channel{Job: job, Attempt: 3, Edge: "src", Producer: i, ConsumerVertex: "sink", Consumer: cons}).String() {
				t.Fatalf("consumer %d input %d: payload %q", cons, i, e.Payload)
			}
			seen[i] = true
		}
	}
	total, perShard := clusterKeys(t, c, "weir:{"+job+":3:*")
	if total != consumers*producers*2 {
		t.Fatalf("keys of the attempt on the masters: %d (%v), want %d", total, perShard, consumers*producers*2)
	}
	for s, n := range perShard {
		if n == 0 {
			t.Fatalf("no key of the attempt on shard %d (%v): the test wants them spread over every master", s, perShard)
		}
	}
	if n, err := kc.CountKeys(ctx, job, 3); err != nil || n != total {
		t.Fatalf("CountKeys = %d, %v; want %d", n, err, total)
	}
	if err := tr.DeleteAttempt(ctx, job, 3); err != nil {
		t.Fatalf("delete attempt: %v", err)
	}
	if total, perShard := clusterKeys(t, c, "weir:{"+job+":*"); total != 0 {
		t.Fatalf("keys left on the masters after DeleteAttempt: %v", perShard)
	}
	if n, err := kc.CountKeys(ctx, job, -1); err != nil || n != 0 {
		t.Fatalf("CountKeys after delete = %d, %v; want 0", n, err)
	}
	if _, _, _, err := pairs[0].r.Read(ctx, time.Second); !errors.Is(err, exchange.ErrChannelLost) {
		t.Fatalf("read after DeleteAttempt = %v, want %v", err, exchange.ErrChannelLost)
	}
}

// TestRedisClusterFailover: the master holding a channel fails over to its
// replica while a writer streams entries through it with credits (many
// times the credit window, so writes and reads go on across the switch). The
// reader gets every entry once and in order, or an error; never a gap, a
// repeat or a hang. Each side that fails is replaced as a restarted
// attempt would be (new attempt, new keys), and the run always ends with
// every entry of a complete attempt read.
func TestRedisClusterFailover(t *testing.T) {
	c := testenv.StartRedisCluster(t, 3, 1)
	tr := newRedisCluster(t, c)
	const total = 3000
	var progress atomic.Int64 // entries read by the running attempt
	run := func(attempt int) (read int, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		ch := exchange.Channel{Job: "failover", Attempt: attempt, Edge: "src", ConsumerVertex: "sink"}
		r, err := tr.NewReader(ctx, []exchange.Channel{ch}, exchange.ReaderOptions{Credits: 8})
		if err != nil {
			return 0, fmt.Errorf("new reader: %w", err)
		}
		defer r.Close()
		w, err := tr.NewWriter(ch)
		if err != nil {
			return 0, err
		}
		defer w.Close()
		werr := make(chan error, 1)
		go func() {
			for i := range total {
				if err := w.Write(ctx, exchange.Entry{Kind: exchange.KindData, Payload: []byte(strconv.Itoa(i))}); err != nil {
					werr <- fmt.Errorf("write %d: %w", i, err)
					return
				}
			}
			werr <- w.Write(ctx, exchange.Entry{Kind: exchange.KindEnd})
		}()
		for {
			_, e, ok, err := r.Read(ctx, 5*time.Second)
			if err != nil {
				cancel()
				<-werr
				return read, fmt.Errorf("read after %d entries: %w", read, err)
			}
			if !ok {
				cancel()
				return read, fmt.Errorf("no entry within 5s after %d (writer: %v)", read, <-werr)
			}
			if e.Kind == exchange.KindEnd {
				if read != total {
					return read, fmt.Errorf("end after %d entries, want %d", read, total)
				}
				return read, <-werr
			}
			if got := string(e.Payload); got != strconv.Itoa(read) {
				t.Fatalf("attempt %d: entry %d holds %q: a gap or a repeat went unnoticed", attempt, read, got)
			}
			read++
			progress.Store(int64(read))
		}
	}
	key := "weir:{failover:1:sink:0}:ch:src:0"
	shard := c.ShardOf(key)
	old := c.Master(shard)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := run(1)
		done <- result{n, err}
	}()
	poll.Until(t, 30*time.Second, "a third of the entries read", func() bool { return progress.Load() >= total/3 })
	// The attempt goes on streaming while the cluster changes.
	c.Failover(shard)
	res := <-done
	n, err := res.n, res.err
	if c.Master(shard) == old {
		t.Fatalf("shard %d is still led by %s", shard, old)
	}
	t.Logf("attempt 1 across the failover of shard %d (%s): %d entries read in order, then %v", shard, old, n, err)
	if err != nil {
		// The attempt failed as a task does; a restarted attempt on the
		// cluster after the failover must run clean.
		if n, err := run(2); err != nil {
			t.Fatalf("attempt 2 after the failover: %d entries, then %v", n, err)
		}
	}
}

// tailLoss is a channel about to lose its writer's last entries: its
// reader consumed entries 0-9, its master's replica had them, and the
// replica is now paused behind 32 MiB of other writes, so what the writer
// writes next is still in the master's buffers when crash kills it.
type tailLoss struct {
	c      *testenv.RedisCluster
	key    string // the stream
	shard  int
	m, rep string
	r      exchange.Reader
	w      exchange.Writer
}

func startTailLoss(ctx context.Context, t *testing.T, job string) *tailLoss {
	t.Helper()
	c := testenv.StartRedisCluster(t, 3, 1)
	tr := newRedisCluster(t, c)
	ch := exchange.Channel{Job: job, Attempt: 1, Edge: "src", ConsumerVertex: "sink"}
	tag := "weir:{" + job + ":1:sink:0}"
	l := &tailLoss{c: c, key: tag + ":ch:src:0"}
	l.shard = c.ShardOf(l.key)
	l.m, l.rep = c.Master(l.shard), c.Replica(l.shard)
	l.r, l.w = openChannel(ctx, t, tr, ch, 4)
	for i := range 10 {
		mustWrite(t, l.w, exchange.Entry{Kind: exchange.KindData, Payload: []byte(strconv.Itoa(i))})
		if _, e, ok, err := l.r.Read(ctx, 5*time.Second); !ok || err != nil || string(e.Payload) != strconv.Itoa(i) {
			t.Fatalf("read %d: %q, %t, %v", i, e.Payload, ok, err)
		}
	}
	// Consume the last entry: the reader trims and raises the limit.
	if _, _, ok, err := l.r.Read(ctx, 100*time.Millisecond); ok || err != nil {
		t.Fatalf("read past the 10 entries: %t, %v", ok, err)
	}
	poll.UntilNil(t, 10*time.Second, "replica "+l.rep+" in sync", func() error {
		info, err := testenv.Dial(l.m, "INFO", "replication")
		if err != nil {
			return err
		}
		var offset string
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_repl_offset:"); ok {
				offset = v
			}
		}
		if !strings.Contains(info, ",offset="+offset+",") {
			return fmt.Errorf("master at offset %s: %s", offset, info)
		}
		return nil
	})
	c.Pause(l.rep)
	filler := strings.Repeat("x", 8<<20)
	for i := range 4 {
		if _, err := testenv.Dial(l.m, "SET", tag+":filler"+strconv.Itoa(i), filler); err != nil {
			t.Fatalf("filler: %v", err)
		}
	}
	return l
}

// crash kills the master and lets the replica take over; the new
// master's stream must lack entry lost, else the test proves nothing.
func (l *tailLoss) crash(t *testing.T, lost int) (start time.Time) {
	t.Helper()
	l.c.Kill(l.m)
	l.c.Resume(l.rep)
	start = time.Now()
	l.c.WaitMaster(l.shard, l.rep, 45*time.Second)
	t.Logf("replica %s leads shard %d %v after master %s crashed", l.rep, l.shard, time.Since(start).Round(time.Millisecond), l.m)
	ids, err := testenv.Dial(l.rep, "XRANGE", l.key, "-", "+")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ids, "0-"+strconv.Itoa(lost)) {
		t.Fatalf("the new master has entry %d: the crash lost nothing, and the test proves nothing (stream: %q)", lost, ids)
	}
	return start
}

// readsNothing checks that the reader gets no entry after the crash: the
// new master has none it had not read.
func (l *tailLoss) readsNothing(ctx context.Context, t *testing.T) {
	t.Helper()
	for {
		_, e, ok, err := l.r.Read(ctx, time.Second)
		if err != nil {
			t.Logf("reader: %v", err)
			return
		}
		if !ok {
			return
		}
		t.Fatalf("reader got entry %q after the crash: the new master has none it had not read", e.Payload)
	}
}

// TestRedisClusterCrashLosesTail: the master holding a channel crashes
// before its replica got the writer's last entries (see tailLoss), and
// the replica takes over. The keys survive with an older stream: the
// writer, waiting for credit its reader will never return, fails with
// ErrChannelLost, which restarts a job from its latest checkpoint; the
// reader never sees an entry twice or out of order.
func TestRedisClusterCrashLosesTail(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := startTailLoss(ctx, t, "crash")
	w := l.w
	for i := 10; i < 14; i++ {
		mustWrite(t, w, exchange.Entry{Kind: exchange.KindData, Payload: []byte(strconv.Itoa(i))})
	}
	waiting := make(chan error, 1)
	go func() {
		waiting <- w.Write(ctx, exchange.Entry{Kind: exchange.KindData, Payload: []byte("14")})
	}()
	poll.Until(t, 10*time.Second, "the writer waiting for credit", func() bool { return w.Stats().CreditWaits > 0 })
	start := l.crash(t, 14)
	select {
	case err := <-waiting:
		t.Logf("writer: %v, %v after the crash", err, time.Since(start).Round(time.Millisecond))
		if err == nil {
			t.Fatal("the write waiting for credit across the crash succeeded: its reader returned no credit")
		}
		if !errors.Is(err, exchange.ErrChannelLost) {
			// Failed while the master was down (its task would fail and
			// the job restart). Written again now that the replica leads,
			// the loss itself must be noticed.
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			err = w.Write(wctx, exchange.Entry{Kind: exchange.KindData, Payload: []byte("14")})
			t.Logf("writer, again: %v", err)
			if !errors.Is(err, exchange.ErrChannelLost) {
				t.Fatalf("write after the replica took over = %v, want %v", err, exchange.ErrChannelLost)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the writer still waits for credit 30s after the new master took over")
	}
	l.readsNothing(ctx, t)
}

// TestRedisClusterCrashLosesIdleTail: as TestRedisClusterCrashLosesTail,
// but the writer has credit left and writes nothing more: nothing waits
// on anything that would notice, and the reader would wait for ever for
// the lost entries. The idle writer looks (Writer.Idle, which a task calls
// between batches) and fails with ErrChannelLost; before the crash it
// finds its entries where they were.
func TestRedisClusterCrashLosesIdleTail(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := startTailLoss(ctx, t, "idlecrash")
	for i := 10; i < 13; i++ {
		mustWrite(t, l.w, exchange.Entry{Kind: exchange.KindData, Payload: []byte(strconv.Itoa(i))})
	}
	later := time.Now()
	idle := func() error {
		later = later.Add(time.Minute) // idle long enough to look
		return l.w.Idle(ctx, later)
	}
	if err := idle(); err != nil {
		t.Fatalf("idle before the crash: %v", err)
	}
	start := l.crash(t, 12)
	poll.UntilNil(t, 30*time.Second, "the idle writer noticing the loss", func() error {
		err := idle()
		if errors.Is(err, exchange.ErrChannelLost) {
			t.Logf("idle writer: %v, %v after the crash", err, time.Since(start).Round(time.Millisecond))
			return nil
		}
		// nil would be a miss; another error is the cluster still
		// changing (a task would fail on it, and the job restart).
		return fmt.Errorf("idle = %v, want %v", err, exchange.ErrChannelLost)
	})
	l.readsNothing(ctx, t)
}

// TestRedisClusterEndWaitsForReplica: an end entry is followed by nothing
// that would show it lost, so on a cluster its write waits until a
// replica has it; a replica that does not answer fails the write (the
// task fails and the job restarts, rather than a reader waiting for ever
// if the master then crashed). With the replica back, an end entry
// succeeds.
func TestRedisClusterEndWaitsForReplica(t *testing.T) {
	c := testenv.StartRedisCluster(t, 3, 1)
	tr := newRedisCluster(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	chans := []exchange.Channel{
		{Job: "end", Attempt: 1, Edge: "src", Producer: 0, ConsumerVertex: "sink"},
		{Job: "end", Attempt: 1, Edge: "src", Producer: 1, ConsumerVertex: "sink"},
	}
	shard := c.ShardOf("weir:{end:1:sink:0}:ch:src:0")
	r, err := tr.NewReader(ctx, chans, exchange.ReaderOptions{Credits: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var ws []exchange.Writer
	for _, ch := range chans {
		w, err := tr.NewWriter(ch)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		mustWrite(t, w, exchange.Entry{Kind: exchange.KindData, Payload: []byte("x")})
		ws = append(ws, w)
	}
	rep := c.Replica(shard)
	c.Pause(rep)
	start := time.Now()
	err = ws[0].Write(ctx, exchange.Entry{Kind: exchange.KindEnd})
	took := time.Since(start)
	c.Resume(rep)
	if err == nil || !strings.Contains(err.Error(), "not acknowledged by a replica") {
		t.Fatalf("end entry written with the replica %s paused = %v (after %v), want a failure saying no replica has it", rep, err, took)
	}
	t.Logf("with the replica paused: %v after %v", err, took.Round(time.Millisecond))
	mustWrite(t, ws[1], exchange.Entry{Kind: exchange.KindEnd})
	ends := 0
	for ends < 2 {
		_, e, ok, err := r.Read(ctx, 5*time.Second)
		if err != nil || !ok {
			t.Fatalf("read: %t, %v (ends %d)", ok, err, ends)
		}
		if e.Kind == exchange.KindEnd {
			ends++
		}
	}
}
