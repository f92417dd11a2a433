//go:build !unix

package offheap

import "errors"

// mapAnon is not supported here: Make allocates on the heap.
func mapAnon(int, bool) ([]byte, error) {
	return nil, errors.New("offheap: no anonymous mappings on this platform")
}

func unmap([]byte) {}

// hugePage is 0: no mappings, so no huge pages.
const hugePage = 0

// dropPages does nothing: nothing is mapped.
func dropPages([]byte) {}
