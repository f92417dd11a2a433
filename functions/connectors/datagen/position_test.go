package datagen_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/connector/splitseq"
	"github.com/weirstream/weir/functions/connectors/datagen"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

// TestDatagenPositionRestore takes a position after every number of polls,
// reads on, and checks that a source restored at the position produces
// exactly the rest: the rows before plus the rows after are the subtask's
// events, each once.
func TestDatagenPositionRestore(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	const count, maxRows = 100, 7
	src := connectortest.DatagenSpec(count)
	src.Splits = 6
	out := connectortest.SourceSchema(t, src)
	for _, p := range []int{1, 3} {
		for sub := range p {
			var want [][]any
			for i := int64(sub); i < count; i += int64(p) {
				want = append(want, datagen.Row(src, out, i))
			}
			for cut := 0; ; cut++ {
				what := fmt.Sprintf("p=%d subtask %d, position after %d polls", p, sub, cut)
				g, err := datagen.NewSource(src, out)
				if err != nil {
					t.Fatal(err)
				}
				if err := g.Open(connectortest.SourceContext(mem, sub, p)); err != nil {
					t.Fatal(err)
				}
				before, ended := connectortest.PollN(t, g, cut, maxRows)
				pos := connectortest.Position(t, g)
				if wantPos := splitsPosition(6, sub, p, int64(sub+len(before)*p)); pos != wantPos {
					t.Fatalf("%s: %s, want %s", what, pos, wantPos)
				}
				rest := connectortest.Drain(t, g, maxRows)
				g.Close()

				r, err := datagen.NewSource(src, out)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.(task.Resumable).Restore(json.RawMessage(pos)); err != nil {
					t.Fatalf("%s: Restore(%s): %v", what, pos, err)
				}
				if err := r.Open(connectortest.SourceContext(mem, sub, p)); err != nil {
					t.Fatalf("%s: Open after Restore(%s): %v", what, pos, err)
				}
				if got := connectortest.Position(t, r); got != pos {
					t.Errorf("%s: restored source's position %s, want %s", what, got, pos)
				}
				after := connectortest.Drain(t, r, maxRows)
				r.Close()
				connectortest.SameRowList(t, what+": rows after restore vs the rest of the first run", after, rest)
				connectortest.SameRowList(t, what+": rows before + rows after restore", append(before, after...), want)
				if ended {
					break
				}
			}
		}
	}
}

func TestDatagenRestoreRefused(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	src := &spec.Source{Name: "gen", Type: spec.SourceDatagen, Count: 10, Schema: connectortest.Schema("n", "int64")}
	out := connectortest.SourceSchema(t, src)
	fresh := func() task.Source {
		g, err := datagen.NewSource(src, out)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	for _, tc := range []struct {
		pos  string
		want []string
	}{
		{``, []string{"position is empty"}},
		{`null`, []string{"position.splits: missing"}},
		{`{}`, []string{"position.splits: missing"}},
		{`{"splits":{}, "next":3}`, []string{"position: splits and next: want one of them"}},
		{`{"splits":{"7":{"next":7,"of":120}}}`, []string{`position.splits["7"]: "7" is not a split id: want 000 to 119`}},
		{`{"splits":{"120":{"next":7,"of":120}}}`, []string{`"120" is not a split id`}},
		{`{"splits":{"007":{"of":120}}}`, []string{`position.splits["007"].next: missing`}},
		{`{"splits":{"007":{"next":7}}}`, []string{`position.splits["007"].of: missing`}},
		{`{"splits":{"007":{"next":7,"of":32}}}`, []string{`position.splits["007"].of: the position is of 32 splits, and the source has 120`}},
		{`{"splits":{"007":{"next":8,"of":120}}}`, []string{`position.splits["007"].next: 8 is an event of split 8, not 7`}},
		{`{"splits":{"007":{"next":-113,"of":120}}}`, []string{`position.splits["007"].next: -113 is negative`}},
		{`{"splits":{"007":{"next":247,"of":120}}}`, []string{`position.splits["007"].next: 247 is past the end`}},
		{`{"splits":{"007":{"next":7,"of":120,"x":1}}}`, []string{`unknown field "x"`}},
		{`{"next":-1}`, []string{"position.next: -1 is negative"}},
		{`{"next":"5"}`, []string{"position.next: got string, want int64"}},
		{`{"next":1.5}`, []string{"position.next: got number 1.5, want int64"}},
		{`{"next":3,"seed":7}`, []string{`unknown field "seed"`}},
		{`{"next":3} {"next":4}`, []string{"more data after the position"}},
		{`not json`, []string{"invalid character"}},
	} {
		connectortest.RestoreRefused(t, fresh(), tc.pos, append(tc.want, "restore datagen source gen")...)
	}

	// Positions of the right shape that do not fit the subtask are refused
	// by Open.
	for _, tc := range []struct {
		pos          string
		subtask, par int
		want         string
	}{
		{`{"next":4}`, 0, 3, "position.next 4 is an event of subtask 1, not 0"},
		{`{"next":4}`, 1, 1, "subtask 1 of parallelism 1"},
		{`{"next":15}`, 0, 3, "position.next 15 is past the end"},
		{`{"next":11}`, 0, 1, "position.next 11 is past the end"},
		{`{"splits":{}}`, 0, 121, "parallelism 121 is above its 120 splits (sources[gen].splits)"},
	} {
		g := fresh()
		if err := g.(task.Resumable).Restore(json.RawMessage(tc.pos)); err != nil {
			t.Fatalf("Restore(%s): %v", tc.pos, err)
		}
		err := g.Open(connectortest.SourceContext(mem, tc.subtask, tc.par))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open subtask %d of %d after Restore(%s): %v, want an error containing %q", tc.subtask, tc.par, tc.pos, err, tc.want)
		}
		g.Close()
	}

	// The end of a subtask's events is a valid position: nothing is left.
	g := fresh()
	if err := g.(task.Resumable).Restore(json.RawMessage(`{"next":12}`)); err != nil {
		t.Fatal(err)
	}
	if err := g.Open(connectortest.SourceContext(mem, 0, 3)); err != nil {
		t.Fatal(err)
	}
	if rows := connectortest.Drain(t, g, 5); len(rows) != 0 {
		t.Errorf("restored at the end: rows %v", rows)
	}
	if _, err := g.(task.Resumable).Position(); err != nil {
		t.Fatal(err)
	}
	connectortest.RestoreRefused(t, g, `{"next":0}`, "already open")
	g.Close()
	if _, err := fresh().(task.Resumable).Position(); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Errorf("Position before Open: %v", err)
	}
}

// splitsPosition is the position of subtask of p, of a source of k
// splits (p divides k), once it has generated its events below next.
func splitsPosition(k, subtask, p int, next int64) string {
	splits := map[string]any{}
	for j := subtask; j < k; j += p {
		n := next + int64((j-int(next%int64(k))+k)%k)
		splits[splitseq.ID(j, k)] = map[string]any{"next": n, "of": k}
	}
	b, _ := json.Marshal(map[string]any{"splits": splits})
	return string(b)
}
