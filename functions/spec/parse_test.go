package spec_test

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/functions/spec"
)

const examplePath = "../../examples/surge-pricing.yaml"

func TestParseExample(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	job, err := spec.Parse(data, "surge-pricing.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if err := job.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if job.Name != "surge-pricing" || job.Parallelism != 2 || job.MaxParallelism != 128 {
		t.Errorf("job header = %q p=%d maxP=%d", job.Name, job.Parallelism, job.MaxParallelism)
	}
	if len(job.Sources) != 1 || len(job.Operators) != 2 || len(job.Sinks) != 2 {
		t.Fatalf("got %d sources, %d operators, %d sinks; want 1, 2, 2", len(job.Sources), len(job.Operators), len(job.Sinks))
	}
	src := job.Sources[0]
	if want := []string{"ride_id", "zone", "fare", "ts"}; !reflect.DeepEqual(src.Schema.Keys, want) {
		t.Errorf("schema columns = %v, want %v (in written order)", src.Schema.Keys, want)
	}
	if want := []string{"int64", "string", "float64", "timestamp_ms"}; !reflect.DeepEqual(src.Schema.Values, want) {
		t.Errorf("schema types = %v, want %v", src.Schema.Values, want)
	}
	if src.Event == nil || src.Event.Column != "ts" || src.Event.MaxOutOfOrderness.D() != 5*time.Second || src.Event.IdleTimeout.D() != 10*time.Second {
		t.Errorf("eventTime = %+v", src.Event)
	}
	if src.Gen == nil || src.Gen.Seed != 42 || src.Gen.OutOfOrderness.D() != 4*time.Second || len(src.Gen.Fields["zone"].Values) != 8 {
		t.Errorf("datagen = %+v", src.Gen)
	}
	if f := src.Gen.Fields["fare"]; f.Min == nil || *f.Min != 5 || f.Max == nil || *f.Max != 80 {
		t.Errorf("fare generator = %+v", f)
	}
	stats := job.Operators[0]
	if stats.Kind() != "window" || stats.Window.Type != spec.WindowSliding ||
		stats.Window.Size.D() != 5*time.Minute || stats.Window.Slide.D() != time.Minute ||
		stats.Window.AllowedLateness.D() != time.Minute || stats.Window.LateOutput != "late" {
		t.Errorf("stats = %+v window %+v", stats, stats.Window)
	}
	if want := []string{"requests", "avg_fare"}; !reflect.DeepEqual(stats.Aggregate.Keys, want) {
		t.Errorf("aggregates = %v, want %v", stats.Aggregate.Keys, want)
	}
	if surge := job.Operators[1]; surge.Kind() != "function" || surge.Function != "surge-multiplier" || !reflect.DeepEqual(surge.KeyBy, []string{"zone"}) {
		t.Errorf("surge = %+v", surge)
	}
	if late := job.Sinks[1]; late.Input != "late" || late.Type != spec.SinkFiles || late.Format != spec.FormatJSONL {
		t.Errorf("late sink = %+v", late)
	}
}

// base is a small valid spec the unknown-key cases start from.
const base = `job: rides
sources:
  - name: rides
    type: datagen
    schema: {id: int64, zone: string, ts: timestamp_ms}
    eventTime:
      column: ts
    datagen:
      fields:
        zone: {values: [a, b]}
operators:
  - name: stats
    input: rides
    keyBy: [zone]
    window:
      type: tumbling
      size: 1m
    aggregate: {n: count()}
sinks:
  - name: out
    input: stats
    type: files
    path: out/
    format: jsonl
exchange:
  credits: 4
`

func TestParseBaseIsValid(t *testing.T) {
	if _, err := spec.Parse([]byte(base), "base.yaml"); err != nil {
		t.Fatalf("base spec: %v", err)
	}
}

func TestParseUnknownKeys(t *testing.T) {
	tests := []struct {
		name    string
		from    string // text of base to replace
		to      string
		field   string
		marker  string // the problem's line contains this
		suggest string // "" for no suggestion
		accept  string // the accepted list, sorted
	}{
		{
			name: "top", from: "job: rides\n", to: "job: rides\nparallelizm: 2\n",
			field: "parallelizm", marker: "parallelizm", suggest: "parallelism",
			accept: "autoscale, checkpoint, exchange, job, maxParallelism, operators, parallelism, restart, sinks, sources",
		},
		{
			name: "source", from: "    type: datagen\n", to: "    typ: datagen\n",
			field: "sources[rides].typ", marker: "typ: datagen", suggest: "type",
			accept: "addr, count, datagen, eventTime, format, name, nexmark, parallelism, path, rate, schema, splits, stream, streams, type",
		},
		{
			name: "eventTime", from: "      column: ts\n", to: "      colum: ts\n",
			field: "sources[rides].eventTime.colum", marker: "colum: ts", suggest: "column",
			accept: "column, idleTimeout, maxOutOfOrderness",
		},
		{
			name: "datagen field", from: "{values: [a, b]}", to: "{valuse: [a, b]}",
			field: "sources[rides].datagen.fields.zone.valuse", marker: "valuse", suggest: "values",
			accept: "cardinality, max, min, nullRate, values",
		},
		{
			name: "operator", from: "    keyBy: [zone]\n", to: "    keyby: [zone]\n",
			field: "operators[stats].keyby", marker: "keyby", suggest: "keyBy",
			accept: "aggregate, config, filter, function, input, join, keyBy, name, parallelism, select, window",
		},
		{
			name: "window", from: "      size: 1m\n", to: "      sise: 1m\n",
			field: "operators[stats].window.sise", marker: "sise", suggest: "size",
			accept: "allowedLateness, gap, lateOutput, size, slide, type",
		},
		{
			name: "sink", from: "    format: jsonl\n", to: "    fromat: jsonl\n",
			field: "sinks[out].fromat", marker: "fromat", suggest: "format",
			accept: "addr, format, input, name, parallelism, path, rate, stream, type",
		},
		{
			name: "exchange", from: "  credits: 4\n", to: "  credit: 4\n",
			field: "exchange.credit", marker: "credit: 4", suggest: "credits",
			accept: "batchBytes, batchRows, bufferTimeout, compression, credits",
		},
		{
			name: "far from anything", from: "    type: files\n", to: "    type: files\n    compression: zstd\n",
			field: "sinks[out].compression", marker: "compression",
			accept: "addr, format, input, name, parallelism, path, rate, stream, type",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(base, tt.from) {
				t.Fatalf("base has no %q", tt.from)
			}
			src := strings.Replace(base, tt.from, tt.to, 1)
			job, err := spec.Parse([]byte(src), "job.yaml")
			ps := problems(t, err)
			if job != nil {
				t.Errorf("Parse returned a job along with unknown-key problems")
			}
			if len(ps) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(ps), ps)
			}
			p := problemAt(t, ps, tt.field)
			if p.File != "job.yaml" {
				t.Errorf("File = %q, want job.yaml", p.File)
			}
			if want := lineOf(t, src, tt.marker); p.Line != want {
				t.Errorf("Line = %d, want %d", p.Line, want)
			}
			key := tt.field[strings.LastIndex(tt.field, ".")+1:]
			wantMsg(t, p, `unknown field "`+key+`"`, "accepted: "+tt.accept)
			if tt.suggest != "" {
				wantMsg(t, p, `did you mean "`+tt.suggest+`"?`)
			} else if strings.Contains(p.Msg, "did you mean") {
				t.Errorf("problem %q suggests a key for a far-off name", p.Msg)
			}
			if !strings.HasPrefix(p.Error(), "job.yaml:") {
				t.Errorf("Error() = %q, want it to start with file:line", p.Error())
			}
		})
	}
}

// A list item without a name is named by its index.
func TestParseUnknownKeyInUnnamedItem(t *testing.T) {
	src := "job: j\nsources:\n  - type: datagen\n    colour: red\nsinks: []\n"
	_, err := spec.Parse([]byte(src), "j.yaml")
	p := problemAt(t, problems(t, err), "sources[0].colour")
	if p.Line != 4 {
		t.Errorf("Line = %d, want 4", p.Line)
	}
}

func TestParseReportsEveryUnknownKey(t *testing.T) {
	src := strings.NewReplacer(
		"job: rides\n", "job: rides\nparalelism: 2\n",
		"      column: ts\n", "      colum: ts\n",
		"      size: 1m\n", "      sise: 1m\n",
		"    format: jsonl\n", "    fromat: jsonl\n",
	).Replace(base)
	_, err := spec.Parse([]byte(src), "job.yaml")
	ps := problems(t, err)
	var fields []string
	for _, p := range ps {
		fields = append(fields, p.Field)
	}
	want := []string{"paralelism", "sources[rides].eventTime.colum", "operators[stats].window.sise", "sinks[out].fromat"}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("problem fields = %v, want %v (all of them, in document order)", fields, want)
	}
	if !strings.Contains(ps.Error(), "(4 problems)") {
		t.Errorf("Error() = %q, want it to count the problems", ps.Error())
	}
}

// redisBase is base with a redis source whose streams are given by
// field ("stream: x", "streams: [a, b]").
func redisBase(field string) string {
	s := strings.Replace(base, "    datagen:\n      fields:\n        zone: {values: [a, b]}\n", "", 1)
	return strings.Replace(s, "    type: datagen\n", "    type: redis\n    "+field+"\n", 1)
}

// TestParseRedisStreams checks that streams is a list or one string, and
// survives the JSON the coordinator stores.
func TestParseRedisStreams(t *testing.T) {
	for _, tc := range []struct {
		field string
		want  spec.StreamNames
	}{
		{"streams: [rides-1, rides-0]", spec.StreamNames{"rides-1", "rides-0"}},
		{"streams:\n      - rides-0", spec.StreamNames{"rides-0"}},
		{"streams: rides-*", spec.StreamNames{"rides-*"}},
		{"streams: \"rides-[01]\"", spec.StreamNames{"rides-[01]"}},
	} {
		job, err := spec.Parse([]byte(redisBase(tc.field)), "job.yaml")
		if err != nil {
			t.Fatalf("%s: %v", tc.field, err)
		}
		if got := job.Sources[0].Streams; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: streams %q, want %q", tc.field, got, tc.want)
		}
		if back := jsonRoundTrip(t, job); !reflect.DeepEqual(back.Sources[0].Streams, tc.want) {
			t.Errorf("%s: streams after JSON %q, want %q", tc.field, back.Sources[0].Streams, tc.want)
		}
	}
	for _, tc := range []struct{ field, msg string }{
		{"streams: {a: 1}", "want a stream name, a pattern such as rides-* or a list such as [rides-0, rides-1], got a mapping"},
		{"streams: [a, [b]]", "the list holds a list: want stream names"},
	} {
		_, err := spec.Parse([]byte(redisBase(tc.field)), "job.yaml")
		wantMsg(t, problemAt(t, problems(t, err), "sources[rides].streams"), tc.msg)
	}
}

func TestParseShapeAndSyntax(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		field  string // "" when the problem names no field
		marker string // "" when the problem has no line
		msg    []string
	}{
		{
			name: "not YAML", src: "job: [unclosed\n",
			msg: []string{"not valid YAML"},
		},
		{
			name: "empty", src: "",
			msg: []string{"empty spec"},
		},
		{
			name: "scalar where a mapping goes", src: strings.Replace(base, "    eventTime:\n      column: ts\n", "    eventTime: ts\n", 1),
			field: "sources[rides].eventTime", marker: "eventTime: ts", msg: []string{`want a mapping, got "ts"`},
		},
		{
			name: "wrong scalar type", src: strings.Replace(base, "job: rides\n", "job: rides\nparallelism: two\n", 1),
			msg: []string{"two", "int"},
		},
		{
			name: "select value not a scalar", src: strings.Replace(base, "{n: count()}", "{n: [count()]}", 1),
			field: "operators[stats].aggregate", marker: "aggregate:", msg: []string{`the value of "n" is a list: want a single value`},
		},
		{
			name: "repeated aggregate", src: strings.Replace(base, "{n: count()}", "{n: count(), n: count()}", 1),
			msg: []string{`"n" is repeated`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := spec.Parse([]byte(tt.src), "job.yaml")
			ps := problems(t, err)
			p := ps[0]
			if tt.field != "" {
				p = problemAt(t, ps, tt.field)
			}
			if p.File != "job.yaml" {
				t.Errorf("File = %q, want job.yaml", p.File)
			}
			if tt.marker != "" {
				if want := lineOf(t, tt.src, tt.marker); p.Line != want {
					t.Errorf("Line = %d, want %d", p.Line, want)
				}
			}
			wantMsg(t, p, tt.msg...)
		})
	}
}

func TestParseDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"5s", 5 * time.Second},
		{"500ms", 500 * time.Millisecond},
		{"1m30s", 90 * time.Second},
		{"2h", 2 * time.Hour},
		{"7d", 7 * 24 * time.Hour},
		{"1.5d", 36 * time.Hour},
		{"0s", 0},
		{"-5s", -5 * time.Second},
	}
	for _, tt := range good {
		d, err := spec.ParseDuration(tt.in)
		if err != nil || d.D() != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, d, err, tt.want)
		}
	}
	// "1h7d" and "5sd" were once read as 1 and 5 days: what precedes the d
	// must be a number, and a finite one.
	for _, in := range []string{"", "5", "5x", "d", "five seconds", "1h7d", "5sd", "7 days", "1d2h", "infd", "nand", "1e300d"} {
		if d, err := spec.ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		} else if !strings.Contains(err.Error(), "want e.g.") {
			t.Errorf("ParseDuration(%q) error %q does not say what is accepted", in, err)
		}
	}
}

// Durations are read in every place they appear, in YAML and JSON, and a
// bad one is reported with its value, its line and what is accepted.
func TestParseDurationsInSpec(t *testing.T) {
	src := strings.NewReplacer(
		"      column: ts\n", "      column: ts\n      maxOutOfOrderness: 1m30s\n      idleTimeout: 7d\n",
		"      size: 1m\n", "      size: 500ms\n      allowedLateness: 2h\n",
		"  credits: 4\n", "  credits: 4\n  bufferTimeout: 5s\n",
	).Replace(base)
	job, err := spec.Parse([]byte(src), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ev, w := job.Sources[0].Event, job.Operators[0].Window
	got := []time.Duration{ev.MaxOutOfOrderness.D(), ev.IdleTimeout.D(), w.Size.D(), w.AllowedLateness.D(), job.Exchange.BufferTimeout.D()}
	want := []time.Duration{90 * time.Second, 7 * 24 * time.Hour, 500 * time.Millisecond, 2 * time.Hour, 5 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("durations = %v, want %v", got, want)
	}

	bad := strings.Replace(base, "      size: 1m\n", "      size: 5 minutes\n", 1)
	_, err = spec.Parse([]byte(bad), "job.yaml")
	ps := problems(t, err)
	p := ps[0]
	wantMsg(t, p, `"5 minutes"`, "want e.g.")
	if line := lineOf(t, bad, "size: 5 minutes"); !strings.Contains(p.Error(), "job.yaml") || !strings.Contains(p.Error(), fmt.Sprintf("job.yaml:%d: operators[stats].window.size: ", line)) {
		t.Errorf("problem %q does not name the file and line %d", p.Error(), line)
	}
}

// Validate's problems get the file and the line of their field when they
// come through Parse.
func TestParseValidateProblemsHaveLines(t *testing.T) {
	src := strings.Replace(base, "      column: ts\n", "      column: when\n", 1)
	_, err := spec.Parse([]byte(src), "job.yaml")
	p := problemAt(t, problems(t, err), "sources[rides].eventTime.column")
	if p.File != "job.yaml" || p.Line != lineOf(t, src, "column: when") {
		t.Errorf("problem at %s:%d, want job.yaml:%d", p.File, p.Line, lineOf(t, src, "column: when"))
	}
	wantMsg(t, p, `"when" is not a column`, "id, zone, ts")
}

func TestWithLines(t *testing.T) {
	src := []byte(base)
	ps := spec.WithLines(spec.Problems{
		{Field: "operators[stats].keyBy", Msg: "x"},
		{Field: "sinks[out].path", Msg: "y"},
		{Field: "nowhere.at.all", Msg: "z"},
		{Msg: "no field"},
	}, src, "job.yaml")
	want := []int{lineOf(t, base, "keyBy: [zone]"), lineOf(t, base, "path: out/"), 0, 0}
	for i, p := range ps {
		if p.File != "job.yaml" || p.Line != want[i] {
			t.Errorf("problem %d (%s) at %s:%d, want job.yaml:%d", i, p.Field, p.File, p.Line, want[i])
		}
	}
}
