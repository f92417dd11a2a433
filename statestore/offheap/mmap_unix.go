//go:build unix

package offheap

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapAnon maps size bytes of zeroed memory outside the Go heap. Where huge
// pages are asked for (SetHugePages), a mapping of a huge page or more
// starts on a huge page boundary and is offered huge pages (adviseHuge),
// so that random reads over gigabytes of keyed state miss the TLB less:
// with 4 KiB pages, 10M keys' records span 160,000 pages and almost every
// lookup walks the page table.
//
// populate asks for the pages to be in memory at once (see MakeFilled).
func mapAnon(size int, populate bool) ([]byte, error) {
	align := 0
	if hugePage > 0 && size >= hugePage && hugePages.Load() {
		align = hugePage
	}
	length := uintptr(size + align)
	flags := unix.MAP_ANON | unix.MAP_PRIVATE
	if populate && align == 0 {
		// An aligned mapping is trimmed after it is made: the trimmed
		// parts would be populated for nothing, so it is populated
		// below, where it is kept.
		flags |= mapPopulate
	}
	p, err := unix.MmapPtr(-1, 0, nil, length, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return nil, err
	}
	if align > 0 {
		// Keep [start, start+size) and give back the rest on both sides.
		skip := alignUp(uintptr(p), uintptr(align)) - uintptr(p)
		if skip > 0 {
			if err := unix.MunmapPtr(p, skip); err != nil {
				return nil, err
			}
		}
		start := unsafe.Add(p, skip)
		end := alignUp(uintptr(size), uintptr(os.Getpagesize()))
		if tail := length - skip - end; tail > 0 {
			if err := unix.MunmapPtr(unsafe.Add(start, end), tail); err != nil {
				return nil, err
			}
		}
		p = start
		adviseHuge(p, size)
		if populate {
			populateWrite(p, size)
		}
	}
	return unsafe.Slice((*byte)(p), size), nil
}

func unmap(b []byte) {
	if err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b))); err != nil {
		panic("offheap: unmap: " + err.Error())
	}
}

func alignUp(n, to uintptr) uintptr { return (n + to - 1) &^ (to - 1) }

// dropPages gives b's pages back to the system: b stays mapped, and reads
// zeros until written again.
func dropPages(b []byte) {
	_ = unix.Madvise(b, unix.MADV_DONTNEED)
}
