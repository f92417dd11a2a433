package offheap

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestMakeFilledIsResident checks that MakeFilled's pages are in memory
// before they are written, in a mapping below a huge page (mapped with
// MAP_POPULATE) and in one above (with huge pages on: aligned, then
// populated), while Make's are not; and that both are zero.
func TestMakeFilledIsResident(t *testing.T) {
	defer SetHugePages(SetHugePages(false))
	for _, huge := range []bool{false, true} {
		SetHugePages(huge)
		makeFilledIsResident(t)
	}
}

func makeFilledIsResident(t *testing.T) {
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

// TestSetHugePages checks that a mapping of a huge page or more asks for
// huge pages (the hg flag of its VMA in /proc/self/smaps, which
// MADV_HUGEPAGE sets) and starts on a huge page boundary only while
// SetHugePages is on, and that smaller mappings never ask.
func TestSetHugePages(t *testing.T) {
	defer SetHugePages(SetHugePages(false))
	for _, on := range []bool{false, true, false} {
		SetHugePages(on)
		var a Arena
		for _, size := range []int{MinMapped * 2, hugePage, 3*hugePage + 4096} {
			b := Make[byte](&a, size)
			b[0], b[size-1] = 1, 1
			p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
			want := on && size >= hugePage
			if got := advisedHuge(t, p); got != want {
				t.Errorf("huge pages %v: a mapping of %d bytes advised huge: %v, want %v", on, size, got, want)
			}
			if want && p%hugePage != 0 {
				t.Errorf("huge pages on: a mapping of %d bytes starts at %#x, not on a huge page", size, p)
			}
		}
		a.Close()
	}
}

// advisedHuge reports whether the mapping that holds address p has the hg
// flag (MADV_HUGEPAGE) in /proc/self/smaps.
func advisedHuge(t *testing.T, p uintptr) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uint64(p) >= start && uint64(p) < end
				continue
			}
		}
		if in && f[0] == "VmFlags:" {
			return slices.Contains(f[1:], "hg")
		}
	}
	t.Fatalf("no mapping of %#x with VmFlags in /proc/self/smaps", p)
	return false
}
