package builtin

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/redis/go-redis/v9"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

// redisSink appends each row to a Redis stream as an entry with the field
// data=<JSON row>. The entries of one batch go in one pipeline, one round
// trip; they are in Redis when Write returns.
type redisSink struct {
	node   string
	addr   string
	stream string

	client   *redis.Client
	counters *task.Counters
	buf      []byte
	ends     []int
}

var _ task.Sink = (*redisSink)(nil)

func newRedisSink(snk *spec.Sink, _ Stream) *redisSink {
	return &redisSink{node: snk.Name, addr: snk.Addr, stream: snk.Stream}
}

func (s *redisSink) Open(ctx *task.SinkContext) error {
	if s.addr == "" {
		s.addr = ctx.RedisAddr
	}
	if s.addr == "" {
		return fmt.Errorf("open redis sink %s: no address: set addr, or run the job with a Redis", s.node)
	}
	s.client = newRedisClient(s.addr)
	s.counters = ctx.Counters
	return nil
}

func (s *redisSink) Write(ctx context.Context, b arrow.RecordBatch) error {
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	s.buf, s.ends = s.buf[:0], s.ends[:0]
	for row := range n {
		s.buf = arrowfmt.AppendJSONRow(s.buf, b, row)
		s.ends = append(s.ends, len(s.buf))
	}
	pipe := s.client.Pipeline()
	start := 0
	for _, end := range s.ends {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: s.stream, Values: []any{"data", s.buf[start:end]}})
		start = end
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("append %d rows to redis stream %q at %s: %w", n, s.stream, s.addr, err)
	}
	if s.counters != nil {
		s.counters.SinkRows.Add(int64(n))
	}
	return nil
}

// Finish has nothing to do: every Write is in Redis when it returns.
func (s *redisSink) Finish(context.Context) error { return nil }

func (s *redisSink) Close() error {
	if s.client == nil {
		return nil
	}
	err := s.client.Close()
	s.client = nil
	if err != nil {
		return fmt.Errorf("close redis sink %s: %w", s.node, err)
	}
	return nil
}
