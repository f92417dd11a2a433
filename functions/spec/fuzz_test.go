package spec_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/weirstream/weir/functions/spec"
)

// jsonRoundTrip is what a spec goes through between the coordinator and a
// worker (and a restarted coordinator): json.Marshal, json.Unmarshal and
// Validate.
func jsonRoundTrip(t *testing.T, job *spec.Job) *spec.Job {
	t.Helper()
	b, err := json.Marshal(job)
	if err != nil {
		t.Fatalf("json.Marshal of a parsed spec: %v", err)
	}
	var back spec.Job
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("json.Unmarshal of a marshalled spec: %v\n%s", err, b)
	}
	if err := back.Validate(); err != nil {
		t.Fatalf("Validate after a JSON round trip: %v\n%s", err, b)
	}
	return &back
}

// A spec Parse accepts must reach a worker as the same spec: it must
// encode as JSON and decode to an equal job.
func TestParsedSpecSurvivesJSON(t *testing.T) {
	example, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, src string
	}{
		{"example", string(example)},
		{"base", base},
		{"valid", valid},
		{"config", strings.Replace(base, "    keyBy: [zone]\n    window:", "    keyBy: [zone]\n    config: {history: 3, label: x, ratio: 0.5, on: true, list: [1, two], nested: {a: 1}}\n    window:", 1)},
		{"redis streams list", redisBase("streams: [rides-1, rides-0]")},
		{"redis streams pattern", redisBase("streams: rides-*")},
		// Numbers JSON cannot carry: Parse must refuse them, naming the
		// field, rather than accept a spec that cannot be stored.
		{"infinite rate", strings.Replace(base, "    type: datagen\n", "    type: datagen\n    rate: .inf\n", 1)},
		{"NaN null rate", strings.Replace(base, "{values: [a, b]}", "{values: [a, b], nullRate: .nan}", 1)},
		{"infinite events per second", strings.Replace(base, "    datagen:\n", "    datagen:\n      eventsPerSecond: .inf\n", 1)},
		{"config with a non-string key", strings.Replace(base, "    keyBy: [zone]\n    window:", "    keyBy: [zone]\n    config: {weights: {1: heavy}}\n    window:", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := spec.Parse([]byte(tt.src), "job.yaml")
			if err != nil {
				if _, ok := spec.AsProblems(err); !ok {
					t.Fatalf("Parse error is not spec.Problems: %v", err)
				}
				return // refused: fine
			}
			back := jsonRoundTrip(t, job)
			// Config is compared as is: a function's New sees the config
			// as the coordinator decoded it at submit time (from YAML)
			// and as the worker decodes it (from JSON); both must be the
			// same values of the same types.
			for i := range job.Operators {
				for k, v := range job.Operators[i].Config {
					if w := back.Operators[i].Config[k]; !reflect.DeepEqual(v, w) {
						t.Errorf("operators[%s].config.%s: parsed %T %v, after JSON %T %v", job.Operators[i].Name, k, v, v, w, w)
					}
				}
			}
			if !t.Failed() && !reflect.DeepEqual(normalize(job, false), normalize(back, false)) {
				t.Errorf("spec changed through JSON:\nparsed: %#v\nback:   %#v", job, back)
			}
		})
	}
}

// normalize makes empty lists and maps nil (JSON omits them, YAML keeps
// "[]"), and, with configViaJSON, passes operator configs through JSON.
func normalize(j *spec.Job, configViaJSON bool) *spec.Job {
	c := *j
	if len(c.Sources) == 0 {
		c.Sources = nil
	}
	if len(c.Operators) == 0 {
		c.Operators = nil
	}
	if len(c.Sinks) == 0 {
		c.Sinks = nil
	}
	c.Sources = append([]spec.Source(nil), c.Sources...)
	for i := range c.Sources {
		s := &c.Sources[i]
		s.Schema = normMap(s.Schema)
		if s.Gen != nil {
			g := *s.Gen
			if len(g.Fields) == 0 {
				g.Fields = nil
			} else {
				fields := map[string]spec.FieldGen{}
				for k, f := range g.Fields {
					if len(f.Values) == 0 {
						f.Values = nil
					}
					fields[k] = f
				}
				g.Fields = fields
			}
			s.Gen = &g
		}
	}
	c.Operators = append([]spec.Operator(nil), c.Operators...)
	for i := range c.Operators {
		o := &c.Operators[i]
		if len(o.KeyBy) == 0 {
			o.KeyBy = nil
		}
		if o.Select != nil {
			m := normMap(*o.Select)
			o.Select = &m
		}
		if o.Aggregate != nil {
			m := normMap(*o.Aggregate)
			o.Aggregate = &m
		}
		if len(o.Config) == 0 {
			o.Config = nil
		} else if configViaJSON {
			b, err := json.Marshal(o.Config)
			if err == nil {
				var m map[string]any
				if json.Unmarshal(b, &m) == nil {
					o.Config = m
				}
			}
		}
	}
	return &c
}

func normMap(m spec.OrderedMap) spec.OrderedMap {
	if len(m.Keys) == 0 {
		return spec.OrderedMap{}
	}
	return m
}

// FuzzParse: Parse never panics, and a spec it accepts survives the JSON
// round trip to the workers unchanged.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(examplePath)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(example),
		base,
		valid,
		// Bad specs: unknown keys, wrong shapes, bad references, cycles,
		// bad durations, anchors.
		strings.Replace(base, "      column: ts\n", "      colum: ts\n", 1),
		strings.Replace(base, "size: 1m", "size: 1x", 1),
		strings.Replace(valid, "input: rides", "input: stats", 1),
		"job: j\nsources: {a: b}\nsinks: x\n",
		"job: &a [*a]\n",
		"- 1\n- 2\n",
		`{"job": "j", "sources": [{"name": "s", "type": "datagen", "schema": {"x": "int64"}}], "sinks": [{"name": "o", "input": "s", "type": "stdout"}]}`,
		"job: j\nsources:\n  - &s {name: s, type: datagen, schema: {x: int64}}\n  - *s\nsinks: []\n",
		"",
		"---\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		job, err := spec.Parse(data, "fuzz.yaml")
		if err != nil {
			if _, ok := spec.AsProblems(err); !ok {
				t.Fatalf("Parse error is not spec.Problems: %v", err)
			}
			return
		}
		if job == nil {
			t.Fatal("Parse returned neither a job nor an error")
		}
		back := jsonRoundTrip(t, job)
		// Config types are TestParsedSpecSurvivesJSON's business.
		if !reflect.DeepEqual(normalize(job, true), normalize(back, true)) {
			b1, _ := json.Marshal(job)
			b2, _ := json.Marshal(back)
			t.Fatalf("spec changed through JSON:\nparsed: %#v\nback:   %#v\n%s\n%s", job, back, b1, b2)
		}
	})
}
