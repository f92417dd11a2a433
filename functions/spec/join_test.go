package spec_test

import (
	"strings"
	"testing"

	"github.com/weirstream/weir/functions/spec"
)

const joinBase = `job: joins
sources:
  - name: nx
    type: nexmark
    count: 100
    eventTime: {column: dateTime}
operators:
  - name: j
    join:
      type: interval
      left: {input: nx.bid, keyBy: [auction]}
      right: {input: nx.auction, keyBy: [id]}
      lower: -10s
      upper: 0s
sinks:
  - {name: out, input: j, type: stdout}
`

func TestJoinAndNexmarkValid(t *testing.T) {
	if _, err := spec.Parse([]byte(joinBase), "job.yaml"); err != nil {
		t.Fatal(err)
	}
}

func TestJoinAndNexmarkProblems(t *testing.T) {
	tests := []struct {
		name      string
		old, new_ string
		field     string
		msg       []string
	}{
		{"nexmark read whole", "input: j,", "input: nx,", "sinks[out].input",
			[]string{`"nx" is not a source, operator or side output`, "nx.bid"}},
		{"nexmark unknown output", "nx.auction", "nx.auctions", "operators[j].join.right.input",
			[]string{`"nx.auctions" is not a source`, `did you mean "nx.auction"`}},
		{"nexmark with a schema", "    count: 100\n", "    count: 100\n    schema: {a: int64}\n", "sources[nx].schema",
			[]string{"fixed schemas"}},
		{"nexmark event time column", "column: dateTime", "column: ts", "sources[nx].eventTime.column",
			[]string{`"ts": a nexmark source's event time is dateTime`}},
		{"nexmark bad start", "    count: 100\n", "    count: 100\n    nexmark: {start: yesterday}\n", "sources[nx].nexmark.start",
			[]string{`"yesterday"`, "RFC 3339"}},
		{"nexmark negative ratio", "    count: 100\n", "    count: 100\n    nexmark: {hotAuctionRatio: -1}\n", "sources[nx].nexmark.hotAuctionRatio",
			[]string{"-1 is negative"}},
		{"join type", "type: interval", "type: outer", "operators[j].join.type",
			[]string{`"outer" is not a join type: want regular, interval or window`}},
		{"join missing key", "keyBy: [auction]", "keyBy: []", "operators[j].join.left.keyBy",
			[]string{"missing: the columns of the left key"}},
		{"join key arity", "keyBy: [id]", "keyBy: [id, seller]", "operators[j].join",
			[]string{"left.keyBy has 1 columns and right.keyBy 2"}},
		{"interval bounds", "upper: 0s", "upper: -20s", "operators[j].join.lower",
			[]string{"-10s is above upper -20s"}},
		{"self join", "input: nx.auction", "input: nx.bid", "operators[j].join.right.input",
			[]string{"joining a stream with itself is not supported"}},
		{"join with input", "  - name: j\n", "  - name: j\n    input: nx.bid\n", "operators[j].input",
			[]string{"a join reads join.left.input and join.right.input"}},
		{"window join without window", "type: interval", "type: window", "operators[j].join.window",
			[]string{"missing: a window join needs a window"}},
		{"regular join with bounds", "type: interval", "type: regular", "operators[j].join",
			[]string{"a regular join takes ttl only"}},
		{"join cycle", "input: nx.auction", "input: k", "operators",
			[]string{"the graph has a cycle: j -> k -> j"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(joinBase, tt.old, tt.new_, 1)
			if src == joinBase {
				t.Fatalf("edit %q not applied", tt.old)
			}
			if tt.name == "join cycle" {
				src = strings.Replace(src, "sinks:", "  - {name: k, input: j, filter: price > 1}\nsinks:", 1)
			}
			_, err := spec.Parse([]byte(src), "job.yaml")
			p := problemAt(t, problems(t, err), tt.field)
			wantMsg(t, p, tt.msg...)
		})
	}
}
