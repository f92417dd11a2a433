package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// badSpecBase is a valid job; each case of TestSpecErrorMessages breaks
// one line of it.
const badSpecBase = `job: bad
parallelism: 1
sources:
  - name: gen
    type: datagen
    rate: 100
    count: 10
    schema: {id: int64, zone: string, ts: timestamp_ms}
    eventTime: {column: ts, maxOutOfOrderness: 1s}
operators:
  - name: slow
    input: gen
    filter: "id > 3"
  - name: win
    input: slow
    keyBy: [zone]
    window: {type: tumbling, size: 10s}
    aggregate: {n: count()}
sinks:
  - {name: out, input: win, type: blackhole}
`

// A bad spec is reported as the user meets it, by weir run and weir
// deploy alike: FILE:LINE: FIELD: what is wrong, the field said once, on a
// last line that ends with a newline.
func TestSpecErrorMessages(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		want           string // after "weir: invalid job spec: bad.yaml:"
	}{
		{"rate not a number", "rate: 100", "rate: abc", `6: sources[gen].rate: "abc" is not a number`},
		{"parallelism a list", "parallelism: 1", "parallelism: [1]", `2: parallelism: want an integer, got a list`},
		{"count not whole", "count: 10", "count: 1.5", `7: sources[gen].count: "1.5" is not an integer`},
		{"unknown field", "count: 10", "cuont: 10", `7: sources[gen].cuont: unknown field "cuont" (did you mean "count"?); accepted: addr, count, datagen, eventTime, format, name, nexmark, parallelism, path, rate, schema, splits, stream, streams, type`},
		{"bad filter", `filter: "id > 3"`, `filter: "id >> 3"`, `13: operators[slow].filter: expression "id >> 3": unexpected token Operator(">") at column 5`},
		{"bad window size", "size: 10s", "size: 10x", `17: operators[win].window.size: "10x" is not a duration: want e.g. 500ms, 5s, 1m30s, 2h or 7d`},
		{"missing input", "input: slow", "input: nope", `15: operators[win].input: "nope" is not a source, operator or side output; known: gen, slow, win`},
		{"event time not a timestamp", "column: ts,", "column: zone,", `9: sources[gen].eventTime.column: column "zone" is string: event time needs a timestamp_ms column`},
		{"keyBy not a list", "keyBy: [zone]", "keyBy: zone", `16: operators[win].keyBy: "zone" is not a list: write [zone]`},
		{"bad sink option", "type: blackhole}", "type: files, path: x, format: xml}", `20: sinks[out].format: "xml" is not supported: want jsonl or parquet`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(badSpecBase, tc.old) {
				t.Fatalf("%q is not in the base spec", tc.old)
			}
			dir := t.TempDir()
			file := filepath.Join(dir, "bad.yaml")
			if err := os.WriteFile(file, []byte(strings.Replace(badSpecBase, tc.old, tc.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			want := "weir: invalid job spec: " + file + ":" + tc.want + "\n"
			for _, cmd := range [][]string{
				{"run", file, "--store", "file://" + dir},
				{"deploy", file},
			} {
				stderr := weirFails(t, cmd...)
				if stderr != want {
					t.Errorf("weir %s: stderr\n%q\nwant\n%q", cmd[0], stderr, want)
				}
			}
		})
	}
}
