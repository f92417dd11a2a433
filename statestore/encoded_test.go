package statestore_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/statetest"
)

// bytesBackend is a Backend from outside the package that stores encoded
// values, as a pebble backend would: its tables are ValueType.Encoded
// over tables of bytes (here Memory's, which also does its timers,
// snapshots and restores). That it passes the contract suite shows the
// interface can be implemented elsewhere.
type bytesBackend struct {
	*statestore.Memory
	types map[string]reflect.Type
}

type rawCodec struct{}

func (rawCodec) Append(dst, v []byte) ([]byte, error) { return append(dst, v...), nil }
func (rawCodec) Decode(b []byte) ([]byte, error)      { return append([]byte(nil), b...), nil }

func (b *bytesBackend) OpenTable(name string, vt statestore.ValueType) (any, error) {
	if t, ok := b.types[name]; ok && t != vt.Type() {
		return nil, fmt.Errorf("%w: %q holds %s, not %s", statestore.ErrTypeMismatch, name, t, vt.Type())
	}
	raw, err := statestore.OpenTable[[]byte](b.Memory, name, rawCodec{})
	if err != nil {
		return nil, err
	}
	b.types[name] = vt.Type()
	return vt.Encoded(raw), nil
}

func TestEncodedBackendContract(t *testing.T) {
	statetest.Run(t, func(t *testing.T, start, end int) statestore.Backend {
		return &bytesBackend{Memory: statestore.NewMemory(start, end), types: map[string]reflect.Type{}}
	})
}
