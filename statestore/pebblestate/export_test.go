package pebblestate

import "github.com/cockroachdb/pebble/v2"

// SetMaxDirty sets maxDirty for a test and returns what restores it.
func SetMaxDirty(n int) (restore func()) {
	old := maxDirty
	maxDirty = n
	return func() { maxDirty = old }
}

// Dirty returns the store's count of dirty hot entries, and the dirty
// entries counted one by one.
func (s *Store) Dirty() (tracked, counted int) {
	for _, t := range s.tables {
		for _, e := range t.hot {
			if e.dirty {
				counted++
			}
		}
	}
	return s.dirty, counted
}

// SetIngestFileSize sets the size of the sstables a rescale ingests.
func SetIngestFileSize(n uint64) (restore func()) {
	old := ingestFileSize
	ingestFileSize = n
	return func() { ingestFileSize = old }
}

// OpenShut makes an empty store as Open does, but with its compactions
// shut until it is closed.
func OpenShut(o Options) (*Store, error) { return open(o, "") }

// Level0 returns the number of sstables in the store's level 0, and the
// number of compactions it has run.
func (s *Store) Level0() (tables, compactions int64) {
	m := s.db.Metrics()
	return m.Levels[0].TablesCount, m.Compact.Count
}

// BlockCache returns the hits and misses of the store's block cache.
func (s *Store) BlockCache() (hits, misses int64) {
	m := s.db.Metrics()
	return m.BlockCache.Hits, m.BlockCache.Misses
}

// SetLegacyMerger makes the stores opened until restore is called use
// pebble's default merge operator, as stores did before they merged
// words.
func SetLegacyMerger() (restore func()) {
	storeMerger = pebble.DefaultMerger
	return func() { storeMerger = wordMerger }
}

// LargestStep returns the most entries an eviction or write-back has
// written to pebble at once, and forgets it.
func (s *Store) LargestStep() int {
	n := s.largestStep
	s.largestStep = 0
	return n
}
