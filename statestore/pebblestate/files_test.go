package pebblestate_test

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/statestore/pebblestate"
)

// model is what a store's tables should hold: table → key group → key →
// value (namespace "n").
type model map[string]map[int]map[string]string

func (m model) clone() model {
	c := model{}
	for name, groups := range m {
		c[name] = map[int]map[string]string{}
		for kg, entries := range groups {
			c[name][kg] = maps.Clone(entries)
		}
	}
	return c
}

// churn makes n random changes to tables a and b of s, and to m: puts of
// new and old keys, overwrites, deletes, over 8 key groups.
func churn(t *testing.T, s *pebblestate.Store, m model, rng *rand.Rand, n int, each func(i int)) {
	t.Helper()
	for i := range n {
		name := []string{"a", "b"}[rng.IntN(2)]
		tab, err := s.Table(name)
		if err != nil {
			t.Fatal(err)
		}
		kg, k := rng.IntN(8), fmt.Sprintf("key-%05d", rng.IntN(20_000))
		if m[name] == nil {
			m[name] = map[int]map[string]string{}
		}
		if m[name][kg] == nil {
			m[name][kg] = map[string]string{}
		}
		if rng.IntN(5) == 0 {
			tab.Delete(kg, k, "n")
			delete(m[name][kg], k)
		} else {
			v := strings.Repeat(fmt.Sprint(rng.IntN(1000), "-"), 1+rng.IntN(20))
			tab.Put(kg, k, "n", []byte(v))
			m[name][kg][k] = v
		}
		if each != nil {
			each(i)
		}
	}
}

// check compares every table of m with s, by Get and by each key group's
// Range.
func check(t *testing.T, what string, s *pebblestate.Store, m model) {
	t.Helper()
	names := slices.Sorted(maps.Keys(m))
	if got := s.TableNames(); !slices.Equal(got, names) {
		t.Fatalf("%s: tables %q, want %q", what, got, names)
	}
	for _, name := range names {
		tab, err := s.Table(name)
		if err != nil {
			t.Fatal(err)
		}
		for kg := range 8 {
			want := m[name][kg]
			got := map[string]string{}
			tab.Range(kg, func(key, ns string, v []byte) bool {
				got[key] = string(v)
				return true
			})
			if len(got) != len(want) {
				t.Fatalf("%s: table %s, key group %d: %d entries, want %d", what, name, kg, len(got), len(want))
			}
			for k, v := range want {
				if got[k] != v {
					t.Fatalf("%s: table %s, key group %d, key %s: Range gives %q, want %q", what, name, kg, k, got[k], v)
				}
				if g, ok := tab.Get(kg, k, "n"); !ok || string(g) != v {
					t.Fatalf("%s: table %s, key group %d, key %s: Get gives %q %v, want %q", what, name, kg, k, g, ok, v)
				}
			}
		}
	}
}

func openFiles(t *testing.T, dir string) *pebblestate.Store {
	t.Helper()
	s, err := pebblestate.OpenFiles(pebblestate.Options{Dir: t.TempDir(), Memory: pebblestate.MinMemory}, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// TestCaptureFiles captures a store's files while the task goes on
// changing it (far more than its 1 MiB of hot entries and 1 MiB
// memtable hold, so evictions and flushes would write to pebble but for
// the capture), opens a store from them, and checks that it holds what
// the first held at the capture's start, and that the first holds every
// change since; then captures the store opened from files in turn. The
// task polls the capture after every change, or only after all of them
// (the capture's flush ended long before, and the changes since would
// have reached the sstables if anything wrote them to pebble).
func TestCaptureFiles(t *testing.T) {
	for _, c := range []struct {
		maxDirty int
		pollEach bool
	}{{0, true}, {0, false}, {64, false}} {
		t.Run(fmt.Sprintf("maxDirty=%d/pollEach=%v", c.maxDirty, c.pollEach), func(t *testing.T) {
			if c.maxDirty > 0 {
				defer pebblestate.SetMaxDirty(c.maxDirty)()
			}
			captureFiles(t, c.pollEach)
		})
	}
}

func captureFiles(t *testing.T, pollEach bool) {
	scale := 1
	if raceEnabled {
		scale = 4
	}
	rng := rand.New(rand.NewPCG(3, 4))
	s := open(t)
	live := model{}
	churn(t, s, live, rng, 60_000/scale, nil)
	dir := filepath.Join(t.TempDir(), "capture")
	c, err := s.CaptureFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CaptureFiles(dir + "2"); err == nil {
		t.Error("a second capture started while one is in flight")
	}
	at := live.clone()
	polls, doneAt := 0, -1
	churn(t, s, live, rng, 30_000/scale, func(i int) {
		if doneAt >= 0 || !pollEach {
			return
		}
		polls++
		done, err := c.Poll(false)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			doneAt = i
		}
	})
	if done, err := c.Poll(true); !done || err != nil {
		t.Fatalf("Poll(true) = %v, %v", done, err)
	}
	if pollEach {
		t.Logf("the capture ended after %d changes (-1: after all)", doneAt)
	}
	var sst int
	for _, f := range c.Files() {
		if f.Immutable {
			sst++
		}
		if f.Size == 0 && f.Immutable {
			t.Errorf("sstable %s is empty", f.Name)
		}
	}
	if sst == 0 {
		t.Fatalf("the capture has no sstable: %+v", c.Files())
	}
	check(t, "the store opened from the capture", openFiles(t, c.Dir()), at)
	check(t, "the store captured", s, live)

	// A store opened from files goes on, and is captured in turn: a
	// table made after the capture takes a new id.
	r := openFiles(t, c.Dir())
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Release left the capture's directory: %v", err)
	}
	churn(t, r, at, rng, 5_000/scale, nil)
	later, err := r.Table("later")
	if err != nil {
		t.Fatal(err)
	}
	later.Put(3, "x", "n", []byte("y"))
	at["later"] = map[int]map[string]string{3: {"x": "y"}}
	c2, err := r.CaptureFiles(filepath.Join(t.TempDir(), "again"))
	if err != nil {
		t.Fatal(err)
	}
	if done, err := c2.Poll(true); !done || err != nil {
		t.Fatalf("Poll(true) = %v, %v", done, err)
	}
	check(t, "the store opened from the second capture", openFiles(t, c2.Dir()), at)
}

// TestCaptureFilesShared checks that an sstable in two captures has the
// same bytes in both (it is the same file: pebble compacts in the
// background, so which files a capture lists can change with nothing
// written), and that a few changes make a new sstable.
func TestCaptureFilesShared(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	s := open(t)
	m := model{}
	churn(t, s, m, rng, 40_000, nil)
	seen := map[string][32]byte{} // sstable -> its content's hash
	capture := func() map[string]bool {
		c, err := s.CaptureFiles(filepath.Join(t.TempDir(), "c"))
		if err != nil {
			t.Fatal(err)
		}
		if done, err := c.Poll(true); !done || err != nil {
			t.Fatalf("Poll(true) = %v, %v", done, err)
		}
		defer c.Release()
		ssts := map[string]bool{}
		for _, f := range c.Files() {
			if !f.Immutable {
				continue
			}
			ssts[f.Name] = true
			data, err := os.ReadFile(filepath.Join(c.Dir(), f.Name))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			if was, ok := seen[f.Name]; ok && was != sum {
				t.Errorf("sstable %s changed between two captures", f.Name)
			}
			seen[f.Name] = sum
		}
		return ssts
	}
	capture()
	second := capture()
	churn(t, s, m, rng, 200, nil)
	added := 0
	for name := range capture() {
		if !second[name] {
			added++
		}
	}
	if added == 0 {
		t.Errorf("200 changes made no new sstable")
	}
}

// TestCaptureFilesRangeWaits checks that a Range while a capture's flush
// is in flight ends the capture first, and that it sees the change made
// after the capture started; and that closing the store ends a capture.
func TestCaptureFilesRangeWaits(t *testing.T) {
	s := open(t)
	tab, err := s.Table("t")
	if err != nil {
		t.Fatal(err)
	}
	tab.Put(1, "k", "", []byte("before"))
	c, err := s.CaptureFiles(filepath.Join(t.TempDir(), "c"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	tab.Put(1, "k", "", []byte("after"))
	var got string
	tab.Range(1, func(key, ns string, v []byte) bool { got = string(v); return true })
	if got != "after" {
		t.Errorf("Range gives %q, want after", got)
	}
	if done, err := c.Poll(false); !done || err != nil {
		t.Fatalf("after a Range the capture is not done: %v, %v", done, err)
	}
	if v, _ := openFiles(t, c.Dir()).Table("t"); v == nil {
		t.Fatal("no table t")
	} else if g, ok := v.Get(1, "k", ""); !ok || string(g) != "before" {
		t.Errorf("the capture holds %q %v, want before", g, ok)
	}

	s2 := open(t)
	c2, err := s2.CaptureFiles(filepath.Join(t.TempDir(), "c"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if done, err := c2.Poll(false); !done || err == nil {
		t.Errorf("a capture of a closed store: done %v, error %v", done, err)
	}
	if err := c2.Release(); err != nil {
		t.Error(err)
	}
}

// TestOpenFilesRefusesBadDirectories checks the errors of OpenFiles: a
// directory that is not there, and one without a database, name it.
func TestOpenFilesRefusesBadDirectories(t *testing.T) {
	empty := t.TempDir()
	for _, dir := range []string{filepath.Join(empty, "missing"), empty} {
		s, err := pebblestate.OpenFiles(pebblestate.Options{Dir: t.TempDir()}, dir)
		if err == nil {
			s.Close()
			t.Errorf("OpenFiles(%s) opened a store", dir)
		} else if !strings.Contains(err.Error(), filepath.Base(dir)) {
			t.Errorf("OpenFiles(%s): the error does not name the directory: %v", dir, err)
		}
	}
}

// TestOpenFilesCompactsAfter opens a capture whose level 0 calls for a
// compaction: OpenFiles returns before it runs, and it runs after.
func TestOpenFilesCompactsAfter(t *testing.T) {
	o := pebblestate.Options{Dir: t.TempDir(), Memory: pebblestate.MinMemory}
	s, err := pebblestate.OpenShut(o) // level 0 grows: nothing compacts it
	if err != nil {
		t.Fatal(err)
	}
	tab, err := s.Table("a")
	if err != nil {
		t.Fatal(err)
	}
	const n = 35_000 // level 0 under 12 sublevels: pebble would stop the writes
	value := func(k int) []byte { return fmt.Appendf(nil, "value-%d-%0100d", k, k) }
	for k := range n {
		tab.Put(k%8, fmt.Sprint("key-", k), "n", value(k))
	}
	c, err := s.CaptureFiles(filepath.Join(t.TempDir(), "capture"))
	if err != nil {
		t.Fatal(err)
	}
	if done, err := c.Poll(true); !done || err != nil {
		t.Fatalf("Poll(true) = %v, %v", done, err)
	}
	l0, compactions := s.Level0()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if l0 < 4 || compactions != 0 { // pebble's L0CompactionThreshold is 4
		t.Fatalf("captured %d sstables in level 0 after %d compactions; want 4 or more after none", l0, compactions)
	}

	start := time.Now()
	r, err := pebblestate.OpenFiles(o, c.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	opened := time.Since(start)
	if got, compactions := r.Level0(); got != l0 || compactions != 0 {
		t.Errorf("OpenFiles returned with %d sstables in level 0 after %d compactions (in %v); want the capture's %d, none compacted", got, compactions, opened, l0)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got, compactions := r.Level0(); compactions > 0 && got < 4 {
			t.Logf("opened in %v with %d sstables in level 0; %d after %d compactions, %v later", opened, l0, got, compactions, time.Since(start))
			break
		}
		if time.Now().After(deadline) {
			got, compactions := r.Level0()
			t.Fatalf("level 0 still holds %d sstables after %d compactions, 30 s after the open", got, compactions)
		}
	}
	rt, err := r.Table("a")
	if err != nil {
		t.Fatal(err)
	}
	for k := range n {
		if v, ok := rt.Get(k%8, fmt.Sprint("key-", k), "n"); !ok || string(v) != string(value(k)) {
			t.Fatalf("key-%d = %q, %v after the compactions; want %q", k, v, ok, value(k))
		}
	}
}

// BenchmarkCaptureFiles measures file captures of 1M string entries over
// 64 key groups in a 256 MiB store, after a share of them change (1% or
// 10%, untimed): what the task waits for at the barrier (the dirty hot
// entries written, the memtable's flush started), how long pebble's
// flush then runs beside it, what ending the capture costs the task (the
// links and the MANIFEST's copy), and how many bytes of sstables are new
// since the capture before (what an upload would send) against all of
// them.
func BenchmarkCaptureFiles(b *testing.B) {
	for _, pct := range []int{1, 10} {
		b.Run(fmt.Sprintf("changed=%d%%", pct), func(b *testing.B) { benchmarkCaptureFiles(b, pct) })
	}
}

func benchmarkCaptureFiles(b *testing.B, pct int) {
	const entries, groups = 1_000_000, 64
	s, err := pebblestate.Open(pebblestate.Options{Dir: b.TempDir(), Memory: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tab, err := s.Table("t")
	if err != nil {
		b.Fatal(err)
	}
	for i := range entries {
		tab.Put(i%groups, fmt.Sprint("key-", i), "", []byte(fmt.Sprint("value-", i)))
	}
	dir := b.TempDir()
	round := 0
	prev := map[string]bool{}
	var barrier, flush, end time.Duration
	var newBytes, allBytes, metaBytes int64
	capture := func() {
		round++
		start := time.Now()
		c, err := s.CaptureFiles(filepath.Join(dir, fmt.Sprint("c", round)))
		if err != nil {
			b.Fatal(err)
		}
		barrier += time.Since(start)
		start = time.Now()
		var done bool
		for !done {
			time.Sleep(100 * time.Microsecond)
			t := time.Now()
			if done, err = c.Poll(false); err != nil {
				b.Fatal(err)
			}
			if done {
				end += time.Since(t)
			}
		}
		flush += time.Since(start)
		now := map[string]bool{}
		for _, f := range c.Files() {
			if !f.Immutable {
				metaBytes += f.Size
				continue
			}
			now[f.Name] = true
			allBytes += f.Size
			if !prev[f.Name] {
				newBytes += f.Size
			}
		}
		prev = now
		if err := c.Release(); err != nil {
			b.Fatal(err)
		}
	}
	capture() // the first: every file is new
	barrier, flush, end, newBytes, allBytes, metaBytes = 0, 0, 0, 0, 0, 0
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		for j := range entries * pct / 100 {
			k := (j*7919 + i*104729) % entries
			tab.Put(k%groups, fmt.Sprint("key-", k), "", []byte(fmt.Sprint("value-", k, "-", i)))
		}
		b.StartTimer()
		capture()
	}
	n := float64(b.N)
	b.ReportMetric(float64(barrier.Microseconds())/1e3/n, "barrier-ms/op")
	b.ReportMetric(float64(flush.Microseconds())/1e3/n, "flush-ms/op")
	b.ReportMetric(float64(end.Microseconds())/1e3/n, "end-ms/op")
	b.ReportMetric(float64(newBytes)/n/(1<<20), "new-MiB/op")
	b.ReportMetric(float64(allBytes)/n/(1<<20), "sst-MiB/op")
	b.ReportMetric(float64(metaBytes)/n/(1<<10), "meta-KiB/op")
}

// TestCaptureCatchesUp changes a store far more during a file capture's
// flush than its bounds allow (nothing is written to pebble meanwhile),
// ends the capture, and goes on: the excess dirty and hot entries go to
// pebble a few thousand at a time as the changes come, not all at once
// when the capture ends (which stalled the task 243 ms), and the store
// is back under its bound on dirty entries well before as many changes
// again; the capture and the store hold what they should.
func TestCaptureCatchesUp(t *testing.T) {
	n := 120_000
	if raceEnabled {
		n /= 2
	}
	rng := rand.New(rand.NewPCG(8, 9))
	s, err := pebblestate.Open(pebblestate.Options{Dir: t.TempDir(), Memory: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tab, err := s.Table("a")
	if err != nil {
		t.Fatal(err)
	}
	m := model{"a": {}}
	put := func(i int) {
		kg, k := i%8, fmt.Sprintf("key-%07d", rng.IntN(4*n))
		v := strings.Repeat(fmt.Sprint(i), 30)
		tab.Put(kg, k, "n", []byte(v))
		if m["a"][kg] == nil {
			m["a"][kg] = map[string]string{}
		}
		m["a"][kg][k] = v
	}
	for i := range n / 2 {
		put(i)
	}
	c, err := s.CaptureFiles(filepath.Join(t.TempDir(), "capture"))
	if err != nil {
		t.Fatal(err)
	}
	at := m.clone()
	for i := range n {
		put(i)
	}
	tracked, _ := s.Dirty()
	if tracked < n/2 {
		t.Fatalf("%d dirty entries during the capture, want at least %d", tracked, n/2)
	}
	s.LargestStep()
	if done, err := c.Poll(true); !done || err != nil {
		t.Fatalf("Poll(true) = %v, %v", done, err)
	}
	back := -1
	for i := range n {
		put(i)
		if i%256 != 0 || back >= 0 {
			continue
		}
		if d, _ := s.Dirty(); d <= 16<<10+4<<10 {
			back = i
		}
	}
	if step := s.LargestStep(); step > 8<<10 {
		t.Errorf("after the capture, %d entries went to pebble at once; want at most %d", step, 8<<10)
	}
	if back < 0 || back > 2*tracked {
		t.Errorf("%d dirty entries at the capture's end; the store was back under its bound after %d changes, want at most %d", tracked, back, 2*tracked)
	}
	t.Logf("%d dirty entries at the capture's end, back under the bound after %d changes", tracked, back)
	check(t, "the store opened from the capture", openFiles(t, c.Dir()), at)
	check(t, "the store captured", s, m)
}
