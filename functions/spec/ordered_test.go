package spec_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/weirstream/weir/functions/spec"
)

func TestOrderedMap(t *testing.T) {
	m := spec.NewOrderedMap(spec.Pair{Key: "z", Value: "1"}, spec.Pair{Key: "a", Value: "2"}, spec.Pair{Key: "m", Value: "3"})
	m.Set("a", "20") // replaces in place
	m.Set("b", "4")  // appends
	if want := []string{"z", "a", "m", "b"}; !reflect.DeepEqual(m.Keys, want) {
		t.Errorf("keys = %v, want %v", m.Keys, want)
	}
	if want := []string{"1", "20", "3", "4"}; !reflect.DeepEqual(m.Values, want) {
		t.Errorf("values = %v, want %v", m.Values, want)
	}
	if v, ok := m.Get("a"); !ok || v != "20" {
		t.Errorf("Get(a) = %q, %v", v, ok)
	}
	if _, ok := m.Get("q"); ok {
		t.Error("Get(q) found a missing key")
	}
	if m.Len() != 4 {
		t.Errorf("Len = %d", m.Len())
	}
	var nilMap *spec.OrderedMap
	if _, ok := nilMap.Get("a"); ok || nilMap.Len() != 0 {
		t.Error("a nil map is not empty")
	}
}

// Column, select and aggregate order survive YAML → JSON → JSON: the order
// of a schema's columns is the order of the Arrow schema.
func TestOrderedMapKeepsOrderThroughJSON(t *testing.T) {
	src := `job: order
sources:
  - name: s
    type: datagen
    schema: {zeta: int64, alpha: string, mid: float64, beta: timestamp_ms}
operators:
  - name: sel
    input: s
    select: {z2: zeta * 2, a: alpha, "with space": mid + 1, b: beta}
sinks:
  - {name: out, input: sel, type: stdout}
`
	job, err := spec.Parse([]byte(src), "order.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wantSchema := []string{"zeta", "alpha", "mid", "beta"}
	wantSelect := []string{"z2", "a", "with space", "b"}
	check := func(stage string, j *spec.Job) {
		t.Helper()
		if !reflect.DeepEqual(j.Sources[0].Schema.Keys, wantSchema) {
			t.Errorf("%s: schema keys = %v, want %v", stage, j.Sources[0].Schema.Keys, wantSchema)
		}
		if !reflect.DeepEqual(j.Operators[0].Select.Keys, wantSelect) {
			t.Errorf("%s: select keys = %v, want %v", stage, j.Operators[0].Select.Keys, wantSelect)
		}
		if v, _ := j.Operators[0].Select.Get("with space"); v != "mid + 1" {
			t.Errorf("%s: select[with space] = %q", stage, v)
		}
	}
	check("yaml", job)

	first, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(first, []byte(`"schema":{"zeta":"int64","alpha":"string","mid":"float64","beta":"timestamp_ms"}`)) {
		t.Errorf("JSON does not keep the schema's order:\n%s", first)
	}
	var j2 spec.Job
	if err := json.Unmarshal(first, &j2); err != nil {
		t.Fatal(err)
	}
	check("json", &j2)
	second, err := json.Marshal(&j2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Errorf("JSON changed on a second round trip:\n%s\n%s", first, second)
	}
	var j3 spec.Job
	if err := json.Unmarshal(second, &j3); err != nil {
		t.Fatal(err)
	}
	check("json again", &j3)

	// And back to YAML, which Parse reads to the same job.
	y, err := yaml.Marshal(&j3)
	if err != nil {
		t.Fatal(err)
	}
	j4, err := spec.Parse(y, "again.yaml")
	if err != nil {
		t.Fatalf("Parse of marshalled YAML: %v\n%s", err, y)
	}
	check("yaml again", j4)
}

func TestOrderedMapUnmarshalJSONErrors(t *testing.T) {
	for _, in := range []string{`[]`, `"x"`, `{"a": 1}`, `{"a": "b"`, `{"a": {"b": "c"}}`} {
		var m spec.OrderedMap
		if err := json.Unmarshal([]byte(in), &m); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want an error", in, m)
		}
	}
	var m spec.OrderedMap
	if err := json.Unmarshal([]byte(`{"b":"1","a":"2"}`), &m); err != nil || !reflect.DeepEqual(m.Keys, []string{"b", "a"}) {
		t.Errorf("Unmarshal = %+v, %v", m, err)
	}
	// Unmarshal replaces what was there.
	if err := json.Unmarshal([]byte(`{"c":"3"}`), &m); err != nil || !reflect.DeepEqual(m.Keys, []string{"c"}) {
		t.Errorf("second Unmarshal = %+v, %v", m, err)
	}
}

func TestOrderedMapYAMLErrors(t *testing.T) {
	for _, in := range []string{"[a, b]", "a: [1]", "a: 1\na: 2", "x"} {
		var m spec.OrderedMap
		if err := yaml.Unmarshal([]byte(in), &m); err == nil {
			t.Errorf("yaml.Unmarshal(%q) = %+v, want an error", in, m)
		} else if !strings.Contains(err.Error(), "line") {
			t.Errorf("yaml.Unmarshal(%q) error %q names no line", in, err)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	var d spec.Duration
	for in, want := range map[string]string{`"1m30s"`: "1m30s", `"7d"`: "168h0m0s", `5000000000`: "5s"} {
		if err := json.Unmarshal([]byte(in), &d); err != nil || d.String() != want {
			t.Errorf("Unmarshal(%s) = %v, %v; want %s", in, d, err, want)
		}
	}
	for _, in := range []string{`"5 seconds"`, `true`, `{}`} {
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("Unmarshal(%s) = %v, want an error", in, d)
		}
	}
	b, err := json.Marshal(spec.Duration(90e9))
	if err != nil || string(b) != `"1m30s"` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
}
