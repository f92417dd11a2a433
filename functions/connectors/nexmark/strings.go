package nexmark

import (
	"math/bits"
	"slices"
	"strconv"
	"sync"
)

// Beam's word lists, kept small so that queries find matches even on small
// data sets.
var (
	usStates    = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities    = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames  = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames   = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	hotChannels = []string{"Google", "Facebook", "Baidu", "Apple"}
)

// byteTable is a list of strings stored back to back, so that the fast path
// copies them to Arrow buffers without converting or allocating.
type byteTable struct {
	data []byte
	off  []int32 // string i is data[off[i]:off[i+1]]
}

func (t *byteTable) add(s []byte) {
	if len(t.off) == 0 {
		t.off = append(t.off, 0)
	}
	t.data = append(t.data, s...)
	t.off = append(t.off, int32(len(t.data)))
}

func (t *byteTable) get(i int) []byte { return t.data[t.off[i]:t.off[i+1]:t.off[i+1]] }

// tables are the constant strings of all events, built once on first use
// and read-only afterwards.
type tables struct {
	states, cities byteTable
	names          byteTable // firstNames[i] + " " + lastNames[j] at i*len(lastNames)+j
	hotChannels    byteTable
	hotURLs        byteTable
	// channelURLs holds the URL of each channel packed in a word (see
	// packURL), so that the table, 80 KB, stays in cache: half the bids
	// look up a random channel.
	channelURLs []uint64
}

var loadTables = sync.OnceValue(func() *tables {
	t := &tables{}
	for _, s := range usStates {
		t.states.add([]byte(s))
	}
	for _, s := range usCities {
		t.cities.add([]byte(s))
	}
	for _, f := range firstNames {
		for _, l := range lastNames {
			t.names.add([]byte(f + " " + l))
		}
	}
	var r javaRandom
	var b []byte
	for i, s := range hotChannels {
		t.hotChannels.add([]byte(s))
		r.setSeed(hotURLSeed(i))
		t.hotURLs.add(appendBaseURL(b[:0], &r))
	}
	t.channelURLs = make([]uint64, NumChannels)
	for n := range t.channelURLs {
		r.setSeed(int64(n))
		t.channelURLs[n] = packURL(&r)
	}
	return t
})

// hotURLSeed seeds the Random that makes hot channel i's URL; the Flink
// port draws these from an unseeded Random.
func hotURLSeed(i int) int64 { return -1 - int64(i) }

const (
	urlPrefix    = "https://www.nexmark.com/"
	urlSuffix    = "item.htm?query=1"
	channelIDKey = "&channel_id="
)

// appendBaseURL is the Flink port's BidGenerator.getBaseUrl: three path
// segments of nextString(random, 5, '_'), which are 3 or 4 characters of
// a to z and _.
func appendBaseURL(dst []byte, r *javaRandom) []byte {
	dst = append(dst, urlPrefix...)
	for range 3 {
		dst = appendNextString(dst, r, 5, '_')
		dst = append(dst, '/')
	}
	return append(dst, urlSuffix...)
}

// Channel n's URL is the Flink port's getNextChannelAndurl with one
// Random seeded by n in place of fresh unseeded ones: a base URL, then, if
// nextInt(10) > 0, the channel's id. packURL draws it from r and packs it
// in a word: 5 bits for each of the 4 characters of each of the 3 path
// segments (0 for none, 1 to 26 for a to z, 27 for _), and a bit saying
// whether the id follows.
func packURL(r *javaRandom) uint64 {
	var p uint64
	var seg []byte
	for j := range 3 {
		seg = appendNextString(seg[:0], r, 5, '_')
		if len(seg) < minStringLength || len(seg) > 4 {
			panic("nexmark: URL segment of unexpected length")
		}
		for i, c := range seg {
			sym := uint64(27) // '_'
			if c != '_' {
				sym = uint64(c-'a') + 1
			}
			p |= sym << (5 * (4*j + i))
		}
	}
	if r.nextIntn(10) > 0 {
		p |= 1 << 60
	}
	return p
}

// appendChannelURL appends channel n's URL, unpacked from p.
func appendChannelURL(dst []byte, p uint64, n int32) []byte {
	dst = append(dst, urlPrefix...)
	for j := range 3 {
		for i := range 4 {
			switch sym := byte(p >> (5 * (4*j + i)) & 31); sym {
			case 0:
			case 27:
				dst = append(dst, '_')
			default:
				dst = append(dst, 'a'+sym-1)
			}
		}
		dst = append(dst, '/')
	}
	dst = append(dst, urlSuffix...)
	if p&(1<<60) != 0 {
		id := int32(bits.Reverse32(uint32(n)))
		if id < 0 {
			id = -id // Math.abs: Integer.MIN_VALUE stays negative, as in Java
		}
		dst = strconv.AppendInt(append(dst, channelIDKey...), int64(id), 10)
	}
	return dst
}

// appendChannelName appends "channel-" and n.
func appendChannelName(dst []byte, n int32) []byte {
	return strconv.AppendInt(append(dst, "channel-"...), int64(n), 10)
}

// minStringLength is Beam's MIN_STRING_LENGTH.
const minStringLength = 3

// appendNextString is Beam's StringsGenerator.nextString(random, maxLength,
// special): 3 to maxLength-1 letters, each one in 13 being special, with
// Java's String.trim applied.
func appendNextString(dst []byte, r *javaRandom, maxLength int, special byte) []byte {
	start := len(dst)
	n := int(minStringLength + r.nextIntn(int32(maxLength-minStringLength)))
	dst = slices.Grow(dst, n)
	// nextInt(13) and nextInt(26) are written out on a local copy of the
	// state, which the compiler keeps in a register and divides by the
	// constants by multiplying. Rejection (u in the last incomplete
	// multiple of the bound) happens about once in 10^8 draws.
	seed := r.seed
	for ; n > 0; n-- {
		seed = (seed*javaMultiplier + javaAddend) & javaMask
		u := int32(seed >> 17)
		v := u % 13
		if u-v+12 < 0 {
			r.seed = seed
			v = r.nextIntnRetry(13)
			seed = r.seed
		}
		if v == 0 {
			dst = append(dst, special)
			continue
		}
		seed = (seed*javaMultiplier + javaAddend) & javaMask
		u = int32(seed >> 17)
		v = u % 26
		if u-v+25 < 0 {
			r.seed = seed
			v = r.nextIntnRetry(26)
			seed = r.seed
		}
		dst = append(dst, byte('a'+v))
	}
	r.seed = seed
	// trim removes characters <= ' ' at both ends; move the rest down so
	// that the string starts where it was appended.
	end := len(dst)
	for end > start && dst[end-1] <= ' ' {
		end--
	}
	lo := start
	for lo < end && dst[lo] <= ' ' {
		lo++
	}
	if lo > start {
		copy(dst[start:], dst[lo:end])
	}
	return dst[:start+end-lo]
}

// appendNextExactString is Beam's nextExactString: length characters, six
// from each nextInt(): 'a' + rnd%26, then rnd /= 26. Java's % and /
// truncate toward zero, so a negative draw gives 'a' minus the base-26
// digits of its magnitude, down to 'a'-25 = 'H'. The digits are computed
// independently of each other, without branching on the sign, because
// extra is most of what the generator writes.
func appendNextExactString(dst []byte, r *javaRandom, length int) []byte {
	start := len(dst)
	dst = slices.Grow(dst, length)[:start+length]
	out := dst[start:]
	seed := r.seed // a local keeps the generator's state in a register
	for len(out) > 0 {
		seed = (seed*javaMultiplier + javaAddend) & javaMask
		v := int32(seed >> 16)        // nextInt()
		m := v >> 31                  // 0, or -1 if v < 0
		u := uint32((v ^ m) - m)      // |v|; MinInt32 becomes 1<<31
		sign := func(d uint32) byte { // 'a' + d, or 'a' - d if v < 0
			return byte('a' + (int32(d) ^ m - m))
		}
		q1, q2, q3, q4, q5 := u/26, u/(26*26), u/(26*26*26), u/(26*26*26*26), u/(26*26*26*26*26)
		if len(out) >= 6 {
			out[0] = sign(u - q1*26)
			out[1] = sign(q1 - q2*26)
			out[2] = sign(q2 - q3*26)
			out[3] = sign(q3 - q4*26)
			out[4] = sign(q4 - q5*26)
			out[5] = sign(q5 % 26)
			out = out[6:]
			continue
		}
		q := [6]uint32{u, q1, q2, q3, q4, q5}
		for i := range out {
			out[i] = sign(q[i] % 26)
		}
		out = out[:0]
	}
	r.seed = seed
	return dst
}

// appendNextExtra is Beam's nextExtra: padding such that currentSize plus
// its length averages desiredAverageSize.
func appendNextExtra(dst []byte, r *javaRandom, currentSize, desiredAverageSize int) []byte {
	if currentSize > desiredAverageSize {
		return dst
	}
	desiredAverageSize -= currentSize
	delta := int(javaRound(float64(desiredAverageSize) * 0.2))
	size := desiredAverageSize - delta
	if delta != 0 {
		size += int(r.nextIntn(int32(2 * delta)))
	}
	return appendNextExactString(dst, r, size)
}

// appendCreditCard is Beam's nextCreditCard: four groups of "%04d".
func appendCreditCard(dst []byte, r *javaRandom) []byte {
	for i := range 4 {
		if i > 0 {
			dst = append(dst, ' ')
		}
		v := r.nextIntn(10000)
		dst = append(dst, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
	}
	return dst
}
