package spec_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/functions/spec"
)

// valid is a small valid spec the Validate cases edit: a source, a filter,
// a window with a late output, and two sinks.
const valid = `job: rides
sources:
  - name: rides
    type: datagen
    count: 100
    schema: {id: int64, zone: string, fare: float64, ts: timestamp_ms}
    eventTime: {column: ts}
operators:
  - name: cheap
    input: rides
    filter: fare < 10
  - name: stats
    input: cheap
    keyBy: [zone]
    window: {type: tumbling, size: 1m, lateOutput: late}
    aggregate: {n: count()}
sinks:
  - {name: out, input: stats, type: files, path: out/, format: jsonl}
  - {name: late-out, input: late, type: stdout}
`

func TestValidSpec(t *testing.T) {
	job, err := spec.Parse([]byte(valid), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Validate(); err != nil {
		t.Fatal(err)
	}
}

// edit applies old→new replacements to valid; each old must occur.
func edit(t *testing.T, pairs ...string) string {
	t.Helper()
	s := valid
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("spec has no %q", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

func TestValidateRules(t *testing.T) {
	const (
		window  = "    window: {type: tumbling, size: 1m, lateOutput: late}\n"
		filter  = "    filter: fare < 10\n"
		evTime  = "    eventTime: {column: ts}\n"
		count   = "    count: 100\n"
		outSink = "  - {name: out, input: stats, type: files, path: out/, format: jsonl}\n"
		srcType = "    type: datagen\n"
	)
	tests := []struct {
		name   string
		edits  []string
		field  string
		marker string // the problem's line holds this; "" not checked
		msg    []string
	}{
		// Names.
		{name: "bad job name", edits: []string{"job: rides", "job: 9rides"},
			field: "job", marker: "job: 9rides", msg: []string{`"9rides" is not a valid job name`, "want a letter"}},
		{name: "bad job name chars", edits: []string{"job: rides", "job: my job!"},
			field: "job", msg: []string{`"my job!" is not a valid job name`}},
		{name: "empty job name", edits: []string{"job: rides\n", ""},
			field: "job", msg: []string{`"" is not a valid job name`}},
		{name: "bad operator name", edits: []string{"  - name: cheap\n", "  - name: cheap.one\n", "input: cheap", "input: cheap.one"},
			field: "operators[cheap.one].name", marker: "name: cheap.one", msg: []string{`"cheap.one" is not a valid name`}},
		{name: "bad sink name", edits: []string{"name: late-out", "name: _late"},
			field: "sinks[_late].name", marker: "name: _late", msg: []string{`"_late" is not a valid name`}},
		{name: "operator named like the source", edits: []string{"  - name: cheap\n", "  - name: rides  # dup\n", "input: cheap", "input: rides"},
			field: "operators[rides].name", marker: "# dup", msg: []string{`name "rides" is already used by source "rides"`}},
		{name: "side output named like an operator", edits: []string{"lateOutput: late", "lateOutput: cheap", "input: late", "input: cheap"},
			field: "operators[stats].window.lateOutput", marker: "lateOutput: cheap", msg: []string{`name "cheap" is already used by operator "cheap"`}},
		{name: "sink named like an operator", edits: []string{"name: late-out", "name: stats"},
			field: "sinks[stats].name", marker: "name: stats, input: late", msg: []string{`name "stats" is already used by operator "stats"`}},
		{name: "sink named like a side output", edits: []string{"name: late-out", "name: late"},
			field: "sinks[late].name", msg: []string{`name "late" is already used by the late output of operator "stats"`}},
		// The problem must point at the second definition, the one to
		// rename, not at the first.
		{name: "two sinks with one name", edits: []string{"name: late-out", "name: out"},
			field: "sinks[out].name", marker: "name: out, input: late", msg: []string{`name "out" is already used by another sink`}},
		{name: "two sources with one name", edits: []string{"operators:\n", "  - {name: rides, type: datagen, schema: {x: int64}}  # dup\noperators:\n"},
			field: "sources[rides].name", marker: "# dup", msg: []string{`name "rides" is already used`}},

		// Inputs.
		{name: "missing input", edits: []string{"    input: rides\n", ""},
			field: "operators[cheap].input", msg: []string{"missing: name a source, operator or side output"}},
		{name: "unknown input", edits: []string{"input: rides", "input: ridez"},
			field: "operators[cheap].input", marker: "input: ridez",
			msg: []string{`"ridez" is not a source, operator or side output`, `did you mean "rides"?`, "known: cheap, late, rides, stats"}},
		{name: "unknown sink input", edits: []string{"input: late", "input: lat"},
			field: "sinks[late-out].input", marker: "input: lat,", msg: []string{`"lat" is not a source`, `did you mean "late"?`}},
		{name: "input names a sink", edits: []string{"input: late", "input: out"},
			field: "sinks[late-out].input", msg: []string{`"out" is a sink; sinks produce nothing to read`}},
		{name: "operator input names a sink", edits: []string{"input: cheap", "input: late-out"},
			field: "operators[stats].input", msg: []string{`"late-out" is a sink`}},

		// Operator kinds.
		{name: "no kind", edits: []string{filter, ""},
			field: "operators[cheap]", msg: []string{"needs exactly one of filter, select, window (with aggregate), function or join"}},
		{name: "two kinds", edits: []string{filter, filter + "    function: f\n"},
			field: "operators[cheap]", msg: []string{"needs exactly one of"}},
		{name: "aggregate without window", edits: []string{window, ""},
			field: "operators[stats].window", msg: []string{"aggregate needs a window"}},
		{name: "window without aggregate", edits: []string{"    aggregate: {n: count()}\n", ""},
			field: "operators[stats].aggregate", msg: []string{"a window needs aggregates"}},
		{name: "function without keyBy", edits: []string{filter, "    function: enrich\n"},
			field: "operators[cheap].keyBy", msg: []string{"a function operator needs keyBy columns"}},

		// Window shapes.
		{name: "tumbling without size", edits: []string{"size: 1m, ", ""},
			field: "operators[stats].window.size", msg: []string{"a tumbling window needs a positive size"}},
		{name: "tumbling with slide", edits: []string{"size: 1m,", "size: 1m, slide: 30s,"},
			field: "operators[stats].window", msg: []string{"a tumbling window takes size only"}},
		{name: "sliding without slide", edits: []string{"type: tumbling", "type: sliding"},
			field: "operators[stats].window", msg: []string{"a sliding window needs a positive size and slide"}},
		{name: "sliding slide above size", edits: []string{"type: tumbling, size: 1m", "type: sliding, size: 1m, slide: 2m"},
			field: "operators[stats].window.slide", msg: []string{"slide 2m0s is longer than size 1m0s"}},
		{name: "sliding with gap", edits: []string{"type: tumbling, size: 1m", "type: sliding, size: 1m, slide: 10s, gap: 5s"},
			field: "operators[stats].window.gap", msg: []string{"a sliding window takes size and slide"}},
		{name: "session without gap", edits: []string{"type: tumbling, size: 1m", "type: session"},
			field: "operators[stats].window.gap", msg: []string{"a session window needs a positive gap"}},
		{name: "session with size", edits: []string{"type: tumbling, size: 1m", "type: session, gap: 10s, size: 1m"},
			field: "operators[stats].window", msg: []string{"a session window takes gap only"}},
		{name: "unknown window type", edits: []string{"type: tumbling", "type: hopping"},
			field: "operators[stats].window.type", msg: []string{`"hopping" is not a window type: want tumbling, sliding or session`}},
		{name: "negative lateness", edits: []string{"size: 1m,", "size: 1m, allowedLateness: -5s,"},
			field: "operators[stats].window.allowedLateness", msg: []string{"-5s is negative"}},
		{name: "negative size", edits: []string{"size: 1m", "size: -1m"},
			field: "operators[stats].window.size", msg: []string{"positive size"}},

		// Numbers.
		{name: "negative rate", edits: []string{count, count + "    rate: -1\n"},
			field: "sources[rides].rate", marker: "rate: -1", msg: []string{"-1 is negative"}},
		{name: "negative count", edits: []string{"count: 100", "count: -5"},
			field: "sources[rides].count", marker: "count: -5", msg: []string{"-5 is negative"}},
		{name: "negative job parallelism", edits: []string{"job: rides\n", "job: rides\nparallelism: -1\n"},
			field: "parallelism", marker: "parallelism: -1", msg: []string{"-1 is out of range"}},
		{name: "parallelism above maxParallelism", edits: []string{"job: rides\n", "job: rides\nmaxParallelism: 4\n", count, count + "    parallelism: 8\n"},
			field: "sources[rides].parallelism", marker: "parallelism: 8", msg: []string{"8 is out of range: want 1..maxParallelism (4)"}},
		{name: "maxParallelism too large", edits: []string{"job: rides\n", "job: rides\nmaxParallelism: 40000\n"},
			field: "maxParallelism", msg: []string{"40000 is out of range: want 1..32768"}},
		{name: "negative operator parallelism", edits: []string{filter, filter + "    parallelism: -2\n"},
			field: "operators[cheap].parallelism", msg: []string{"-2 is out of range"}},
		{name: "negative sink parallelism", edits: []string{"type: stdout}", "type: stdout, parallelism: -3}"},
			field: "sinks[late-out].parallelism", msg: []string{"-3 is out of range"}},
		{name: "negative sink rate", edits: []string{"type: stdout}", "type: stdout, rate: -0.5}"},
			field: "sinks[late-out].rate", msg: []string{"-0.5 is negative"}},
		{name: "negative out-of-orderness", edits: []string{"{column: ts}", "{column: ts, maxOutOfOrderness: -1s}"},
			field: "sources[rides].eventTime.maxOutOfOrderness", msg: []string{"-1s is negative"}},
		{name: "negative idle timeout", edits: []string{"{column: ts}", "{column: ts, idleTimeout: -1m}"},
			field: "sources[rides].eventTime.idleTimeout", msg: []string{"-1m0s is negative"}},
		{name: "negative datagen out-of-orderness", edits: []string{evTime, evTime + "    datagen: {outOfOrderness: -2s}\n"},
			field: "sources[rides].datagen.outOfOrderness", msg: []string{"-2s is negative"}},
		{name: "negative exchange setting", edits: []string{"operators:\n", "exchange: {credits: -1}\noperators:\n"},
			field: "exchange", msg: []string{"must not be negative"}},
		{name: "unknown exchange compression", edits: []string{"operators:\n", "exchange: {compression: snappy}\noperators:\n"},
			field: "exchange.compression", msg: []string{`"snappy" is not a compression: want none, lz4 or zstd`}},
		{name: "unknown exchange encoding", edits: []string{"operators:\n", "exchange: {encoding: varint}\noperators:\n"},
			field: "exchange.encoding", msg: []string{`"varint" is not an encoding: want compact or plain`}},
		{name: "unknown checkpoint compression", edits: []string{"operators:\n", "checkpoint: {interval: 1s, compression: gzip}\noperators:\n"},
			field: "checkpoint.compression", msg: []string{`"gzip" is not a compression: want lz4, zstd or none`}},
		{name: "null rate of 1", edits: []string{evTime, evTime + "    datagen: {fields: {zone: {nullRate: 1}}}\n"},
			field: "sources[rides].datagen.fields.zone.nullRate", msg: []string{"1 is out of range: want [0,1)"}},
		{name: "min not below max", edits: []string{evTime, evTime + "    datagen: {fields: {fare: {min: 5, max: 5}}}\n"},
			field: "sources[rides].datagen.fields.fare", msg: []string{"min 5 must be below max 5"}},
		{name: "datagen field not in schema", edits: []string{evTime, evTime + "    datagen: {fields: {colour: {values: [red]}}}\n"},
			field: "sources[rides].datagen.fields.colour", msg: []string{`"colour" is not a column of the schema`}},

		// Sources.
		{name: "no sources", edits: []string{"sources:\n  - name: rides\n    type: datagen\n" + count + "    schema: {id: int64, zone: string, fare: float64, ts: timestamp_ms}\n" + evTime, "sources: []\n"},
			field: "sources", msg: []string{"a job needs at least one source"}},
		{name: "no schema", edits: []string{"    schema: {id: int64, zone: string, fare: float64, ts: timestamp_ms}\n", ""},
			field: "sources[rides].schema", msg: []string{"a source needs a schema"}},
		{name: "event time not a column", edits: []string{"{column: ts}", "{column: time}"},
			field: "sources[rides].eventTime.column", marker: "column: time", msg: []string{`"time" is not a column of the schema (id, zone, fare, ts)`}},
		{name: "event time without column", edits: []string{"{column: ts}", "{idleTimeout: 5s}"},
			field: "sources[rides].eventTime.column", msg: []string{"missing: name the timestamp_ms column"}},
		{name: "unknown source type", edits: []string{srcType, "    type: kafka\n"},
			field: "sources[rides].type", marker: "type: kafka", msg: []string{`"kafka" is not a source type: want datagen, files, redis or nexmark`}},
		{name: "datagen with path", edits: []string{srcType, srcType + "    path: in/\n"},
			field: "sources[rides]", msg: []string{"datagen takes no path or stream"}},
		{name: "files without path", edits: []string{srcType, "    type: files\n    format: jsonl\n", count, ""},
			field: "sources[rides].path", msg: []string{"missing: a files source reads the objects under this prefix"}},
		{name: "files in csv", edits: []string{srcType, "    type: files\n    path: in/\n    format: csv\n", count, ""},
			field: "sources[rides].format", marker: "format: csv", msg: []string{`"csv" is not supported: want jsonl`}},
		{name: "files without format", edits: []string{srcType, "    type: files\n    path: in/\n", count, ""},
			field: "sources[rides].format", msg: []string{`"" is not supported: want jsonl`}},
		{name: "files with datagen options", edits: []string{srcType, "    type: files\n    path: in/\n    format: jsonl\n    datagen: {seed: 1}\n", count, ""},
			field: "sources[rides].datagen", msg: []string{"only a datagen source takes datagen options"}},
		{name: "redis without stream", edits: []string{srcType, "    type: redis\n", count, ""},
			field: "sources[rides].stream", msg: []string{"missing: the Redis stream to read"}},
		{name: "redis with stream and streams", edits: []string{srcType, "    type: redis\n    stream: rides\n    streams: [a, b]\n", count, ""},
			field: "sources[rides].streams", msg: []string{"give stream or streams, not both"}},
		{name: "redis with a pattern in a list", edits: []string{srcType, "    type: redis\n    streams: [rides-0, rides-*]\n", count, ""},
			field: "sources[rides].streams[1]", msg: []string{`"rides-*" is a pattern`, "streams: rides-*"}},
		{name: "redis with a repeated stream", edits: []string{srcType, "    type: redis\n    streams: [a, b, a]\n", count, ""},
			field: "sources[rides].streams[2]", msg: []string{`"a" is repeated`}},
		{name: "redis with an empty stream name", edits: []string{srcType, "    type: redis\n    streams: [a, \"\"]\n", count, ""},
			field: "sources[rides].streams[1]", msg: []string{"empty: want a stream name"}},
		{name: "redis with an empty list", edits: []string{srcType, "    type: redis\n    streams: []\n", count, ""},
			field: "sources[rides].stream", msg: []string{"missing: the Redis stream to read", "streams: rides-*"}},
		{name: "datagen with streams", edits: []string{srcType, srcType + "    streams: [a]\n"},
			field: "sources[rides]", msg: []string{"datagen takes no path or stream"}},
		{name: "redis in csv", edits: []string{srcType, "    type: redis\n    stream: rides\n    format: csv\n", count, ""},
			field: "sources[rides].format", msg: []string{`"csv" is not supported: want jsonl`}},

		// Sinks.
		{name: "no sinks", edits: []string{"sinks:\n" + outSink + "  - {name: late-out, input: late, type: stdout}\n", "sinks: []\n"},
			field: "sinks", msg: []string{"a job needs at least one sink"}},
		{name: "unknown sink type", edits: []string{"type: stdout", "type: kafka"},
			field: "sinks[late-out].type", msg: []string{`"kafka" is not a sink type: want files, redis, stdout or blackhole`}},
		{name: "files sink without path", edits: []string{" path: out/,", ""},
			field: "sinks[out].path", msg: []string{"missing: a files sink writes objects under this prefix"}},
		{name: "files sink in csv", edits: []string{"format: jsonl}", "format: csv}"},
			field: "sinks[out].format", marker: "format: csv", msg: []string{`"csv" is not supported: want jsonl or parquet`}},
		{name: "redis sink without stream", edits: []string{"type: stdout", "type: redis"},
			field: "sinks[late-out].stream", msg: []string{"missing: the Redis stream to append to"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := edit(t, tt.edits...)
			job, err := spec.Parse([]byte(src), "job.yaml")
			ps := problems(t, err)
			if job == nil {
				t.Errorf("Parse returned no job with validation problems")
			}
			p := problemAt(t, ps, tt.field)
			wantMsg(t, p, tt.msg...)
			if p.File != "job.yaml" {
				t.Errorf("File = %q, want job.yaml", p.File)
			}
			if tt.marker != "" {
				if want := lineOf(t, src, tt.marker); p.Line != want {
					t.Errorf("%s: Line = %d, want %d (the line of %q)", tt.field, p.Line, want, tt.marker)
				}
			}
		})
	}
}

func TestValidateCycles(t *testing.T) {
	tests := []struct {
		name  string
		ops   string
		cycle string // in data-flow order, from the first operator listed
	}{
		{
			name:  "self",
			ops:   "  - {name: a, input: a, filter: id > 0}\n",
			cycle: "a -> a",
		},
		{
			name:  "two",
			ops:   "  - {name: a, input: b, filter: id > 0}\n  - {name: b, input: a, filter: id > 1}\n",
			cycle: "a -> b -> a",
		},
		{
			// a reads c, b reads a, c reads b: data flows a, b, c, a.
			name:  "three",
			ops:   "  - {name: a, input: c, filter: id > 0}\n  - {name: b, input: a, filter: id > 1}\n  - {name: c, input: b, filter: id > 2}\n",
			cycle: "a -> b -> c -> a",
		},
		{
			// a reads w's late output, w reads a.
			name: "through a side output",
			ops: "  - {name: a, input: late, filter: id > 0}\n" +
				"  - {name: w, input: a, keyBy: [id], window: {type: tumbling, size: 1s, lateOutput: late}, aggregate: {n: count()}}\n",
			cycle: "a -> w -> a",
		},
		{
			// The cycle does not include the first operator, which reads
			// into it.
			name:  "downstream of a reader",
			ops:   "  - {name: x, input: b, filter: id > 0}\n  - {name: b, input: c, filter: id > 1}\n  - {name: c, input: b, filter: id > 2}\n",
			cycle: "b -> c -> b",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "job: j\nsources:\n  - {name: s, type: datagen, schema: {id: int64, ts: timestamp_ms}, eventTime: {column: ts}}\n" +
				"operators:\n" + tt.ops +
				"sinks:\n  - {name: out, input: s, type: stdout}\n"
			_, err := spec.Parse([]byte(src), "job.yaml")
			ps := problems(t, err)
			if len(ps) != 1 {
				t.Errorf("got %d problems, want only the cycle:\n%v", len(ps), ps)
			}
			p := problemAt(t, ps, "operators")
			wantMsg(t, p, "the graph has a cycle: "+tt.cycle)
		})
	}
}

// Every problem is reported at once, in one error.
func TestValidateReportsEveryProblem(t *testing.T) {
	src := edit(t,
		"job: rides", "job: 1rides",
		"input: rides", "input: nowhere",
		"type: tumbling", "type: hopping",
		"format: jsonl}", "format: csv}",
		"type: stdout", "type: kafka",
	)
	_, err := spec.Parse([]byte(src), "job.yaml")
	ps := problems(t, err)
	for _, f := range []string{"job", "operators[cheap].input", "operators[stats].window.type", "sinks[out].format", "sinks[late-out].type"} {
		problemAt(t, ps, f)
	}
	if len(ps) != 5 {
		t.Errorf("got %d problems, want 5:\n%v", len(ps), ps)
	}
}

// Validate on a job built in Go reports fields but no file or line.
func TestValidateGoJob(t *testing.T) {
	job := &spec.Job{Name: "j",
		Sources: []spec.Source{{Name: "s", Type: spec.SourceDatagen, Schema: *spec.NewOrderedMap(spec.Pair{Key: "id", Value: "int64"})}},
		Sinks:   []spec.Sink{{Name: "out", Input: "s", Type: spec.SinkStdout}},
	}
	if err := job.Validate(); err != nil {
		t.Fatalf("valid job: %v", err)
	}
	job.Sinks[0].Input = "elsewhere"
	ps := problems(t, job.Validate())
	p := problemAt(t, ps, "sinks[out].input")
	if p.File != "" || p.Line != 0 {
		t.Errorf("Validate set file %q line %d", p.File, p.Line)
	}
	if got, want := ps.Error(), `invalid job spec: sinks[out].input: "elsewhere" is not a source, operator or side output; known: s`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestEffective(t *testing.T) {
	job, err := spec.Parse([]byte(valid), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	job.Parallelism = 3
	job.Operators[1].Parallelism = 2
	e := job.Effective()
	if e.Parallelism != 3 || e.MaxParallelism != spec.DefaultMaxParallelism {
		t.Errorf("job parallelism %d max %d, want 3 and %d", e.Parallelism, e.MaxParallelism, spec.DefaultMaxParallelism)
	}
	if e.Sources[0].Parallelism != 3 || e.Operators[0].Parallelism != 3 || e.Operators[1].Parallelism != 2 ||
		e.Sinks[0].Parallelism != 3 || e.Sinks[1].Parallelism != 3 {
		t.Errorf("node parallelism not filled from the job's: sources %d, operators %d %d, sinks %d %d",
			e.Sources[0].Parallelism, e.Operators[0].Parallelism, e.Operators[1].Parallelism, e.Sinks[0].Parallelism, e.Sinks[1].Parallelism)
	}
	want := spec.Exchange{BatchRows: 8192, BatchBytes: 1 << 20, BufferTimeout: spec.Duration(100 * time.Millisecond), Credits: 4}
	if e.Exchange == nil || *e.Exchange != want {
		t.Errorf("exchange = %+v, want %+v", e.Exchange, want)
	}
	// The original is untouched.
	if job.Sources[0].Parallelism != 0 || job.Sinks[0].Parallelism != 0 || job.Exchange != nil || job.MaxParallelism != 0 {
		t.Errorf("Effective changed its receiver: %+v", job)
	}

	// Set values are kept.
	job.Exchange = &spec.Exchange{Credits: 16, BatchRows: 10}
	job.MaxParallelism = 64
	e = job.Effective()
	if e.MaxParallelism != 64 || e.Exchange.Credits != 16 || e.Exchange.BatchRows != 10 || e.Exchange.BatchBytes != 1<<20 {
		t.Errorf("effective = max %d exchange %+v", e.MaxParallelism, e.Exchange)
	}
	if job.Exchange.BatchBytes != 0 {
		t.Errorf("Effective filled the receiver's exchange: %+v", job.Exchange)
	}
	// A job with no parallelism gets the default.
	if e := (&spec.Job{Sources: []spec.Source{{Name: "s"}}}).Effective(); e.Parallelism != spec.DefaultParallelism || e.Sources[0].Parallelism != spec.DefaultParallelism {
		t.Errorf("default parallelism = %d / %d, want %d", e.Parallelism, e.Sources[0].Parallelism, spec.DefaultParallelism)
	}
}

func TestOperatorKind(t *testing.T) {
	sel := spec.NewOrderedMap(spec.Pair{Key: "a", Value: "b"})
	tests := []struct {
		op   spec.Operator
		want string
	}{
		{spec.Operator{Filter: "x"}, "filter"},
		{spec.Operator{Select: sel}, "select"},
		{spec.Operator{Window: &spec.Window{}}, "window"},
		{spec.Operator{Aggregate: sel}, "window"},
		{spec.Operator{Window: &spec.Window{}, Aggregate: sel}, "window"},
		{spec.Operator{Function: "f"}, "function"},
		{spec.Operator{}, ""},
		{spec.Operator{Filter: "x", Select: sel}, ""},
		{spec.Operator{Function: "f", Window: &spec.Window{}}, ""},
	}
	for _, tt := range tests {
		if got := tt.op.Kind(); got != tt.want {
			t.Errorf("Kind(%+v) = %q, want %q", tt.op, got, tt.want)
		}
	}
}

func TestProblemsError(t *testing.T) {
	ps := spec.Problems{
		{File: "a.yaml", Line: 3, Field: "sinks[x].path", Msg: "missing"},
		{File: "a.yaml", Field: "job", Msg: "bad"},
		{Line: 7, Msg: "no file"},
	}
	want := "invalid job spec (3 problems):\n  a.yaml:3: sinks[x].path: missing\n  a.yaml: job: bad\n  line 7: no file"
	if got := ps.Error(); got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	if _, ok := spec.AsProblems(errWrap{ps}); !ok {
		t.Error("AsProblems does not see Problems through a wrapping error")
	}
	if !reflect.DeepEqual(ps[:1].Error(), "invalid job spec: a.yaml:3: sinks[x].path: missing") {
		t.Errorf("single problem Error() = %q", ps[:1].Error())
	}
}

type errWrap struct{ err error }

func (e errWrap) Error() string { return "wrapped: " + e.err.Error() }
func (e errWrap) Unwrap() error { return e.err }
