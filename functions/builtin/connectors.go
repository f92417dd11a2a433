package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

// SourceSchema returns the stream a source produces: its schema from
// src.Schema, in order, and its event-time column from src.Event, which
// must be a timestamp_ms column. It reports every problem at once.
func SourceSchema(src *spec.Source) (Stream, error) {
	p := fmt.Sprintf("sources[%s]", src.Name)
	var errs []error
	if src.Schema.Len() == 0 {
		errs = append(errs, fmt.Errorf("%s.schema: a source needs a schema: {column: type, ...}", p))
	}
	fields := make([]arrowfmt.Field, 0, src.Schema.Len())
	for i, name := range src.Schema.Keys {
		t, err := arrowfmt.ParseType(src.Schema.Values[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.schema.%s: %w", p, name, err))
			continue
		}
		fields = append(fields, arrowfmt.Field{Name: name, Type: t})
	}
	if len(errs) > 0 {
		return Stream{}, errors.Join(errs...)
	}
	schema, err := arrowfmt.NewSchema(fields)
	if err != nil {
		return Stream{}, fmt.Errorf("%s.schema: %w", p, err)
	}
	s := Stream{Schema: schema, TimeColumn: -1}
	if src.Event == nil {
		return s, nil
	}
	col := src.Event.Column
	idx := schema.FieldIndices(col)
	switch {
	case col == "":
		return Stream{}, fmt.Errorf("%s.eventTime.column: missing: name the timestamp_ms column that holds event time", p)
	case len(idx) == 0:
		return Stream{}, fmt.Errorf("%s.eventTime.column: %q is not a column of the schema (columns: %s)", p, col, columnList(schema))
	case fields[idx[0]].Type != arrowfmt.TimestampMs:
		return Stream{}, fmt.Errorf("%s.eventTime.column: column %q is %s: event time needs a %s column", p, col, fields[idx[0]].Type, arrowfmt.TimestampMs)
	}
	s.TimeColumn = idx[0]
	return s, nil
}

// NewSource returns the source src describes, producing out (from
// SourceSchema). The source only reads: the runtime that wraps it limits
// its rate and generates watermarks.
func NewSource(src *spec.Source, out Stream) (task.Source, error) {
	p := fmt.Sprintf("sources[%s]", src.Name)
	switch src.Type {
	case spec.SourceDatagen:
		return newDatagen(src, out)
	case spec.SourceFiles:
		if src.Path == "" {
			return nil, fmt.Errorf("%s.path: missing: a files source reads the objects under this prefix of the store", p)
		}
		if src.Format != spec.FormatJSONL {
			return nil, fmt.Errorf("%s.format: %q is not supported: want %s", p, src.Format, spec.FormatJSONL)
		}
		return newFileSource(src, out), nil
	case spec.SourceRedis:
		if src.Stream == "" {
			return nil, fmt.Errorf("%s.stream: missing: the Redis stream to read", p)
		}
		if src.Format != "" && src.Format != spec.FormatJSONL {
			return nil, fmt.Errorf("%s.format: %q is not supported: want %s", p, src.Format, spec.FormatJSONL)
		}
		return newRedisSource(src, out), nil
	case spec.SourceNexmark:
		return newNexmarkSource(src)
	}
	return nil, fmt.Errorf("%s.type: %q is not a source type: want %s, %s, %s or %s", p, src.Type, spec.SourceDatagen, spec.SourceFiles, spec.SourceRedis, spec.SourceNexmark)
}

// SinkTypes returns the sink types still built in this package (files,
// redis and blackhole), for connector.RegisterSink. Package spec checks
// their fields.
func SinkTypes() []connector.SinkType {
	var ts []connector.SinkType
	for _, name := range []string{spec.SinkFiles, spec.SinkRedis, spec.SinkBlackhole} {
		ts = append(ts, connector.SinkType{Name: name, Check: func(*spec.Sink) spec.Problems { return nil }, New: newSink})
	}
	return ts
}

// newSink returns the files, redis or blackhole sink snk describes,
// consuming in.
func newSink(snk *spec.Sink, in Stream) (task.Sink, error) {
	p := fmt.Sprintf("sinks[%s]", snk.Name)
	switch snk.Type {
	case spec.SinkFiles:
		if snk.Path == "" {
			return nil, fmt.Errorf("%s.path: missing: a files sink writes objects under this prefix of the store", p)
		}
		if snk.Format != spec.FormatJSONL && snk.Format != spec.FormatParq {
			return nil, fmt.Errorf("%s.format: %q is not supported: want %s or %s", p, snk.Format, spec.FormatJSONL, spec.FormatParq)
		}
		return newFileSink(snk, in), nil
	case spec.SinkRedis:
		if snk.Stream == "" {
			return nil, fmt.Errorf("%s.stream: missing: the Redis stream to append to", p)
		}
		return newRedisSink(snk, in), nil
	case spec.SinkBlackhole:
		return newBlackhole(snk, in), nil
	}
	return nil, fmt.Errorf("%s.type: %q is not a sink type built here", p, snk.Type)
}

// decodePosition decodes a source's position into v, a struct of pointer
// fields so that a missing field is seen as nil. It refuses unknown fields,
// values of the wrong type and anything after the object; what names the
// source in errors ("datagen source gen").
func decodePosition(what string, pos json.RawMessage, v any) error {
	if len(bytes.TrimSpace(pos)) == 0 {
		return fmt.Errorf("restore %s: position is empty", what)
	}
	dec := json.NewDecoder(bytes.NewReader(pos))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); !errors.Is(extra, io.EOF) {
			err = errors.New("more data after the position object")
		}
	}
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Field != "":
		return fmt.Errorf("restore %s: position.%s: got %s, want %s", what, te.Field, te.Value, te.Type)
	}
	return fmt.Errorf("restore %s: position %s: %w", what, quotePosition(pos), err)
}

// quotePosition quotes pos for an error message, shortened if long.
func quotePosition(pos json.RawMessage) string {
	const most = 200
	if len(pos) > most {
		return fmt.Sprintf("%q...", pos[:most])
	}
	return fmt.Sprintf("%q", pos)
}

// allocator returns mem, or Go's allocator if the runtime gave none.
func allocator(mem memory.Allocator) memory.Allocator {
	if mem == nil {
		return memory.DefaultAllocator
	}
	return mem
}
