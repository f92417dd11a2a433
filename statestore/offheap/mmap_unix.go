//go:build unix

package offheap

import "syscall"

// mapAnon maps size bytes of zeroed memory outside the Go heap.
func mapAnon(size int) ([]byte, error) {
	return syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

func unmap(b []byte) {
	if err := syscall.Munmap(b); err != nil {
		panic("offheap: unmap: " + err.Error())
	}
}
