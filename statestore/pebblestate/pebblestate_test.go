package pebblestate_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/pebblestate"
	"github.com/weirstream/weir/statestore/statetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T) *pebblestate.Store {
	t.Helper()
	s, err := pebblestate.Open(pebblestate.Options{Dir: t.TempDir(), Memory: pebblestate.MinMemory})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
			t.Errorf("the store's directory is still there after Close: %v", err)
		}
	})
	return s
}

func TestContract(t *testing.T) {
	statetest.Run(t, func(t *testing.T, start, end int) statestore.Backend {
		return statestore.NewStored(start, end, open(t))
	})
}
