package builtin

import (
	"unsafe"

	"github.com/weirstream/weir/statestore/offheap"
)

// How a window operator keeps its keys.
//
// A key's state is a windowKey of 64 bytes with no pointer in it: its
// encoding (up to keyInline bytes) and its window (when it has one) are
// inside it. The records live in a slab outside the Go heap
// (statestore/offheap), indexed per key group by an open-addressing table
// of their slab Refs and hash tags (keyTable), also outside the heap once
// it is large; so are the timers. A keyed count then costs about 64 bytes
// for the record, 11 to 16 for its slot in the table, 24 for its timer
// and 8 for its accumulator, and the garbage collector neither scans it
// nor lets it double. The lists of keys a checkpoint keeps (changes, dead,
// a capture's walk) hold Refs, not pointers, for the same reason.
//
// The rarer cases spill to the heap: a key whose encoding is longer than
// keyInline (longKeys), and a key with more than one window (sliding
// windows, sessions, a tumbling window while the one before waits for
// the watermark or for allowed lateness), whose windows are in spill.
//
// A record is freed when its key is dropped, unless a change list or a
// capture in flight may still hold it (windowOperator.dead): a delta
// writes a clear row for a key dropped since the previous snapshot, and
// reads its encoding then.

// keyInline is how many bytes of a key's encoding its record holds.
const keyInline = 19

// windowKey is the state of one key. Its typed key values are not kept:
// they are decoded from the encoding when a result or a snapshot row is
// written (arrowfmt.AppendKeyValues).
type windowKey struct {
	tag uint32      // the key's hash tag (tagOf)
	ref offheap.Ref // the record's own Ref
	// win holds the key's window when nwin is 1; with manyWins,
	// win[0].slot is the index of its windows in windowOperator.spill.
	// Windows are sorted by start. Session windows are disjoint and do not touch, so their ends
	// are sorted too. A key whose state is dropped has none.
	win [1]windowState
	// changed is the epoch of the key's latest change (see
	// windowOperator.snaps), 0 for none since it was created or
	// restored: the key is in the change list of that epoch.
	changed uint32
	// captured is the sequence number of the last capture that holds
	// the key's state or needs none of it (the key was created after its
	// barrier); see windowCapture.
	captured uint32
	group    uint16 // key group (at most 32768 of them)
	// fresh: the key was created in the epoch changed names, so no
	// snapshot before has it and a delta need not clear it once it is
	// dropped.
	fresh  bool
	nwin   uint8 // windows in win (0 or 1), or manyWins
	keyLen uint8 // bytes of key used, or longKey
	key    [keyInline]byte
}

const (
	manyWins = 2   // nwin: the windows are in windowOperator.spill
	longKey  = 255 // keyLen: the encoding is in windowOperator.longKeys
)

// keyOf returns the encoding of ks. The string may alias the record: it
// is for comparing and decoding, valid until the key is freed.
func (w *windowOperator) keyOf(ks *windowKey) string {
	if ks.keyLen == longKey {
		return w.longKeys[ks]
	}
	return unsafe.String(&ks.key[0], int(ks.keyLen))
}

// setKey sets the encoding of ks, a new key.
func (w *windowOperator) setKey(ks *windowKey, key []byte) {
	if len(key) <= keyInline {
		ks.keyLen = uint8(len(key))
		copy(ks.key[:], key)
		return
	}
	if w.longKeys == nil {
		w.longKeys = map[*windowKey]string{}
	}
	ks.keyLen = longKey
	w.longKeys[ks] = string(key)
}

// winsOf returns the windows of ks. Changing a window through the slice
// changes the key's; adding or removing one takes setWins.
func (w *windowOperator) winsOf(ks *windowKey) []windowState {
	if ks.nwin == manyWins {
		return w.spill[ks.win[0].slot]
	}
	return ks.win[:ks.nwin]
}

// setWins makes wins the windows of ks. wins may alias what winsOf
// returned.
func (w *windowOperator) setWins(ks *windowKey, wins []windowState) {
	if len(wins) <= 1 {
		if ks.nwin == manyWins {
			w.unspill(ks)
		}
		copy(ks.win[:], wins)
		ks.nwin = uint8(len(wins))
		return
	}
	if ks.nwin == manyWins {
		w.spill[ks.win[0].slot] = wins
		return
	}
	var i int32
	if k := len(w.spillFree); k > 0 {
		i, w.spillFree = w.spillFree[k-1], w.spillFree[:k-1]
	} else {
		i = int32(len(w.spill))
		w.spill = append(w.spill, nil)
	}
	w.spill[i] = wins
	ks.win[0], ks.nwin = windowState{slot: i}, manyWins
}

// unspill frees the spilled windows of ks.
func (w *windowOperator) unspill(ks *windowKey) {
	i := ks.win[0].slot
	w.spill[i] = nil
	w.spillFree = append(w.spillFree, i)
	ks.win[0], ks.nwin = windowState{}, 0
}

// freeKey gives the record of ks back to the slab.
func (w *windowOperator) freeKey(ks *windowKey) {
	if ks.keyLen == longKey {
		delete(w.longKeys, ks)
	}
	if ks.nwin == manyWins {
		w.unspill(ks)
	}
	w.keys.Free(ks.ref)
}

// freeDead frees the records of dead, keys dropped that no change list
// or capture holds any more.
func (w *windowOperator) freeDead(dead []offheap.Ref) {
	for _, r := range dead {
		w.freeKey(w.keys.At(r))
	}
}

// keyTable is the keys of one key group: an open-addressing table with
// linear probing, keyed by the key hash.
//
// A slot holds a key's Ref in the slab and, beside it, the high 32 bits
// of the key's multiplied hash (tagOf), its tag: the high bits of the
// tag are the key's home slot. So a lookup reads a key's record only
// where the tag matches: it passes other keys in the slot's cache line,
// and a new key is found absent, without a load from memory each; and a
// table grows, and a removal shifts keys back, without reading any
// record.
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

// lookup returns the key of key group kgStart+g whose hash is hash and
// whose encoding w.keyBuf holds, or nil.
func (w *windowOperator) lookup(g int, hash uint64) *windowKey {
	t := &w.groups[g]
	if t.n == 0 {
		return nil
	}
	tag := tagOf(hash)
	mask := len(t.slots) - 1
	for i := t.home(tag); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return nil
		}
		if s.tag() != tag {
			continue
		}
		if ks := w.keys.At(s.ref()); w.keyOf(ks) == string(w.keyBuf) {
			return ks
		}
	}
}

// insert adds ks, which the table does not hold, growing it to keep it
// at most three quarters full.
func (w *windowOperator) insert(t *keyTable, ks *windowKey) {
	if (t.n+1)*4 > len(t.slots)*3 {
		w.resize(t, max(8, 2*len(t.slots)))
	}
	t.place(makeSlot(ks.tag, ks.ref))
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
func (w *windowOperator) reserve(t *keyTable, n int) {
	if n*4 <= len(t.slots)*3 {
		return
	}
	size := max(8, 1<<log2((n*4+2)/3))
	w.resize(t, size)
}

// resize moves t's keys into a table of size slots (a power of two).
// Taking them in slot order places them in order of their new homes
// too, so the new table is written from start to end.
func (w *windowOperator) resize(t *keyTable, size int) {
	old := t.slots
	t.slots = offheap.Make[keySlot](&w.arena, size)
	t.shift = uint8(32 - log2(size))
	for _, s := range old {
		if s != 0 {
			t.place(s)
		}
	}
	offheap.Free(&w.arena, old)
}

func (t *keyTable) place(s keySlot) {
	mask := len(t.slots) - 1
	i := t.home(s.tag())
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// remove removes ks, which the table holds. It shifts back the keys
// after it whose probe passed its slot, so no probe stops short.
func (t *keyTable) remove(ks *windowKey) {
	mask := len(t.slots) - 1
	i := t.home(ks.tag)
	for t.slots[i] != makeSlot(ks.tag, ks.ref) {
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
