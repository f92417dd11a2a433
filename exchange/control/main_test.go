package control_test

import (
	"os"
	"testing"

	"github.com/weirstream/weir/exchange/exchangetest"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) { os.Exit(exchangetest.RunWithoutLeaks(m)) }
