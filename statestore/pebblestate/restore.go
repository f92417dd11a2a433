package pebblestate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirstream/weir/statestore"
)

// Restore returns a store holding what the captures in stores (their
// directories, and the key groups each held) hold in key groups [start,
// end), and the index of the capture whose files it was opened on (its
// sstables, which a later capture lists again), or -1 if it is into,
// which must be empty (no capture overlaps [start, end)); into is closed
// when Restore returns another store.
//
// A restore after a failure opens the one capture over exactly those key
// groups. A rescale copies no entry one by one: it opens the capture
// that shares the most key groups with [start, end) and excises the
// others from it (pebble keeps the sstables, bounded to what is left),
// then writes each other capture's entries of [start, end) into
// sstables of about ingestFileSize, table after table, and ingests them;
// the key groups are disjoint, so they go to the bottom level.
//
// A capture of a store made before stores merged words (its sstables
// name pebble's default merge operator, which a store cannot read with
// its own) is never opened on its files: its entries are written anew,
// as another capture's are at a rescale. If every capture is such, into
// takes them all.
func Restore(o Options, into *Store, stores []statestore.CapturedStore, start, end int) (*Store, int, error) {
	best, most, overlap := -1, 0, false
	for i, c := range stores {
		n := min(c.KeyGroupEnd, end) - max(c.KeyGroupStart, start)
		if n <= 0 {
			continue
		}
		overlap = true
		legacy, err := isLegacy(c.Dir)
		if err != nil {
			return nil, -1, fmt.Errorf("pebblestate: key groups [%d, %d): %w", c.KeyGroupStart, c.KeyGroupEnd, err)
		}
		if !legacy && n > most {
			best, most = i, n
		}
	}
	if !overlap {
		return into, -1, nil
	}
	if best < 0 {
		if err := into.ingestCaptures(stores, -1, start, end); err != nil {
			return nil, -1, err
		}
		return into, -1, nil
	}
	s, err := restore(o, stores, best, start, end)
	if err != nil {
		return nil, -1, err
	}
	if err := into.Close(); err != nil {
		return nil, -1, errors.Join(err, s.Close())
	}
	return s, best, nil
}

// restore opens stores[best] and makes it hold what stores hold in key
// groups [start, end).
func restore(o Options, stores []statestore.CapturedStore, best, start, end int) (_ *Store, err error) {
	c := stores[best]
	// Its compactions wait for what it drops and what it gains.
	s, err := openFiles(o, c.Dir)
	if err != nil {
		return nil, fmt.Errorf("key groups [%d, %d): %w", c.KeyGroupStart, c.KeyGroupEnd, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
		}
	}()
	if err := s.excise(c.KeyGroupStart, start); err != nil {
		return nil, err
	}
	if err := s.excise(end, c.KeyGroupEnd); err != nil {
		return nil, err
	}
	if err := s.ingestCaptures(stores, best, start, end); err != nil {
		return nil, err
	}
	s.gate.Open()
	return s, nil
}

// ingestCaptures ingests what the captures in stores but stores[skip]
// hold in key groups [start, end) into s.
func (s *Store) ingestCaptures(stores []statestore.CapturedStore, skip, start, end int) error {
	for i, c := range stores {
		from, to := max(c.KeyGroupStart, start), min(c.KeyGroupEnd, end)
		if i == skip || from >= to {
			continue
		}
		src, err := openSource(c.Dir)
		if err != nil {
			return fmt.Errorf("key groups [%d, %d): %w", c.KeyGroupStart, c.KeyGroupEnd, err)
		}
		err = s.ingestGroups(src, from, to)
		if err = errors.Join(err, src.Close()); err != nil {
			return fmt.Errorf("key groups [%d, %d): %w", c.KeyGroupStart, c.KeyGroupEnd, err)
		}
	}
	return nil
}

// excise removes key groups [from, to) of every table from s (nothing
// if from >= to).
func (s *Store) excise(from, to int) error {
	if from >= to {
		return nil
	}
	for name, t := range s.tables {
		if t == s.meta {
			continue
		}
		_, hi := groupBounds(t.id, to-1)
		span := pebble.KeyRange{Start: appendPrefix(nil, t.id, from), End: hi}
		if err := s.db.Excise(context.Background(), span); err != nil {
			return fmt.Errorf("pebblestate: table %q: excise key groups [%d, %d): %w", name, from, to, err)
		}
	}
	return nil
}

// source is a capture's database opened read-only where it is, and its
// tables' ids by name: what a rescale reads other key groups out of.
// Opened so, pebble neither compacts nor writes, and the files stay as
// they were downloaded.
type source struct {
	db    *pebble.DB
	cache *pebble.Cache
	ids   map[string][]byte
}

// sourceCache is a source's block cache: it is read once, in order.
const sourceCache = 4 << 20

func openSource(dir string) (_ *source, err error) {
	if err := peek(dir); err != nil {
		return nil, err
	}
	legacy, err := isLegacy(dir)
	if err != nil {
		return nil, fmt.Errorf("pebblestate: open the files in %s: %w", dir, err)
	}
	cache := pebble.NewCache(sourceCache)
	opts := options(cache)
	opts.ReadOnly = true
	if legacy {
		// Made before the stores merged words: it holds no operand, and
		// pebble reads its sstables with the merge operator they name
		// only.
		opts.Merger = pebble.DefaultMerger
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("pebblestate: open the files in %s: %w", dir, err)
	}
	src := &source{db: db, cache: cache}
	if src.ids, err = readTables(db); err != nil {
		return nil, errors.Join(fmt.Errorf("pebblestate: open the files in %s: %w", dir, err), src.Close())
	}
	return src, nil
}

// Close closes the database; its directory stays.
func (src *source) Close() error {
	err := src.db.Close()
	src.cache.Unref()
	return err
}

// ingestGroups ingests src's entries of key groups [from, to) into s, in
// sstables of about ingestFileSize, each table's under s's id for it
// (src may have given the same table another). Nothing of s may be in
// those key groups.
func (s *Store) ingestGroups(src *source, from, to int) error {
	var spans []tableIDs
	for name, id := range src.ids {
		if _, err := s.Table(name); err != nil {
			return err
		}
		spans = append(spans, tableIDs{src: id, dst: s.tables[name].id})
	}
	// Ids are uvarints, none a prefix of another: tables in the order of
	// their ids' bytes make one sorted run of keys.
	slices.SortFunc(spans, func(a, b tableIDs) int { return bytes.Compare(a.dst, b.dst) })

	dir, err := os.MkdirTemp(filepath.Dir(s.dir), "ingest-")
	if err != nil {
		return fmt.Errorf("pebblestate: ingest: %w", err)
	}
	defer os.RemoveAll(dir)
	w := &splitWriter{s: s, dir: dir}
	err = writeGroups(w, src, spans, from, to)
	if err = errors.Join(err, w.close()); err != nil {
		return fmt.Errorf("pebblestate: ingest: write into %s: %w", dir, err)
	}
	if len(w.paths) == 0 {
		return nil
	}
	if err := s.db.Ingest(context.Background(), w.paths); err != nil {
		return fmt.Errorf("pebblestate: ingest %d sstables of %s: %w", len(w.paths), dir, err)
	}
	return nil
}

// ingestFileSize is about the size of the sstables a rescale ingests, as
// pebble's compactions would write them. One large file would have one
// large Bloom filter, which each Get needs in the block cache.
var ingestFileSize uint64 = 8 << 20

// splitWriter writes sorted entries into sstables of about
// ingestFileSize in directory dir, for store s's bottom level.
type splitWriter struct {
	s     *Store
	dir   string
	w     *sstable.Writer
	paths []string // the files written
}

func (sw *splitWriter) set(key, value []byte) error {
	if sw.w == nil {
		path := filepath.Join(sw.dir, fmt.Sprintf("%06d.sst", len(sw.paths)))
		f, err := sw.s.opts.FS.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return err
		}
		sw.w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), sw.s.opts.MakeWriterOptions(len(sw.s.opts.Levels)-1, sw.s.db.TableFormat()))
		sw.paths = append(sw.paths, path)
	}
	if err := sw.w.Set(key, value); err != nil {
		return err
	}
	if sw.w.Raw().EstimatedSize() >= ingestFileSize {
		return sw.close()
	}
	return nil
}

// close closes the file being written, if any.
func (sw *splitWriter) close() error {
	if sw.w == nil {
		return nil
	}
	err := sw.w.Close()
	sw.w = nil
	return err
}

// tableIDs are a table's ids in two stores.
type tableIDs struct{ src, dst []byte }

// writeGroups writes src's entries of key groups [from, to) of the tables
// of spans to w, under their ids in the store.
func writeGroups(w *splitWriter, src *source, spans []tableIDs, from, to int) error {
	var key []byte
	for _, sp := range spans {
		_, hi := groupBounds(sp.src, to-1)
		it, err := src.db.NewIter(&pebble.IterOptions{LowerBound: appendPrefix(nil, sp.src, from), UpperBound: hi})
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				return errors.Join(err, it.Close())
			}
			key = append(append(key[:0], sp.dst...), it.Key()[len(sp.src):]...)
			if err := w.set(key, v); err != nil {
				return errors.Join(err, it.Close())
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	return nil
}
