package seqcheck

import (
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

// TestChecker: rows in sequence are ok; a repeated or skipped row is not.
func TestChecker(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema, err := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "k", Type: arrowfmt.Int64}, {Name: "seq", Type: arrowfmt.Int64}})
	if err != nil {
		t.Fatal(err)
	}
	in := builtin.Stream{Schema: schema, TimeColumn: -1}
	op := &spec.Operator{Name: "check", Input: "in", KeyBy: []string{"k"}, Function: Name, Config: map[string]any{"stride": 10.0}}
	proc, err := builtin.NewProcess(op, in, builtin.ProcessEnv{})
	if err != nil {
		t.Fatal(err)
	}
	out := &collect{}
	ctx := &task.Context{Job: "j", Node: "check", Parallelism: 1, MaxParallelism: 128, KeyGroupEnd: 128,
		Mem: mem, Now: time.Now, Out: out, Counters: &task.Counters{}}
	if err := proc.Open(ctx); err != nil {
		t.Fatal(err)
	}
	b := arrowfmt.NewBuilder(schema, mem)
	defer b.Release()
	// Key 3: 3, 13, 23 in order; then 23 again (a duplicate); then 53
	// (43, which the counter now expects, skipped). Key 4: 4.
	for _, r := range [][2]int64{{3, 3}, {3, 13}, {4, 4}, {3, 23}, {3, 23}, {3, 53}} {
		_ = b.AppendAny(0, r[0])
		_ = b.AppendAny(1, r[1])
	}
	rec := b.NewBatch()
	if err := proc.ProcessBatch(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if err := proc.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := proc.Close(); err != nil {
		t.Fatal(err)
	}
	want := [][]any{
		{int64(3), int64(3), int64(1), true}, {int64(3), int64(13), int64(2), true}, {int64(4), int64(4), int64(1), true},
		{int64(3), int64(23), int64(3), true}, {int64(3), int64(23), int64(4), false}, {int64(3), int64(53), int64(5), false},
	}
	if len(out.rows) != len(want) {
		t.Fatalf("%d rows, want %d: %v", len(out.rows), len(want), out.rows)
	}
	for i := range want {
		for c := range want[i] {
			if out.rows[i][c] != want[i][c] {
				t.Errorf("row %d = %v, want %v", i, out.rows[i], want[i])
				break
			}
		}
	}
}
