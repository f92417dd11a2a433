package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/integration/testenv"
)

// BenchmarkExchangeRows moves Arrow batches of (int64, string, float64,
// timestamp) rows through one channel — encode, write, read, decode — with
// the in-process and the Redis exchange, sweeping the rows per entry. It
// reports rows/s, payload MB/s and rows per CPU-second (this process plus
// Redis).
//
//	go test -run '^$' -bench ExchangeRows -benchtime 2s ./integration/
func BenchmarkExchangeRows(b *testing.B) {
	srv := testenv.StartRedis(b)
	for _, rows := range []int{256, 2048, 8192, 32768} {
		for _, mode := range []string{"local", "redis"} {
			b.Run(fmt.Sprintf("%s/%drows", mode, rows), func(b *testing.B) {
				var tr exchange.Transport
				pid := 0
				if mode == "local" {
					tr = exchange.NewLocal()
				} else {
					var err error
					tr, err = exchange.NewRedis(exchange.RedisOptions{Addr: srv.Addr})
					if err != nil {
						b.Fatal(err)
					}
					pid = srv.PID()
				}
				defer tr.Close()
				benchChannel(b, tr, rows, pid)
			})
		}
	}
}

func benchChannel(b *testing.B, tr exchange.Transport, rows, redisPID int) {
	mem := memory.NewGoAllocator()
	schema, _ := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "id", Type: arrowfmt.Int64}, {Name: "zone", Type: arrowfmt.String},
		{Name: "fare", Type: arrowfmt.Float64}, {Name: "ts", Type: arrowfmt.TimestampMs}})
	bld := arrowfmt.NewBuilder(schema, mem)
	for i := 0; i < rows; i++ {
		bld.Int64(0, int64(i))
		bld.String(1, fmt.Sprintf("zone-%d", i%1000))
		bld.Float64(2, float64(i)*0.25)
		bld.TimestampMs(3, 1767225600000+int64(i))
	}
	rec := bld.NewBatch()
	bld.Release()
	defer rec.Release()

	ctx := context.Background()
	job := fmt.Sprintf("bench-%d-%d", rows, time.Now().UnixNano())
	ch := exchange.Channel{Job: job, Attempt: 1, Edge: "e", ConsumerVertex: "c"}
	defer tr.DeleteAttempt(ctx, job, -1)
	r, err := tr.NewReader(ctx, []exchange.Channel{ch}, exchange.ReaderOptions{Credits: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	w, err := tr.NewWriter(ch)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()

	var payloadBytes int64
	errc := make(chan error, 1)
	b.ResetTimer()
	cpu0, _ := testenv.ProcessCPU(0)
	var rcpu0 time.Duration
	if redisPID != 0 {
		rcpu0, _ = testenv.ProcessCPU(redisPID)
	}
	start := time.Now()
	go func() {
		enc := arrowfmt.NewEncoder(schema, mem)
		for i := 0; i < b.N; i++ {
			p, err := enc.Encode(rec)
			if err != nil {
				errc <- err
				return
			}
			payloadBytes += int64(len(p))
			if err := w.Write(ctx, exchange.Entry{Kind: exchange.KindData, Payload: p}); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	dec := arrowfmt.NewDecoder(mem)
	defer dec.Close()
	var got int64
	for i := 0; i < b.N; i++ {
		_, e, ok, err := r.Read(ctx, 10*time.Second)
		if err != nil || !ok {
			b.Fatalf("read: ok=%v %v", ok, err)
		}
		d, err := dec.Decode(e.Payload)
		if err != nil {
			b.Fatal(err)
		}
		got += d.NumRows()
		d.Release()
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	wall := time.Since(start)
	cpu1, _ := testenv.ProcessCPU(0)
	cpu := cpu1 - cpu0
	if redisPID != 0 {
		rcpu1, _ := testenv.ProcessCPU(redisPID)
		cpu += rcpu1 - rcpu0
	}
	b.StopTimer()
	if got != int64(b.N*rows) {
		b.Fatalf("got %d rows, want %d", got, b.N*rows)
	}
	b.ReportMetric(float64(got)/wall.Seconds(), "rows/s")
	b.ReportMetric(float64(payloadBytes)/wall.Seconds()/1e6, "payload-MB/s")
	b.ReportMetric(float64(payloadBytes)/float64(b.N)/1024, "KiB/entry")
	if cpu > 0 {
		b.ReportMetric(float64(got)/cpu.Seconds(), "rows/cpu-s")
	}
}
