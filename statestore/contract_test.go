package statestore_test

import (
	"testing"

	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/statetest"
)

func TestMemoryContract(t *testing.T) {
	statetest.Run(t, func(t *testing.T, start, end int) statestore.Backend { return statestore.NewMemory(start, end) })
}
