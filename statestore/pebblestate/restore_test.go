package pebblestate_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/pebblestate"
)

// BenchmarkRescale restores the stores of two subtasks over key groups
// [0, 64) and [64, 128), each with entries/2 entries, at parallelism 3,
// as a rescale 2 → 3 does, and reports how long each new subtask's
// Restore took, the longest, its store's bytes on disk, and the time a
// Get and a Put of a key of its own then take (1M of them).
func BenchmarkRescale(b *testing.B) {
	const entries, groups = 4_000_000, 128
	o := pebblestate.Options{Dir: b.TempDir(), Memory: 32 << 20}
	var captures []statestore.CapturedStore
	for i, r := range [][2]int{{0, 64}, {64, groups}} {
		s, err := pebblestate.Open(o)
		if err != nil {
			b.Fatal(err)
		}
		tab, err := s.Table("t")
		if err != nil {
			b.Fatal(err)
		}
		for k := range entries / 2 {
			kg := r[0] + k%(r[1]-r[0])
			tab.Put(kg, fmt.Sprint("key-", k), "", []byte(fmt.Sprint("value-", k)))
		}
		c, err := s.CaptureFiles(filepath.Join(b.TempDir(), fmt.Sprint("capture-", i)))
		if err != nil {
			b.Fatal(err)
		}
		if done, err := c.Poll(true); !done || err != nil {
			b.Fatalf("Poll(true) = %v, %v", done, err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		captures = append(captures, statestore.CapturedStore{Dir: c.Dir(), KeyGroupStart: r[0], KeyGroupEnd: r[1]})
	}
	ranges := [][2]int{{0, 43}, {43, 86}, {86, groups}}
	const work = 1_000_000
	took := make([]time.Duration, len(ranges))
	worked := make([]time.Duration, len(ranges))
	disk := make([]int64, len(ranges))
	b.ResetTimer()
	for range b.N {
		for i, r := range ranges {
			into, err := pebblestate.Open(o)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			s, _, err := pebblestate.Restore(o, into, captures, r[0], r[1])
			if err != nil {
				b.Fatal(err)
			}
			// What a task does before its first batch: tables opened.
			tab, err := s.Table("t")
			if err != nil {
				b.Fatal(err)
			}
			took[i] += time.Since(start)
			disk[i] += s.DiskBytes()
			// Then what the sequence checker does: read a key, write it.
			start = time.Now()
			for j, n := 0, 0; n < work; j++ {
				k := (j * 7919) % (entries / 2)
				for _, kg := range [2]int{k % 64, 64 + k%64} { // its key group in either store
					if kg < r[0] || kg >= r[1] {
						continue
					}
					v, ok := tab.Get(kg, fmt.Sprint("key-", k), "")
					if !ok {
						b.Fatalf("key-%d is not in key group %d", k, kg)
					}
					tab.Put(kg, fmt.Sprint("key-", k), "", append(v[:len(v):len(v)], 'x'))
					n++
				}
			}
			worked[i] += time.Since(start)
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	var longest time.Duration
	for i, r := range ranges {
		b.ReportMetric(float64(took[i].Milliseconds())/float64(b.N), fmt.Sprintf("kg%d-%d-ms/op", r[0], r[1]))
		b.ReportMetric(float64(disk[i])/float64(b.N)/(1<<20), fmt.Sprintf("kg%d-%d-disk-MiB/op", r[0], r[1]))
		longest = max(longest, took[i])
		b.ReportMetric(float64(worked[i].Nanoseconds())/float64(b.N)/work, fmt.Sprintf("kg%d-%d-get-put-ns", r[0], r[1]))
	}
	b.ReportMetric(float64(longest.Milliseconds())/float64(b.N), "longest-ms/op")
}

// part is a store over key groups [start, end) and what it holds.
type part struct {
	s          *pebblestate.Store
	m          model
	start, end int
}

// fill makes n random changes to tables of p in its key groups: tables
// opened in the order given (so that stores give them other ids).
func (p *part) fill(t *testing.T, rng *rand.Rand, tables []string, n int) {
	t.Helper()
	for _, name := range tables {
		if _, err := p.s.Table(name); err != nil {
			t.Fatal(err)
		}
		if p.m[name] == nil {
			p.m[name] = map[int]map[string]string{}
		}
	}
	for range n {
		name := tables[rng.IntN(len(tables))]
		tab, err := p.s.Table(name)
		if err != nil {
			t.Fatal(err)
		}
		kg, k := p.start+rng.IntN(p.end-p.start), fmt.Sprintf("key-%04d", rng.IntN(2_000))
		if p.m[name][kg] == nil {
			p.m[name][kg] = map[string]string{}
		}
		if rng.IntN(5) == 0 {
			tab.Delete(kg, k, "n")
			delete(p.m[name][kg], k)
			continue
		}
		v := strings.Repeat(fmt.Sprint(rng.IntN(1000), "-"), 1+rng.IntN(20))
		tab.Put(kg, k, "n", []byte(v))
		p.m[name][kg][k] = v
	}
}

// capture captures p's store as files and returns them with the model.
func (p *part) capture(t *testing.T) (statestore.CapturedStore, model) {
	t.Helper()
	c, err := p.s.CaptureFiles(filepath.Join(t.TempDir(), "capture"))
	if err != nil {
		t.Fatal(err)
	}
	if done, err := c.Poll(true); !done || err != nil {
		t.Fatalf("Poll(true) = %v, %v", done, err)
	}
	return statestore.CapturedStore{Dir: c.Dir(), KeyGroupStart: p.start, KeyGroupEnd: p.end}, p.m.clone()
}

// rescale restores key groups [start, end) from captures (with their
// models), and checks the store against what they held there: every
// table of a capture it overlaps, and nothing in other key groups.
func rescale(t *testing.T, start, end int, captures []statestore.CapturedStore, models []model) *part {
	t.Helper()
	o := pebblestate.Options{Dir: t.TempDir(), Memory: pebblestate.MinMemory}
	into, err := pebblestate.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := pebblestate.Restore(o, into, captures, start, end)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	want := model{}
	for i, c := range captures {
		if max(c.KeyGroupStart, start) >= min(c.KeyGroupEnd, end) {
			continue
		}
		for name, groups := range models[i] {
			if want[name] == nil {
				want[name] = map[int]map[string]string{}
			}
			for kg, entries := range groups {
				if kg >= start && kg < end {
					want[name][kg] = maps.Clone(entries)
				}
			}
		}
	}
	check(t, fmt.Sprintf("key groups [%d, %d)", start, end), s, want)
	return &part{s: s, m: want, start: start, end: end}
}

// TestRestoreRescale restores stores at other key groups than they were
// captured over: scaled out, in, and across three captures whose stores
// gave their tables other ids (and one table only some have); then
// changes the restored stores and restores their captures in turn; with
// the ingested entries in one sstable, and in many.
func TestRestoreRescale(t *testing.T) {
	for _, size := range []uint64{0, 4 << 10} {
		t.Run(fmt.Sprint("ingestFileSize=", size), func(t *testing.T) {
			if size > 0 {
				defer pebblestate.SetIngestFileSize(size)() // many ingested files
			}
			restoreRescale(t)
		})
	}
}

func restoreRescale(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 14))
	gen := func(ranges [][2]int, tables [][]string, from []statestore.CapturedStore, models []model) ([]statestore.CapturedStore, []model) {
		var captures []statestore.CapturedStore
		var ms []model
		for i, r := range ranges {
			var p *part
			if from == nil {
				p = &part{s: open(t), m: model{}, start: r[0], end: r[1]}
			} else {
				p = rescale(t, r[0], r[1], from, models)
			}
			p.fill(t, rng, tables[i], 3_000)
			c, m := p.capture(t)
			captures, ms = append(captures, c), append(ms, m)
		}
		return captures, ms
	}
	// Three stores: table ids differ (a, b / b, a, c / c, a).
	captures, models := gen([][2]int{{0, 3}, {3, 5}, {5, 8}}, [][]string{{"a", "b"}, {"b", "a", "c"}, {"c", "a"}}, nil, nil)
	for _, r := range [][2]int{{0, 8}, {0, 3}, {2, 6}, {1, 4}, {6, 8}, {4, 5}} {
		rescale(t, r[0], r[1], captures, models)
	}
	// Restored, changed, captured, and restored again.
	captures, models = gen([][2]int{{0, 2}, {2, 6}, {6, 8}}, [][]string{{"b"}, {"c", "a"}, {"a", "d"}}, captures, models)
	for _, r := range [][2]int{{1, 7}, {0, 8}, {5, 6}} {
		rescale(t, r[0], r[1], captures, models)
	}
}
