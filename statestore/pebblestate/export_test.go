package pebblestate

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
