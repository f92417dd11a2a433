package exchange_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/integration/testenv"
)

// BenchmarkThroughput moves data entries from one producer to one consumer
// with 4 credits, through the in-process transport and through a
// redis-server the benchmark starts. The payload is written as is and not
// looked at by the consumer, so this measures the transport alone.
//
//	go test -run '^$' -bench Throughput -benchtime 2s ./exchange/
//
// Besides ns/op and MB/s it reports entries/s, the producer's credit waits
// per entry and, for Redis, the server's CPU use in cores.
func BenchmarkThroughput(b *testing.B) {
	srv := testenv.StartRedis(b)
	transports := []struct {
		name string
		tr   exchange.Transport
	}{
		{"local", exchange.NewLocal()},
		{"redis", newRedis(b, srv)},
	}
	attempt := 0
	for _, tc := range transports {
		for _, size := range []int{16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20} {
			b.Run(tc.name+"/"+sizeName(size), func(b *testing.B) {
				attempt++
				var cpu func() float64
				if tc.name == "redis" {
					cpu = redisCPU(b, srv)
				}
				benchmarkThroughput(b, tc.tr, attempt, size, cpu)
			})
		}
	}
	_ = transports[0].tr.Close()
}

func benchmarkThroughput(b *testing.B, tr exchange.Transport, attempt, size int, cpu func() float64) {
	ctx := context.Background()
	ch := exchange.Channel{Job: "bench", Attempt: attempt, Edge: "src", ConsumerVertex: "sink"}
	w, err := tr.NewWriter(ch)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	r, err := tr.NewReader(ctx, []exchange.Channel{ch}, exchange.ReaderOptions{Credits: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	defer func() {
		if err := tr.DeleteAttempt(ctx, "bench", attempt); err != nil {
			b.Errorf("delete attempt: %v", err)
		}
	}()
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 7)
	}

	b.SetBytes(int64(size))
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	b.ResetTimer()
	go func() {
		for range b.N {
			// The writer takes ownership of the payload but never
			// modifies it, so one buffer serves every entry.
			if err := w.Write(wctx, exchange.Entry{Kind: exchange.KindData, Payload: payload}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range b.N {
		_, e, ok, err := r.Read(ctx, 10*time.Second)
		if err != nil || !ok || len(e.Payload) != size {
			cancel()
			<-done
			b.Fatalf("read %d: ok %t, err %v, %d bytes", i, ok, err, len(e.Payload))
		}
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("write: %v", err)
	}
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/secs, "entries/s")
	b.ReportMetric(float64(w.Stats().CreditWaits)/float64(b.N), "waits/entry")
	if cpu != nil {
		b.ReportMetric(cpu()/secs, "redis-cores")
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// redisCPU returns a function that reports the CPU seconds the server used
// since redisCPU was called.
func redisCPU(b *testing.B, srv *testenv.Redis) func() float64 {
	used := func() float64 {
		info, err := srv.Do("INFO", "cpu")
		if err != nil {
			b.Fatalf("info cpu: %v", err)
		}
		var total float64
		for line := range strings.Lines(info) {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if k == "used_cpu_sys" || k == "used_cpu_user" {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("info cpu: %s is %q", k, v)
				}
				total += f
			}
		}
		return total
	}
	start := used()
	return func() float64 { return used() - start }
}

// BenchmarkManyChannels moves small entries over an all-to-all edge of
// producers × consumers channels on one redis-server: each producer
// writes to its channels in turn, each consumer reads all of its inputs
// with one reader (one pipelined round trip for them all), 4 credits a
// channel. This is a keyed edge at a high parallelism, where each
// channel carries few rows and an output buffer flushes on its timeout
// with a few KiB. -benchtime Nx writes N entries to each channel.
//
//	go test -run '^$' -bench ManyChannels -benchtime 20x ./exchange/
//
// It reports Redis's CPU per entry and this process's (every producer
// and consumer: the client side) per entry, entries/s, and Redis's
// round trips per entry read.
func BenchmarkManyChannels(b *testing.B) {
	srv := testenv.StartRedis(b)
	tr := newRedis(b, srv)
	attempt := 0
	for _, n := range []int{4, 16, 48} {
		for _, size := range []int{4 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%dx%d/%s", n, n, sizeName(size)), func(b *testing.B) {
				attempt++
				benchmarkManyChannels(b, tr, srv, attempt, n, size)
			})
		}
	}
}

func benchmarkManyChannels(b *testing.B, tr exchange.Transport, srv *testenv.Redis, attempt, n, size int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const job = "many"
	ch := func(p, c int) exchange.Channel {
		return exchange.Channel{Job: job, Attempt: attempt, Edge: "src", Producer: p, ConsumerVertex: "sink", Consumer: c}
	}
	readers := make([]exchange.Reader, n)
	for c := range n {
		inputs := make([]exchange.Channel, n)
		for p := range n {
			inputs[p] = ch(p, c)
		}
		r, err := tr.NewReader(ctx, inputs, exchange.ReaderOptions{Credits: 4})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		readers[c] = r
	}
	writers := make([][]exchange.Writer, n)
	for p := range n {
		for c := range n {
			w, err := tr.NewWriter(ch(p, c))
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			writers[p] = append(writers[p], w)
		}
	}
	defer func() {
		if err := tr.DeleteAttempt(context.Background(), job, attempt); err != nil {
			b.Errorf("delete attempt: %v", err)
		}
	}()
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	calls := redisCalls(b, srv)
	redis := redisCPU(b, srv)
	self := processCPU()
	b.SetBytes(int64(size) * int64(n) * int64(n))
	b.ResetTimer()
	g, gctx := errgroup.WithContext(ctx)
	for p := range n {
		g.Go(func() error {
			for range b.N {
				for _, w := range writers[p] {
					if err := w.Write(gctx, exchange.Entry{Kind: exchange.KindData, Payload: payload}); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	for c := range n {
		g.Go(func() error {
			for got := 0; got < b.N*n; {
				_, e, ok, err := readers[c].Read(gctx, 10*time.Second)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("consumer %d: nothing for 10s after %d entries", c, got)
				}
				if len(e.Payload) != size {
					return fmt.Errorf("consumer %d: an entry of %d bytes, want %d", c, len(e.Payload), size)
				}
				got++
			}
			// Consume the last entry, as a task does at its next Read.
			_, _, _, err := readers[c].Read(gctx, 0)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	entries := float64(b.N * n * n)
	secs := b.Elapsed().Seconds()
	b.ReportMetric(entries/secs, "entries/s")
	b.ReportMetric(redis()/entries*1e6, "redis-µs/entry")
	b.ReportMetric(self()/entries*1e6, "client-µs/entry")
	b.ReportMetric(calls()/entries, "redis-calls/entry")
}

// processCPU returns a function that reports the CPU seconds this
// process used since processCPU was called.
func processCPU() func() float64 {
	used := func() float64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	start := used()
	return func() float64 { return used() - start }
}

// redisCalls returns a function that reports the commands the server ran
// since redisCalls was called (INFO stats' total_commands_processed; a
// pipeline's commands count one by one, a script's calls inside it not).
func redisCalls(b *testing.B, srv *testenv.Redis) func() float64 {
	calls := func() float64 {
		info, err := srv.Do("INFO", "stats")
		if err != nil {
			b.Fatalf("info stats: %v", err)
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("info stats: total_commands_processed is %q", v)
				}
				return f
			}
		}
		b.Fatal("info stats: no total_commands_processed")
		return 0
	}
	start := calls()
	return func() float64 { return calls() - start }
}
