package coordinator_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// refuseFn passes ids through and fails on the row whose id is 77.
type refuseFn struct{}

func (refuseFn) ProcessElement(ctx *functions.Context, row functions.Row, out *functions.Collector) error {
	id := row.Int64("id")
	if id == 77 {
		return fmt.Errorf("refusing row %d", id)
	}
	return out.Emit(id)
}

func init() {
	functions.Register("coord-test-refuse", functions.Definition{
		New: func(map[string]any) (functions.ProcessFunction, error) { return refuseFn{}, nil },
		Output: func(in *arrow.Schema) ([]arrowfmt.Field, error) {
			if len(in.FieldIndices("id")) == 0 {
				return nil, errors.New(`the input has no column "id"`)
			}
			return []arrowfmt.Field{{Name: "id", Type: arrowfmt.Int64}}, nil
		},
	})
}
