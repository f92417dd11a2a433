package statestore

import (
	"errors"
	"fmt"
)

// A backend over a FileStore (NewStoredFiles) is checkpointed the way
// Flink checkpoints RocksDB: its tables as the store's own files, shared
// between checkpoints (an LSM's sstables never change, so a checkpoint
// uploads only the new ones), and its timers as rows. Its tables track
// no changes (no delta needs them), so their writes cost no memory
// until the barrier, and its snapshots' rows (Snapshot, BeginSnapshot)
// hold the timers only; the task captures the store beside them
// (StoreCapturer) and restores it before them.

// StoreFile is one file of a store captured as files.
type StoreFile struct {
	// Name is the file's name in the capture's directory.
	Name string
	// Size is its size in bytes.
	Size int64
	// Immutable is true for a file that the store names once and never
	// rewrites (an sstable): a file of this name in a later capture of
	// the store, or of a store opened from the capture, is the same.
	// The others (a database's MANIFEST) belong to their capture.
	Immutable bool
}

// FileStore is a Store that can be captured whole as files at a barrier,
// beside processing (statestore/pebblestate).
type FileStore interface {
	SnapshotStore
	// CaptureFiles starts capturing the store as it is now into
	// directory dir, which must not exist. One capture is in flight at a
	// time.
	CaptureFiles(dir string) (StoreFileCapture, error)
	// TableNames returns the names of the store's tables, sorted,
	// including those of the capture it was opened from.
	TableNames() []string
}

// StoreFileCapture is a capture of a FileStore in flight.
type StoreFileCapture interface {
	// Poll ends the capture if it can, waiting until it can if wait, and
	// reports whether it is done and how it ended. The store's goroutine
	// calls it, between its other calls into the store.
	Poll(wait bool) (done bool, err error)
	// Dir is the capture's directory.
	Dir() string
	// Files lists the capture's files once it is done, sorted by name.
	Files() []StoreFile
	// Release removes the capture's directory.
	Release() error
}

// StoreCapturer is a Snapshotter whose keyed tables are in a store that
// checkpoints capture as files: the rows it snapshots hold the rest (a
// backend's timers). At every barrier the task calls CaptureStore right
// after BeginSnapshot (or Snapshot), and uploads the capture's files
// with the rows; a restore calls RestoreStores with the stores' files
// before it restores rows.
type StoreCapturer interface {
	Snapshotter
	// CaptureStore starts the capture of the store for checkpoint id.
	CaptureStore(id int64) (StoreFileCapture, error)
	// StoreScratch is a directory where the task may make directories
	// of its own (downloaded stores), on the store's disk.
	StoreScratch() string
	// RestoreStores makes the tables what the captured stores hold in
	// the key groups the state owns. Each store held key groups
	// [KeyGroupStart, KeyGroupEnd) when captured; they do not overlap.
	// It is called once, before anything else changes the state. It
	// returns the index of the store whose files the state's store now
	// is, with those of other key groups excluded: a capture may list
	// its immutable files again, as it would its own. -1 for none.
	RestoreStores(stores []CapturedStore) (kept int, err error)
}

// CapturedStore is the directory of a store captured as files (a
// StoreFileCapture's, or its files downloaded) and the key groups it
// held.
type CapturedStore struct {
	Dir                        string
	KeyGroupStart, KeyGroupEnd int
}

// NewStoredFiles returns an empty backend owning key groups [start, end)
// whose tables live in s (which must be empty) and are checkpointed as
// its files (see above): its snapshots' rows hold its timers only, and
// CaptureStore captures its tables.
func NewStoredFiles(start, end int, s FileStore) *Memory {
	b := NewMemory(start, end)
	b.store, b.storeFiles = s, true
	b.adoptTables()
	return b
}

// CaptureStore starts capturing the backend's tables as its store's
// files into dir (see FileStore.CaptureFiles). The backend must have
// been made by NewStoredFiles.
func (b *Memory) CaptureStore(dir string) (StoreFileCapture, error) {
	fs, ok := b.store.(FileStore)
	if !ok || !b.storeFiles {
		return nil, errors.New("statestore: capture the store: the backend's tables are not captured as files")
	}
	return fs.CaptureFiles(dir)
}

// ReplaceStore makes s the backend's store: its tables are the backend's
// tables from now on (those opened already, and the others once opened).
// A restore calls it before anything is written; the caller owns both
// stores. The backend must have been made by NewStoredFiles.
func (b *Memory) ReplaceStore(s FileStore) error {
	if !b.storeFiles {
		return errors.New("statestore: replace the store: the backend's tables are not captured as files")
	}
	if b.capture != nil {
		return errors.New("statestore: replace the store: a snapshot is being captured")
	}
	for name, t := range b.tables {
		st, ok := t.(*storedTable)
		if !ok {
			return fmt.Errorf("statestore: replace the store: table %q is not a store's", name)
		}
		nt, err := s.Table(name)
		if err != nil {
			return fmt.Errorf("statestore: replace the store: table %q: %w", name, err)
		}
		st.t = nt
	}
	clear(b.pending)
	b.store = s
	b.adoptTables()
	return nil
}
