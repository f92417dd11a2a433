package pebblestate_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/pebblestate"
)

// The kinds of the words of the values TestMergeTable merges: every kind,
// so that each word of a merge is checked.
var testKinds = []pebblestate.WordKind{pebblestate.WordAdd, pebblestate.WordMin, pebblestate.WordMax, pebblestate.WordMinFloat, pebblestate.WordMaxFloat}

// fold is the test's own account of a merge: the full value v with the
// operand of flags and words applied, word by word as WordKind says.
func fold(v []byte, flags byte, words []int64) []byte {
	out := []byte{v[0] | flags}
	for i, k := range testKinds {
		a, b := int64(binary.LittleEndian.Uint64(v[1+8*i:])), words[i]
		x, y := math.Float64frombits(uint64(a)), math.Float64frombits(uint64(b))
		r := a
		switch k {
		case pebblestate.WordAdd:
			r = a + b
		case pebblestate.WordMin:
			r = min(a, b)
		case pebblestate.WordMax:
			r = max(a, b)
		case pebblestate.WordMinFloat:
			if math.IsNaN(x) || (!math.IsNaN(y) && y < x) {
				r = b
			}
		case pebblestate.WordMaxFloat:
			if math.IsNaN(y) || (!math.IsNaN(x) && y > x) {
				r = b
			}
		}
		out = binary.LittleEndian.AppendUint64(out, uint64(r))
	}
	return out
}

// identity is the full value an operand applies to when nothing is
// beneath it, as the test's fold sees it.
func identity() []byte {
	v := []byte{0}
	for _, w := range []int64{0, math.MaxInt64, math.MinInt64, int64(math.Float64bits(math.NaN())), int64(math.Float64bits(math.Inf(-1)))} {
		v = binary.LittleEndian.AppendUint64(v, uint64(w))
	}
	return v
}

// randomWords are words for testKinds: ints that overflow when added,
// and floats among them NaNs, infinities and both zeros.
func randomWords(rng *rand.Rand) []int64 {
	floats := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1.5, -2.25, 1e300}
	f := func() int64 {
		if rng.IntN(2) == 0 {
			return int64(math.Float64bits(floats[rng.IntN(len(floats))]))
		}
		return int64(math.Float64bits(rng.NormFloat64()))
	}
	return []int64{rng.Int64(), rng.Int64N(1000) - 500, rng.Int64N(1000) - 500, f(), f()}
}

// TestMergeTable merges random operands into a table's entries, among
// puts, deletes and gets, far more than the hot entries of a 4 MiB store
// hold; captures the store's files and goes on with the store opened
// from them; and checks each Get and every key group's Range against
// the test's own fold of each entry's operands in order. pebble merges
// operands in its memtables, flushes and compactions, grouped as they
// come, so an entry's value is right only if merging is associative.
func TestMergeTable(t *testing.T) {
	for _, maxDirty := range []int{0, 64} {
		t.Run(fmt.Sprint("maxDirty=", maxDirty), func(t *testing.T) {
			if maxDirty > 0 {
				defer pebblestate.SetMaxDirty(maxDirty)()
			}
			mergeTable(t)
		})
	}
}

func mergeTable(t *testing.T) {
	n := 120_000
	if raceEnabled {
		n /= 4
	}
	rng := rand.New(rand.NewPCG(11, 12))
	s := open(t)
	m := model{"w": {}}
	var op []byte
	var merges, resolved int
	for i := range n {
		tab, err := s.Table("w")
		if err != nil {
			t.Fatal(err)
		}
		kg, k := rng.IntN(8), fmt.Sprintf("key-%05d", rng.IntN(5_000))
		if m["w"][kg] == nil {
			m["w"][kg] = map[string]string{}
		}
		old, had := m["w"][kg][k]
		switch p := rng.IntN(100); {
		case p < 75:
			flags, words := byte(1<<rng.IntN(7)), randomWords(rng)
			op = pebblestate.AppendOperand(op[:0], flags, testKinds, words)
			tab.(pebblestate.MergeTable).Merge(kg, k, "n", op)
			base := identity()
			if had {
				base = []byte(old)
			}
			m["w"][kg][k] = string(fold(base, flags, words))
			merges++
		case p < 83:
			v := fold(identity(), byte(rng.IntN(128)), randomWords(rng))
			tab.Put(kg, k, "n", v)
			m["w"][kg][k] = string(v)
		case p < 88:
			tab.Delete(kg, k, "n")
			delete(m["w"][kg], k)
		default:
			v, ok := tab.Get(kg, k, "n")
			if ok != had || string(v) != old {
				t.Fatalf("change %d: Get(%d, %s) = %x %v, want %x %v", i, kg, k, v, ok, old, had)
			}
			if had {
				resolved++
			}
		}
		if i == n/2 {
			c, err := s.CaptureFiles(filepath.Join(t.TempDir(), "capture"))
			if err != nil {
				t.Fatal(err)
			}
			if done, err := c.Poll(true); !done || err != nil {
				t.Fatalf("Poll(true) = %v, %v", done, err)
			}
			check(t, "the store captured halfway", s, m)
			s = openFiles(t, c.Dir())
			check(t, "the store opened from the capture", s, m)
		}
	}
	check(t, "the store at the end", s, m)
	t.Logf("%d merges, %d gets of entries", merges, resolved)
}

// TestMergeOperandRefused: an operand whose words do not fit the value
// beneath it fails the table's call, naming the entry.
func TestMergeOperandRefused(t *testing.T) {
	s := open(t)
	tab, err := s.Table("w")
	if err != nil {
		t.Fatal(err)
	}
	tab.Put(1, "k", "n", fold(identity(), 1, randomWords(rand.New(rand.NewPCG(1, 2)))))
	defer func() {
		p := recover()
		if p == nil || !strings.Contains(fmt.Sprint(p), `key "k": merge`) || !strings.Contains(fmt.Sprint(p), "1 words onto a value of 41 bytes") {
			t.Fatalf("merge of a one-word operand onto five words: panic %v", p)
		}
	}()
	tab.(pebblestate.MergeTable).Merge(1, "k", "n", pebblestate.AppendOperand(nil, 1, testKinds[:1], []int64{3}))
}

// TestLegacyCaptures restores captures of stores made before stores
// merged words: their sstables name pebble's default merge operator,
// which a store cannot read with its own. A restart on one, a rescale
// across two, and one across such a capture and a new one all hold what
// was captured, and take merges; opening one on its files is refused.
func TestLegacyCaptures(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	var captures []statestore.CapturedStore
	var models []model
	restoreMerger := pebblestate.SetLegacyMerger()
	for _, r := range [][2]int{{0, 4}, {4, 8}} {
		p := &part{s: open(t), m: model{}, start: r[0], end: r[1]}
		p.fill(t, rng, []string{"a", "w"}, 2_000)
		c, m := p.capture(t)
		captures, models = append(captures, c), append(models, m)
	}
	restoreMerger()
	_, err := pebblestate.OpenFiles(pebblestate.Options{Dir: t.TempDir(), Memory: pebblestate.MinMemory}, captures[0].Dir)
	if err == nil || !strings.Contains(err.Error(), "made before stores merged words") {
		t.Fatalf("OpenFiles of a legacy capture: %v", err)
	}
	// A new store's capture, beside a legacy one.
	p := &part{s: open(t), m: model{}, start: 4, end: 8}
	p.fill(t, rng, []string{"w", "b"}, 2_000)
	c, m := p.capture(t)
	mixed, mixedModels := []statestore.CapturedStore{captures[0], c}, []model{models[0], m}

	for _, tc := range []struct {
		from       []statestore.CapturedStore
		models     []model
		start, end int
	}{
		{captures, models, 0, 4}, {captures, models, 0, 8}, {captures, models, 2, 6},
		{mixed, mixedModels, 0, 8}, {mixed, mixedModels, 3, 6},
	} {
		p := rescale(t, tc.start, tc.end, tc.from, tc.models)
		tab, err := p.s.Table("w")
		if err != nil {
			t.Fatal(err)
		}
		words := []int64{1, 2, 3, 4, 5}
		if p.m["w"][tc.start] == nil {
			p.m["w"][tc.start] = map[string]string{}
		}
		for _, k := range []string{"new", "key-0001"} {
			base := identity()
			if _, ok := p.m["w"][tc.start][k]; ok { // not words: made words first
				base = fold(identity(), 1, words)
				tab.Put(tc.start, k, "n", base)
			}
			tab.(pebblestate.MergeTable).Merge(tc.start, k, "n", pebblestate.AppendOperand(nil, 2, testKinds, words))
			p.m["w"][tc.start][k] = string(fold(base, 2, words))
		}
		check(t, fmt.Sprintf("key groups [%d, %d) restored and merged into", tc.start, tc.end), p.s, p.m)
	}
}
