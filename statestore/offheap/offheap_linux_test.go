package offheap

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestMakeFilledIsResident checks that MakeFilled's pages are in memory
// before they are written, in a mapping below a huge page (mapped with
// MAP_POPULATE) and in one above (aligned, then populated), while
// Make's are not; and that both are zero.
func TestMakeFilledIsResident(t *testing.T) {
	resident := func(b []byte) int {
		page := os.Getpagesize()
		vec := make([]byte, (len(b)+page-1)/page)
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
		if errno != 0 {
			t.Fatal(errno)
		}
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		return n
	}
	var a Arena
	defer a.Close()
	for _, size := range []int{MinMapped * 4, 3 << 20} {
		filled := MakeFilled[byte](&a, size)
		lazy := Make[byte](&a, size)
		pages := (size + os.Getpagesize() - 1) / os.Getpagesize()
		if got := resident(filled); got != pages {
			t.Errorf("%d bytes from MakeFilled: %d of %d pages resident, want all", size, got, pages)
		}
		if got := resident(lazy); got == pages {
			t.Errorf("%d bytes from Make: all %d pages resident before a write", size, pages)
		}
		for i, v := range filled {
			if v != 0 {
				t.Fatalf("byte %d of %d from MakeFilled is %d", i, size, v)
			}
		}
		filled[size-1] = 1
	}
}
