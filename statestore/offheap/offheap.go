// Package offheap keeps large, long-lived, pointer-free state outside the
// Go heap, as Flink keeps its managed memory outside the JVM's.
//
// Why: the garbage collector lets the heap grow to about twice what is
// live before it collects (GOGC=100), so a state of N bytes on the heap
// costs a process up to 2N, and more while a slice doubles. Memory mapped
// here is not counted in the heap, not scanned and not collected: it costs
// what it holds.
//
// What may live here: values whose types hold no string, slice, map,
// channel, function or interface (Make refuses them). Pointers are allowed
// only to memory of the same Arena, which the garbage collector neither
// sees nor needs to: an Arena's owner frees it, and must not use a value
// after freeing it. Small allocations (below MinMapped bytes) come from
// the Go heap as usual, so that a small state does not map a page per
// slice.
//
// An Arena and what it hands out belong to one goroutine.
package offheap

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// MinMapped is the smallest allocation that is mapped outside the heap.
const MinMapped = 64 << 10

// maxChunk is the largest chunk a Slab or a Vec maps at once.
const maxChunk = 4 << 20

// Arena hands out slices, mapping the large ones outside the Go heap, and
// unmaps what is still mapped when it is closed. Its zero value is ready.
type Arena struct {
	maps   map[*byte][]byte // mapped memory by its first byte
	mapped int
}

// Mapped returns the bytes mapped outside the Go heap and not freed.
func (a *Arena) Mapped() int { return a.mapped }

// Close unmaps everything the arena still has mapped. What it handed out
// must not be used after.
func (a *Arena) Close() {
	for p, b := range a.maps {
		unmap(b)
		delete(a.maps, p)
	}
	a.mapped = 0
}

// Make returns a zeroed slice of n values of T, mapped outside the Go heap
// if it takes at least MinMapped bytes. It panics if T may hold a
// reference to the Go heap other than a pointer (see the package comment).
func Make[T any](a *Arena, n int) []T { return makeSlice[T](a, n, false) }

// MakeFilled is Make for a slice the caller writes all over at once (a
// hash table it rebuilds): the mapping comes with its pages in memory
// (MAP_POPULATE on Linux), one system call instead of a page fault for
// every page as the writes reach it. A fresh mapping faults where reused
// heap memory does not, and on this 2-vCPU VM those faults cost a heap
// table's index 5-7% of a job's CPU (docs/benchmarks.md).
func MakeFilled[T any](a *Arena, n int) []T { return makeSlice[T](a, n, true) }

func makeSlice[T any](a *Arena, n int, populate bool) []T {
	checkType(reflect.TypeFor[T]())
	size := int(reflect.TypeFor[T]().Size()) * n
	if size < MinMapped || size == 0 {
		return make([]T, n)
	}
	b, err := mapAnon(size, populate)
	if err != nil { // not supported here, or out of address space: the heap
		return make([]T, n)
	}
	if a.maps == nil {
		a.maps = map[*byte][]byte{}
	}
	a.maps[unsafe.SliceData(b)] = b
	a.mapped += len(b)
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// Append appends x to s, as the built-in append does, for a slice that
// grows one value at a time into a large table (a join's keys, say): s is
// nil or a slice Make, Append or Grow returned. Use the slice returned,
// not s, after.
func Append[T any](a *Arena, s []T, x T) []T {
	if len(s) == cap(s) {
		s = Grow(a, s, 1)
	}
	return append(s, x)
}

// Grow returns s with room for n more values, as slices.Grow does, for s
// nil or a slice Make, Append or Grow returned. The room doubles; once it
// takes MinMapped bytes it is mapped outside the Go heap, and from then on
// it grows by remapping its pages (Linux's mremap) instead of copying
// them, so that a growing table neither holds its old and new copies at
// once nor copies itself. The values may move: pointers to them, and
// values that point into s, are not valid after. Use the slice returned,
// not s, after.
func Grow[T any](a *Arena, s []T, n int) []T {
	if n < 0 {
		panic("offheap: Grow by a negative length")
	}
	if cap(s)-len(s) >= n {
		return s
	}
	checkType(reflect.TypeFor[T]())
	want := max(len(s)+n, 2*cap(s), 64)
	size := int(reflect.TypeFor[T]().Size()) * want
	if size < MinMapped || size == 0 {
		return slices.Grow(s, want-len(s))
	}
	if isMapped(a, s) {
		p := (*byte)(unsafe.Pointer(unsafe.SliceData(s)))
		old := a.maps[p]
		if b, err := remap(old, size); err == nil {
			delete(a.maps, p)
			a.maps[unsafe.SliceData(b)] = b
			a.mapped += len(b) - len(old)
			return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), want)[:len(s)]
		}
	}
	ns := Make[T](a, want)[:len(s)]
	copy(ns, s)
	Free(a, s)
	return ns
}

// isMapped reports whether s, which Make returned, is mapped outside the
// heap.
func isMapped[T any](a *Arena, s []T) bool {
	if cap(s) == 0 {
		return false
	}
	_, ok := a.maps[(*byte)(unsafe.Pointer(unsafe.SliceData(s)))]
	return ok
}

// Free gives back s, which Make returned (any slice of it that starts at
// its first value). s must not be used after.
func Free[T any](a *Arena, s []T) {
	if cap(s) == 0 {
		return
	}
	p := (*byte)(unsafe.Pointer(unsafe.SliceData(s)))
	if b, ok := a.maps[p]; ok { // else on the heap: the collector frees it
		delete(a.maps, p)
		a.mapped -= len(b)
		unmap(b)
	}
}

// Allowed reports whether values of T may live outside the heap: whether
// Make, Append and Grow accept T (see the package comment).
func Allowed[T any]() bool { return heapRef(reflect.TypeFor[T]()) == "" }

// checked holds the types checkType accepted.
var checked sync.Map // reflect.Type -> struct{}

// checkType panics if a value of t may refer to the Go heap other than by
// a pointer.
func checkType(t reflect.Type) {
	if _, ok := checked.Load(t); ok {
		return
	}
	if what := heapRef(t); what != "" {
		panic(fmt.Sprintf("offheap: %v holds a %s, which the garbage collector would not see outside the heap", t, what))
	}
	checked.Store(t, struct{}{})
}

func heapRef(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
		return t.Kind().String()
	case reflect.Array:
		return heapRef(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if what := heapRef(t.Field(i).Type); what != "" {
				return what
			}
		}
	}
	return ""
}

// chunkLen is the length of a Slab's or Vec's chunk number k of values of
// size bytes: 64 values, doubling up to maxChunk bytes.
func chunkLen(k, size int) int {
	n := 64
	for ; k > 0 && n*size < maxChunk; k-- {
		n *= 2
	}
	return max(n, 1)
}

// Slab hands out values of T one at a time from chunks of an Arena, and
// reuses the ones freed. A value stays where it is until it is freed, so
// a pointer to it is valid until then. Each value has a Ref, 32 bits that
// name it in its slab, for tables that would rather not hold a pointer
// (a pointer costs 8 bytes, and a slice of them is scanned by the garbage
// collector when it is on the heap). Its zero value is not ready: call
// Init.
type Slab[T any] struct {
	a      *Arena
	chunks [][]T
	used   int // values handed out of the last chunk
	// free is the Ref+1 of the latest value freed, 0 for none. A freed
	// value holds the next one's Ref+1 in its first 4 bytes (T is at
	// least 4 bytes long, see Init), so the list of freed values takes
	// no memory of its own: at a tumbling period's end every key is
	// freed at once, and a slice of their Refs grew on the heap.
	free Ref
	live int
	// lanes, if set (SetLanes), hand out values of each lane from blocks
	// of LaneBlock values that hold that lane's only, each block with a
	// free list of its own: see NewIn.
	lanes []slabLane
}

// slabLane is a lane's block being handed out, [next, end), and its free
// list (Ref+1, as Slab.free).
type slabLane struct{ next, end, free Ref }

// LaneBlock is how many values a lane's block holds: 16, 1 KiB of 64-byte
// values. A walk of a lane reads 16 lines in a row. Blocks of a 4 KiB
// page read faster still, but every lane writes its new values into its
// own block, and with a window's 128 lanes of records and 128 of slots
// those pages alone filled a core's 1 MiB L2 cache: making keys cost more
// than the walks gained (docs/benchmarks.md, "Keys in lanes"). Every
// chunk's length is a multiple of it (chunkLen), so a block never
// straddles two chunks.
const LaneBlock = 16

// Ref names a value of a Slab: its chunk (high 16 bits) and its index
// in the chunk (low 16 bits). No Ref is 2^32-1, so Ref+1 fits 32 bits.
type Ref uint32

// slabChunkBits bounds the length of a Slab's chunk, so that a Ref holds
// the index in it.
const slabChunkBits = 16

// Init makes the slab allocate from a. It panics if T is shorter than 4
// bytes or aligned to fewer.
func (s *Slab[T]) Init(a *Arena) {
	if t := reflect.TypeFor[T](); t.Size() < 4 || t.Align() < 4 {
		panic(fmt.Sprintf("offheap: a Slab of %v: values must be at least 4 bytes long and aligned to 4", t))
	}
	s.a = a
}

// nextFree is where a freed value holds the Ref+1 of the one freed
// before it.
func nextFree[T any](v *T) *Ref { return (*Ref)(unsafe.Pointer(v)) }

// New returns a zeroed value and its Ref.
func (s *Slab[T]) New() (Ref, *T) {
	s.live++
	if s.free != 0 {
		return s.pop(&s.free)
	}
	r := s.take(1)
	return r, s.At(r)
}

// pop takes the value a list of freed values (head: its first's Ref+1,
// not 0) begins with, zeroes the bytes that held the list, and returns it.
func (s *Slab[T]) pop(head *Ref) (Ref, *T) {
	r := *head - 1
	v := s.At(r)
	next := nextFree(v)
	*head, *next = *next, 0
	return r, v
}

// push zeroes the value r names and puts it first on the list of freed
// values head begins.
func (s *Slab[T]) push(head *Ref, r Ref) {
	var zero T
	v := s.At(r)
	*v = zero
	*nextFree(v) = *head
	*head = r + 1
	s.live--
}

// take returns the Ref of the first of n values never handed out, next
// to each other in one chunk; n divides every chunk's length.
func (s *Slab[T]) take(n int) Ref {
	if k := len(s.chunks); k == 0 || s.used == len(s.chunks[k-1]) {
		if k == 1<<slabChunkBits-1 {
			// The last chunk is not made, so no Ref is 2^32-1: a table
			// may store Ref+1 in 32 bits.
			panic("offheap: a Slab holds fewer than 2^32-2^16 values")
		}
		c := min(chunkLen(k, int(reflect.TypeFor[T]().Size())), 1<<slabChunkBits)
		s.chunks = append(s.chunks, Make[T](s.a, c))
		s.used = 0
	}
	if s.used%n != 0 {
		// New took single values since the last block: skip to the
		// next boundary (those values are lost to lanes until then).
		s.used += n - s.used%n
		if s.used == len(s.chunks[len(s.chunks)-1]) {
			return s.take(n)
		}
	}
	k := len(s.chunks) - 1
	r := Ref(k<<slabChunkBits | s.used)
	s.used += n
	return r
}

// SetLanes gives the slab n lanes (NewIn, FreeIn; without lanes they
// are New and Free). A slab whose values are walked a lane at a time,
// such as a window's keys a key group at a time when a checkpoint
// captures them, keeps each lane's values in blocks of their own: the walk, in the order of the Refs, then reads
// whole blocks of neighbours instead of one line per value from all over
// the slab. Call it before any NewIn; New and Free stay usable beside.
func (s *Slab[T]) SetLanes(n int) { s.lanes = make([]slabLane, n) }

// NewIn returns a zeroed value of lane l and its Ref: one freed in the
// lane, or the next of the lane's block, or the first of a new block.
//
// It then asks for (Prefetch) the value the lane's next NewIn will hand
// out. With many lanes, each lane's next value is a line that no
// sequential stream leads to, and the write to it would wait for memory;
// asked for now, it is in the cache when the lane's turn comes.
func (s *Slab[T]) NewIn(l int) (Ref, *T) {
	if s.lanes == nil {
		return s.New()
	}
	ln := &s.lanes[l]
	s.live++
	var r Ref
	var v *T
	if ln.free != 0 {
		r, v = s.pop(&ln.free)
	} else {
		if ln.next == ln.end {
			ln.next = s.take(LaneBlock)
			ln.end = ln.next + LaneBlock
		}
		r = ln.next
		ln.next++
		v = s.At(r)
	}
	switch {
	case ln.free != 0:
		Prefetch(unsafe.Pointer(s.At(ln.free - 1)))
	case ln.next != ln.end:
		Prefetch(unsafe.Pointer(s.At(ln.next)))
	}
	return r, v
}

// FreeIn zeroes the value r names, which NewIn(l) returned, and keeps it
// for a later NewIn(l).
func (s *Slab[T]) FreeIn(l int, r Ref) {
	if s.lanes == nil {
		s.Free(r)
		return
	}
	s.push(&s.lanes[l].free, r)
}

// At returns the value r names, which New returned and which is not
// freed.
func (s *Slab[T]) At(r Ref) *T {
	return &s.chunks[r>>slabChunkBits][r&(1<<slabChunkBits-1)]
}

// Free zeroes the value r names, which New returned, and keeps it for a
// later New.
func (s *Slab[T]) Free(r Ref) { s.push(&s.free, r) }

// Len returns the values handed out and not freed.
func (s *Slab[T]) Len() int { return s.live }

// Release frees every chunk: no value of the slab may be used after.
func (s *Slab[T]) Release() {
	for _, c := range s.chunks {
		Free(s.a, c)
	}
	s.chunks, s.free, s.used, s.live = nil, 0, 0, 0
	clear(s.lanes)
}

// Vec is a list of values of T that grows by chunks of an Arena: it never
// copies what it holds. Its zero value is not ready: call Init.
type Vec[T any] struct {
	a      *Arena
	chunks [][]T // their lengths are what they hold: each full up to cur
	cur    int   // the chunk being filled, if any
	tail   []T   // chunks[cur] as it is filled (chunks[cur] is behind it)
	full   int   // the values in chunks before cur
}

// Init makes the list allocate from a.
func (v *Vec[T]) Init(a *Arena) { v.a = a }

// Append adds x at the end. It is small enough to be inlined: a window's
// change lists take one per key changed.
func (v *Vec[T]) Append(x T) {
	if len(v.tail) == cap(v.tail) {
		v.grow()
	}
	v.tail = append(v.tail, x)
}

// grow moves to the next chunk, making it if there is none.
func (v *Vec[T]) grow() {
	if len(v.chunks) > 0 {
		v.chunks[v.cur] = v.tail
		v.full += len(v.tail)
		v.cur++
	}
	if v.cur == len(v.chunks) {
		v.chunks = append(v.chunks, Make[T](v.a, chunkLen(v.cur, int(reflect.TypeFor[T]().Size())))[:0])
	}
	v.tail = v.chunks[v.cur][:0]
}

// Len returns how many values the list holds.
func (v *Vec[T]) Len() int { return v.full + len(v.tail) }

// Chunks returns the list's values, in order, in the slices that hold
// them. The slices alias the list: they are valid until it is reset or
// released.
func (v *Vec[T]) Chunks() [][]T {
	if v.Len() == 0 {
		return nil
	}
	v.chunks[v.cur] = v.tail
	return v.chunks[:v.cur+1]
}

// Reset empties the list. It keeps its chunks on the Go heap for the
// values to come, and frees the mapped ones.
func (v *Vec[T]) Reset() {
	if len(v.chunks) > 0 {
		v.chunks[v.cur] = v.tail
	}
	keep := 0
	for _, c := range v.chunks {
		if isMapped(v.a, c) {
			Free(v.a, c[:cap(c)])
			continue
		}
		v.chunks[keep] = c[:0]
		keep++
	}
	clear(v.chunks[keep:])
	v.chunks, v.cur, v.full, v.tail = v.chunks[:keep], 0, 0, nil
	if keep > 0 {
		v.tail = v.chunks[0]
	}
}

// Release empties the list and frees its chunks.
func (v *Vec[T]) Release() {
	if len(v.chunks) > 0 {
		v.chunks[v.cur] = v.tail
	}
	for _, c := range v.chunks {
		Free(v.a, c[:cap(c)])
	}
	clear(v.chunks)
	v.chunks, v.cur, v.full, v.tail = v.chunks[:0], 0, 0, nil
}

// hugePages is whether large mappings ask for transparent huge pages (see
// SetHugePages).
var hugePages atomic.Bool

// SetHugePages sets whether the mappings made from now on of a huge page
// or more (2 MiB on Linux) ask the kernel for transparent huge pages
// (MADV_HUGEPAGE; nothing where that is not Linux), and returns what it
// was. Off, the default, such memory gets what the system gives unasked:
// no huge pages where transparent huge pages are "madvise" (Debian's
// default), huge pages where they are "always".
//
// Huge pages make random reads over a large state cheaper, as they miss
// the TLB less, but the first write to each costs the kernel a 2 MiB page
// to clear where a 4 KiB page would do. Where guest memory the host has
// taken back must be given again (a VM with free page reporting, such as
// Firecracker's) that costs milliseconds a huge page: a job that builds
// its state once and keeps it for minutes gains, one that builds it in
// seconds loses (docs/benchmarks.md measures both). It is a setting of
// the process, as the machine decides it: a worker's --huge-pages.
func SetHugePages(on bool) bool { return hugePages.Swap(on) }
