package statestore

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Memory is the in-memory Backend, like Flink's heap backend: it keeps Go
// values, not bytes, so a Get or Put costs a map operation and no
// serialisation; codecs are used by snapshots only. It holds its tables by
// name and its timers, for the key groups [start, end) it owns. It is not
// safe for concurrent use.
//
// Made by NewStored, its tables are a Store's instead (encoded values
// outside the heap, on local disk); the rest (timers, change tracking,
// snapshots) is the same.
type Memory struct {
	start, end int
	tables     map[string]anyTable
	timers     *Timers
	// pending holds the tables restored that no OpenTable has registered
	// yet: for the heap, their rows encoded (*encodedTable; OpenTable
	// decodes them); on a store, its tables (*storedTable). Full
	// snapshots carry them on meanwhile (see Restore).
	pending map[string]snapTable
	store   Store // nil: the heap
	// storeFiles: the store's tables are checkpointed as its files
	// (NewStoredFiles), not as rows, and track no changes.
	storeFiles bool
	// batchBytes caps the variable-length bytes of one snapshot batch
	// (tests lower it).
	batchBytes int
	// capture is the snapshot being captured in steps, or nil.
	capture *memCapture
	// hashes is Prefetch's room for its keys' hashes.
	hashes []uint64
}

var _ Backend = (*Memory)(nil)

// NewMemory returns an empty in-memory backend owning key groups [start,
// end). It panics if the range is empty or negative: that is a bug in the
// caller.
func NewMemory(start, end int) *Memory {
	if start < 0 || end <= start {
		panic(fmt.Sprintf("statestore: invalid key group range [%d,%d)", start, end))
	}
	return &Memory{
		start:      start,
		end:        end,
		tables:     map[string]anyTable{},
		timers:     newTimers(start, end),
		pending:    map[string]snapTable{},
		batchBytes: snapshotBatchBytes,
	}
}

// Close implements Backend: it unmaps what the heap tables hold outside
// the Go heap. A Store's tables are its owner's to close.
func (b *Memory) Close() {
	for _, t := range b.tables {
		t.free()
	}
	clear(b.tables)
}

// Prefetch asks for the cache lines where the heap tables would look up
// each key of keys (in key group groups[i], namespace ""), before a
// function's Gets and Puts look them up one row at a time: the requests
// for one key do not wait for another's, so they overlap, where each
// lookup in turn waits for memory (at millions of keys, the index slot
// and the cell are both misses). A batch's keys are known before its
// rows are processed. A store's tables (pebble) are not touched.
//
// Only a table of prefetchMinBytes or more is prefetched: a smaller one
// is mostly in the cache already, and hashing each key once more cost
// 4-5% of a job at 100K keys.
func (b *Memory) Prefetch(groups []int, keys []string) {
	hashed := false
	for _, t := range b.tables {
		h, ok := t.(prefetchTable)
		if !ok || h.footprint() < prefetchMinBytes {
			continue
		}
		if !hashed {
			b.hashes = b.hashes[:0]
			for _, k := range keys {
				b.hashes = append(b.hashes, hashKey(k, ""))
			}
			hashed = true
		}
		h.prefetch(groups, b.hashes)
	}
}

// prefetchMinBytes is the smallest table Prefetch reads ahead in: 8 times
// the 2 MiB of L2 cache a core has on the machines weir is measured on.
var prefetchMinBytes = 16 << 20

// prefetchTable is a heap table (Memory.Prefetch).
type prefetchTable interface {
	// footprint returns the bytes of the table's index and cells.
	footprint() int
	prefetch(groups []int, hashes []uint64)
}

// KeyGroups implements Backend.
func (b *Memory) KeyGroups() (start, end int) { return b.start, b.end }

// Timers implements Backend.
func (b *Memory) Timers() TimerService { return b.timers }

// Schema implements Snapshotter: SnapshotSchema.
func (b *Memory) Schema() *arrow.Schema { return snapshotSchema }

// TableNames implements Backend.
func (b *Memory) TableNames() []string {
	names := make([]string, 0, len(b.tables))
	for n := range b.tables {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// TakeDirty implements Backend.
func (b *Memory) TakeDirty() []Dirty {
	var out []Dirty
	for _, name := range b.TableNames() {
		if s := b.tables[name].takeDirty(); len(s) > 0 {
			out = append(out, Dirty{Table: name, Scopes: s})
		}
	}
	return out
}

// OpenTable implements Backend. The table keeps the codec of its first
// registration. If Restore has kept rows of name (it was restored before
// it was opened), registering it decodes them with the type's codec.
func (b *Memory) OpenTable(name string, vt ValueType) (any, error) {
	if err := checkTableName(name); err != nil {
		return nil, err
	}
	if t, ok := b.tables[name]; ok {
		if t.valueType() == vt.Type() {
			return t.user(), nil
		}
		return nil, fmt.Errorf("%w: %q holds %s, not %s", ErrTypeMismatch, name, t.valueType(), vt.Type())
	}
	if b.store != nil {
		st, _ := b.pending[name].(*storedTable) // restored rows are in the store already
		if st == nil {
			t, err := b.store.Table(name)
			if err != nil {
				return nil, fmt.Errorf("statestore: open table %q: %w", name, err)
			}
			st = b.newStoredTable(name, t)
		}
		st.open(vt)
		delete(b.pending, name)
		b.tables[name] = st
		return st.user(), nil
	}
	t := vt.newHeapTable(name, b.start, b.end)
	if p, ok := b.pending[name].(*encodedTable); ok {
		if err := p.decodeInto(t); err != nil {
			return nil, err
		}
		delete(b.pending, name)
	}
	b.tables[name] = t
	return t, nil
}

// checkTableName refuses an empty name and the names reserved for timers.
func checkTableName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidName)
	}
	if strings.HasPrefix(name, reservedPrefix) {
		return fmt.Errorf("%w: %q: names starting with %q are reserved for timers", ErrInvalidName, name, reservedPrefix)
	}
	return nil
}

func checkGroup(kg, start, end int) {
	if kg < start || kg >= end {
		panic(fmt.Sprintf("statestore: key group %d outside the backend's range [%d,%d)", kg, start, end))
	}
}
