//go:build amd64 || arm64

package offheap

import "unsafe"

// Prefetch asks the core to bring the cache line at p into its caches,
// and returns at once: unlike a load, the request holds nothing up while
// it is served, so a loop can have many of them in flight (a keyed
// operator's table slots and records, read ahead of a batch's lookups).
// p need not be valid memory: a prefetch never faults.
//
//go:noescape
func Prefetch(p unsafe.Pointer)
