package offheap

import (
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestAllocatorMapsLargeBuffers: buffers of MinMapped bytes or more are
// mapped, zeroed and unmapped on Free; smaller ones come from the small
// allocator, which sees every one of them freed; growing a buffer keeps
// its bytes across the threshold.
func TestAllocatorMapsLargeBuffers(t *testing.T) {
	small := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer small.AssertSize(t, 0)
	a := NewAllocator(small)

	s := a.Allocate(100)
	if a.Mapped() != 0 || small.CurrentAlloc() != 100 {
		t.Fatalf("100 bytes: mapped %d, small %d; want them from the small allocator", a.Mapped(), small.CurrentAlloc())
	}
	for i := range s {
		s[i] = byte(i)
	}
	// Grown past the threshold: mapped, with its bytes, and the small
	// buffer freed.
	g := a.Reallocate(3*MinMapped, s)
	if a.Mapped() != 3*MinMapped || small.CurrentAlloc() != 0 {
		t.Fatalf("grown to %d bytes: mapped %d, small %d", 3*MinMapped, a.Mapped(), small.CurrentAlloc())
	}
	for i := range 100 {
		if g[i] != byte(i) {
			t.Fatalf("byte %d is %d after growing, want %d", i, g[i], byte(i))
		}
	}
	for i := 100; i < len(g); i++ {
		if g[i] != 0 {
			t.Fatalf("byte %d of the grown buffer is %d, want 0", i, g[i])
		}
	}
	// Shrunk and grown again within its mapping: the same memory.
	if h := a.Reallocate(MinMapped, g); &h[0] != &g[0] || a.Mapped() != 3*MinMapped {
		t.Fatalf("shrinking moved the buffer or changed the mapping (%d bytes)", a.Mapped())
	}
	if h := a.Reallocate(2*MinMapped, g[:MinMapped]); &h[0] != &g[0] || h[99] != 99 {
		t.Fatal("growing within the mapping moved the buffer or lost its bytes")
	}
	// Grown past its mapping: a larger one (remapped on Linux, else a
	// new one and a copy), with its bytes and zeros after them.
	g[2*MinMapped] = 7
	g = a.Reallocate(8*MinMapped, g)
	if a.Mapped() != 8*MinMapped || g[99] != 99 || g[2*MinMapped] != 7 {
		t.Fatalf("grown past its mapping: %d bytes mapped, byte 99 = %d, byte %d = %d", a.Mapped(), g[99], 2*MinMapped, g[2*MinMapped])
	}
	for i := 3 * MinMapped; i < len(g); i++ {
		if g[i] != 0 {
			t.Fatalf("byte %d of the grown buffer is %d, want 0", i, g[i])
		}
	}
	g[len(g)-1] = 1 // all of it is writable
	a.Free(g)
	if a.Mapped() != 0 {
		t.Fatalf("%d bytes mapped after the last buffer was freed", a.Mapped())
	}
}

// TestAllocatorAcrossGoroutines builds Arrow batches on some goroutines
// and releases them on others, as a task and its uploader do (run under
// -race), and checks the values and that nothing stays mapped.
func TestAllocatorAcrossGoroutines(t *testing.T) {
	small := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer small.AssertSize(t, 0)
	a := NewAllocator(small)
	schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	built := make(chan arrow.RecordBatch)
	var builders, releasers sync.WaitGroup
	for w := range 4 {
		builders.Go(func() {
			for n := range 6 {
				rows := 1000 << n // 1000 to 32000 rows: small and mapped buffers
				b := array.NewRecordBuilder(a, schema)
				for i := range rows {
					b.Field(0).(*array.Int64Builder).Append(int64(w*1_000_000 + i))
					b.Field(1).(*array.StringBuilder).Append("row")
				}
				built <- b.NewRecordBatch()
				b.Release()
			}
		})
	}
	var mu sync.Mutex
	var maxMapped int
	for range 2 {
		releasers.Go(func() {
			for rec := range built {
				k := rec.Column(0).(*array.Int64)
				for i := 0; i < k.Len(); i++ {
					if got := k.Value(i) % 1_000_000; got != int64(i) {
						t.Errorf("row %d holds %d", i, got)
						break
					}
				}
				mu.Lock()
				maxMapped = max(maxMapped, a.Mapped())
				mu.Unlock()
				rec.Release()
			}
		})
	}
	builders.Wait()
	close(built)
	releasers.Wait()
	if maxMapped == 0 {
		t.Error("no buffer was ever mapped: the batches were all on the heap")
	}
	if a.Mapped() != 0 {
		t.Errorf("%d bytes still mapped after every batch was released", a.Mapped())
	}
}
