package pebblestate_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
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

// TestHotEntriesEvicted writes, overwrites and deletes far more than the
// hot entries hold (a 4 MiB store keeps 1 MiB of them), and checks every
// Get and each key group's Range against a map of what was written.
func TestHotEntriesEvicted(t *testing.T) {
	s := open(t)
	tab, err := s.Table("t")
	if err != nil {
		t.Fatal(err)
	}
	small, err := s.Table("small") // evicted by the other table's writes
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		small.Put(i%8, fmt.Sprint("s", i), "", []byte(fmt.Sprint("small-", i)))
	}
	want := map[int]map[string]string{}
	put := func(kg int, k, v string) {
		if want[kg] == nil {
			want[kg] = map[string]string{}
		}
		want[kg][k] = v
		tab.Put(kg, k, "ns", []byte(v))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 30_000 {
		put(i%8, fmt.Sprintf("key-%06d", i), strings.Repeat("v", 20+i%50))
	}
	for range 20_000 {
		i := rng.IntN(30_000)
		k := fmt.Sprintf("key-%06d", i)
		if rng.IntN(4) == 0 {
			delete(want[i%8], k)
			tab.Delete(i%8, k, "ns")
		} else {
			put(i%8, k, fmt.Sprint("changed-", rng.IntN(1000)))
		}
	}
	for i := range 30_000 {
		k := fmt.Sprintf("key-%06d", i)
		w, ok := want[i%8][k]
		v, got := tab.Get(i%8, k, "ns")
		if ok != got || string(v) != w {
			t.Fatalf("Get(%d, %s) = %q %v, want %q %v", i%8, k, v, got, w, ok)
		}
	}
	for kg := range 8 {
		n := 0
		tab.Range(kg, func(key, ns string, v []byte) bool {
			n++
			if want[kg][key] != string(v) || ns != "ns" {
				t.Fatalf("Range(%d): %s %s = %q, want %q", kg, key, ns, v, want[kg][key])
			}
			return true
		})
		if n != len(want[kg]) {
			t.Fatalf("Range(%d) gave %d entries, want %d", kg, n, len(want[kg]))
		}
	}
	for i := range 100 {
		if v, ok := small.Get(i%8, fmt.Sprint("s", i), ""); !ok || string(v) != fmt.Sprint("small-", i) {
			t.Fatalf("small table: Get(s%d) = %q %v", i, v, ok)
		}
	}
	if s.DiskBytes() == 0 {
		t.Errorf("nothing reached the disk")
	}
}
