package spec_test

import (
	"testing"

	"go.uber.org/goleak"

	// Validate checks sources and sinks as their registered types do.
	_ "github.com/weirstream/weir/functions/connectors"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
