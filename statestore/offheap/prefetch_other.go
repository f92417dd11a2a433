//go:build !amd64 && !arm64

package offheap

import "unsafe"

// Prefetch does nothing where weir has no prefetch instruction for the
// platform: the loads that follow it wait for memory themselves.
func Prefetch(unsafe.Pointer) {}
