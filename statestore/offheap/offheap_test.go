package offheap

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

type rec struct {
	id   int64
	next *rec // to memory of the same arena
	tag  [3]byte
}

func TestMakeMapsLargeSlices(t *testing.T) {
	var a Arena
	small := Make[int64](&a, 100)
	if a.Mapped() != 0 {
		t.Fatalf("a slice of 800 bytes mapped %d bytes, want it on the heap", a.Mapped())
	}
	big := Make[int64](&a, MinMapped/8)
	if a.Mapped() != MinMapped {
		t.Fatalf("mapped %d bytes for a slice of %d, want %d", a.Mapped(), MinMapped, MinMapped)
	}
	for i := range big {
		if big[i] != 0 {
			t.Fatalf("value %d of a new slice is %d, want 0", i, big[i])
		}
		big[i] = int64(i)
	}
	odd := Make[rec](&a, 5000) // 5000 × 24 B: rounded up to whole pages
	if got := a.Mapped() - MinMapped; got < 5000*int(unsafe.Sizeof(rec{})) {
		t.Fatalf("mapped %d bytes for 5000 records", got)
	}
	odd[4999].next = &odd[0]
	odd[0].tag = [3]byte{'a', 'b', 'c'}
	if got := odd[4999].next.tag; got != [3]byte{'a', 'b', 'c'} {
		t.Fatalf("a pointer within mapped memory reads %q", got[:])
	}
	Free(&a, big)
	Free(&a, small)
	Free(&a, odd[:10]) // a slice of it that starts at its first value
	if a.Mapped() != 0 {
		t.Fatalf("%d bytes mapped after every slice was freed", a.Mapped())
	}
	Make[int64](&a, MinMapped)
	a.Close()
	if a.Mapped() != 0 || len(a.maps) != 0 {
		t.Fatalf("after Close: %d bytes, %d mappings", a.Mapped(), len(a.maps))
	}
}

func TestMakeRefusesHeapReferences(t *testing.T) {
	for name, mk := range map[string]func(*Arena){
		"string":    func(a *Arena) { Make[struct{ s string }](a, 1) },
		"slice":     func(a *Arena) { Make[[2]struct{ b []byte }](a, 1) },
		"map":       func(a *Arena) { Make[map[int]int](a, 1) },
		"interface": func(a *Arena) { Make[any](a, 1) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, name) {
					t.Fatalf("panic %v, want one naming a %s", r, name)
				}
			}()
			var a Arena
			mk(&a)
		})
	}
}

func TestSlabReusesFreedValues(t *testing.T) {
	var a Arena
	defer a.Close()
	var s Slab[rec]
	s.Init(&a)
	const n = 100_000 // several chunks, the later ones mapped
	ps := make([]*rec, n)
	refs := make([]Ref, n)
	seen := map[Ref]bool{}
	for i := range ps {
		refs[i], ps[i] = s.New()
		if ps[i].id != 0 || ps[i].next != nil {
			t.Fatalf("value %d is not zeroed: %+v", i, *ps[i])
		}
		if seen[refs[i]] || s.At(refs[i]) != ps[i] {
			t.Fatalf("value %d: ref %#x is taken, or names %p, not the value %p", i, refs[i], s.At(refs[i]), ps[i])
		}
		seen[refs[i]] = true
		ps[i].id = int64(i)
		if i > 0 {
			ps[i].next = ps[i-1]
		}
	}
	if a.Mapped() == 0 {
		t.Fatal("nothing mapped for 100,000 records")
	}
	for i, p := range ps { // values stay where they are
		if p.id != int64(i) || i > 0 && p.next.id != int64(i-1) || s.At(refs[i]) != p {
			t.Fatalf("value %d moved: %+v", i, *p)
		}
	}
	s.Free(refs[7])
	s.Free(refs[n-1])
	if s.Len() != n-2 {
		t.Fatalf("Len %d, want %d", s.Len(), n-2)
	}
	mapped := a.Mapped()
	for range 2 {
		if r, p := s.New(); p != ps[7] && p != ps[n-1] || p.id != 0 || s.At(r) != p {
			t.Fatalf("New after Free gave %p (%+v), ref %#x, want a freed value, zeroed, and its ref", p, *p, r)
		}
	}
	if a.Mapped() != mapped {
		t.Fatal("New mapped more memory with freed values to reuse")
	}
	s.Release()
	if a.Mapped() != 0 {
		t.Fatalf("%d bytes mapped after Release", a.Mapped())
	}
}

// TestSlabReusesEveryFreedValue frees many values in an order of their
// own and takes them all back: each comes back once and zeroed, even the
// bytes where a freed value keeps the list of freed ones, and only then
// does the slab hand out a value it did not hand out before.
func TestSlabReusesEveryFreedValue(t *testing.T) {
	var a Arena
	defer a.Close()
	var s Slab[rec]
	s.Init(&a)
	const n = 200_000
	refs := make([]Ref, n)
	for i := range refs {
		var p *rec
		refs[i], p = s.New()
		p.id, p.next = -1, p
	}
	freed := map[Ref]bool{}
	for i := 0; i < n; i += 3 { // every third, from both ends
		for _, r := range []Ref{refs[i], refs[n-1-i]} {
			if !freed[r] {
				s.Free(r)
				freed[r] = true
			}
		}
	}
	if s.Len() != n-len(freed) {
		t.Fatalf("Len %d, want %d", s.Len(), n-len(freed))
	}
	mapped := a.Mapped()
	for range len(freed) {
		r, p := s.New()
		if !freed[r] || p.id != 0 || p.next != nil || s.At(r) != p {
			t.Fatalf("New gave ref %#x (%+v): not a freed value, given twice, or not zeroed", r, *p)
		}
		delete(freed, r)
	}
	if a.Mapped() != mapped {
		t.Fatal("New mapped more memory with freed values to reuse")
	}
	r, p := s.New()
	if slices.Contains(refs, r) || p.id != 0 || p.next != nil {
		t.Fatalf("New with nothing freed gave ref %#x (%+v), want a new, zeroed value", r, *p)
	}
}

// TestSlabRefsPastFullChunks fills chunks of the most values a Ref can
// index (small values), so refs must name the chunk and the index in it.
func TestSlabRefsPastFullChunks(t *testing.T) {
	var a Arena
	defer a.Close()
	var s Slab[int64]
	s.Init(&a)
	const n = 3<<slabChunkBits + 5
	refs := make([]Ref, n)
	for i := range refs {
		var p *int64
		refs[i], p = s.New()
		*p = int64(i)
	}
	if len(s.chunks) < 4 {
		t.Fatalf("%d values in %d chunks, want full ones", n, len(s.chunks))
	}
	for i, r := range refs {
		if got := *s.At(r); got != int64(i) {
			t.Fatalf("ref %#x of value %d names %d", r, i, got)
		}
	}
}

// TestSlabLanesKeepTheirBlocks hands out values of several lanes in a
// random order, with values of no lane (New) among them, frees some and
// takes them back: every block of LaneBlock values holds one lane's only,
// a freed value comes back in its own lane, zeroed, before the lane takes
// a new block, and no value is handed out twice.
func TestSlabLanesKeepTheirBlocks(t *testing.T) {
	var a Arena
	defer a.Close()
	var s Slab[rec]
	s.Init(&a)
	const lanes, n = 7, 150_000 // several chunks, the later ones mapped
	s.SetLanes(lanes)
	rng := rand.New(rand.NewPCG(1, 2))
	owner := map[Ref]int{} // lane, or -1 for New
	block := map[Ref]int{} // a block's first Ref: its lane
	give := func(l int) Ref {
		var r Ref
		var p *rec
		if l < 0 {
			r, p = s.New()
		} else {
			r, p = s.NewIn(l)
		}
		if _, ok := owner[r]; ok || p.id != 0 || p.next != nil || s.At(r) != p {
			t.Fatalf("lane %d: ref %#x given twice, not zeroed (%+v) or not its value", l, r, *p)
		}
		owner[r] = l
		p.id, p.next = int64(l), p
		if l >= 0 {
			b := r &^ (LaneBlock - 1)
			if o, ok := block[b]; ok && o != l {
				t.Fatalf("ref %#x of lane %d is in a block of lane %d", r, l, o)
			}
			block[b] = l
		}
		return r
	}
	for range n {
		give(rng.IntN(lanes+1) - 1)
	}
	for r, l := range owner {
		if l < 0 {
			if b, ok := block[r&^(LaneBlock-1)]; ok {
				t.Fatalf("ref %#x of New is in a block of lane %d", r, b)
			}
		}
	}
	// Free a third of lane 3's values, and some of lane 5's.
	freed := map[Ref]int{} // lane
	for r, l := range owner {
		if l == 3 && rng.IntN(3) == 0 || l == 5 && rng.IntN(50) == 0 {
			s.FreeIn(l, r)
			freed[r] = l
			delete(owner, r)
		}
	}
	if s.Len() != len(owner) {
		t.Fatalf("Len %d, want %d", s.Len(), len(owner))
	}
	blocks, mapped := len(block), a.Mapped()
	left := map[int]int{} // freed values of each lane
	for _, l := range freed {
		left[l]++
	}
	for left[3]+left[5] > 0 {
		l := 3
		if left[3] == 0 || left[5] > 0 && rng.IntN(4) == 0 {
			l = 5
		}
		left[l]--
		if r := give(l); freed[r] != l {
			t.Fatalf("lane %d: NewIn gave ref %#x, not a freed value, with %d freed", l, r, left[l]+1)
		}
	}
	if len(block) != blocks || a.Mapped() != mapped {
		t.Fatalf("the lanes took %d blocks and %d bytes more with freed values to reuse", len(block)-blocks, a.Mapped()-mapped)
	}
	for r, l := range owner { // nothing moved or was overwritten
		if p := s.At(r); p.id != int64(l) || p.next != p {
			t.Fatalf("ref %#x of lane %d holds %+v", r, l, *p)
		}
	}
	s.Release()
	if r, _ := s.NewIn(0); r != 0 {
		t.Fatalf("after Release the first value is %#x, want 0", r)
	}
}

func TestVecKeepsOrderAcrossChunks(t *testing.T) {
	var a Arena
	defer a.Close()
	var v Vec[int64]
	v.Init(&a)
	for round := range 2 { // a released list is used again
		const n = 1_000_000
		for i := range n {
			v.Append(int64(i + round))
		}
		if v.Len() != n || len(v.Chunks()) < 3 {
			t.Fatalf("Len %d in %d chunks, want %d in several", v.Len(), len(v.Chunks()), n)
		}
		i := 0
		for _, c := range v.Chunks() {
			for _, x := range c {
				if x != int64(i+round) {
					t.Fatalf("value %d is %d, want %d", i, x, i+round)
				}
				i++
			}
		}
		if i != n {
			t.Fatalf("the chunks hold %d values, want %d", i, n)
		}
		if a.Mapped() < n*8 {
			t.Fatalf("%d bytes mapped for %d values of 8 bytes", a.Mapped(), n)
		}
		v.Release()
		if v.Len() != 0 || a.Mapped() != 0 {
			t.Fatalf("after Release: Len %d, %d bytes mapped", v.Len(), a.Mapped())
		}
	}
}

func TestVecResetKeepsHeapChunks(t *testing.T) {
	var a Arena
	defer a.Close()
	var v Vec[int64]
	v.Init(&a)
	for round := range 3 {
		n := []int{1000, 100_000, 10}[round]
		for i := range n {
			v.Append(int64(i))
		}
		got := 0
		for _, c := range v.Chunks() {
			for _, x := range c {
				if x != int64(got) {
					t.Fatalf("round %d: value %d is %d", round, got, x)
				}
				got++
			}
		}
		if got != n || v.Len() != n {
			t.Fatalf("round %d: %d values, Len %d, want %d", round, got, v.Len(), n)
		}
		v.Reset()
		if a.Mapped() != 0 {
			t.Fatalf("round %d: %d bytes mapped after Reset", round, a.Mapped())
		}
		if len(v.Chunks()) != 0 {
			t.Fatalf("round %d: a list reset has %d chunks of values", round, len(v.Chunks()))
		}
	}
	if len(v.chunks) == 0 {
		t.Fatal("Reset dropped the chunks on the heap")
	}
}

// With huge pages on, a mapping of a huge page or more starts on a huge
// page boundary, so the kernel can back it with huge pages, and the rest
// of what was mapped to align it was given back: freeing it returns Mapped
// to 0, and memory around it stays usable.
func TestMakeAlignsHugeMappings(t *testing.T) {
	defer SetHugePages(SetHugePages(true))
	// Where no huge pages are asked for (not Linux), the sizes are still
	// mapped and freed, and only the alignment goes unchecked.
	huge := uintptr(max(hugePage, 2<<20))
	var a Arena
	defer a.Close()
	var kept [][]byte
	for _, size := range []int{int(huge), int(huge) + 1, 3*int(huge) + 4096, 5 << 20} {
		b := Make[byte](&a, size)
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(b))); hugePage > 0 && p%huge != 0 {
			t.Fatalf("a mapping of %d bytes starts at %#x, not on a %d-byte boundary", size, p, hugePage)
		}
		if hugePage > 0 && a.Mapped() < size {
			t.Fatalf("mapped %d bytes after a slice of %d", a.Mapped(), size)
		}
		for i := range b {
			b[i] = byte(i)
		}
		kept = append(kept, b)
	}
	for _, b := range kept {
		for i := 0; i < len(b); i += 4093 {
			if b[i] != byte(i) {
				t.Fatalf("byte %d of a %d-byte mapping reads %d: mappings overlap", i, len(b), b[i])
			}
		}
		Free(&a, b)
	}
	if a.Mapped() != 0 {
		t.Fatalf("%d bytes still mapped after freeing every slice", a.Mapped())
	}
}

// TestAppendGrowsOutsideTheHeap appends values one at a time past
// MinMapped bytes: the slice moves outside the heap once, then grows by
// remapping, and keeps every value.
func TestAppendGrowsOutsideTheHeap(t *testing.T) {
	type entry struct {
		a, b int64
		c    int32
	}
	var a Arena
	var s []entry
	const n = 3 * MinMapped // values of 24 bytes: about 72 MinMapped's worth
	moves := 0
	for i := range n {
		before := unsafe.SliceData(s)
		s = Append(&a, s, entry{a: int64(i), b: -int64(i), c: int32(i)})
		if before != unsafe.SliceData(s) {
			moves++
		}
		if i == 100 && a.Mapped() != 0 {
			t.Fatalf("%d bytes mapped for 101 values, want them on the heap", a.Mapped())
		}
	}
	if len(s) != n {
		t.Fatalf("len %d, want %d", len(s), n)
	}
	for i, e := range s {
		if e != (entry{a: int64(i), b: -int64(i), c: int32(i)}) {
			t.Fatalf("value %d is %+v", i, e)
		}
	}
	size := int(unsafe.Sizeof(entry{}))
	if got := a.Mapped(); got != cap(s)*size || !isMapped(&a, s) {
		t.Fatalf("mapped %d bytes (mapped: %v), want the slice's %d", got, isMapped(&a, s), cap(s)*size)
	}
	if len(a.maps) != 1 {
		t.Fatalf("%d mappings, want only the slice's: a grown one was not given back", len(a.maps))
	}
	// The room past the values is zero, as Make's is.
	extra := s[len(s):cap(s)]
	for i := range extra {
		if extra[i] != (entry{}) {
			t.Fatalf("value %d past the end is %+v, want zero", len(s)+i, extra[i])
		}
	}
	// Grow by more than doubling: the room is what was asked for.
	s = Grow(&a, s, 5*cap(s))
	if cap(s)-len(s) < 5*n {
		t.Fatalf("cap %d after Grow by %d from len %d", cap(s), 5*n, len(s))
	}
	if s[n-1].c != n-1 {
		t.Fatalf("last value after Grow: %+v", s[n-1])
	}
	if got := Grow(&a, s, 1); unsafe.SliceData(got) != unsafe.SliceData(s) || cap(got) != cap(s) {
		t.Fatal("Grow with room enough moved the slice")
	}
	t.Logf("%d values of %d bytes: %d moves, %d bytes mapped", n, size, moves, a.Mapped())
	a.Close()
	if a.Mapped() != 0 {
		t.Fatalf("after Close: %d bytes", a.Mapped())
	}
}
