//go:build unix && !linux

package offheap

import "unsafe"

// hugePage is 0 where weir does not ask for huge pages.
const hugePage = 0

func adviseHuge(unsafe.Pointer, int) {}

// mapPopulate is 0: the pages of a mapping fault in as they are written.
const mapPopulate = 0

func populateWrite(unsafe.Pointer, int) {}
