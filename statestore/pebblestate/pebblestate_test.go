package pebblestate_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/apache/arrow-go/v18/arrow/memory"

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
// Get and each key group's Range against a map of what was written; with
// the default bound on dirty entries, and with 64 of them (written back
// to pebble 4,096 at a time: all of them each time).
func TestHotEntriesEvicted(t *testing.T) {
	for _, maxDirty := range []int{0, 64} {
		t.Run(fmt.Sprint("maxDirty=", maxDirty), func(t *testing.T) {
			if maxDirty > 0 {
				defer pebblestate.SetMaxDirty(maxDirty)()
			}
			hotEntriesEvicted(t, maxDirty)
		})
	}
}

func hotEntriesEvicted(t *testing.T, maxDirty int) {
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
	tracked, counted := s.Dirty()
	if tracked != counted || maxDirty > 0 && tracked > maxDirty {
		t.Errorf("%d dirty entries tracked, %d counted; at most %d", tracked, counted, maxDirty)
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

// TestSnapshot checks that a snapshot reads the tables as they were when
// it was taken, hot entries included, while they change after it, and
// that closing the store closes a snapshot and an iterator left open.
func TestSnapshot(t *testing.T) {
	s := open(t)
	tab, err := s.Table("t")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		tab.Put(i%4, fmt.Sprintf("k%04d", i), "", []byte(fmt.Sprint("old-", i)))
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if i%3 == 0 {
			tab.Delete(i%4, fmt.Sprintf("k%04d", i), "")
		} else {
			tab.Put(i%4, fmt.Sprintf("k%04d", i), "", []byte(fmt.Sprint("new-", i)))
		}
	}
	tab.Put(1, "added", "", []byte("new"))
	later, err := s.Table("later")
	if err != nil {
		t.Fatal(err)
	}
	later.Put(1, "x", "", []byte("y"))
	for kg := range 4 {
		it := snap.Iter("t", kg)
		for i := kg; i < 1000; i += 4 {
			k := fmt.Sprintf("k%04d", i)
			key, _, v, ok := it.SeekGE(k, "")
			if want := fmt.Sprint("old-", i); !ok || key != k || string(v) != want {
				t.Fatalf("snapshot SeekGE(%s) = %q, %q, %v; want %q", k, key, v, ok, want)
			}
		}
		it.Close()
	}
	if _, _, _, ok := snap.Iter("later", 1).Next(); ok {
		t.Error("the snapshot has a table made after it")
	}
	it := snap.Iter("t", 1)
	n := 0
	for {
		key, _, v, ok := it.Next()
		if !ok {
			break
		}
		if key == "added" || !strings.HasPrefix(string(v), "old-") {
			t.Fatalf("the snapshot's iterator gives %q = %q", key, v)
		}
		if n++; n == 100 { // tab changes while the iterator is open
			tab.Put(1, "k0001", "", []byte("newer"))
		}
	}
	if n != 250 {
		t.Errorf("the snapshot's iterator gave %d entries of key group 1, want 250", n)
	}
	it.Close()
	it = snap.Iter("t", 0)
	for _, c := range []struct{ seek, want string }{
		{"k0500", "k0500"}, // there: itself
		{"k0501", "k0504"}, // not in key group 0: the next that is
		{"k0998", ""},      // past the last (k0996)
	} {
		key, _, v, ok := it.SeekGE(c.seek, "")
		if key != c.want || ok != (c.want != "") || ok && !strings.HasPrefix(string(v), "old-") {
			t.Errorf("SeekGE(%s) = %q, %q, %v; want %q", c.seek, key, v, ok, c.want)
		}
	}
	it.Close()
	// The live table has the changes.
	if v, ok := tab.Get(1, "k0001", ""); !ok || string(v) != "newer" {
		t.Errorf("the table's k0001 = %q, %v after the snapshot", v, ok)
	}
	_ = snap.Iter("t", 2) // left open, with the snapshot: Close closes them
}

// BenchmarkCapture measures what a base snapshot of 1M string entries
// over 64 key groups in pebble costs the task at the barrier, at once or
// in steps read from a pebble snapshot. Before each, 100K entries change
// (hot and dirty: the barrier writes them to pebble before its snapshot).
func BenchmarkCapture(b *testing.B) {
	const entries, groups = 1_000_000, 64
	s, err := pebblestate.Open(pebblestate.Options{Dir: b.TempDir(), Memory: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	be := statestore.NewStored(0, groups, s)
	tab, err := statestore.OpenTable[string](be, "t", nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range entries {
		tab.Put(i%groups, fmt.Sprint("key-", i), "", fmt.Sprint("value-", i))
	}
	round := 0
	change := func() {
		round++
		for i := range entries / 10 {
			k := (i*7919 + round) % entries
			tab.Put(k%groups, fmt.Sprint("key-", k), "", fmt.Sprint("value-", k, "-", round))
		}
	}
	statetest.BenchmarkCapture(b, be, memory.NewGoAllocator(), entries, change)
}

// TestBlocksCached: entries that fit in a store's memory, but not all in
// its hot entries, are read from pebble's block cache, not from the
// files, once they have been read. Pebble reserves its memtables in the
// block cache; sized as if it did not, the cache held no block, and the
// second pass below missed on almost every block it read.
func TestBlocksCached(t *testing.T) {
	const keys = 40_000 // about 3.5 MB in sstables; the hot entries hold about 24K
	s, err := pebblestate.Open(pebblestate.Options{Dir: t.TempDir(), Memory: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	tb, err := s.Table("t")
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(strings.Repeat("v", 64))
	for i := range keys {
		tb.Put(i%128, fmt.Sprintf("k%07d", i), "", value)
	}
	// A capture flushes every entry into sstables.
	c, err := s.CaptureFiles(t.TempDir() + "/capture")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Poll(true); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pass := func() (reads, misses int64) {
		h0, m0 := s.BlockCache()
		for _, i := range rng.Perm(keys) {
			if v, ok := tb.Get(i%128, fmt.Sprintf("k%07d", i), ""); !ok || string(v) != string(value) {
				t.Fatalf("key %d: %q, %v", i, v, ok)
			}
		}
		h1, m1 := s.BlockCache()
		return h1 - h0 + m1 - m0, m1 - m0
	}
	pass()
	reads, misses := pass()
	if reads < keys/10 {
		t.Fatalf("the second pass read %d blocks for %d keys: the hot entries answered almost every Get, so this test shows nothing", reads, keys)
	}
	if misses > reads/20 {
		t.Errorf("the second pass missed the block cache %d times in %d block reads, want at most 5%%", misses, reads)
	}
	t.Logf("second pass: %d block reads, %d misses", reads, misses)
}
