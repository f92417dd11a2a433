package blackhole

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
)

// blackhole is Flink's blackhole connector with a stopwatch: it discards
// its input, counts rows and, for a stream with event time, records each
// row's latency, the processing time it arrived minus its event time, in a
// histogram (rows whose event time is still ahead of the clock are counted
// apart, as early). With a path, Finish writes the histogram to
// <path>latency-<subtask>.json in the store (LatencySummary), for
// benchmarks to read.
type blackhole struct {
	path     string
	in       stream.Stream
	subtask  int
	now      func() time.Time
	bucket   blob.Bucket
	counters *task.Counters
	hist     LatencySummary
}

// LatencySummary is what a blackhole sink with a path writes at the end:
// how many rows it took and how late they were, as counts per latency
// bucket. A bucket's key is its lower bound in milliseconds (see
// LatencyBucket), so a percentile read from it is within 1/32.
type LatencySummary struct {
	Rows  int64 `json:"rows"`
	Timed int64 `json:"timed"`
	// Early counts rows whose event time was still ahead of the clock:
	// results made before their time, as when the end of a bounded input
	// fires every open window. They are not in the histogram.
	Early   int64           `json:"early,omitempty"`
	Buckets map[int64]int64 `json:"latencyMs"`
}

// SinkType is the blackhole sink, for connector.RegisterSink. Its one
// field, path, is optional.
func SinkType() connector.SinkType {
	return connector.SinkType{
		Name:  spec.SinkBlackhole,
		Check: func(*spec.Sink) spec.Problems { return nil },
		New:   NewSink,
	}
}

// NewSink returns the blackhole sink snk describes, consuming in.
func NewSink(snk *spec.Sink, in stream.Stream) (task.Sink, error) {
	return &blackhole{path: snk.Path, in: in, hist: LatencySummary{Buckets: map[int64]int64{}}}, nil
}

func (s *blackhole) Open(ctx *task.SinkContext) error {
	s.subtask, s.now, s.bucket, s.counters = ctx.Subtask, ctx.Now, ctx.Bucket, ctx.Counters
	return nil
}

func (s *blackhole) Write(_ context.Context, b arrow.RecordBatch) error {
	n := b.NumRows()
	s.hist.Rows += n
	if s.counters != nil {
		s.counters.SinkRows.Add(n)
	}
	if !s.in.HasTime() || n == 0 {
		return nil
	}
	ts, ok := b.Column(s.in.TimeColumn).(*array.Timestamp)
	if !ok {
		return nil
	}
	now := s.now().UnixMilli()
	for i := range int(n) {
		if ts.IsNull(i) {
			continue
		}
		lat := now - int64(ts.Value(i)) - s.in.TimeOffset
		if lat < 0 {
			s.hist.Early++
			continue
		}
		s.hist.Buckets[LatencyBucket(lat)]++
		s.hist.Timed++
	}
	return nil
}

// LatencyBucket returns the lower bound of the bucket of a latency in ms
// (negative latencies, from event times ahead of the clock, count as 0).
// Buckets are exact below 64 ms; above, a bucket keeps the six most
// significant bits, so it is less than 1/32 wide.
func LatencyBucket(ms int64) int64 {
	if ms < 64 {
		return max(ms, 0)
	}
	shift := bits.Len64(uint64(ms)) - 6
	return ms >> shift << shift
}

// Percentile returns the latency below which fraction q (0..1) of the
// timed rows fall, as a bucket's lower bound; -1 without timed rows.
func (l LatencySummary) Percentile(q float64) int64 {
	if l.Timed == 0 {
		return -1
	}
	keys := make([]int64, 0, len(l.Buckets))
	for k := range l.Buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := int64(math.Ceil(q * float64(l.Timed)))
	var seen int64
	for _, k := range keys {
		seen += l.Buckets[k]
		if seen >= want {
			return k
		}
	}
	return keys[len(keys)-1]
}

// Merge adds o's rows and buckets to l.
func (l *LatencySummary) Merge(o LatencySummary) {
	if l.Buckets == nil {
		l.Buckets = map[int64]int64{}
	}
	l.Rows += o.Rows
	l.Timed += o.Timed
	l.Early += o.Early
	for k, v := range o.Buckets {
		l.Buckets[k] += v
	}
}

func (s *blackhole) Finish(ctx context.Context) error {
	if s.path == "" || s.bucket == nil {
		return nil
	}
	data, err := json.Marshal(s.hist)
	if err != nil {
		return err
	}
	key := fmt.Sprintf("%slatency-%d.json", s.path, s.subtask)
	if err := s.bucket.Put(ctx, key, data); err != nil {
		return fmt.Errorf("blackhole sink: write %s: %w", key, err)
	}
	return nil
}

func (s *blackhole) Close() error { return nil }
