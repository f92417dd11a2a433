package offheap

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// remap grows the mapping b to size bytes: the kernel moves its pages to
// a larger range (or extends it in place) without copying them, and the
// new bytes are zero.
func remap(b []byte, size int) ([]byte, error) {
	p, err := unix.MremapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)), nil, uintptr(size), unix.MREMAP_MAYMOVE)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), size), nil
}
