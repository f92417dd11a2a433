package redis

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

// SourceConfig is a redis source's configuration, from its spec entry.
type SourceConfig struct {
	// Addr of the Redis server; "" is the job's Redis.
	Addr string
	// Streams are the streams to read, sorted: the source's splits. Nil
	// with a Pattern.
	Streams []string
	// Pattern is a glob (SCAN MATCH) for the streams to read, expanded
	// when the source opens; "" with Streams.
	Pattern string
	// Format of each entry's data field: jsonl (the default) is the only
	// one.
	Format string
}

// isPattern reports whether a name from streams is a glob pattern.
func isPattern(name string) bool { return strings.ContainsAny(name, "*?[") }

// sourceConfig decodes and checks the fields of a redis source: exactly
// one of stream (one name, taken literally) and streams (a list of names,
// or one pattern).
func sourceConfig(src *spec.Source) (SourceConfig, spec.Problems) {
	p := fmt.Sprintf("sources[%s]", src.Name)
	var ps spec.Problems
	cfg := SourceConfig{Addr: src.Addr, Format: src.Format}
	switch {
	case src.Stream != "" && len(src.Streams) > 0:
		ps.Add(p+".streams", "give stream or streams, not both: stream: %s is streams: [%s]", src.Stream, src.Stream)
	case src.Stream != "":
		cfg.Streams = []string{src.Stream}
	case len(src.Streams) == 0:
		ps.Add(p+".stream", "missing: the Redis stream to read (stream: rides), or streams: a list (streams: [rides-0, rides-1]) or a pattern (streams: rides-*)")
	case len(src.Streams) == 1 && isPattern(src.Streams[0]):
		cfg.Pattern = src.Streams[0]
	default:
		seen := map[string]bool{}
		for i, name := range src.Streams {
			f := fmt.Sprintf("%s.streams[%d]", p, i)
			switch {
			case name == "":
				ps.Add(f, "empty: want a stream name")
			case isPattern(name):
				ps.Add(f, "%q is a pattern: a list holds stream names; write a pattern as the one value of streams (streams: %s)", name, name)
			case seen[name]:
				ps.Add(f, "%q is repeated", name)
			}
			seen[name] = true
		}
		cfg.Streams = slices.Sorted(maps.Keys(seen))
	}
	if src.Format != "" && src.Format != spec.FormatJSONL {
		ps.Add(p+".format", "%q is not supported: want %s", src.Format, spec.FormatJSONL)
	}
	return cfg, ps
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
			// A subtask without a stream would idle (and hold back
			// event time unless eventTime.idleTimeout is set). A pattern
			// is only expanded at Open.
			var ps spec.Problems
			cfg, _ := sourceConfig(src)
			f := fmt.Sprintf("sources[%s].parallelism", src.Name)
			switch n := len(cfg.Streams); {
			case n == 1 && src.Parallelism > 1:
				ps.Add(f, "a redis source reads one stream: parallelism must be 1, got %d", src.Parallelism)
			case n > 1 && src.Parallelism > n:
				ps.Add(f, "a redis source reads each of its %d streams in one subtask: parallelism must be at most %d, got %d", n, n, src.Parallelism)
			}
			return ps
		},
		New:              NewSource,
		Splits:           true,
		Pending:          pending,
		DescribePosition: describePosition,
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
