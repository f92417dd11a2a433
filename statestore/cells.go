package statestore

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"unsafe"

	"github.com/weirstream/weir/statestore/offheap"
)

// A heap table's entries of one key group (group): cells in a slice,
// found through an open-addressing index of their hashes, with the keys'
// bytes in an arena.
//
// A Go map of (key, namespace) strings to values cost a heap table three
// cache misses per lookup at a million keys (the map's control word, its
// slot, the key's bytes) and held a pointer per string for the garbage
// collector to scan. Here a lookup reads one index slot (a 32-bit hash
// tag beside the cell's position) and then the cell, which holds the
// key's first 8 bytes and both lengths: a key of up to 8 bytes without a
// namespace (an integer key) is compared without reading the arena. The
// cells and the arena hold no pointers unless V does.
//
// The index, and the cells when V holds no pointers, are outside the Go
// heap once large (statestore/offheap: the table's arena), so that the
// collector does not let them double and a growing slice of cells is
// remapped rather than copied. The arena of keys stays on the heap: the
// strings handed out point into it, and the collector keeps an old
// arena while they do.
//
// Strings handed out (key) point into the arena, which is only ever
// appended to: a compaction copies the live keys into a new arena, so a
// string handed out before stays what it was.

// keySeed seeds the hashes of the process's heap tables.
var keySeed = maphash.MakeSeed()

// Cell states.
const (
	cellFree    uint8 = iota // unused, on the free list
	cellLive                 // an entry
	cellAbsent               // a tombstone: deleted, kept for a dirty set
	cellRetired              // a tombstone out of the index, its key kept for a capture's dirty set (group.retire)
)

// cell is an entry of a heap table.
type cell[V any] struct {
	v V
	// prefix is the key's first 8 bytes (little endian, zero padded).
	prefix uint64
	// The key's bytes then the namespace's are at off in the arena.
	off         uint64
	klen, nslen uint32
	// epoch is the table's epoch when the entry was last marked dirty.
	epoch uint32
	state uint8
}

// Index slots: 0 is empty, slotGone a slot whose cell was dropped (a
// probe goes on past it), else the hash's high 32 bits and the cell's
// position + 1.
const slotGone = 1 << 32

// group is one key group's part of a table.
type group[V any] struct {
	// mem holds the index, and the cells if offCells (V holds no
	// pointers).
	mem      *offheap.Arena
	offCells bool
	cells    []cell[V]
	index    []uint64 // a power of two long, or nil
	// used counts the index slots not empty (cells and slotGone).
	used  int
	free  []uint32 // free cells
	arena []byte
	// garbage counts the arena bytes of dropped cells.
	garbage int
	// live and dead count the entries and the tombstones.
	live, dead int
	// dirty lists the cells marked in the table's current epoch.
	dirty []uint32
	// retired lists the cells retired while a capture holds its dirty
	// set; they are freed when it ends (release).
	retired []uint32
}

func hashKey(key, ns string) uint64 {
	h := maphash.String(keySeed, key)
	if ns != "" {
		h ^= bits.RotateLeft64(maphash.String(keySeed, ns), 31) * 0x9e3779b97f4a7c15
	}
	return h
}

func keyPrefix(s string) uint64 {
	if len(s) >= 8 {
		return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s), 8))
	}
	var b [8]byte
	copy(b[:], s)
	return binary.LittleEndian.Uint64(b[:])
}

// find returns the position of the cell of (key, ns), live or a
// tombstone, or -1, and the key's hash.
func (g *group[V]) find(key, ns string) (int, uint64) {
	h := hashKey(key, ns)
	if g.index == nil {
		return -1, h
	}
	p := keyPrefix(key)
	tag := h >> 32
	mask := uint64(len(g.index) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := g.index[i]
		if s == 0 {
			return -1, h
		}
		if s>>32 != tag || uint32(s) == 0 {
			continue
		}
		c := &g.cells[uint32(s)-1]
		if c.prefix != p || int(c.klen) != len(key) || int(c.nslen) != len(ns) {
			continue
		}
		if (len(key) <= 8 && len(ns) == 0) || g.equal(c, key, ns) {
			return int(uint32(s) - 1), h
		}
	}
}

func (g *group[V]) equal(c *cell[V], key, ns string) bool {
	b := g.arena[c.off : c.off+uint64(c.klen)+uint64(c.nslen)]
	return string(b[:c.klen]) == key && string(b[c.klen:]) == ns
}

// key returns the key of cell i, pointing into the arena.
func (g *group[V]) key(i int) entryKey {
	c := &g.cells[i]
	return entryKey{g.str(c.off, c.klen), g.str(c.off+uint64(c.klen), c.nslen)}
}

func (g *group[V]) str(off uint64, n uint32) string {
	if n == 0 {
		return ""
	}
	return unsafe.String(&g.arena[off], n)
}

// set stores v in the cell of (key, ns), live now, made if there is
// none, and returns its position.
func (g *group[V]) set(key, ns string, v V) int {
	i, h := g.find(key, ns)
	switch {
	case i < 0:
		i = g.add(h, key, ns)
		g.live++
	case g.cells[i].state == cellAbsent:
		g.dead--
		g.live++
	}
	c := &g.cells[i]
	c.v, c.state = v, cellLive
	return i
}

// add makes a cell for (key, ns), which has none, of hash h (find's),
// copying the strings into the arena, and returns its position. Its
// state and value are the caller's to set; its epoch is 0.
func (g *group[V]) add(h uint64, key, ns string) int {
	g.room()
	var i int
	if n := len(g.free); n > 0 {
		i = int(g.free[n-1])
		g.free = g.free[:n-1]
	} else {
		if g.offCells {
			g.cells = offheap.Append(g.mem, g.cells, cell[V]{})
		} else {
			g.cells = append(g.cells, cell[V]{})
		}
		i = len(g.cells) - 1
	}
	off := uint64(len(g.arena))
	g.arena = append(append(g.arena, key...), ns...)
	g.cells[i] = cell[V]{prefix: keyPrefix(key), off: off, klen: uint32(len(key)), nslen: uint32(len(ns))}
	g.place(h, i)
	return i
}

// room makes sure the index has room for one more cell.
func (g *group[V]) room() {
	if (g.used+1)*4 > len(g.index)*3 {
		g.rebuild(len(g.cells) - len(g.free) + 1)
	}
}

// place puts cell i of hash h in the first empty or dropped slot of its
// probe.
func (g *group[V]) place(h uint64, i int) {
	mask := uint64(len(g.index) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		switch g.index[j] {
		case 0:
			g.used++
			fallthrough
		case slotGone:
			g.index[j] = h>>32<<32 | uint64(i+1)
			return
		}
	}
}

// rebuild makes an index for n cells at most half full, without the
// dropped slots.
func (g *group[V]) rebuild(n int) {
	size := 8
	for size < 2*n {
		size *= 2
	}
	offheap.Free(g.mem, g.index)
	g.index = offheap.MakeFilled[uint64](g.mem, size)
	g.used = 0
	for i := range g.cells {
		if st := g.cells[i].state; st == cellLive || st == cellAbsent {
			k := g.key(i)
			g.place(hashKey(k.key, k.ns), i)
		}
	}
}

// unindex takes cell i out of the index.
func (g *group[V]) unindex(i int) {
	k := g.key(i)
	h := hashKey(k.key, k.ns)
	mask := uint64(len(g.index) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		if uint32(g.index[j]) == uint32(i+1) {
			g.index[j] = slotGone
			return
		}
	}
}

// retire takes cell i out of the index but keeps it, key and all, until
// release: a capture's dirty set names it by position, and giving the
// set back (restoreDirty) reads its key.
func (g *group[V]) retire(i int) {
	g.unindex(i)
	var zero V
	c := &g.cells[i]
	c.v, c.state = zero, cellRetired
	g.retired = append(g.retired, uint32(i))
}

// release frees the retired cells that were not given back.
func (g *group[V]) release() {
	for _, i := range g.retired {
		if g.cells[i].state == cellRetired {
			g.free1(int(i))
		}
	}
	g.retired = g.retired[:0]
}

// drop removes cell i from the index and frees it; the caller keeps the
// counts.
func (g *group[V]) drop(i int) {
	g.unindex(i)
	g.free1(i)
}

// free1 frees cell i, which is out of the index.
func (g *group[V]) free1(i int) {
	c := &g.cells[i]
	g.garbage += int(c.klen) + int(c.nslen)
	*c = cell[V]{}
	g.free = append(g.free, uint32(i))
	if g.garbage > 4096 && g.garbage*2 > len(g.arena) {
		g.compact()
	}
}

// compact copies the keys of the cells in use into a new arena.
func (g *group[V]) compact() {
	arena := make([]byte, 0, len(g.arena)-g.garbage)
	for i := range g.cells {
		c := &g.cells[i]
		if c.state == cellFree {
			continue
		}
		off := uint64(len(arena))
		arena = append(arena, g.arena[c.off:c.off+uint64(c.klen)+uint64(c.nslen)]...)
		c.off = off
	}
	g.arena, g.garbage = arena, 0
}

// footprint returns the bytes of the table's indexes and cells.
func (t *heapTable[V]) footprint() int {
	n := 0
	for i := range t.groups {
		g := &t.groups[i]
		n += len(g.index)*8 + len(g.cells)*int(unsafe.Sizeof(cell[V]{}))
	}
	return n
}

// prefetch asks for (offheap.Prefetch) the index slot and then the cell
// where find would first look for each key of hash hashes[i] in key group
// groups[i] (Memory.Prefetch): first every slot, then every cell, each
// pass requests that wait for nothing, all in flight at once. (Loads, as
// it made before, overlapped only as far as the core's reorder buffer
// reached.)
func (t *heapTable[V]) prefetch(groups []int, hashes []uint64) {
	for i, kg := range groups {
		if kg >= t.start && kg < t.end {
			if g := &t.groups[kg-t.start]; g.index != nil {
				offheap.Prefetch(unsafe.Pointer(&g.index[hashes[i]&uint64(len(g.index)-1)]))
			}
		}
	}
	for i, kg := range groups {
		if kg < t.start || kg >= t.end {
			continue
		}
		g := &t.groups[kg-t.start]
		if g.index == nil {
			continue
		}
		if s := g.index[hashes[i]&uint64(len(g.index)-1)]; s>>32 == hashes[i]>>32 && uint32(s) != 0 {
			offheap.Prefetch(unsafe.Pointer(&g.cells[uint32(s)-1]))
			t.prefetched++
		}
	}
}
