package pebblestate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirstream/weir/statestore"
)

var (
	_ statestore.FileStore        = (*Store)(nil)
	_ statestore.StoreFileCapture = (*FileCapture)(nil)
)

// A file capture takes the store as it is at a barrier in the form
// pebble keeps it, its database's files, the way Flink's RocksDB backend
// checkpoints: the sstables are immutable and named by number, so a
// capture after a few changes shares most of them with the one before,
// and only the new ones need uploading.
//
// The barrier's part (CaptureFiles) writes the dirty hot entries to
// pebble (at most maxDirty) and starts a flush of the memtable, which
// pebble runs on its own goroutine. Until the flush ends nothing more is
// written to pebble: changes stay in the hot entries, dirty, and neither
// eviction nor write-back runs (a Range or Snapshot meanwhile waits for
// the flush instead). So when it ends, pebble's sstables hold exactly
// the state at the barrier; the capture then takes them (pebble's
// Checkpoint: hard links to the sstables, copies of the small MANIFEST
// and OPTIONS) and writing resumes. The task goes on processing while
// the flush runs: the hot entries may outgrow their quarter of Memory by
// what the task changes in that time.

// maxManifest bounds the MANIFEST file, which each capture copies.
const maxManifest = 1 << 20

// metaID is the id of the table of the tables' ids.
const metaID = 0

// File is one file of a captured database. Immutable ones are sstables
// and blob files: named by a number pebble never gives twice in one
// database, and never rewritten, so a file of this name in two captures
// of a database, or of the database opened from one (OpenFiles), is the
// same file. The others (MANIFEST, OPTIONS, markers) belong to their
// capture.
type File = statestore.StoreFile

// FileCapture is a capture of a store's database files (CaptureFiles).
type FileCapture struct {
	s       *Store
	dir     string
	flushed <-chan struct{}
	done    bool
	err     error
	files   []File
}

// CaptureFiles starts capturing the store as it is now into directory
// dir, which must not exist: it writes the dirty hot entries to pebble
// and starts the flush of its memtable. The capture ends in Poll. One
// capture is in flight at a time.
func (s *Store) CaptureFiles(dir string) (statestore.StoreFileCapture, error) {
	if s.closed {
		return nil, errors.New("pebblestate: file capture of a closed store")
	}
	if s.files != nil {
		return nil, errors.New("pebblestate: a file capture is in flight")
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("pebblestate: file capture into %s: it exists (or cannot be checked: %v)", dir, err)
	}
	for _, t := range s.tables {
		t.flush()
	}
	flushed, err := s.db.AsyncFlush()
	if err != nil {
		return nil, fmt.Errorf("pebblestate: file capture: flush: %w", err)
	}
	c := &FileCapture{s: s, dir: dir, flushed: flushed}
	s.files = c
	return c, nil
}

// Poll ends the capture if pebble's flush has ended, waiting for it if
// wait is true, and reports whether the capture is done, and how it
// ended. Ending it links the files into the capture's directory (a few
// milliseconds) and lets the store write to pebble again.
func (c *FileCapture) Poll(wait bool) (done bool, err error) {
	if c.done {
		return true, c.err
	}
	if !wait {
		select {
		case <-c.flushed:
		default:
			return false, nil
		}
	}
	c.s.settle()
	return true, c.err
}

// Dir returns the capture's directory: OpenFiles opens a store from it.
func (c *FileCapture) Dir() string { return c.dir }

// Files returns the files of a capture that is done, sorted by name.
func (c *FileCapture) Files() []File { return c.files }

// Release removes the capture's directory (its links and copies; the
// store's own files stay). It ends the capture first if it is in flight.
func (c *FileCapture) Release() error {
	if !c.done && !c.s.closed {
		c.s.settle()
	}
	c.files = nil
	return os.RemoveAll(c.dir)
}

// settle ends the file capture in flight, if any, waiting for its flush:
// the store is about to write to pebble, or to read pebble as it is.
func (s *Store) settle() {
	c := s.files
	if c == nil {
		return
	}
	<-c.flushed
	s.files = nil
	c.done = true
	if err := s.db.Checkpoint(c.dir); err != nil {
		c.err = fmt.Errorf("pebblestate: file capture into %s: %w", c.dir, err)
	} else if c.files, err = listFiles(c.dir); err != nil {
		c.err = fmt.Errorf("pebblestate: file capture: %w", err)
	}
	// What waited for the flush, the next changes do a batch at a time
	// (catchUpBatch).
}

// listFiles lists the files in dir, sorted by name.
func listFiles(dir string) ([]File, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(ents))
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		if !info.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file", filepath.Join(dir, e.Name()))
		}
		files = append(files, File{Name: e.Name(), Size: info.Size(), Immutable: immutable(e.Name())})
	}
	return files, nil
}

// immutable reports whether a database file of this name is an sstable
// or a blob file.
func immutable(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// OpenFiles makes a store, in a new directory under o.Dir, from the files
// of a capture in directory from (a FileCapture's, or its files
// downloaded): its tables, their entries, and the next table's id. from
// is left as it is (the files are linked where the file system can, else
// copied).
//
// It does not wait for the compactions the files call for: they run
// once it has returned.
func OpenFiles(o Options, from string) (*Store, error) {
	s, err := openFiles(o, from)
	if err != nil {
		return nil, err
	}
	s.gate.Open()
	return s, nil
}

// openFiles is OpenFiles with the store's compactions still waiting for
// s.gate.Open.
func openFiles(o Options, from string) (*Store, error) {
	if from == "" {
		return nil, errors.New("pebblestate: open files: no directory")
	}
	if err := peek(from); err != nil {
		return nil, err
	}
	switch legacy, err := isLegacy(from); {
	case err != nil:
		return nil, fmt.Errorf("pebblestate: open the files in %s: %w", from, err)
	case legacy:
		return nil, fmt.Errorf("pebblestate: open the files in %s: a store made before stores merged words (its merge operator is %s): Restore writes its entries into a new store", from, legacyMerger)
	}
	return open(o, from)
}

// peek refuses a directory without a pebble database, before pebble.Open
// (which leaks a goroutine when it fails).
func peek(dir string) error {
	desc, err := pebble.Peek(dir, vfs.Default)
	if err != nil {
		return fmt.Errorf("pebblestate: open the files in %s: %w", dir, err)
	}
	if !desc.Exists {
		return fmt.Errorf("pebblestate: open the files in %s: no pebble database there", dir)
	}
	return nil
}

// linkFiles links (or copies) every file of directory from into dir.
func linkFiles(from, dir string) error {
	ents, err := os.ReadDir(from)
	if err != nil {
		return fmt.Errorf("pebblestate: open files: %w", err)
	}
	for _, e := range ents {
		src, dst := filepath.Join(from, e.Name()), filepath.Join(dir, e.Name())
		if !e.Type().IsRegular() {
			return fmt.Errorf("pebblestate: open files: %s: not a regular file", src)
		}
		// pebble appends to the MANIFEST it opens: a link would change
		// the capture's copy.
		if immutable(e.Name()) && os.Link(src, dst) == nil {
			continue
		}
		if err := copyFile(src, dst); err != nil {
			return fmt.Errorf("pebblestate: open files: %w", err)
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// loadTables reads the table of the tables' ids.
func (s *Store) loadTables() error {
	ids, err := readTables(s.db)
	if err != nil {
		return err
	}
	for name, id := range ids {
		s.addTable(name, id)
	}
	return nil
}

// readTables reads a database's table of the tables' ids, by name.
func readTables(r reader) (map[string][]byte, error) {
	it := newGroupIter(r, "", []byte{metaID}, 0)
	defer it.Close()
	ids := map[string][]byte{}
	for {
		name, _, id, ok := it.Next()
		if !ok {
			return ids, nil
		}
		n, w := binary.Uvarint(id)
		if w <= 0 || w != len(id) || n == metaID || name == "" {
			return nil, fmt.Errorf("table %q: bad id %x", name, id)
		}
		ids[name] = append([]byte(nil), id...)
	}
}
