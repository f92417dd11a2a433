package offheap

import (
	"bytes"
	"testing"
)

// TestBufferReleaseKeepsChunksMapped: a released chunk stays readable
// (a reader that outlives the upload reads zeros, not unmapped memory),
// gives back its pages beyond the few kept hot, and is reused.
func TestBufferReleaseKeepsChunksMapped(t *testing.T) {
	var b Buffer
	for range 2 * hotChunks * ChunkSize / 4096 {
		_, _ = b.Write(bytes.Repeat([]byte{0xa5}, 4096))
	}
	held := append([][]byte(nil), b.chunks...)
	if n := BufferChunks(); n != int64(len(held)) {
		t.Fatalf("BufferChunks %d with one buffer of %d chunks", n, len(held))
	}
	before, _ := chunks.pooled()
	b.Release()
	all, hot := chunks.pooled()
	if all != before+len(held) || hot != hotChunks || BufferChunks() != 0 {
		t.Fatalf("after releasing %d chunks the pool holds %d (%d hot), BufferChunks %d; want %d (%d hot), 0", len(held), all, hot, BufferChunks(), before+len(held), hotChunks)
	}
	// The chunks released last went cold: their pages are gone, and they
	// read zeros.
	cold := held[len(held)-1]
	for i, c := range cold {
		if c != 0 {
			t.Fatalf("a chunk released cold still holds byte %d = %#x, want zeros", i, c)
		}
	}
	// Chunks come back from the pool before any is mapped.
	_, _ = b.Write(make([]byte, len(held)*ChunkSize))
	if after, _ := chunks.pooled(); after != all-len(held) {
		t.Fatalf("writing %d chunks took %d from the pool, want them all", len(held), all-after)
	}
	b.Release()
}
