package connector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

// SourceSchema returns the stream a source with one output produces: its schema from
// src.Schema, in order, and its event-time column from src.Event, which
// must be a timestamp_ms column. It reports every problem at once.
func SourceSchema(src *spec.Source) (stream.Stream, error) {
	p := fmt.Sprintf("sources[%s]", src.Name)
	var errs []error
	if src.Schema.Len() == 0 {
		errs = append(errs, spec.Errorf(p+".schema", "a source needs a schema: {column: type, ...}"))
	}
	fields := make([]arrowfmt.Field, 0, src.Schema.Len())
	for i, name := range src.Schema.Keys {
		t, err := arrowfmt.ParseType(src.Schema.Values[i])
		if err != nil {
			errs = append(errs, spec.Errorf(p+".schema."+name, "%w", err))
			continue
		}
		fields = append(fields, arrowfmt.Field{Name: name, Type: t})
	}
	if len(errs) > 0 {
		return stream.Stream{}, errors.Join(errs...)
	}
	schema, err := arrowfmt.NewSchema(fields)
	if err != nil {
		return stream.Stream{}, spec.Errorf(p+".schema", "%w", err)
	}
	s := stream.Stream{Schema: schema, TimeColumn: -1}
	if src.Event == nil {
		return s, nil
	}
	col := src.Event.Column
	idx := schema.FieldIndices(col)
	switch {
	case col == "":
		return stream.Stream{}, spec.Errorf(p+".eventTime.column", "missing: name the timestamp_ms column that holds event time")
	case len(idx) == 0:
		return stream.Stream{}, spec.Errorf(p+".eventTime.column", "%q is not a column of the schema (columns: %s)", col, stream.ColumnList(schema))
	case fields[idx[0]].Type != arrowfmt.TimestampMs:
		return stream.Stream{}, spec.Errorf(p+".eventTime.column", "column %q is %s: event time needs a %s column", col, fields[idx[0]].Type, arrowfmt.TimestampMs)
	}
	s.TimeColumn = idx[0]
	return s, nil
}

// NewSource returns the source src describes, producing out (from
// SourceSchema; the zero Stream for a source with outputs), built by its
// registered type. The source only reads: the runtime that wraps it
// limits its rate and generates watermarks.
func NewSource(src *spec.Source, out stream.Stream) (task.Source, error) {
	t, ok := LookupSource(src.Type)
	if !ok {
		return nil, unknownSource(src)
	}
	return t.New(src, out)
}

// SourceOutputs returns the outputs of a source with several (a nexmark
// source: person, auction, bid) and their streams; nil for a source with
// one output, whose stream SourceSchema returns.
func SourceOutputs(src *spec.Source) ([]string, []stream.Stream) {
	t, ok := LookupSource(src.Type)
	if !ok || t.Outputs == nil {
		return nil, nil
	}
	names := make([]string, len(t.Outputs))
	streams := make([]stream.Stream, len(t.Outputs))
	for i, o := range t.Outputs {
		names[i], streams[i] = o.Name, o.Stream
	}
	return names, streams
}

// PlanSource checks src, with the job's defaults filled in, as its type's
// Plan does; nil for a type without one, or unknown (Validate refused it).
func PlanSource(src *spec.Source) spec.Problems {
	if t, ok := LookupSource(src.Type); ok && t.Plan != nil {
		return t.Plan(src)
	}
	return nil
}

// DescribePosition renders a checkpointed position of a source of type
// typ for weir checkpoints inspect, as the type describes its positions:
// the JSON as stored when it does not (or the type is unknown).
func DescribePosition(typ string, pos json.RawMessage) string {
	if t, ok := LookupSource(typ); ok && t.DescribePosition != nil {
		return t.DescribePosition(pos)
	}
	return string(pos)
}

// DecodePosition decodes a source's position into v, a struct of pointer
// fields so that a missing field is seen as nil. It refuses unknown fields,
// values of the wrong type and anything after the object; what names the
// source in errors ("datagen source gen").
func DecodePosition(what string, pos json.RawMessage, v any) error {
	if len(bytes.TrimSpace(pos)) == 0 {
		return fmt.Errorf("restore %s: position is empty", what)
	}
	err := decodeStrict(pos, v, "position")
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Field != "":
		return fmt.Errorf("restore %s: position.%s: got %s, want %s", what, te.Field, te.Value, te.Type)
	}
	return fmt.Errorf("restore %s: position %s: %w", what, quotePosition(pos), err)
}

// decodeStrict decodes the JSON object in data into v, refusing unknown
// fields and anything after the object; what names the object ("handle")
// in that error.
func decodeStrict(data []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); !errors.Is(extra, io.EOF) {
			err = fmt.Errorf("more data after the %s object", what)
		}
	}
	return err
}

// quotePosition quotes pos for an error message, shortened if long.
func quotePosition(pos json.RawMessage) string {
	const most = 200
	if len(pos) > most {
		return fmt.Sprintf("%q...", pos[:most])
	}
	return fmt.Sprintf("%q", pos)
}

// DeadLetterReason turns the error decoding an input record (arrowfmt's
// JSONDecoder) into a dead letter's reason.
func DeadLetterReason(err error) string {
	return strings.TrimPrefix(err.Error(), "arrowfmt: ")
}
