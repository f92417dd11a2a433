package builtin

import (
	"fmt"
	"path/filepath"

	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/pebblestate"
)

// operatorStore is the pebble store of an operator that keeps its keyed
// state in one (a window's or a join's, state: {backend: pebble}), and
// the store's backend, which captures it as files and restores it (its
// rows hold nothing of these operators': they keep no timers).
type operatorStore struct {
	what  string // the operator, as errors name it: "window w"
	st    *spec.State
	dir   string
	store *pebblestate.Store
	state *statestore.Memory
}

// options are the options of the operator's stores.
func (s *operatorStore) options() pebblestate.Options {
	mem := int64(s.st.Memory)
	if mem == 0 {
		mem = spec.DefaultStateMemory
	}
	return pebblestate.Options{Dir: s.dir, Memory: mem}
}

// openStore opens an empty store for key groups [start, end).
func (s *operatorStore) openStore(start, end int) error {
	st, err := pebblestate.Open(s.options())
	if err != nil {
		return fmt.Errorf("open %s: state: %w", s.what, err)
	}
	s.store = st
	s.state = statestore.NewStoredFiles(start, end, st)
	return nil
}

// closeStore closes the store, which deletes it; safe to call twice.
func (s *operatorStore) closeStore() error {
	if s.state != nil {
		s.state.Close()
		s.state = nil
	}
	var err error
	if s.store != nil {
		err = s.store.Close()
		s.store = nil
	}
	return err
}

// failed turns a panic into the operator's error: a store's tables panic
// when it fails (a full disk, a damaged entry), and that fails the task,
// not the worker. Deferred, as failed(&err).
func (s *operatorStore) failed(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%s: state: %v", s.what, p)
	}
}

// captureStore captures the store into a directory beside it.
func (s *operatorStore) captureStore(id int64) (statestore.StoreFileCapture, error) {
	c, err := s.state.CaptureStore(fmt.Sprintf("%s-capture-%d", s.store.Dir(), id))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.what, err)
	}
	return c, nil
}

// scratch is the directory the store is in.
func (s *operatorStore) scratch() string { return filepath.Dir(s.store.Dir()) }

// restoreStores makes the operator's store the one captured over its key
// groups [start, end), or at a rescale the one sharing the most key
// groups with it, with the rest ingested (pebblestate.Restore), and
// returns which it kept. The operator opens its tables again after.
func (s *operatorStore) restoreStores(stores []statestore.CapturedStore, start, end int) (int, error) {
	st, kept, err := pebblestate.Restore(s.options(), s.store, stores, start, end)
	if err != nil {
		return -1, fmt.Errorf("%s: restore the store: %w", s.what, err)
	}
	if st != s.store {
		s.store = st // the old one is closed
		if err := s.state.ReplaceStore(st); err != nil {
			return -1, fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return kept, nil
}
