package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/integration/testenv"
)

// shuffleJobs are the shuffle-heavy jobs of BenchmarkShuffle: parallelism
// 2, every event crosses the keyBy edge (source → window), the only edge
// that goes through the exchange (the sink is chained to the window).
// narrow: three 8-byte columns of datagen, 10,000 keys. wide: Nexmark
// bids keyed by auction with every column crossing (the aggregates use
// them all, else the edge would carry only the columns used): three
// strings among them.
var shuffleJobs = []struct {
	name   string
	events int
	spec   func(events int) string
}{
	{"narrow", 10_000_000, func(n int) string {
		return fmt.Sprintf(`job: shuffle-narrow
parallelism: 2
sources:
  - name: events
    type: datagen
    count: %d
    schema: {key: int64, value: int64, ts: timestamp_ms}
    eventTime: {column: ts, maxOutOfOrderness: 1s}
    datagen:
      seed: 1
      eventsPerSecond: 1000000
      fields:
        key: {min: 0, max: 10000}
operators:
  - name: counts
    input: events
    keyBy: [key]
    window: {type: tumbling, size: 10s}
    aggregate: {n: count(), total: sum(value)}
sinks:
  - {name: out, input: counts, type: blackhole}
`, n)
	}},
	{"wide", 5_000_000, func(n int) string {
		return fmt.Sprintf(`job: shuffle-wide
parallelism: 2
sources:
  - name: nexmark
    type: nexmark
    count: %d
    eventTime: {column: dateTime, maxOutOfOrderness: 4s}
    nexmark: {eventsPerSecond: 100000}
operators:
  - name: counts
    input: nexmark.bid
    keyBy: [auction]
    window: {type: tumbling, size: 10s}
    aggregate: {bids: count(), top: max(price), bidder: max(bidder), channels: count(channel), urls: count(url), extras: count(extra)}
sinks:
  - {name: out, input: counts, type: blackhole}
`, n)
	}},
}

// BenchmarkShuffle runs each shuffle-heavy job with the in-process
// exchange and with the Redis exchange, one after the other in the same
// iteration, and reports events per CPU-second of each (Redis's CPU
// counted), their ratio (distributed ÷ embedded), the exchange bytes per
// event and the CPU-seconds per GB shipped. SHUFFLE_EVENTS overrides the
// event counts; SHUFFLE_ONLY=embedded or distributed runs one mode (to
// profile it); SHUFFLE_COMPRESSION sets exchange.compression (none, lz4,
// zstd: the distributed run compresses, the embedded one never does).
//
//	go test -run '^$' -bench Shuffle -benchtime 1x -count 2 ./integration/
func BenchmarkShuffle(b *testing.B) {
	only := os.Getenv("SHUFFLE_ONLY") // embedded or distributed: one mode, to profile it
	if only != "" && only != "embedded" && only != "distributed" {
		b.Fatalf("SHUFFLE_ONLY=%q: want embedded or distributed", only)
	}
	srv := testenv.StartRedis(b)
	for _, job := range shuffleJobs {
		events := job.events
		if v := os.Getenv("SHUFFLE_EVENTS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				b.Fatalf("SHUFFLE_EVENTS=%q: want a positive whole number", v)
			}
			events = n
		}
		text := job.spec(events)
		if c := os.Getenv("SHUFFLE_COMPRESSION"); c != "" {
			text += "exchange: {compression: " + c + "}\n"
		}
		js, err := spec.Parse([]byte(text), job.name+".yaml")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(job.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var local, dist jobRun
				if only != "distributed" {
					local, _, _ = measureJob(b, js, events, exchange.NewLocal(), control.NewLocal(), benchDir(b), nil)
					b.ReportMetric(perCPU(events, local), "embedded-events/cpu-s")
				}
				if only == "embedded" {
					continue
				}
				tr, err := exchange.NewRedis(exchange.RedisOptions{Addr: srv.Addr})
				if err != nil {
					b.Fatal(err)
				}
				pl, err := control.NewRedis(context.Background(), control.RedisOptions{Addr: srv.Addr})
				if err != nil {
					b.Fatal(err)
				}
				dist, _, _ = measureJob(b, js, events, tr, pl, benchDir(b), map[string]int{"redis": srv.PID()})
				var shipped float64 // encoded bytes written to channels
				for _, v := range dist.status.Vertices {
					shipped += float64(v.Totals.BytesOut)
				}
				b.ReportMetric(perCPU(events, dist), "distributed-events/cpu-s")
				b.ReportMetric(dist.helpers["redis"].Seconds(), "redis-cpu-s")
				b.ReportMetric(shipped/float64(events), "exchange-B/event")
				if only == "" {
					b.ReportMetric(perCPU(events, dist)/perCPU(events, local), "distributed/embedded")
					b.ReportMetric((dist.cpu-local.cpu).Seconds()/(shipped/1e9), "extra-cpu-s/GB")
				}
			}
		})
	}
}

func perCPU(events int, r jobRun) float64 { return float64(events) / r.cpu.Seconds() }
