// Package rowcost is a function whose cost per row is set in its config,
// for trying the autoscaler on a machine of few cores: importing the
// package registers it as "row-cost".
//
// It passes every row through unchanged and spends `cost` (a duration,
// default 1ms) on each, sleeping once the debt reaches a few milliseconds
// (a sleep per row would measure the timer's granularity, not the cost).
// Sleeping is busy time to weir (busy = wall time not idle or waiting for
// credit), so a subtask does at most 1/cost rows per busy second however
// many cores the machine has: more subtasks do more, which is what an
// autoscaler needs to see.
package rowcost

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions"
)

// Name is the name the function is registered under.
const Name = "row-cost"

// flushDebt is how much cost is slept at once.
const flushDebt = 5 * time.Millisecond

func init() {
	functions.Register(Name, functions.Definition{
		New: func(cfg map[string]any) (functions.ProcessFunction, error) {
			f := &rowCost{cost: time.Millisecond}
			for k, v := range cfg {
				s, ok := v.(string)
				d, err := time.ParseDuration(s)
				if k != "cost" || !ok || err != nil || d < 0 {
					return nil, fmt.Errorf("config %s: %v: want cost: a duration per row, such as 500us", k, v)
				}
				f.cost = d
			}
			return f, nil
		},
		Output: func(in *arrow.Schema) ([]arrowfmt.Field, error) {
			out := make([]arrowfmt.Field, in.NumFields())
			for i, f := range in.Fields() {
				t, err := arrowfmt.TypeOf(f.Type)
				if err != nil {
					return nil, fmt.Errorf("column %s: %w", f.Name, err)
				}
				out[i] = arrowfmt.Field{Name: f.Name, Type: t}
			}
			return out, nil
		},
		Doc: "Passes rows through, spending a set time on each (sleeping: busy, not CPU). Config: cost (a duration, default 1ms).",
	})
}

type rowCost struct {
	cost, debt time.Duration
	values     []any
}

func (f *rowCost) ProcessElement(_ *functions.Context, row functions.Row, out *functions.Collector) error {
	if f.debt += f.cost; f.debt >= flushDebt {
		time.Sleep(f.debt)
		f.debt = 0
	}
	s := row.Schema()
	f.values = f.values[:0]
	for i := range s.NumFields() {
		f.values = append(f.values, row.Value(s.Field(i).Name))
	}
	return out.Emit(f.values...)
}
