//go:build unix && !linux

package offheap

import "unsafe"

// hugePage is 0 where weir does not ask for huge pages.
const hugePage = 0

func adviseHuge(unsafe.Pointer, int) {}
