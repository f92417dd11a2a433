package offheap

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on Linux (x86-64 and
// arm64 with 4 KiB base pages).
const hugePage = 2 << 20

// adviseHuge asks the kernel to back n bytes at p with huge pages. Where
// transparent huge pages are "always" this changes nothing; where they
// are "madvise" (Debian's default) only advised memory gets them; where
// they are "never" the advice is ignored, and so is its error.
func adviseHuge(p unsafe.Pointer, n int) {
	_ = unix.Madvise(unsafe.Slice((*byte)(p), n), unix.MADV_HUGEPAGE)
}

// mapPopulate is the mmap flag that brings a mapping's pages in at once.
const mapPopulate = unix.MAP_POPULATE

// populateWrite brings n bytes at p into memory for writing (MakeFilled, for
// a mapping aligned after it was made); where the kernel is older than
// 5.14 and cannot, the pages fault in as they are written.
func populateWrite(p unsafe.Pointer, n int) {
	_ = unix.Madvise(unsafe.Slice((*byte)(p), n), unix.MADV_POPULATE_WRITE)
}
