package arrowfmt

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestHashStable pins hash values: they decide which subtask owns a key and
// are baked into snapshots, so they must never change by accident. The
// fixed-width values were cross-checked with an independent implementation
// of the fold (Python); strings add xxhash64 ("" is 0xef46db3751d8e999).
func TestHashStable(t *testing.T) {
	for _, c := range []struct {
		vals []any
		want uint64
	}{
		{[]any{int64(0)}, 0xde5e2cf6bdc336bc},
		{[]any{int64(42)}, 0x43b4f278d833e0fe},
		{[]any{"user-1"}, 0x7424a88f964f026d},
		{[]any{""}, 0x60c86d49614387c1},
		{[]any{nil}, 0xcd7d11bc6269360c},
		{[]any{1.5}, 0xacf2788dfd5914fe},
		{[]any{true}, 0x3f8b65f461e407b6},
		{[]any{"user-1", int64(7)}, 0xea4f2752657795fa},
	} {
		if got := HashKeyValues(c.vals...); got != c.want {
			t.Errorf("HashKeyValues(%#v) = %#x, want %#x", c.vals, got, c.want)
		}
	}
}

func TestHashKeysMatchesHashKeyValues(t *testing.T) {
	mem := newMem(t)
	rec := testBatch(t, mem, 0, 500)
	defer rec.Release()
	for _, cols := range [][]int{{colID}, {colName}, {colPrice}, {colTS}, {colOK}, {colName, colID}, {colOK, colTS, colPrice, colName, colID}} {
		hashes := HashKeys(rec, cols, nil)
		for r := range int(rec.NumRows()) {
			vals := make([]any, len(cols))
			for i, c := range cols {
				vals[i] = Value(rec.Column(c), r)
			}
			if want := HashKeyValues(vals...); hashes[r] != want {
				t.Fatalf("cols %v row %d %v: HashKeys %#x, HashKeyValues %#x", cols, r, vals, hashes[r], want)
			}
		}
	}
	// Reuses out.
	out := make([]uint64, 0, 1000)
	if got := HashKeys(rec, []int{colID}, out); &got[0] != &out[:1][0] {
		t.Error("HashKeys did not reuse out")
	}
}

func TestHashDistinguishes(t *testing.T) {
	// A key column has one type, so only values of one type must differ;
	// null must differ from each type's zero value.
	for _, zero := range []any{int64(0), "", false, 0.0} {
		if HashKeyValues(nil) == HashKeyValues(zero) {
			t.Errorf("null and %#v hash equally", zero)
		}
	}
	for _, p := range [][2][]any{
		{{int64(1), int64(2)}, {int64(2), int64(1)}},
		{{"ab", "c"}, {"a", "bc"}},
		{{nil, int64(0)}, {int64(0), nil}},
		{{nil, nil}, {nil}},
	} {
		if HashKeyValues(p[0]...) == HashKeyValues(p[1]...) {
			t.Errorf("%#v and %#v hash equally", p[0], p[1])
		}
	}
	// Values equal as keys hash equally.
	if HashKeyValues(math.Copysign(0, -1)) != HashKeyValues(0.0) {
		t.Error("-0 and 0 hash differently")
	}
	if HashKeyValues(math.NaN()) != HashKeyValues(-math.NaN()) {
		t.Error("NaNs hash differently")
	}
	ts := time.UnixMilli(1700000000123)
	if HashKeyValues(ts) != HashKeyValues(int64(1700000000123)) {
		t.Error("time.Time and its milliseconds hash differently")
	}
}

// TestKeyGroupSpread checks the hash spreads sequential keys evenly over key
// groups.
func TestKeyGroupSpread(t *testing.T) {
	const keys = 128 * 1000
	counts := make([]int, DefaultMaxParallelism)
	for i := range keys {
		counts[KeyGroup(HashKeyValues(int64(i)), DefaultMaxParallelism)]++
	}
	for kg, c := range counts {
		if c < 850 || c > 1150 { // mean 1000, stddev ~31
			t.Errorf("key group %d has %d of %d keys", kg, c, keys)
		}
	}
}

// TestKeyGroupIsHashModulo checks that the mask KeyGroup takes for a power
// of two gives the key groups the modulo does: they are in every
// checkpoint.
func TestKeyGroupIsHashModulo(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, k := range []int{1, 2, 3, 100, 128, 129, 4096, 32768} {
		for range 10_000 {
			h := rng.Uint64()
			if got, want := KeyGroup(h, k), int(h%uint64(k)); got != want {
				t.Fatalf("KeyGroup(%#x, %d) = %d, want %d", h, k, got, want)
			}
		}
	}
}

func TestKeyGroupRanges(t *testing.T) {
	for k := 1; k <= 300; k++ {
		for p := 1; p <= k; p++ {
			next := 0
			for i := range p {
				start, end := KeyGroupRange(i, k, p)
				if start != next || end <= start {
					t.Fatalf("K=%d p=%d: subtask %d has [%d,%d), want start %d and nonempty", k, p, i, start, end, next)
				}
				for kg := start; kg < end; kg++ {
					if s := SubtaskForKeyGroup(kg, k, p); s != i {
						t.Fatalf("K=%d p=%d: key group %d in range of %d, SubtaskForKeyGroup says %d", k, p, kg, i, s)
					}
				}
				next = end
			}
			if next != k {
				t.Fatalf("K=%d p=%d: ranges end at %d", k, p, next)
			}
		}
	}
	// Flink's examples: K=128, p=3.
	for i, want := range [][2]int{{0, 43}, {43, 86}, {86, 128}} {
		if s, e := KeyGroupRange(i, 128, 3); s != want[0] || e != want[1] {
			t.Errorf("KeyGroupRange(%d, 128, 3) = [%d,%d), want %v", i, s, e, want)
		}
	}
}

func BenchmarkHashKeys(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec := benchBatch(b, mem)
	defer rec.Release()
	out := make([]uint64, rec.NumRows())
	for _, bc := range []struct {
		name string
		cols []int
	}{{"int64", []int{0}}, {"string", []int{1}}, {"string+int64", []int{1, 0}}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				out = HashKeys(rec, bc.cols, out)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rec.NumRows()), "ns/row")
		})
	}
}
