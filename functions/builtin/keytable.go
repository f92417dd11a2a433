package builtin

import (
	"unsafe"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/statestore/offheap"
)

// keyTable is the keys of one key group of a window or a join: an
// open-addressing table with linear probing, keyed by the key hash. Its
// slots are outside the Go heap once large (offheap.Arena). Each
// operator looks its keys up itself, comparing them as it keeps them.
//
// A slot holds a key's Ref (a window's record in its slab; a join's
// index in its keys) and, beside it, the high 32 bits of the key's
// multiplied hash (tagOf), its tag: the high bits of the tag are the
// key's home slot. So a lookup reads a key's record only where the tag
// matches: it passes other keys in the slot's cache line, and a new key
// is found absent, without a load from memory each; and a table grows,
// and a removal shifts keys back, without reading any record.
type keyTable struct {
	slots []keySlot // 0: free; a power of two long, or empty
	n     int
	shift uint8 // 32 - log2(len(slots))
}

// keySlot is tag<<32 | ref+1 of a key, or 0 for a free slot.
type keySlot uint64

func makeSlot(tag uint32, r offheap.Ref) keySlot {
	return keySlot(tag)<<32 | keySlot(r) + 1
}

func (s keySlot) tag() uint32      { return uint32(s >> 32) }
func (s keySlot) ref() offheap.Ref { return offheap.Ref(uint32(s) - 1) }

// tagOf returns the tag of a key of hash hash: the high 32 bits of a
// multiplicative hash. The key group is hash modulo the number of groups,
// so the table uses other bits of it than the low ones.
func tagOf(hash uint64) uint32 {
	return uint32((hash * 0x9e3779b97f4a7c15) >> 32)
}

// home is the slot where a key of tag tag is looked for first.
func (t *keyTable) home(tag uint32) int {
	return int(tag >> t.shift)
}

// insert adds the key of slot s, which the table does not hold, growing
// the table (in a) to keep it at most three quarters full.
func (t *keyTable) insert(a *offheap.Arena, s keySlot) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(a, max(8, 2*len(t.slots)))
	}
	t.place(s)
	t.n++
}

// reserve grows t so that it holds n keys without growing again.
//
// A restore calls it before a base's keys: they come in the order of the
// table they were captured from, by tag, and a table growing as they come
// would take the first of them, whose homes are all in its first part,
// at a load above one there, so that each insert probed the run of all
// before it (5M keys took 5 s to restore, 1M 0.34 s). At its final size
// the table spreads them as it will hold them.
func (t *keyTable) reserve(a *offheap.Arena, n int) {
	if n*4 <= len(t.slots)*3 {
		return
	}
	size := max(8, 1<<log2((n*4+2)/3))
	t.resize(a, size)
}

// resize moves t's keys into a table of size slots (a power of two).
// Taking them in slot order places them in order of their new homes
// too, so the new table is written from start to end.
func (t *keyTable) resize(a *offheap.Arena, size int) {
	old := t.slots
	t.slots = offheap.MakeFilled[keySlot](a, size)
	t.shift = uint8(32 - log2(size))
	for _, s := range old {
		if s != 0 {
			t.place(s)
		}
	}
	offheap.Free(a, old)
}

func (t *keyTable) place(s keySlot) {
	mask := len(t.slots) - 1
	i := t.home(s.tag())
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// remove removes the key of slot s, which the table holds. It shifts
// back the keys after it whose probe passed its slot, so no probe stops
// short.
func (t *keyTable) remove(s keySlot) {
	mask := len(t.slots) - 1
	i := t.home(s.tag())
	for t.slots[i] != s {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		// The key at j may move to i if its home is not in (i, j],
		// cyclically.
		h := t.home(t.slots[j].tag())
		if i <= j && (h <= i || h > j) || i > j && h <= i && h > j {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
	t.n--
}

// free frees the table's slots.
func (t *keyTable) free(a *offheap.Arena) {
	offheap.Free(a, t.slots)
	*t = keyTable{}
}

func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

// prefetchHomes asks for (offheap.Prefetch) the home slot of each of
// hashes in the table of its key group; groups are an operator's tables,
// by key group - kgStart, of maxPar key groups. A hash of a key group
// outside them is passed over (the operator refuses its row).
func prefetchHomes(groups []keyTable, hashes []uint64, maxPar, kgStart int) {
	for _, h := range hashes {
		g := arrowfmt.KeyGroup(h, maxPar) - kgStart
		if uint(g) >= uint(len(groups)) {
			continue
		}
		if t := &groups[g]; t.n > 0 {
			offheap.Prefetch(unsafe.Pointer(&t.slots[t.home(tagOf(h))]))
		}
	}
}

// probeTags appends to refs, for each of hashes whose table has one, the
// Ref of the first slot on from its home whose tag matches: the key its
// lookup will compare first, most likely its own. The home slots are
// best asked for first (prefetchHomes), so that the probes of a block of
// hashes wait for memory once.
func probeTags(groups []keyTable, hashes []uint64, maxPar, kgStart int, refs []offheap.Ref) []offheap.Ref {
	for _, h := range hashes {
		g := arrowfmt.KeyGroup(h, maxPar) - kgStart
		if uint(g) >= uint(len(groups)) {
			continue
		}
		t := &groups[g]
		if t.n == 0 {
			continue
		}
		tag := tagOf(h)
		mask := len(t.slots) - 1
		for i := t.home(tag); t.slots[i] != 0; i = (i + 1) & mask {
			if s := t.slots[i]; s.tag() == tag {
				refs = append(refs, s.ref())
				break
			}
		}
	}
	return refs
}
