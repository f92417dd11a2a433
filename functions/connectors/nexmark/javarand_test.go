package nexmark

import (
	"math"
	"testing"
)

// Values printed by OpenJDK 17's java.util.Random.
func TestJavaRandomKnownValues(t *testing.T) {
	r := func(seed int64) *javaRandom {
		var r javaRandom
		r.setSeed(seed)
		return &r
	}
	if got := r(0).nextInt(); got != -1155484576 {
		t.Errorf("new Random(0).nextInt() = %d, want -1155484576", got)
	}
	if got := r(42).nextInt(); got != -1170105035 {
		t.Errorf("new Random(42).nextInt() = %d, want -1170105035", got)
	}
	if got := r(0).nextLong(); got != -4962768465676381896 {
		t.Errorf("new Random(0).nextLong() = %d, want -4962768465676381896", got)
	}
	if got := r(0).nextDouble(); got != 0.730967787376657 {
		t.Errorf("new Random(0).nextDouble() = %v, want 0.730967787376657", got)
	}
	// nextInt(bound): the power-of-two branch, the modulo branch, and a
	// bound large enough that the rejection loop runs.
	for _, tc := range []struct {
		seed  int64
		bound int32
		want  []int32
	}{
		{0, 16, []int32{11, 13, 3, 9, 10}},
		{0, 10, []int32{0, 8, 9, 7, 5}},
		{42, 1_500_000_000, []int32{117392763, 1467211248, 102948884, 662969970, 595021505}},
	} {
		g := r(tc.seed)
		for i, w := range tc.want {
			if got := g.nextIntn(tc.bound); got != w {
				t.Errorf("new Random(%d): nextInt(%d) #%d = %d, want %d", tc.seed, tc.bound, i, got, w)
			}
		}
	}
}

func TestJavaRandomNextIntnRange(t *testing.T) {
	var r javaRandom
	r.setSeed(7)
	for _, bound := range []int32{1, 2, 3, 13, 26, 64, 10000, math.MaxInt32} {
		for range 1000 {
			if v := r.nextIntn(bound); v < 0 || v >= bound {
				t.Fatalf("nextInt(%d) = %d", bound, v)
			}
		}
	}
}

func TestBeamNextLong(t *testing.T) {
	var a, b javaRandom
	a.setSeed(3)
	b.setSeed(3)
	// Below Integer.MAX_VALUE it is nextInt((int) n).
	for range 100 {
		if x, y := beamNextLong(&a, 1000), int64(b.nextIntn(1000)); x != y {
			t.Fatalf("nextLong(1000) = %d, want nextInt(1000) = %d", x, y)
		}
	}
	// Above, abs(nextLong() % n).
	for range 100 {
		n := int64(5_000_000_000)
		v := b.nextLong() % n
		if v < 0 {
			v = -v
		}
		if got := beamNextLong(&a, n); got != v {
			t.Fatalf("nextLong(%d) = %d, want %d", n, got, v)
		}
	}
}

func TestJavaRound(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want int64
	}{
		{0, 0}, {0.49999999999999994, 0}, {0.5, 1}, {1.5, 2}, {2.5, 3}, {2.4999, 2}, {12.6, 13}, {99999999.5, 100000000},
	} {
		if got := javaRound(tc.x); got != tc.want {
			t.Errorf("javaRound(%v) = %d, want %d", tc.x, got, tc.want)
		}
	}
}

// refNextInt is Java's nextInt(bound) written as the JDK writes it, to
// check the inlined and split-up versions against.
func refNextInt(r *javaRandom, bound int32) int32 {
	rv := r.next(31)
	m := bound - 1
	if bound&m == 0 {
		return int32((int64(bound) * int64(rv)) >> 31)
	}
	for u := rv; ; u = r.next(31) {
		rv = u % bound
		if u-rv+m >= 0 {
			return rv
		}
	}
}

// stateBefore returns the generator state whose next(31) is u: the state
// after the step is u<<17.
func stateBefore(u int32) int64 { return stepBack(int64(u) << 17) }

// stepBack inverts a step of the generator, with the multiplier's inverse
// modulo 2^48.
func stepBack(s int64) int64 {
	inv := uint64(javaMultiplier) // Newton's iteration for the inverse of an odd number
	for range 5 {
		inv *= 2 - javaMultiplier*inv
	}
	return int64((uint64(s) - javaAddend) * inv & javaMask)
}

// TestNextIntRejection checks Java's rejection of a draw in the last,
// incomplete multiple of the bound, which the golden events are unlikely
// to contain: from 2^31-1, nextInt(13) and nextInt(26) must draw again.
func TestNextIntRejection(t *testing.T) {
	var r javaRandom
	r.seed = stateBefore(math.MaxInt32)
	if got := r.next(31); got != math.MaxInt32 {
		t.Fatalf("stateBefore: next(31) = %d", got)
	}
	for _, bound := range []int32{13, 26, 10, 10000, 1_500_000_000} {
		for _, u := range []int32{math.MaxInt32, math.MaxInt32 - 3, 12345} {
			a, b := javaRandom{stateBefore(u)}, javaRandom{stateBefore(u)}
			if x, y := a.nextIntn(bound), refNextInt(&b, bound); x != y || a != b {
				t.Errorf("nextInt(%d) after %d: %d, state %x; want %d, state %x", bound, u, x, a.seed, y, b.seed)
			}
		}
	}
	// appendNextString draws nextInt(13) and nextInt(26) inline. Its
	// first draw is the length; make the second (a nextInt(13)) or the
	// third (a nextInt(26) if the second was not 0) a rejected one.
	for _, s := range []int64{stepBack(stateBefore(math.MaxInt32)), stepBack(stepBack(stateBefore(math.MaxInt32))), stateBefore(77)} {
		for _, maxLength := range []int{5, 7, 20, 100} {
			a, b := javaRandom{s}, javaRandom{s}
			got := string(appendNextString(nil, &a, maxLength, '_'))
			var want []byte
			for n := minStringLength + refNextInt(&b, int32(maxLength-minStringLength)); n > 0; n-- {
				if refNextInt(&b, 13) == 0 {
					want = append(want, '_')
				} else {
					want = append(want, byte('a'+refNextInt(&b, 26)))
				}
			}
			if got != string(want) || a != b {
				t.Errorf("nextString(%d) from state %x = %q, want %q", maxLength, s, got, want)
			}
		}
	}
}
