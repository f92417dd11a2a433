package exchange_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

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
