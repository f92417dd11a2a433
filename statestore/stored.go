package statestore

import (
	"reflect"
	"slices"
	"strings"
)

// Store keeps a backend's tables as encoded values outside the Go heap:
// on local disk in an LSM (statestore/pebblestate), for state larger
// than memory. NewStored makes a Backend over one; the backend keeps
// what changed since the last snapshot and the timers in memory and
// snapshots and restores through the same rows as Memory, so checkpoints,
// rescaling and `weir state dump` treat both alike.
type Store interface {
	// Table returns the table called name, empty if it is new; the same
	// one for the same name. It fails only if the store does.
	Table(name string) (StoredTable, error)
}

// StoredTable is one table of a Store: encoded values by key group and
// (key, namespace). Its methods cannot return errors: a store that fails
// (a full disk) panics, which fails the task, and the job restarts from
// its latest checkpoint. Used by one goroutine.
type StoredTable interface {
	// Get returns the value at (kg, key, ns); it is only read until the
	// next call on the table.
	Get(kg int, key, ns string) (v []byte, ok bool)
	// Put stores v at (kg, key, ns); the table does not keep v.
	Put(kg int, key, ns string, v []byte)
	// Delete removes the entry at (kg, key, ns), if any.
	Delete(kg int, key, ns string)
	// Range calls fn for every entry of key group kg, sorted by key and
	// namespace, until fn returns false; key, ns and v are only read
	// until fn returns. fn may Delete the entry it is given.
	Range(kg int, fn func(key, ns string, v []byte) bool)
}

// SnapshotStore is a Store that can take a snapshot of its tables: a
// backend over one captures its snapshots beside processing, reading
// them from the store's snapshot taken at the barrier.
type SnapshotStore interface {
	Store
	// Snapshot returns a read-only view of every table as it is now,
	// which later writes do not change. It fails only if the store does.
	Snapshot() (StoreSnapshot, error)
}

// StoreSnapshot is a Store's tables as they were when it was taken. Like
// StoredTable's, its methods panic if the store fails. Used by one
// goroutine, the one that writes the store.
type StoreSnapshot interface {
	// Iter returns the entries of key group kg of the table called
	// table, sorted by key and namespace.
	Iter(table string, kg int) StoredIter
	// Close releases the snapshot and closes its iterators; safe to
	// call twice.
	Close()
}

// StoredIter walks the entries of one key group of a StoreSnapshot. An
// open iterator holds what the store has in memory, so a capture opens
// one for each write of its rows.
type StoredIter interface {
	// Next returns the next entry, or ok false at the end; v is only
	// read until the next call.
	Next() (key, ns string, v []byte, ok bool)
	// SeekGE returns the first entry at or after (key, ns), and goes on
	// from it: increasing seeks are about as cheap as Next.
	SeekGE(key, ns string) (k, n string, v []byte, ok bool)
	// Close releases the iterator; safe to call twice.
	Close()
}

// NewStored returns a backend owning key groups [start, end) whose tables
// live in s: empty, or a FileStore opened from a capture, whose tables
// it then holds as restored. Its timers are in memory. It panics if the
// range is empty or negative.
func NewStored(start, end int, s Store) *Memory {
	b := NewMemory(start, end)
	b.store = s
	b.adoptTables()
	return b
}

// adoptTables makes the tables the store holds already (a FileStore
// opened from a capture) the backend's restored tables, until opened.
func (b *Memory) adoptTables() {
	fs, ok := b.store.(FileStore)
	if !ok {
		return
	}
	for _, name := range fs.TableNames() {
		if _, open := b.tables[name]; open {
			continue
		}
		if t, err := fs.Table(name); err == nil {
			b.pending[name] = b.newStoredTable(name, t)
		}
	}
}

// storeSnapshots reports whether the backend's store takes snapshots.
func (b *Memory) storeSnapshots() bool {
	_, ok := b.store.(SnapshotStore)
	return ok
}

// storedTable is a Store's table as the backend uses it: it marks what
// is written dirty, per key group, for the next delta, and gives the
// user a Table[V] over itself (ValueType.Encoded).
type storedTable struct {
	name       string
	t          StoredTable
	start, end int
	vt         ValueType // nil while restored and not opened
	table      any       // vt.Encoded(this)
	dirty      []map[entryKey]struct{}
	// stepped: the store takes snapshots (SnapshotStore), so a capture
	// in steps reads from snap, the one taken at its barrier.
	stepped bool
	snap    StoreSnapshot
	// untracked: the table tracks no changes, since checkpoints capture
	// its store as files (NewStoredFiles).
	untracked bool
}

var (
	_ EncodedTable = (*storedTable)(nil)
	_ anyTable     = (*storedTable)(nil)
)

// newStoredTable makes the backend's table of its store's table t.
func (b *Memory) newStoredTable(name string, t StoredTable) *storedTable {
	return &storedTable{name: name, t: t, start: b.start, end: b.end, dirty: make([]map[entryKey]struct{}, b.end-b.start), stepped: b.storeSnapshots(), untracked: b.storeFiles}
}

// open gives the table its value type (OpenTable).
func (s *storedTable) open(vt ValueType) {
	s.vt = vt
	s.table = vt.Encoded(s)
}

func (s *storedTable) markDirty(kg int, key, ns string) {
	checkGroup(kg, s.start, s.end)
	if s.untracked {
		return
	}
	d := &s.dirty[kg-s.start]
	if *d == nil {
		*d = map[entryKey]struct{}{}
	}
	(*d)[entryKey{key, ns}] = struct{}{}
}

// EncodedTable.

// free does nothing: the store's owner closes it.
func (s *storedTable) free() {}

func (s *storedTable) Name() string { return s.name }

func (s *storedTable) Get(kg int, key, ns string) ([]byte, bool) {
	checkGroup(kg, s.start, s.end)
	return s.t.Get(kg, key, ns)
}

func (s *storedTable) Put(kg int, key, ns string, v []byte) {
	s.markDirty(kg, key, ns)
	s.t.Put(kg, key, ns, v)
}

// Delete removes the entry, marking it dirty if it existed.
func (s *storedTable) Delete(kg int, key, ns string) {
	if s.untracked {
		checkGroup(kg, s.start, s.end)
		s.t.Delete(kg, key, ns)
		return
	}
	if _, ok := s.Get(kg, key, ns); !ok {
		return
	}
	s.markDirty(kg, strings.Clone(key), strings.Clone(ns)) // the dirty set keeps them
	s.t.Delete(kg, key, ns)
}

func (s *storedTable) Range(kg int, fn func(key, ns string, v []byte) bool) {
	checkGroup(kg, s.start, s.end)
	s.t.Range(kg, fn)
}

// Len counts the entries of key group kg, reading them.
func (s *storedTable) Len(kg int) int {
	n := 0
	s.Range(kg, func(string, string, []byte) bool { n++; return true })
	return n
}

func (s *storedTable) TakeDirty() []Scope { return s.takeDirty() }

// anyTable.

func (s *storedTable) user() any { return s.table }

func (s *storedTable) valueType() reflect.Type {
	if s.vt == nil {
		return nil
	}
	return s.vt.Type()
}

func (s *storedTable) takeDirty() []Scope {
	var out []Scope
	for i, d := range s.dirty {
		first := len(out)
		for k := range d {
			out = append(out, Scope{KeyGroup: s.start + i, Key: k.key, Namespace: k.ns})
		}
		slices.SortFunc(out[first:], Scope.compare)
		s.dirty[i] = nil
	}
	return out
}

func (s *storedTable) appendEncoded(dst []byte, kg int, key, ns string) ([]byte, bool, error) {
	v, ok := s.Get(kg, key, ns)
	if !ok {
		return dst, false, nil
	}
	return append(dst, v...), true, nil
}

func (s *storedTable) putEncoded(kg int, key, ns string, b []byte) error {
	checkGroup(kg, s.start, s.end)
	s.t.Put(kg, key, ns, b) // restored: not dirty
	return nil
}

// snapTable.

// segment reads the store's snapshot taken at the barrier when the
// capture is in steps (hooked), else the store as it is: the capture then
// runs to the end at the barrier. Either way v has no copies.
func (s *storedTable) segment(name string, kg int, full bool, v *groupView, keys []entryKey) segment {
	if !full {
		if v.dirty != nil {
			keys = v.dirty.appendTo(keys)
		}
		snap := s.snap
		if snap == nil {
			return newKeySegment(name, kg, keys, s.appendEncoded)
		}
		// The keys are sorted: seeking them in order reads the snapshot's
		// blocks once each, where a Get per key read them again and
		// again.
		var it StoredIter
		seg := newKeySegment(name, kg, keys, func(dst []byte, kg int, key, ns string) ([]byte, bool, error) {
			if it == nil {
				it = snap.Iter(name, kg)
			}
			k, n, val, ok := it.SeekGE(key, ns)
			if !ok || k != key || n != ns {
				return dst, false, nil
			}
			return append(dst, val...), true, nil
		})
		seg.after = func() {
			if it != nil {
				it.Close()
				it = nil
			}
		}
		return seg
	}
	// A base reads the store in its order (sorted by key and namespace).
	if s.snap != nil {
		return &iterSegment{name: name, kg: kg, snap: s.snap}
	}
	return &wholeSegment{fn: func(w *snapWriter) error {
		var err error
		s.t.Range(kg, func(key, ns string, val []byte) bool {
			err = w.entry(kg, name, key, ns, val, true)
			return err == nil
		})
		return err
	}}
}

// iterSegment writes the rows of a key group from a store's snapshot, n
// at a time, each time through a new iterator that seeks past the last
// row written.
type iterSegment struct {
	name string
	kg   int
	snap StoreSnapshot
	last entryKey // the last row written
	any  bool
	done bool
}

func (s *iterSegment) write(w *snapWriter, n int) (bool, error) {
	it := s.snap.Iter(s.name, s.kg)
	defer it.Close()
	var (
		key, ns string
		v       []byte
		ok      bool
	)
	if !s.any {
		key, ns, v, ok = it.Next()
	} else if key, ns, v, ok = it.SeekGE(s.last.key, s.last.ns); ok && key == s.last.key && ns == s.last.ns {
		key, ns, v, ok = it.Next()
	}
	for ; ok; key, ns, v, ok = it.Next() {
		if err := w.entry(s.kg, s.name, key, ns, v, true); err != nil {
			return false, err
		}
		s.last, s.any = entryKey{key, ns}, true
		if n--; n == 0 {
			return false, nil
		}
	}
	s.done = true
	return true, nil
}

func (s *iterSegment) written(k entryKey, _ int) bool {
	return s.done || s.any && compareEntryKeys(k, s.last) <= 0
}

func (s *iterSegment) release() []entryKey { return nil }

func (s *storedTable) takeDirtyGroups() []dirtySet {
	out := make([]dirtySet, len(s.dirty))
	for i, d := range s.dirty {
		if d != nil {
			out[i] = keySet(d)
		}
	}
	s.dirty = make([]map[entryKey]struct{}, s.end-s.start)
	return out
}

func (s *storedTable) restoreDirty(kg int, d dirtySet) {
	if d == nil {
		return
	}
	for k := range d.(keySet) {
		s.markDirty(kg, k.key, k.ns)
	}
}

// copyOnWrite: a capture in steps copies nothing of a store's tables; it
// reads the store's snapshot, if the store takes them. Copying an entry
// before it changes, instead, read its old value from the store and held
// it in memory until the capture ended: checkpoints of a 1M-key state on
// pebble took 30-48 s instead of 4.3 s and the process's memory doubled
// (BenchmarkProcessState).
func (s *storedTable) copyOnWrite() bool { return s.stepped }

// hook gives the table the capture's store snapshot (nil: none).
func (s *storedTable) hook(c *memCapture, _ int) {
	s.snap = nil
	if c != nil {
		s.snap = c.snap
	}
}

// rows is what a delta holds; a full snapshot would have to read the
// table to know, so it reserves nothing for it.
func (s *storedTable) rows(full bool) int {
	if full {
		return 0
	}
	n := 0
	for _, d := range s.dirty {
		n += len(d)
	}
	return n
}

func (s *storedTable) restoreRow(kg int, key, ns string, value []byte, deleted bool) error {
	if deleted {
		s.t.Delete(kg, key, ns)
		return nil
	}
	s.t.Put(kg, key, ns, value)
	return nil
}
