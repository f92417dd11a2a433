package statestore_test

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

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

// TestSnapshotsCrossBackends: a base and a delta taken on the heap
// restore on a store and the other way round (a savepoint taken on one
// backend resumes on the other), and a full snapshot of either then has
// the same rows.
func TestSnapshotsCrossBackends(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	backends := map[string]func() *statestore.Memory{
		"memory": func() *statestore.Memory { return statestore.NewMemory(0, 4) },
		"stored": func() *statestore.Memory { return statestore.NewStored(0, 4, mapStore{}) },
	}
	full := func(t *testing.T, b statestore.Backend) string {
		t.Helper()
		batches, err := b.Snapshot(mem, true)
		if err != nil {
			t.Fatal(err)
		}
		// A heap table writes in the order of its cells, a store by key.
		return inRuns(t, renderBatches(batches))
	}
	for from, newFrom := range backends {
		for to, newTo := range backends {
			t.Run(from+"-to-"+to, func(t *testing.T) {
				src := newFrom()
				tab, err := statestore.OpenTable[string](src, "t", nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := range 50 {
					tab.Put(i%4, fmt.Sprint("k", i), "", fmt.Sprint("v", i))
				}
				base, err := src.Snapshot(mem, true)
				if err != nil {
					t.Fatal(err)
				}
				tab.Delete(1, "k1", "")
				tab.Put(2, "k2", "ns", "changed")
				delta, err := src.Snapshot(mem, false)
				if err != nil {
					t.Fatal(err)
				}
				dst := newTo()
				for _, r := range append(base, delta...) {
					if err := dst.Restore(r); err != nil {
						t.Fatal(err)
					}
					r.Release()
				}
				if _, err := statestore.OpenTable[string](dst, "t", nil); err != nil {
					t.Fatal(err)
				}
				if a, b := full(t, src), full(t, dst); a != b || !strings.Contains(a, base64.StdEncoding.EncodeToString([]byte("changed"))) ||
					strings.Contains(a, `"key":"`+base64.StdEncoding.EncodeToString([]byte("k1"))+`"`) {
					t.Errorf("full snapshots differ:\n%s: %s\n%s: %s", from, a, to, b)
				}
			})
		}
	}
}
