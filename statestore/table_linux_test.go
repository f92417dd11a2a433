package statestore

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestHeapTableUnmappedWhenUnreachable checks the safety net for a
// backend never closed: once a table is unreachable, the collector's
// cleanup unmaps its cells (mincore then fails on their address).
func TestHeapTableUnmappedWhenUnreachable(t *testing.T) {
	addr, size := func() (uintptr, uintptr) {
		tab, _ := OpenTable[int64](NewMemory(0, 1), "n", nil)
		for i := range 20_000 {
			tab.Put(0, string(rune(i)), "", int64(i))
		}
		g := &tab.(*heapTable[int64]).groups[0]
		return uintptr(unsafe.Pointer(unsafe.SliceData(g.cells))), uintptr(cap(g.cells)) * unsafe.Sizeof(g.cells[0])
	}()
	mapped := func() bool {
		vec := make([]byte, (size+4095)/4096+1)
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, addr&^4095, size, uintptr(unsafe.Pointer(&vec[0])))
		return errno != unix.ENOMEM
	}
	if !mapped() {
		t.Fatal("the cells are not mapped while the table is in use")
	}
	for deadline := time.Now().Add(5 * time.Second); mapped(); {
		if time.Now().After(deadline) {
			t.Fatal("the cells of an unreachable table are still mapped after 5 s of collections")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
