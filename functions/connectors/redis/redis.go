package redis

import (
	"fmt"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

// SourceConfig is a redis source's configuration, from its spec entry.
type SourceConfig struct {
	// Addr of the Redis server; "" is the job's Redis.
	Addr string
	// Stream is the stream to read (required).
	Stream string
	// Format of each entry's data field: jsonl (the default) is the only
	// one.
	Format string
}

// sourceConfig decodes and checks the fields of a redis source.
func sourceConfig(src *spec.Source) (SourceConfig, spec.Problems) {
	p := fmt.Sprintf("sources[%s]", src.Name)
	var ps spec.Problems
	if src.Stream == "" {
		ps.Add(p+".stream", "missing: the Redis stream to read")
	}
	if src.Format != "" && src.Format != spec.FormatJSONL {
		ps.Add(p+".format", "%q is not supported: want %s", src.Format, spec.FormatJSONL)
	}
	return SourceConfig{Addr: src.Addr, Stream: src.Stream, Format: src.Format}, ps
}

// SinkConfig is a redis sink's configuration, from its spec entry.
type SinkConfig struct {
	// Addr of the Redis server; "" is the job's Redis.
	Addr string
	// Stream is the stream to append to (required).
	Stream string
}

// sinkConfig decodes and checks the fields of a redis sink.
func sinkConfig(snk *spec.Sink) (SinkConfig, spec.Problems) {
	var ps spec.Problems
	if snk.Stream == "" {
		ps.Add(fmt.Sprintf("sinks[%s].stream", snk.Name), "missing: the Redis stream to append to")
	}
	return SinkConfig{Addr: snk.Addr, Stream: snk.Stream}, ps
}

// SourceType is the redis source, for connector.RegisterSource.
func SourceType() connector.SourceType {
	return connector.SourceType{
		Name: spec.SourceRedis,
		Check: func(src *spec.Source) spec.Problems {
			_, ps := sourceConfig(src)
			if src.Gen != nil {
				ps.Add(fmt.Sprintf("sources[%s].datagen", src.Name), "only a datagen source takes datagen options")
			}
			return ps
		},
		Plan: func(src *spec.Source) spec.Problems {
			var ps spec.Problems
			if src.Parallelism > 1 {
				ps.Add(fmt.Sprintf("sources[%s].parallelism", src.Name), "a redis source reads one stream: parallelism must be 1, got %d", src.Parallelism)
			}
			return ps
		},
		New: NewSource,
	}
}

// SinkType is the redis sink, for connector.RegisterSink.
func SinkType() connector.SinkType {
	return connector.SinkType{
		Name: spec.SinkRedis,
		Check: func(snk *spec.Sink) spec.Problems {
			_, ps := sinkConfig(snk)
			return ps
		},
		New: NewSink,
		Txn: txnType(),
	}
}

// NewSource returns the redis source src describes, producing out.
func NewSource(src *spec.Source, out stream.Stream) (task.Source, error) {
	cfg, ps := sourceConfig(src)
	if len(ps) > 0 {
		return nil, ps[0]
	}
	return newRedisSource(src.Name, cfg, out), nil
}

// NewSink returns the redis sink snk describes. It is a
// task.TwoPhaseSink.
func NewSink(snk *spec.Sink, _ stream.Stream) (task.Sink, error) {
	cfg, ps := sinkConfig(snk)
	if len(ps) > 0 {
		return nil, ps[0]
	}
	return newRedisSink(snk.Name, cfg), nil
}
