package nexmark

import "math"

// javaRandom is java.util.Random: a 48-bit linear congruential generator.
// The generator's values are only comparable with Beam's if every draw is
// bit-identical, so each method follows the JDK's algorithm exactly,
// including its int overflow.
type javaRandom struct{ seed int64 }

const (
	javaMultiplier = 0x5DEECE66D
	javaAddend     = 0xB
	javaMask       = 1<<48 - 1
)

// setSeed is new Random(s) / Random.setSeed(s).
func (r *javaRandom) setSeed(s int64) { r.seed = (s ^ javaMultiplier) & javaMask }

// next is Random.next(bits): the top bits of the next 48-bit state, as a
// signed int (so next(32) may be negative).
func (r *javaRandom) next(bits uint) int32 {
	r.seed = (r.seed*javaMultiplier + javaAddend) & javaMask
	return int32(r.seed >> (48 - bits))
}

// nextInt is Random.nextInt(): any int32.
func (r *javaRandom) nextInt() int32 { return r.next(32) }

// nextIntn is Random.nextInt(bound): uniform in [0, bound). bound must be
// positive, which the callers ensure (Java throws otherwise).
func (r *javaRandom) nextIntn(bound int32) int32 {
	if bound&(bound-1) == 0 { // a power of two: take the high bits
		return int32((int64(bound) * int64(r.next(31))) >> 31)
	}
	return r.nextIntNotPow2(bound)
}

// nextIntNotPow2 is Random.nextInt(bound) for a bound that is not a power
// of two. It is small enough to inline, so that the many draws with a
// constant bound divide by multiplying; the rare rejected draw goes to
// nextIntnRetry.
func (r *javaRandom) nextIntNotPow2(bound int32) int32 {
	u := r.next(31)
	v := u % bound
	if u-v+(bound-1) < 0 { // in the last, incomplete multiple of bound (int32 wraps)
		return r.nextIntnRetry(bound)
	}
	return v
}

// nextIntnRetry is the rest of Java's rejection loop.
//
//go:noinline
func (r *javaRandom) nextIntnRetry(bound int32) int32 {
	m := bound - 1
	for {
		u := r.next(31)
		if v := u % bound; u-v+m >= 0 {
			return v
		}
	}
}

// nextLong is Random.nextLong().
func (r *javaRandom) nextLong() int64 {
	hi := int64(r.next(32))
	lo := int64(r.next(32))
	return hi<<32 + lo
}

// nextDouble is Random.nextDouble(): 53 random bits in [0, 1).
func (r *javaRandom) nextDouble() float64 {
	hi := int64(r.next(26))
	lo := int64(r.next(27))
	return float64(hi<<27+lo) * (1.0 / (1 << 53))
}

// beamNextLong is Beam's LongGenerator.nextLong(random, n): a value in
// [0, n). Below Integer.MAX_VALUE it is nextInt((int) n); above, Beam takes
// abs(nextLong() % n), which is skewed, but it is what Beam does.
func beamNextLong(r *javaRandom, n int64) int64 {
	if n < math.MaxInt32 {
		return int64(r.nextIntn(int32(n)))
	}
	v := r.nextLong() % n
	if v < 0 {
		v = -v
	}
	return v
}

// javaRound is Java's Math.round(double) for the finite values the
// generator rounds: floor(x + 1/2), computed without the error of adding
// 0.5 in floating point.
func javaRound(x float64) int64 {
	f := math.Floor(x)
	if x-f >= 0.5 {
		f++
	}
	return int64(f)
}
