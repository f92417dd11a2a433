// Package pebblestate is a statestore.Store on pebble, an LSM on local
// disk: keyed state larger than memory. A task's process operator opens
// one per subtask (a job spec's `state: {backend: pebble, memory: ...}`)
// and makes its backend with statestore.NewStoredFiles: recently used
// entries stay in pebble's block cache and memtables (bounded by Memory),
// the rest is on disk.
//
// Checkpoints take the store whole as its database's files at the
// barrier (CaptureFiles), without a stall, and upload the sstables the
// bucket does not have yet: they are immutable, so consecutive captures
// share most of them. A restarted task opens its store from the files
// (OpenFiles); a rescaled one opens the store it shares the most key
// groups with, excises the others, and ingests the rest of its key
// groups as sstables written from the other stores (Restore). A store is
// scratch space otherwise: it writes no
// WAL and syncs nothing, and Close deletes its directory. It can also be
// read as rows (statestore.NewStored, Snapshot), as `weir state dump`
// does. A table's values may be words that change without being read:
// Merge writes an operand that pebble folds into the value when it reads
// or compacts it (words.go; a window's accumulators).
//
// Keys are the table's id (a uvarint from 1, given in order of first use;
// id 0 is the table of the tables' ids by name), the key group (2 bytes,
// big-endian), the state key with 0x00 escaped as 0x00 0xff and ended by
// 0x00 0x01, then the namespace: a key group's entries are one contiguous
// range, sorted by key and namespace.
package pebblestate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirstream/weir/statestore"
)

// The store keeps recently used entries (hot keys) in a write-back cache
// of decoded bytes in front of pebble, bounded to a quarter of Memory:
// a Get or Put of a cached key touches no skiplist, and a key written
// many times while it is hot reaches pebble less often. Evicted dirty
// entries go to pebble in one batch; Range and Snapshot write the dirty
// entries first. At most maxDirty entries are dirty: beyond that the
// oldest writeBackBatch go to pebble (they stay hot), so that a snapshot,
// taken at a checkpoint's barrier, writes few.

// maxDirty bounds a store's dirty hot entries, and so what Snapshot
// writes to pebble at the barrier: about 2.5 µs an entry on this
// project's 2-vCPU machine, so ~40 ms (BenchmarkCapture).
var maxDirty = 16 << 10

// writeBackBatch is how many of the oldest dirty entries go to pebble
// once more than maxDirty are.
const writeBackBatch = 4 << 10

// While a file capture's flush runs, nothing is written to pebble, so
// the hot entries may end it far over their bounds (CaptureFiles). Written
// back and evicted at once when it ends, they stalled the task: 243 ms
// at 1M keys, once merges made the window fast enough to change 100K
// entries during a flush. Far over a bound, the store comes back under
// it gradually instead: catchUpBatch entries for every catchUpEvery
// changes, so each change waits for a small batch and the excess still
// shrinks.
const (
	catchUpBatch = 4 << 10
	catchUpEvery = catchUpBatch / 2
)

// Options configure a Store.
type Options struct {
	// Dir is where the store makes its own directory (removed by Close).
	// Default: the system's temporary directory.
	Dir string
	// Memory bounds what the store keeps in memory, in bytes: a quarter
	// for its cache of hot entries, and three quarters for pebble's
	// cache, which holds its memtables (a quarter each, at most three
	// queued) and its blocks in what the memtables leave.
	// Default DefaultMemory; at least MinMemory.
	Memory int64
}

// DefaultMemory is the memory of a store whose Options give none.
const DefaultMemory = 64 << 20

// MinMemory is the least memory a store takes.
const MinMemory = 4 << 20

// Store is a statestore.Store in a pebble database of its own. It is not
// safe for concurrent use (one task goroutine uses it).
type Store struct {
	db     *pebble.DB
	opts   *pebble.Options
	gate   *gate // compactions: shut until the store is ready
	cache  interface{ Unref() }
	dir    string
	tables map[string]*table
	closed bool

	hot      int64 // bytes of the tables' hot entries
	hotLimit int64
	dirty    int // the tables' dirty hot entries
	// Changes since the last eviction and write-back far over their
	// bounds (catchUpEvery).
	evictPace, writePace int
	// largestStep is the most entries an eviction or write-back has
	// written to pebble at once.
	largestStep int

	snaps map[*snapshot]struct{} // open snapshots (Close closes them)

	// meta is the table of the tables' ids (tables[""]), by name, so that
	// a database's files say which table each key is in; nextID is the
	// next table's.
	meta   *table
	nextID uint64
	// files is the file capture whose flush is in flight: until it ends,
	// nothing is written to pebble (see CaptureFiles).
	files *FileCapture
}

var _ statestore.Store = (*Store)(nil)

// Open makes an empty store in a new directory under o.Dir.
func Open(o Options) (*Store, error) {
	s, err := open(o, "")
	if err != nil {
		return nil, err
	}
	s.gate.Open()
	return s, nil
}

// open makes a store in a new directory under o.Dir: empty, or with the
// files of a database's checkpoint in directory from (OpenFiles). Its
// compactions wait for s.gate.Open.
func open(o Options, from string) (*Store, error) {
	if o.Memory == 0 {
		o.Memory = DefaultMemory
	}
	if o.Memory < MinMemory {
		return nil, fmt.Errorf("pebblestate: memory %d bytes is below the least, %d", o.Memory, MinMemory)
	}
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("pebblestate: %w", err)
	}
	dir, err := os.MkdirTemp(o.Dir, "pebble-")
	if err != nil {
		return nil, fmt.Errorf("pebblestate: %w", err)
	}
	if from != "" {
		if err := linkFiles(from, dir); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	// Pebble reserves each memtable's size in its cache (Cache.Reserve),
	// so the cache is sized for the memtables and the blocks together. A
	// cache of a quarter, as it was, held no block once one memtable of a
	// quarter was reserved: every Get read its blocks from the files.
	hotLimit := o.Memory / 4
	cache := pebble.NewCache(o.Memory - hotLimit)
	opts := options(cache)
	opts.MemTableSize = uint64(o.Memory / 4)
	// A checkpoint flushes the memtable (CaptureFiles): with writes
	// stopped at two memtables, one that filled between checkpoints and
	// still flushed stalled that flush, and with it the barrier, by
	// 130-220 ms (BenchmarkProcessState/pebble-64MiB).
	opts.MemTableStopWritesThreshold = 3
	// A file capture copies the MANIFEST (the sstables are linked): a
	// small one, rolled over often, keeps that copy short.
	opts.MaxManifestFileSize = maxManifest
	opts.ErrorIfNotExists = from != ""
	// A rescale excises key groups (Restore), which takes virtual
	// sstables. An older store's files are moved up to it on open.
	opts.FormatMajorVersion = pebble.FormatVirtualSSTables
	// Shut until the caller has the store as it wants it (see gate).
	gate := newGate()
	opts.Experimental.CompactionScheduler = gate
	db, err := pebble.Open(dir, opts)
	if err != nil {
		gate.Unregister()
		cache.Unref()
		_ = os.RemoveAll(dir)
		if from != "" {
			return nil, fmt.Errorf("pebblestate: open the files in %s: %w", from, err)
		}
		return nil, fmt.Errorf("pebblestate: open %s: %w", dir, err)
	}
	s := &Store{db: db, opts: opts, gate: gate, cache: cache, dir: dir, tables: map[string]*table{}, hotLimit: hotLimit, snaps: map[*snapshot]struct{}{}}
	s.meta = &table{s: s, name: "", id: []byte{metaID}, hot: map[string]*hotEntry{}}
	s.tables[""] = s.meta
	s.nextID = metaID + 1
	if from != "" {
		if err := s.loadTables(); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("pebblestate: open the checkpoint in %s: %w", from, err)
		}
	}
	return s, nil
}

// options are the options of every database of a store, with block cache
// cache.
func options(cache *pebble.Cache) *pebble.Options {
	opts := &pebble.Options{
		Cache:      cache,
		DisableWAL: true,
		FS:         noSyncFS{vfs.Default},
		Logger:     quiet{},
		Merger:     storeMerger,
	}
	// Point reads are what state does: a Bloom filter per table lets a Get
	// skip the files without its key, and uncompressed blocks cost no
	// decompression on every block-cache miss (the files are scratch).
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	return opts
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// DiskBytes returns the bytes the store's files take on disk.
func (s *Store) DiskBytes() int64 {
	m := s.db.Metrics()
	return int64(m.DiskSpaceUsage())
}

// Table implements statestore.Store.
func (s *Store) Table(name string) (statestore.StoredTable, error) {
	if s.closed {
		return nil, errors.New("pebblestate: table of a closed store")
	}
	if name == "" {
		return nil, errors.New("pebblestate: a table needs a name")
	}
	if t := s.tables[name]; t != nil {
		return t, nil
	}
	t := s.addTable(name, binary.AppendUvarint(nil, s.nextID))
	s.meta.remember(s.meta.entryKey(0, name, ""), t.id, true, true, false)
	return t, nil
}

// addTable makes table name with id id.
func (s *Store) addTable(name string, id []byte) *table {
	t := &table{s: s, name: name, id: id, hot: map[string]*hotEntry{}}
	s.tables[name] = t
	if n, _ := binary.Uvarint(id); n >= s.nextID {
		s.nextID = n + 1
	}
	return t
}

// TableNames returns the names of the store's tables, sorted: those made
// with Table, and a checkpoint's (OpenFiles).
func (s *Store) TableNames() []string {
	names := make([]string, 0, len(s.tables))
	for name := range s.tables {
		if name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Close closes the database and deletes its directory; safe to call
// twice.
func (s *Store) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if c := s.files; c != nil {
		<-c.flushed // pebble's Close fails while a flush is in flight
		c.err, c.done, s.files = errors.New("pebblestate: the store was closed during the capture"), true, nil
	}
	for sn := range s.snaps {
		sn.Close()
	}
	err := s.db.Close()
	s.cache.Unref()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// table is one table of a Store.
type table struct {
	s    *Store
	name string
	id   []byte
	key  []byte // scratch for the key being built
	val  []byte // Get's result
	mval []byte // Merge's scratch
	// hot are the recently used entries by pebble key: their value (or
	// that there is none), and whether pebble lacks the change yet; dirty
	// counts those that are. dirtyKeys has their keys, oldest first, and
	// keys no longer dirty (evicted, or dirtied twice): see markDirty.
	hot       map[string]*hotEntry
	dirty     int
	dirtyKeys []string
}

// A hot entry's value is v if present; if operand too, v is a merge
// operand (Merge) that pebble lacks, to merge onto what pebble has, and
// the entry is dirty.
type hotEntry struct {
	v       []byte
	present bool
	dirty   bool
	operand bool
}

// hotOverhead is what an entry costs beyond its key and value bytes (the
// map slot, the struct, the string header).
const hotOverhead = 96

func hotSize(k string, e *hotEntry) int64 { return int64(len(k) + cap(e.v) + hotOverhead) }

// remember puts (k, v) among the hot entries, making room first: v is
// the value if present, and a merge operand to merge onto pebble's if
// operand too (then dirty).
func (t *table) remember(k []byte, v []byte, present, dirty, operand bool) {
	if e := t.hot[string(k)]; e != nil {
		t.setValue(string(k), e, v)
		e.present, e.operand = present, operand
		if dirty && !e.dirty {
			t.markDirty(string(k), e)
		}
		return
	}
	if t.s.hot >= t.s.hotLimit && t.s.files == nil {
		t.s.makeRoom()
	}
	ks := string(k)
	e := &hotEntry{v: bytes.Clone(v), present: present, operand: operand}
	t.hot[ks] = e
	t.s.hot += hotSize(ks, e)
	if dirty {
		t.markDirty(ks, e)
	}
}

// markDirty makes the clean hot entry e at k dirty, and writes the
// store's oldest dirty entries to pebble when too many are.
func (t *table) markDirty(k string, e *hotEntry) {
	e.dirty = true
	t.dirty++
	t.s.dirty++
	// Keys of entries evicted while dirty stay in dirtyKeys: drop them
	// once they are half of it.
	if len(t.dirtyKeys) >= 1024 && len(t.dirtyKeys) >= 2*t.dirty {
		live := t.dirtyKeys[:0]
		for _, dk := range t.dirtyKeys {
			if d := t.hot[dk]; d != nil && d.dirty {
				live = append(live, dk)
			}
		}
		clear(t.dirtyKeys[len(live):])
		t.dirtyKeys = live
	}
	t.dirtyKeys = append(t.dirtyKeys, k)
	s := t.s
	if s.dirty <= maxDirty || s.files != nil {
		return
	}
	if s.dirty > maxDirty+writeBackBatch { // far over: catch up
		if s.writePace++; s.writePace < catchUpEvery {
			return
		}
		s.writePace = 0
	}
	s.writeBack(writeBackBatch)
}

// makeRoom evicts hot entries, which are over their bound: a quarter of
// them, or far over it, catchUpBatch for every catchUpEvery calls.
func (s *Store) makeRoom() {
	n := 0
	for _, t := range s.tables {
		n += len(t.hot)
	}
	if s.hot >= s.hotLimit+s.hotLimit/8 {
		if s.evictPace++; s.evictPace < catchUpEvery {
			return
		}
		s.evictPace = 0
		s.evict(min(n/4, catchUpBatch), n)
		return
	}
	s.evict(n/4, n)
}

// writeBack writes about n of the oldest dirty hot entries to pebble, in
// one batch; they stay hot.
func (s *Store) writeBack(n int) {
	b := s.db.NewBatch()
	for _, t := range s.tables {
		n -= t.stageDirty(b, n)
		if n <= 0 {
			break
		}
	}
	s.largestStep = max(s.largestStep, int(b.Count()))
	if err := b.Commit(pebble.NoSync); err != nil {
		panic(fmt.Sprintf("pebblestate: write back: %v", err))
	}
	_ = b.Close()
}

// stageDirty stages up to n of the table's oldest dirty entries into b,
// which makes them clean, and returns how many it staged.
func (t *table) stageDirty(b *pebble.Batch, n int) int {
	staged, i := 0, 0
	for ; i < len(t.dirtyKeys) && staged < n; i++ {
		k := t.dirtyKeys[i]
		if e := t.hot[k]; e != nil && e.dirty {
			t.stage(b, k, e)
			e.dirty = false
			staged++
			if e.operand {
				// What the entry's value is now is pebble's to say.
				t.s.hot -= hotSize(k, e)
				delete(t.hot, k)
			}
		}
	}
	clear(t.dirtyKeys[:i])
	if t.dirtyKeys = t.dirtyKeys[i:]; len(t.dirtyKeys) == 0 {
		t.dirtyKeys = nil
	}
	t.dirty -= staged
	t.s.dirty -= staged
	return staged
}

// evict drops about n of the tables' total hot entries, each table's in
// proportion (in map order, which is random), writing the dirty ones to
// pebble in one batch.
func (s *Store) evict(n, total int) {
	if total == 0 {
		return
	}
	b := s.db.NewBatch()
	for _, t := range s.tables {
		target := len(t.hot) - int(int64(len(t.hot))*int64(n)/int64(total))
		for k, e := range t.hot {
			if len(t.hot) <= target {
				break
			}
			if e.dirty {
				t.stage(b, k, e)
				t.dirty--
				s.dirty--
			}
			s.hot -= hotSize(k, e)
			delete(t.hot, k)
		}
	}
	s.largestStep = max(s.largestStep, int(b.Count()))
	if err := b.Commit(pebble.NoSync); err != nil {
		panic(fmt.Sprintf("pebblestate: evict: %v", err))
	}
	_ = b.Close()
}

// flush writes every dirty hot entry of the table to pebble; they stay
// hot. It is free when none is dirty.
func (t *table) flush() {
	if t.dirty == 0 {
		return
	}
	t.s.settle()
	b := t.s.db.NewBatch()
	t.stageDirty(b, t.dirty)
	if err := b.Commit(pebble.NoSync); err != nil {
		panic(fmt.Sprintf("pebblestate: table %q: write its hot entries: %v", t.name, err))
	}
	_ = b.Close()
}

func (t *table) stage(b *pebble.Batch, k string, e *hotEntry) {
	var err error
	switch {
	case e.operand:
		err = b.Merge([]byte(k), e.v, nil)
	case e.present:
		err = b.Set([]byte(k), e.v, nil)
	default:
		err = b.Delete([]byte(k), nil)
	}
	if err != nil {
		panic(fmt.Sprintf("pebblestate: table %q: stage a hot entry: %v", t.name, err))
	}
}

// MergeTable is a table that takes merge operands of words (see
// AppendOperand): every table of a Store is one.
type MergeTable interface {
	statestore.StoredTable
	Merge(kg int, key, ns string, op []byte)
}

var _ MergeTable = (*table)(nil)

// appendPrefix appends the key prefix of key group kg of the table of id
// id to dst.
func appendPrefix(dst, id []byte, kg int) []byte {
	if kg < 0 || kg > math.MaxUint16 {
		panic(fmt.Sprintf("pebblestate: key group %d out of range", kg))
	}
	dst = append(dst, id...)
	return binary.BigEndian.AppendUint16(dst, uint16(kg))
}

// groupBounds returns the bounds of key group kg's range in the table of
// id id: its prefix, and the next key group's (the last key group ends
// the id's range).
func groupBounds(id []byte, kg int) (lo, hi []byte) {
	lo = appendPrefix(nil, id, kg)
	if kg < math.MaxUint16 {
		return lo, appendPrefix(nil, id, kg+1)
	}
	return lo, append(bytes.Clone(id), 0xff, 0xff, 0xff)
}

// entryKey builds the key of (kg, key, ns) in t.key.
func (t *table) entryKey(kg int, key, ns string) []byte {
	t.key = appendEntryKey(t.key[:0], t.id, kg, key, ns)
	return t.key
}

// appendEntryKey appends the key of (kg, key, ns) in the table of id id.
func appendEntryKey(dst, id []byte, kg int, key, ns string) []byte {
	k := appendPrefix(dst, id, kg)
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			k = append(k, 0, 0xff)
		} else {
			k = append(k, key[i])
		}
	}
	k = append(k, 0, 1)
	return append(k, ns...)
}

// splitKey parses what follows a key group's prefix: the state key and
// the namespace.
func splitKey(rest []byte) (key, ns string, ok bool) {
	var b []byte
	for i := 0; i < len(rest); i++ {
		if rest[i] != 0 {
			continue
		}
		if i+1 >= len(rest) {
			return "", "", false
		}
		switch rest[i+1] {
		case 0xff:
			b = append(b, rest[:i]...)
			b = append(b, 0)
			rest = rest[i+2:]
			i = -1
		case 1:
			b = append(b, rest[:i]...)
			return string(b), string(rest[i+2:]), true
		default:
			return "", "", false
		}
	}
	return "", "", false
}

func (t *table) fail(op string, kg int, key string, err error) {
	panic(fmt.Sprintf("pebblestate: table %q, key group %d, key %q: %s: %v", t.name, kg, key, op, err))
}

// Get implements statestore.StoredTable: a hot entry, else pebble's
// (which becomes hot, absent or not).
func (t *table) Get(kg int, key, ns string) ([]byte, bool) {
	k := t.entryKey(kg, key, ns)
	if e := t.hot[string(k)]; e != nil {
		if e.operand {
			t.resolve(kg, key, k, e)
		}
		t.val = append(t.val[:0], e.v...)
		return t.val, e.present
	}
	v, closer, err := t.s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		t.remember(k, nil, false, false, false)
		return nil, false
	}
	if err != nil {
		t.fail("get", kg, key, err)
	}
	t.val = append(t.val[:0], v...)
	if err := closer.Close(); err != nil {
		t.fail("get", kg, key, err)
	}
	t.remember(k, t.val, true, false, false)
	return t.val, true
}

// resolve merges the operand of hot entry e, at k, onto pebble's value:
// the entry then has the value it stands for.
func (t *table) resolve(kg int, key string, k []byte, e *hotEntry) {
	v, closer, err := t.s.db.Get(k)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		t.mval, err = baseOf(t.mval[:0], e.v)
	case err != nil:
		t.fail("get", kg, key, err)
	default:
		t.mval, err = mergeWords(t.mval[:0], v, e.v)
		err = errors.Join(err, closer.Close())
	}
	if err != nil {
		t.fail("merge", kg, key, err)
	}
	t.setValue(string(k), e, t.mval)
	e.operand = false
}

// setValue sets the value of hot entry e at k to a copy of v.
func (t *table) setValue(k string, e *hotEntry, v []byte) {
	t.s.hot -= hotSize(k, e)
	e.v = append(e.v[:0], v...)
	t.s.hot += hotSize(k, e)
}

// Merge implements MergeTable: operand op (AppendOperand) is merged onto
// the entry's value without reading it. A hot entry takes it at once;
// else it becomes a hot entry, dirty, that goes to pebble as a merge
// (or merges onto pebble's value if it is read first).
func (t *table) Merge(kg int, key, ns string, op []byte) {
	k := t.entryKey(kg, key, ns)
	e := t.hot[string(k)]
	if e == nil {
		t.remember(k, op, true, true, true)
		return
	}
	var err error
	if e.present {
		t.mval, err = mergeWords(t.mval[:0], e.v, op)
	} else {
		t.mval, err = baseOf(t.mval[:0], op)
	}
	if err != nil {
		t.fail("merge", kg, key, err)
	}
	t.setValue(string(k), e, t.mval)
	e.present = true
	if !e.dirty {
		t.markDirty(string(k), e)
	}
}

// Put implements statestore.StoredTable: the entry becomes hot and dirty.
func (t *table) Put(kg int, key, ns string, v []byte) {
	t.remember(t.entryKey(kg, key, ns), v, true, true, false)
}

// Delete implements statestore.StoredTable: the entry's absence becomes
// hot and dirty.
func (t *table) Delete(kg int, key, ns string) {
	t.remember(t.entryKey(kg, key, ns), nil, false, true, false)
}

// Range implements statestore.StoredTable: an iterator over the key
// group's range, which sees the table as it was when Range began (fn
// may delete what it is given).
func (t *table) Range(kg int, fn func(key, ns string, v []byte) bool) {
	t.flush()
	it := newGroupIter(t.s.db, t.name, t.id, kg)
	defer it.Close()
	for {
		key, ns, v, ok := it.Next()
		if !ok || !fn(key, ns, v) {
			return
		}
	}
}

// reader is what a groupIter reads: the database or a snapshot of it.
type reader interface {
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}

// groupIter is an iterator over one key group of a table
// (statestore.StoredIter).
type groupIter struct {
	it      *pebble.Iterator
	name    string
	id      []byte
	kg      int
	lo      int // the length of the key group's prefix
	started bool
	onClose func()
	key     []byte // SeekGE's scratch
}

func newGroupIter(r reader, name string, id []byte, kg int) *groupIter {
	lo, hi := groupBounds(id, kg)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		panic(fmt.Sprintf("pebblestate: table %q, key group %d: iterate: %v", name, kg, err))
	}
	return &groupIter{it: it, name: name, id: id, kg: kg, lo: len(lo)}
}

// Next implements statestore.StoredIter.
func (g *groupIter) Next() (key, ns string, v []byte, ok bool) {
	if g.it == nil {
		return "", "", nil, false
	}
	if g.started {
		ok = g.it.Next()
	} else {
		ok, g.started = g.it.First(), true
	}
	return g.entry(ok)
}

// SeekGE implements statestore.StoredIter. pebble notices that seeks
// increase and steps forward from where it is instead of seeking anew.
func (g *groupIter) SeekGE(key, ns string) (string, string, []byte, bool) {
	if g.it == nil {
		return "", "", nil, false
	}
	g.key = appendEntryKey(g.key[:0], g.id, g.kg, key, ns)
	g.started = true
	return g.entry(g.it.SeekGE(g.key))
}

// entry returns the entry the iterator is at, if ok.
func (g *groupIter) entry(ok bool) (key, ns string, v []byte, _ bool) {
	if !ok {
		if err := g.it.Error(); err != nil {
			g.fail("", err)
		}
		return "", "", nil, false
	}
	key, ns, good := splitKey(g.it.Key()[g.lo:])
	if !good {
		g.fail(fmt.Sprintf("%x", g.it.Key()), errors.New("malformed key"))
	}
	v, err := g.it.ValueAndErr()
	if err != nil {
		g.fail(key, err)
	}
	return key, ns, v, true
}

func (g *groupIter) fail(key string, err error) {
	panic(fmt.Sprintf("pebblestate: table %q, key group %d, key %q: range: %v", g.name, g.kg, key, err))
}

// Close implements statestore.StoredIter; safe to call twice.
func (g *groupIter) Close() {
	if g.it == nil {
		return
	}
	err := g.it.Close()
	g.it = nil
	if g.onClose != nil {
		g.onClose()
	}
	if err != nil {
		g.fail("", err)
	}
}

var _ statestore.SnapshotStore = (*Store)(nil)

// Snapshot implements statestore.SnapshotStore: it writes the tables'
// dirty hot entries to pebble (at most maxDirty) and takes a pebble
// snapshot, which later writes do not change.
func (s *Store) Snapshot() (statestore.StoreSnapshot, error) {
	if s.closed {
		return nil, errors.New("pebblestate: snapshot of a closed store")
	}
	s.settle()
	ids := make(map[string][]byte, len(s.tables))
	for name, t := range s.tables {
		t.flush()
		ids[name] = t.id
	}
	sn := &snapshot{s: s, snap: s.db.NewSnapshot(), ids: ids, iters: map[*groupIter]struct{}{}}
	s.snaps[sn] = struct{}{}
	return sn, nil
}

// snapshot is a Store's snapshot (statestore.StoreSnapshot).
type snapshot struct {
	s     *Store
	snap  *pebble.Snapshot
	ids   map[string][]byte // the tables at the snapshot
	iters map[*groupIter]struct{}
}

// Iter implements statestore.StoreSnapshot.
func (sn *snapshot) Iter(table string, kg int) statestore.StoredIter {
	id, ok := sn.ids[table]
	if !ok || sn.snap == nil {
		return &groupIter{}
	}
	g := newGroupIter(sn.snap, table, id, kg)
	sn.iters[g] = struct{}{}
	g.onClose = func() { delete(sn.iters, g) }
	return g
}

// Close implements statestore.StoreSnapshot: it closes the snapshot's
// iterators too. Safe to call twice.
func (sn *snapshot) Close() {
	if sn.snap == nil {
		return
	}
	for g := range sn.iters {
		g.Close()
	}
	err := sn.snap.Close()
	sn.snap = nil
	delete(sn.s.snaps, sn)
	if err != nil {
		panic(fmt.Sprintf("pebblestate: close a snapshot: %v", err))
	}
}

// quiet drops pebble's informational logs; errors still fail the calls
// that meet them.
type quiet struct{}

func (quiet) Infof(string, ...any)         {}
func (quiet) Errorf(string, ...any)        {}
func (quiet) Fatalf(f string, args ...any) { panic(fmt.Sprintf("pebble: "+f, args...)) }
