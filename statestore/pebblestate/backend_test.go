package pebblestate_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/pebblestate"
)

// filesBackend is a backend over a store of its own whose tables are
// checkpointed as the store's files (statestore.NewStoredFiles), with a
// table "t" opened.
type filesBackend struct {
	s   *pebblestate.Store
	b   *statestore.Memory
	tab statestore.Table[string]
}

func newFilesBackend(t *testing.T, start, end int) *filesBackend {
	t.Helper()
	s := open(t)
	b := statestore.NewStoredFiles(start, end, s)
	t.Cleanup(b.Close)
	tab, err := statestore.OpenTable[string](b, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &filesBackend{s: s, b: b, tab: tab}
}

// capture captures f's store as files, waiting for the capture to end.
func (f *filesBackend) capture(t *testing.T) statestore.CapturedStore {
	t.Helper()
	c, err := f.b.CaptureStore(filepath.Join(t.TempDir(), "capture"))
	if err != nil {
		t.Fatal(err)
	}
	if done, err := c.Poll(true); !done || err != nil {
		t.Fatalf("Poll(true) = %v, %v", done, err)
	}
	start, end := f.b.KeyGroups()
	return statestore.CapturedStore{Dir: c.Dir(), KeyGroupStart: start, KeyGroupEnd: end}
}

// restore makes a backend of key groups [start, end) from the captures,
// as a restoring process operator does: its table opened first, then
// the store restored (pebblestate.Restore) and put in place.
func restore(t *testing.T, start, end int, captures ...statestore.CapturedStore) *filesBackend {
	t.Helper()
	f := newFilesBackend(t, start, end)
	s, _, err := pebblestate.Restore(pebblestate.Options{Dir: t.TempDir(), Memory: pebblestate.MinMemory}, f.s, captures, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if s != f.s {
		t.Cleanup(func() { _ = s.Close() })
		if err := f.b.ReplaceStore(s); err != nil {
			t.Fatal(err)
		}
		f.s = s
	}
	return f
}

// TestBackendCapturedAsFiles checks a backend whose tables are
// checkpointed as its store's files: its tables track no changes and its
// rows hold the timers alone; a backend restored from a capture over its
// own key groups, or from two over others (a rescale), holds their
// entries of its key groups, in tables opened before the restore or
// after it; and a backend of rows over a store opened from a capture
// (what `weir state dump` and `export` read) snapshots its entries.
func TestBackendCapturedAsFiles(t *testing.T) {
	const groups = 8
	put := func(f *filesBackend, kg, i int) {
		f.tab.Put(kg, fmt.Sprint("key-", i), "", fmt.Sprint("value-", kg, "-", i))
	}
	want := func(t *testing.T, what string, f *filesBackend, start, end int) {
		t.Helper()
		for kg := range groups {
			if kg < start || kg >= end {
				// Not the backend's: not in its store either.
				if f.s == nil {
					continue
				}
				st, err := f.s.Table("t")
				if err != nil {
					t.Fatal(err)
				}
				st.Range(kg, func(key, _ string, _ []byte) bool {
					t.Fatalf("%s: key group %d, %s is in the store", what, kg, key)
					return false
				})
				continue
			}
			for i := range 50 {
				if v, ok := f.tab.Get(kg, fmt.Sprint("key-", i), ""); !ok || v != fmt.Sprint("value-", kg, "-", i) {
					t.Fatalf("%s: key group %d, key-%d = %q, %v", what, kg, i, v, ok)
				}
			}
		}
	}
	// Two subtasks' worth: key groups [0, 4) and [4, 8).
	lo, hi := newFilesBackend(t, 0, 4), newFilesBackend(t, 4, groups)
	for kg := range groups {
		f := lo
		if kg >= 4 {
			f = hi
		}
		for i := range 50 {
			put(f, kg, i)
		}
		f.b.Timers().Register(statestore.EventTime, statestore.Timer{Timestamp: int64(100 + kg), KeyGroup: kg, Key: "key-1"})
	}
	lo.tab.Delete(1, "key-49", "")
	put(lo, 1, 49) // deleted and put again
	if d := lo.b.TakeDirty(); len(d) != 0 {
		t.Errorf("a table captured as files tracks changes: %v", d)
	}
	recs, err := lo.b.Snapshot(memory.DefaultAllocator, true)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for _, rec := range recs {
		tables := rec.Column(1).(*array.String)
		for i := range int(rec.NumRows()) {
			if tables.Value(i) != statestore.EventTimersTable {
				t.Errorf("a snapshot's row of table %q: want the timers' rows alone", tables.Value(i))
			}
		}
		rows += rec.NumRows()
	}
	if rows != 4 {
		t.Errorf("the snapshot holds %d rows, want the 4 timers", rows)
	}
	capLo, capHi := lo.capture(t), hi.capture(t)

	// After a failure: the one capture over the same key groups.
	same := restore(t, 0, 4, capLo)
	for _, rec := range recs {
		if err := same.b.Restore(rec); err != nil {
			t.Fatal(err)
		}
	}
	want(t, "restored over the same key groups", same, 0, 4)
	if n := same.b.Timers().Len(statestore.EventTime); n != 4 {
		t.Errorf("restored %d timers, want 4", n)
	}
	// A rescale: two captures, one subtask over [2, 6).
	mid := restore(t, 2, 6, capLo, capHi)
	want(t, "restored over key groups [2, 6) from two captures", mid, 2, 6)

	// A table opened only after the restore holds its entries too.
	later, err := pebblestate.OpenFiles(pebblestate.Options{Dir: t.TempDir(), Memory: pebblestate.MinMemory}, capHi.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	b := statestore.NewStoredFiles(4, groups, later)
	defer b.Close()
	tab, err := statestore.OpenTable[string](b, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	want(t, "a table opened after the restore", &filesBackend{b: b, tab: tab}, 4, groups)

	// Rows of a store opened from a capture: every entry.
	rowsOf, err := pebblestate.OpenFiles(pebblestate.Options{Dir: t.TempDir(), Memory: pebblestate.MinMemory}, capLo.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rowsOf.Close()
	m := statestore.NewStored(0, 4, rowsOf)
	defer m.Close()
	recs, err = m.Snapshot(memory.DefaultAllocator, true)
	if err != nil {
		t.Fatal(err)
	}
	rows = 0
	for _, rec := range recs {
		rows += rec.NumRows()
		rec.Release()
	}
	if rows != 4*50 {
		t.Errorf("a backend of rows over the capture snapshots %d rows, want its 200 entries", rows)
	}
}
