package offheap

import (
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Allocator is an Arrow memory.Allocator for buffers that are released
// explicitly and soon, as a checkpoint's captured batches are: built by
// the capture, released once their state file is uploaded. A buffer of
// MinMapped bytes or more is mapped outside the Go heap and unmapped when
// Arrow frees it, so that the hundreds of megabytes a large base captures
// are not in the heap when the garbage collector sets its next goal
// (about twice what is live: see the package comment). Smaller buffers
// come from another allocator.
//
// A buffer Arrow never frees (a batch never released) stays mapped, where
// on the heap the collector would have taken it: what builds with an
// Allocator must release what it builds. Mapped tells what is left.
//
// Unlike an Arena it is safe for concurrent use: a task builds its
// batches on its goroutine and its uploader releases them on another.
type Allocator struct {
	small  memory.Allocator
	mu     sync.Mutex
	maps   map[*byte][]byte // mapped buffers by their first byte
	mapped int
}

var _ memory.Allocator = (*Allocator)(nil)

// NewAllocator returns an Allocator whose buffers below MinMapped bytes
// come from small.
func NewAllocator(small memory.Allocator) *Allocator {
	return &Allocator{small: small, maps: map[*byte][]byte{}}
}

// Allocate returns size zeroed bytes.
func (a *Allocator) Allocate(size int) []byte {
	if size < MinMapped {
		return a.small.Allocate(size)
	}
	b, err := mapAnon(size, false)
	if err != nil { // not supported here, or out of address space
		return a.small.Allocate(size)
	}
	a.keep(b)
	return b
}

// Reallocate returns b resized to size bytes, with b's first bytes. A
// mapped buffer grows by remapping where the platform can (Linux's
// mremap), not by copying: a capture's builders double their buffers
// as they fill, and copying hundreds of megabytes made a long step.
func (a *Allocator) Reallocate(size int, b []byte) []byte {
	m := a.mapping(b)
	switch {
	case m != nil && size <= len(m):
		return b[:size]
	case m == nil && size < MinMapped:
		return a.small.Reallocate(size, b)
	case m != nil:
		// Out of the map before the remap: a remap that moves the pages
		// frees the old address, which another goroutine's mapping may
		// get at once; its entry must not be the one deleted here.
		a.forget(m)
		if nb, err := remap(m, size); err == nil {
			a.keep(nb)
			return nb
		}
		a.keep(m) // not moved: still mapped
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

// keep records mapping m.
func (a *Allocator) keep(m []byte) {
	a.mu.Lock()
	a.maps[unsafe.SliceData(m)] = m
	a.mapped += len(m)
	a.mu.Unlock()
}

// forget drops the record of mapping m.
func (a *Allocator) forget(m []byte) {
	a.mu.Lock()
	delete(a.maps, unsafe.SliceData(m))
	a.mapped -= len(m)
	a.mu.Unlock()
}

// Free gives back b, which Allocate or Reallocate returned.
func (a *Allocator) Free(b []byte) {
	if cap(b) == 0 {
		a.small.Free(b)
		return
	}
	p := unsafe.SliceData(b)
	a.mu.Lock()
	m, ok := a.maps[p]
	if ok {
		delete(a.maps, p)
		a.mapped -= len(m)
	}
	a.mu.Unlock()
	if !ok {
		a.small.Free(b)
		return
	}
	unmap(m)
}

// Mapped returns the bytes mapped outside the Go heap and not freed.
func (a *Allocator) Mapped() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mapped
}

// mapping returns the whole mapping b starts, nil if b is not mapped.
func (a *Allocator) mapping(b []byte) []byte {
	if cap(b) == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.maps[unsafe.SliceData(b)]
}
