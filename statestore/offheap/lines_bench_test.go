package offheap

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// lineSink keeps what BenchmarkRandomLines reads, so the loads stay.
var lineSink uint32

// line is one 64-byte cache line; next names another line (a chase).
type line struct {
	next uint32
	n    uint32
	_    [56]byte
}

// BenchmarkRandomLines measures what a random 64-byte line of memory
// costs on this machine, in state mapped as the keyed state's is (Make),
// OFFHEAP_LINES_MIB of it (default 512, far past the caches): the floor
// under what an event costs a keyed operator at millions of keys, where
// each event reads its key's table slot, record and accumulator lines,
// each in a random place (docs/benchmarks.md). Each run touches 4M
// lines:
//
//   - read: independent loads, as many in flight as the core allows;
//   - read-pairs: a line, then the line it names (a table slot, then its
//     key's record);
//   - increment: a read and a write of each line (a count), which must
//     be written back when it leaves the cache;
//   - chase: each load's address comes from the one before, so none
//     overlap: the latency of one.
//
// With pages=huge the mapping is offered transparent huge pages (see
// SetHugePages); its first touch then costs more, before the timer.
func BenchmarkRandomLines(b *testing.B) {
	mib := 512
	if s := os.Getenv("OFFHEAP_LINES_MIB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("OFFHEAP_LINES_MIB=%q: want a positive number of MiB", s)
		}
		mib = n
	}
	const touches = 4 << 20
	for _, huge := range []bool{false, true} {
		pages := map[bool]string{false: "small", true: "huge"}[huge]
		b.Run("pages="+pages, func(b *testing.B) {
			defer SetHugePages(SetHugePages(huge))
			var a Arena
			defer a.Close()
			n := mib << 20 / 64
			lines := Make[line](&a, n)
			rng := rand.New(rand.NewPCG(1, 2))
			// One cycle through every line, in random order, for the
			// chase; the writes are each page's first touch.
			perm := rng.Perm(n)
			for i := range n {
				lines[perm[i]].next = uint32(perm[(i+1)%n])
			}
			idx := make([]uint32, touches)
			for i := range idx {
				idx[i] = uint32(rng.IntN(n))
			}
			report := func(b *testing.B, per int) {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(per), "ns/line")
				b.ReportMetric(0, "ns/op")
			}
			var sink uint32
			b.Run("read", func(b *testing.B) {
				for b.Loop() {
					var x uint32
					for _, i := range idx {
						x += lines[i].n
					}
					sink += x
				}
				report(b, touches)
			})
			b.Run("read-pairs", func(b *testing.B) {
				for b.Loop() {
					var x uint32
					for _, i := range idx {
						x += lines[lines[i].next].n
					}
					sink += x
				}
				report(b, 2*touches)
			})
			b.Run("increment", func(b *testing.B) {
				for b.Loop() {
					for _, i := range idx {
						lines[i].n++
					}
				}
				report(b, touches)
			})
			b.Run("chase", func(b *testing.B) {
				for b.Loop() {
					j := uint32(0)
					for range touches / 4 {
						j = lines[j].next
					}
					sink += j
				}
				report(b, touches/4)
			})
			lineSink = sink
		})
	}
}
