package rowcost

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/builtin"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

type collect struct{ rows [][]any }

func (c *collect) Emit(b arrow.RecordBatch) error {
	for r := 0; r < int(b.NumRows()); r++ {
		row := make([]any, b.NumCols())
		for i := range row {
			row[i] = arrowfmt.Value(b.Column(i), r)
		}
		c.rows = append(c.rows, row)
	}
	return nil
}

// TestRowCost: rows pass through unchanged, and 100 rows at 2ms take at
// least 200ms; a bad cost is refused naming it.
func TestRowCost(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema, err := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "k", Type: arrowfmt.Int64}, {Name: "name", Type: arrowfmt.String}})
	if err != nil {
		t.Fatal(err)
	}
	in := builtin.Stream{Schema: schema, TimeColumn: -1}
	op := &spec.Operator{Name: "cost", Input: "in", KeyBy: []string{"k"}, Function: Name, Config: map[string]any{"cost": "2ms"}}
	proc, err := builtin.NewProcess(op, in, builtin.ProcessEnv{})
	if err != nil {
		t.Fatal(err)
	}
	out := &collect{}
	ctx := &task.Context{Job: "j", Node: "cost", Parallelism: 1, MaxParallelism: 128, KeyGroupEnd: 128,
		Mem: mem, Now: time.Now, Out: out, Counters: &task.Counters{}}
	if err := proc.Open(ctx); err != nil {
		t.Fatal(err)
	}
	b := arrowfmt.NewBuilder(schema, mem)
	defer b.Release()
	for i := range 100 {
		_ = b.AppendAny(0, int64(i))
		_ = b.AppendAny(1, "row")
	}
	rec := b.NewBatch()
	start := time.Now()
	if err := proc.ProcessBatch(rec); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	rec.Release()
	if err := proc.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := proc.Close(); err != nil {
		t.Fatal(err)
	}
	if took < 200*time.Millisecond {
		t.Errorf("100 rows at 2ms took %v", took)
	}
	if len(out.rows) != 100 || out.rows[42][0] != int64(42) || out.rows[42][1] != "row" {
		t.Errorf("%d rows out, row 42 %v", len(out.rows), out.rows[42])
	}
	bad := &spec.Operator{Name: "cost", Input: "in", KeyBy: []string{"k"}, Function: Name, Config: map[string]any{"cost": "fast"}}
	if _, err := builtin.NewProcess(bad, in, builtin.ProcessEnv{}); err == nil || !strings.Contains(err.Error(), "config cost: fast: want cost: a duration per row") {
		t.Errorf("a bad cost: %v", err)
	}
}
