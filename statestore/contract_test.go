package statestore_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/statetest"
)

func TestMemoryContract(t *testing.T) {
	statetest.Run(t, func(t *testing.T, start, end int) statestore.Backend { return statestore.NewMemory(start, end) })
}

// mapStore is a Store of sorted maps, so the stored backend's contract is
// checked apart from any one store.
type mapStore map[string]*mapTable

func (s mapStore) Table(name string) (statestore.StoredTable, error) {
	t := s[name]
	if t == nil {
		t = &mapTable{m: map[int]map[[2]string][]byte{}}
		s[name] = t
	}
	return t, nil
}

type mapTable struct{ m map[int]map[[2]string][]byte }

func (t *mapTable) Get(kg int, key, ns string) ([]byte, bool) {
	v, ok := t.m[kg][[2]string{key, ns}]
	return v, ok
}

func (t *mapTable) Put(kg int, key, ns string, v []byte) {
	if t.m[kg] == nil {
		t.m[kg] = map[[2]string][]byte{}
	}
	t.m[kg][[2]string{key, ns}] = slices.Clone(v)
}

func (t *mapTable) Delete(kg int, key, ns string) { delete(t.m[kg], [2]string{key, ns}) }

func (t *mapTable) Range(kg int, fn func(key, ns string, v []byte) bool) {
	keys := slices.SortedFunc(maps.Keys(t.m[kg]), func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	for _, k := range keys {
		if v, ok := t.m[kg][k]; ok && !fn(k[0], k[1], v) {
			return
		}
	}
}

func TestStoredContract(t *testing.T) {
	statetest.Run(t, func(t *testing.T, start, end int) statestore.Backend {
		return statestore.NewStored(start, end, mapStore{})
	})
}
