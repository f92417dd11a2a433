package statestore

import (
	"reflect"
	"runtime"
	"slices"

	"github.com/weirstream/weir/statestore/offheap"
)

// heapTable is the in-memory Table: it holds Go values per key group
// and (key, namespace). It tracks which entries changed since the last
// TakeDirty. Key groups outside the backend's range are a bug in the caller
// and panic.
//
// Its entries are cells behind an open-addressing index (cells.go).
// Change tracking costs no map of its own: each cell carries the epoch
// it was last marked dirty in, and a key group lists the cells marked in
// the current epoch, each once. Taking the dirty sets starts a new epoch.
// A deleted entry stays as a tombstone while a dirty set needs it.
type heapTable[V any] struct {
	name       string
	codec      Codec[V]
	start, end int
	groups     []group[V]
	// epoch is the current epoch: entries marked in it are in the
	// groups' dirty lists. Restored entries are in epoch 0, which is
	// never current.
	epoch uint32
	// capture is the snapshot being captured in steps, which this table
	// is the index-th table of, or nil.
	capture *memCapture
	index   int
	// mem holds the groups' indexes, and their cells if V holds no
	// pointers (cells.go). free unmaps it; so does cleanup, the
	// collector's, if the table becomes unreachable unfreed.
	mem     *offheap.Arena
	cleanup runtime.Cleanup
	// prefetched counts the cells prefetch asked for (TestPrefetch).
	prefetched int
}

var _ Table[int64] = (*heapTable[int64])(nil)

func newHeapTable[V any](name string, codec Codec[V], start, end int) *heapTable[V] {
	t := &heapTable[V]{name: name, codec: codec, start: start, end: end, groups: make([]group[V], end-start), epoch: 1, mem: new(offheap.Arena)}
	off := offheap.Allowed[cell[V]]()
	for i := range t.groups {
		t.groups[i].mem, t.groups[i].offCells = t.mem, off
	}
	// What the arena maps is reached only through the groups (every
	// method, and a dirty set, holds a group), so once their array is
	// unreachable nothing can read it. (Not the table: a method that
	// goes on with a group may no longer need the table.)
	t.cleanup = runtime.AddCleanup(&t.groups[0], func(a *offheap.Arena) { a.Close() }, t.mem)
	return t
}

// free unmaps what the table holds outside the heap: the table must not
// be used after.
func (t *heapTable[V]) free() {
	// The arena is not safe for concurrent use: the collector's
	// goroutine must not close it again.
	t.cleanup.Stop()
	t.groups = nil
	t.mem.Close()
}

// anyTable is a table of the in-memory backend seen without its value
// type, as snapshots see it.
type anyTable interface {
	// user returns the Table[V] OpenTable hands out.
	user() any
	valueType() reflect.Type
	takeDirty() []Scope
	// appendEncoded appends the encoding of an entry; ok is false if the
	// entry does not exist.
	appendEncoded(dst []byte, kg int, key, ns string) (out []byte, ok bool, err error)
	// putEncoded decodes b and stores it (restore).
	putEncoded(kg int, key, ns string, b []byte) error
	// free gives back what the table holds outside the Go heap; the
	// table must not be used after.
	free()
	snapTable
}

type entryKey struct{ key, ns string }

// mark marks cell i of g dirty, once per epoch. The dirty list grows
// outside the heap once large (4 bytes a key changed: 40 MB at 10M keys).
func (t *heapTable[V]) mark(g *group[V], i int) {
	if c := &g.cells[i]; c.epoch != t.epoch {
		c.epoch = t.epoch
		g.dirty = offheap.Append(g.mem, g.dirty, uint32(i))
	}
}

// Name implements Table.
func (t *heapTable[V]) Name() string { return t.name }

// Codec implements Table.
func (t *heapTable[V]) Codec() Codec[V] { return t.codec }

func (t *heapTable[V]) group(kg int) *group[V] {
	checkGroup(kg, t.start, t.end)
	return &t.groups[kg-t.start]
}

// Get returns the value at (kg, key, ns) and whether there is one. The value
// is the one stored, not a copy: change a mutable value only to Put it back.
func (t *heapTable[V]) Get(kg int, key, ns string) (V, bool) {
	g := t.group(kg)
	if i, _ := g.find(key, ns); i >= 0 && g.cells[i].state == cellLive {
		return g.cells[i].v, true
	}
	var zero V
	return zero, false
}

// Put stores v at (kg, key, ns) and marks the entry dirty.
func (t *heapTable[V]) Put(kg int, key, ns string, v V) {
	g := t.group(kg)
	if t.capture != nil {
		i, _ := g.find(key, ns)
		if i < 0 {
			// New since the barrier: absent at it, if the walk is yet
			// to reach its cell.
			i = g.set(key, ns, v)
			if cv := t.capture.wantsCopy(t.index, kg, g.key(i), i); cv != nil {
				t.capture.copyAbsent(cv, i)
			}
			t.mark(g, i)
			return
		}
		t.capture.copyEntry(t.index, kg, g.key(i), i)
	}
	t.mark(g, g.set(key, ns, v))
}

// Delete removes the entry at (kg, key, ns), marking it dirty if it existed.
func (t *heapTable[V]) Delete(kg int, key, ns string) {
	g := t.group(kg)
	i, _ := g.find(key, ns)
	if i < 0 || g.cells[i].state != cellLive {
		return
	}
	if t.capture != nil {
		// The arena's key: the caller's strings may be borrowed.
		t.capture.copyEntry(t.index, kg, g.key(i), i)
	}
	t.tombstone(g, i)
	t.mark(g, i)
}

// tombstone makes live cell i of g a tombstone.
func (t *heapTable[V]) tombstone(g *group[V], i int) {
	var zero V
	c := &g.cells[i]
	c.v, c.state = zero, cellAbsent
	g.live--
	g.dead++
}

// Range calls fn for every entry of key group kg, in no particular order,
// until fn returns false. fn may Delete the entry it is given.
func (t *heapTable[V]) Range(kg int, fn func(key, ns string, v V) bool) {
	g := t.group(kg)
	for i := 0; i < len(g.cells); i++ {
		if g.cells[i].state != cellLive {
			continue
		}
		k := g.key(i)
		if !fn(k.key, k.ns, g.cells[i].v) {
			return
		}
	}
}

// Len returns the number of entries in key group kg.
func (t *heapTable[V]) Len(kg int) int { return t.group(kg).live }

// TakeDirty returns the scopes written or deleted since the last call,
// sorted by key group, key and namespace, and clears the dirty set. An
// entry written then deleted is in it (as absent now).
func (t *heapTable[V]) TakeDirty() []Scope { return t.takeDirty() }

func (t *heapTable[V]) takeDirty() []Scope {
	var out []Scope
	for i := range t.groups {
		g := &t.groups[i]
		if len(g.dirty) == 0 {
			continue
		}
		first := len(out)
		for _, j := range g.dirty {
			k := g.key(int(j))
			out = append(out, Scope{KeyGroup: t.start + i, Key: k.key, Namespace: k.ns})
		}
		for _, j := range g.dirty {
			if g.cells[j].state == cellAbsent {
				g.drop(int(j)) // no dirty set holds it now
				g.dead--
			}
		}
		slices.SortFunc(out[first:], Scope.compare)
		g.dirty = g.dirty[:0]
	}
	t.epoch++
	return out
}

func (t *heapTable[V]) user() any { return t }

func (t *heapTable[V]) valueType() reflect.Type { return reflect.TypeFor[V]() }

func (t *heapTable[V]) appendEncoded(dst []byte, kg int, key, ns string) ([]byte, bool, error) {
	v, ok := t.Get(kg, key, ns)
	if !ok {
		return dst, false, nil
	}
	out, err := t.codec.Append(dst, v)
	return out, true, err
}

func (t *heapTable[V]) putEncoded(kg int, key, ns string, b []byte) error {
	v, err := t.codec.Decode(b)
	if err != nil {
		return err
	}
	t.restore(kg, key, ns, v)
	return nil
}

// restore stores a restored entry: it is in the snapshot already, so it
// is not marked dirty (an entry marked before keeps its mark).
func (t *heapTable[V]) restore(kg int, key, ns string, v V) {
	t.group(kg).set(key, ns, v)
}
