// Package seqcheck is the sequence checker of the exactly-once tests: a
// keyed process function whose state must survive every failure exactly.
// Importing the package registers it as "sequence-check".
//
// Its input carries a key `k` and a sequence number `seq` that grows by a
// fixed stride per key (datagen's index column, split by `k = seq %
// stride`). Per key it keeps a counter in a ValueState and, for every
// row, emits
//
//	k int64, seq int64, n int64, ok bool
//
// where n is the key's counter after the row and ok says the row is the
// one the counter expected: seq == k + stride*(n-1). A restore that loses
// or repeats state, or a source that rewinds to the wrong place, shows up
// as ok=false rows, as (k, n) pairs emitted twice or never.
package seqcheck

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions"
)

// Name is the name the function is registered under.
const Name = "sequence-check"

func init() {
	functions.Register(Name, functions.Definition{
		New: func(cfg map[string]any) (functions.ProcessFunction, error) {
			stride := int64(1)
			for k, v := range cfg {
				f, ok := v.(float64)
				if k != "stride" || !ok || f < 1 || f != math.Trunc(f) {
					return nil, fmt.Errorf("config %s: %v: want stride: a whole number ≥ 1", k, v)
				}
				stride = int64(f)
			}
			return &checker{stride: stride}, nil
		},
		Output: func(in *arrow.Schema) ([]arrowfmt.Field, error) {
			for _, c := range []string{"k", "seq"} {
				if f, ok := in.FieldsByName(c); !ok || f[0].Type.ID() != arrow.INT64 {
					return nil, fmt.Errorf("input needs an int64 column %q", c)
				}
			}
			return []arrowfmt.Field{{Name: "k", Type: arrowfmt.Int64}, {Name: "seq", Type: arrowfmt.Int64},
				{Name: "n", Type: arrowfmt.Int64}, {Name: "ok", Type: arrowfmt.Bool}}, nil
		},
		Doc: "Checks that each key's rows arrive exactly once and in order: emits k, seq, n (the key's counter) and ok. Config: stride.",
	})
}

type checker struct {
	stride int64
	n      *functions.ValueState[int64]
}

func (c *checker) Open(oc *functions.OpenContext) error {
	c.n = functions.Value[int64](oc, "n")
	return nil
}

func (c *checker) ProcessElement(_ *functions.Context, row functions.Row, out *functions.Collector) error {
	k, seq := row.Int64("k"), row.Int64("seq")
	n, _ := c.n.Value()
	n++
	c.n.Update(n)
	return out.Emit(k, seq, n, seq == k+c.stride*(n-1))
}
