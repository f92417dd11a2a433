package files

import (
	"fmt"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

// SourceConfig is a files source's configuration, from its spec entry.
type SourceConfig struct {
	// Path is the object or the prefix of the objects to read in the
	// job's store (required).
	Path string
	// Format of the objects: jsonl, the only one (required).
	Format string
}

// sourceConfig decodes and checks the fields of a files source.
func sourceConfig(src *spec.Source) (SourceConfig, spec.Problems) {
	p := fmt.Sprintf("sources[%s]", src.Name)
	var ps spec.Problems
	if src.Path == "" {
		ps.Add(p+".path", "missing: a files source reads the objects under this prefix of the store")
	}
	if src.Format != spec.FormatJSONL {
		ps.Add(p+".format", "%q is not supported: want %s", src.Format, spec.FormatJSONL)
	}
	return SourceConfig{Path: src.Path, Format: src.Format}, ps
}

// SinkConfig is a files sink's configuration, from its spec entry.
type SinkConfig struct {
	// Path is the prefix in the job's store the objects are written
	// under (required).
	Path string
	// Format of the objects: jsonl or parquet (required).
	Format string
}

// sinkConfig decodes and checks the fields of a files sink.
func sinkConfig(snk *spec.Sink) (SinkConfig, spec.Problems) {
	p := fmt.Sprintf("sinks[%s]", snk.Name)
	var ps spec.Problems
	if snk.Path == "" {
		ps.Add(p+".path", "missing: a files sink writes objects under this prefix of the store")
	}
	if snk.Format != spec.FormatJSONL && snk.Format != spec.FormatParq {
		ps.Add(p+".format", "%q is not supported: want %s or %s", snk.Format, spec.FormatJSONL, spec.FormatParq)
	}
	return SinkConfig{Path: snk.Path, Format: snk.Format}, ps
}

// SourceType is the files source, for connector.RegisterSource.
func SourceType() connector.SourceType {
	return connector.SourceType{
		Name: spec.SourceFiles,
		Check: func(src *spec.Source) spec.Problems {
			_, ps := sourceConfig(src)
			if src.Gen != nil {
				ps.Add(fmt.Sprintf("sources[%s].datagen", src.Name), "only a datagen source takes datagen options")
			}
			return ps
		},
		New: NewSource,
		// Each object is a split (see fileSource), so a files source
		// rescales.
		Splits: true,
	}
}

// SinkType is the files sink, for connector.RegisterSink.
func SinkType() connector.SinkType {
	return connector.SinkType{
		Name: spec.SinkFiles,
		Check: func(snk *spec.Sink) spec.Problems {
			_, ps := sinkConfig(snk)
			return ps
		},
		New: NewSink,
		Txn: txnType(),
	}
}

// NewSource returns the files source src describes, producing out.
func NewSource(src *spec.Source, out stream.Stream) (task.Source, error) {
	cfg, ps := sourceConfig(src)
	if len(ps) > 0 {
		return nil, ps[0]
	}
	return newFileSource(src.Name, cfg, out), nil
}

// NewSink returns the files sink snk describes, consuming in. It is a
// task.TwoPhaseSink.
func NewSink(snk *spec.Sink, in stream.Stream) (task.Sink, error) {
	cfg, ps := sinkConfig(snk)
	if len(ps) > 0 {
		return nil, ps[0]
	}
	return newFileSink(snk.Name, cfg, in), nil
}
