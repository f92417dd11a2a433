package connector_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
)

func TestDatagenSourceSchema(t *testing.T) {
	src := &spec.Source{Name: "trips", Type: "datagen",
		Schema: connectortest.Schema("id", "int64", "fare", "float64", "at", "timestamp_ms", "who", "string", "ok", "bool"),
		Event:  &spec.EventTime{Column: "at"}}
	s := connectortest.SourceSchema(t, src)
	if s.TimeColumn != 2 || s.TimeOffset != 0 || s.Schema.NumFields() != 5 {
		t.Fatalf("stream %+v", s)
	}
	want := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Timestamp_ms, arrow.BinaryTypes.String, arrow.FixedWidthTypes.Boolean}
	for i, f := range s.Schema.Fields() {
		if !arrow.TypeEqual(f.Type, want[i]) {
			t.Errorf("column %d %s: type %v, want %v", i, f.Name, f.Type, want[i])
		}
	}

	src.Event = nil
	if s := connectortest.SourceSchema(t, src); s.TimeColumn != -1 {
		t.Errorf("no eventTime: TimeColumn %d, want -1", s.TimeColumn)
	}

	for _, tc := range []struct {
		name string
		src  spec.Source
		want []string
	}{
		{"bad types", spec.Source{Name: "s", Schema: connectortest.Schema("a", "int", "b", "float64", "c", "text")},
			[]string{`sources[s].schema.a`, `"int"`, `sources[s].schema.c`, `"text"`, "timestamp_ms"}},
		{"event column type", spec.Source{Name: "s", Schema: connectortest.Schema("a", "int64"), Event: &spec.EventTime{Column: "a"}},
			[]string{"sources[s].eventTime.column", `"a" is int64`, "timestamp_ms"}},
		{"event column missing", spec.Source{Name: "s", Schema: connectortest.Schema("a", "int64"), Event: &spec.EventTime{Column: "t"}},
			[]string{"sources[s].eventTime.column", `"t" is not a column`, "a int64"}},
		{"no schema", spec.Source{Name: "s"}, []string{"sources[s].schema"}},
	} {
		_, err := connector.SourceSchema(&tc.src)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %s", tc.name, err, w)
			}
		}
	}
}

func TestDatagenDispatchErrors(t *testing.T) {
	out := stream.Stream{Schema: arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil), TimeColumn: -1}
	for _, tc := range []struct {
		src  spec.Source
		want string
	}{
		{spec.Source{Name: "s", Type: "kafka"}, `sources[s].type: "kafka" is not a source type: want datagen, files, redis or nexmark`},
		{spec.Source{Name: "s", Type: "files", Format: "jsonl"}, `sources[s].path: missing`},
		{spec.Source{Name: "s", Type: "files", Path: "in", Format: "csv"}, `sources[s].format: "csv" is not supported: want jsonl`},
		{spec.Source{Name: "s", Type: "redis"}, `sources[s].stream: missing`},
	} {
		if _, err := connector.NewSource(&tc.src, out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewSource(%+v): error %v, want %q", tc.src, err, tc.want)
		}
	}
}
