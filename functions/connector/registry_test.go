package connector_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connectors/files"
	"github.com/weirstream/weir/functions/spec"
)

// TestRegistry checks what functions/connectors registered, in the order
// error messages list the types, and that a type cannot be registered
// twice or without its functions.
func TestRegistry(t *testing.T) {
	if got, want := connector.SourceTypes(), []string{"datagen", "files", "redis", "nexmark"}; !slices.Equal(got, want) {
		t.Errorf("SourceTypes() = %v, want %v", got, want)
	}
	if got, want := connector.SinkTypes(), []string{"files", "redis", "stdout", "blackhole"}; !slices.Equal(got, want) {
		t.Errorf("SinkTypes() = %v, want %v", got, want)
	}
	if _, ok := connector.LookupSource("kafka"); ok {
		t.Error("LookupSource(kafka) found a type")
	}
	for name, register := range map[string]func(){
		"a taken name":       func() { connector.RegisterSink(files.SinkType()) },
		"a type without New": func() { connector.RegisterSource(connector.SourceType{Name: "x", Check: files.SourceType().Check}) },
		"Txn without Owns": func() {
			connector.RegisterSink(connector.SinkType{Name: "y", Check: files.SinkType().Check, New: files.NewSink, Txn: &connector.TxnType{}})
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registering %s did not panic", name)
				}
			}()
			register()
		}()
	}
	if got := connector.SourceTypes(); len(got) != 4 {
		t.Errorf("a refused registration changed the registry: %v", got)
	}
}

// TestSinkTypeOfHandle checks that the sink types with transactions tell
// their handles apart, for sinks the job spec does not name.
func TestSinkTypeOfHandle(t *testing.T) {
	for handle, want := range map[string]string{
		`{"v":1,"txn":"t","objects":[]}`:          spec.SinkFiles,
		`{"v":1,"stream":"s","txn":"t","rows":2}`: spec.SinkRedis,
		`{"v":1}`:  "",
		`not json`: "",
	} {
		if got := connector.SinkTypeOfHandle(json.RawMessage(handle)); got != want {
			t.Errorf("SinkTypeOfHandle(%s) = %q, want %q", handle, got, want)
		}
	}
}

// TestDescribePosition checks that a built-in source's position is shown
// as stored.
func TestDescribePosition(t *testing.T) {
	for typ, pos := range map[string]string{"datagen": `{"next":42}`, "kafka": `{"offset":1}`} {
		if got := connector.DescribePosition(typ, json.RawMessage(pos)); got != pos {
			t.Errorf("DescribePosition(%s, %s) = %s", typ, pos, got)
		}
	}
}
