package builtin

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
)

func TestWindowKeyRecordSize(t *testing.T) {
	if got := unsafe.Sizeof(windowKey{}); got != 64 {
		t.Fatalf("a key's record is %d bytes, want 64 (see window_keys.go)", got)
	}
}

// TestKeyTable adds and drops keys at random against a map, with hashes
// drawn from a small set so that keys share hashes and home slots, and
// probes cross the end of the table; some keys are longer than a record
// holds.
func TestKeyTable(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			w := &windowOperator{groups: make([]keyTable, 1)}
			w.keys.Init(&w.arena)
			defer w.arena.Close()
			want := map[string]*windowKey{}
			hashOf := func(k string) uint64 { // few distinct hashes
				var h uint64
				for _, c := range k {
					h = h*31 + uint64(c)
				}
				return h % 97 * 0x9e3779b97f4a7c15
			}
			for step := range 20_000 {
				k := fmt.Sprint(rng.IntN(3000))
				if rng.IntN(4) == 0 {
					k += "-a-key-longer-than-a-record-holds"
				}
				w.keyBuf = append(w.keyBuf[:0], k...)
				h := hashOf(k)
				got := w.lookup(0, h)
				if got != want[k] {
					t.Fatalf("step %d: lookup %q gave %p, want %p", step, k, got, want[k])
				}
				switch {
				case got == nil:
					want[k] = w.newKey(0, h, false)
				case rng.IntN(2) == 0:
					w.removeKey(got)
					delete(want, k)
				}
			}
			if w.groups[0].n != len(want) || w.keys.Len() != len(want) {
				t.Fatalf("the table holds %d keys in %d records, want %d", w.groups[0].n, w.keys.Len(), len(want))
			}
			for k, ks := range want {
				if w.keyOf(ks) != k {
					t.Fatalf("the record of %q holds %q", k, w.keyOf(ks))
				}
				w.keyBuf = append(w.keyBuf[:0], k...)
				if w.lookup(0, ks.hash) != ks {
					t.Fatalf("key %q is not found", k)
				}
			}
			n := 0
			w.eachKey(func(*windowKey) { n++ })
			if n != len(want) {
				t.Fatalf("eachKey gave %d keys, want %d", n, len(want))
			}
			long := 0
			for k := range want {
				if len(k) > keyInline {
					long++
				}
			}
			if long == 0 || len(w.longKeys) != long {
				t.Fatalf("%d long keys kept, want %d (and some)", len(w.longKeys), long)
			}
		})
	}
}
