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
// nor lets it double. The lists of keys a checkpoint keeps (changes, a
// capture's walk) hold Refs, not pointers, for the same reason.
//
// The rarer cases spill to the heap: a key whose encoding is longer than
// keyInline (longKeys), and a key with more than one window (sliding
// windows, sessions, a tumbling window while the one before waits for
// the watermark or for allowed lateness), whose windows are in spill.
//
// A record is freed when its key is dropped, unless a change list holds
// it (windowOperator.removeKey): a delta writes a clear row for a key
// dropped since the previous snapshot, and reads its encoding then, so
// the capture that takes the list frees the record once it has written
// the row.

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
	w.keys.FreeIn(w.keyLane(ks), ks.ref)
}

// droppedIn reports whether ks is the record of a key dropped in epoch
// e (see removeKey).
func droppedIn(ks *windowKey, e uint32) bool { return ks.nwin == 0 && ks.changed == e }

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
