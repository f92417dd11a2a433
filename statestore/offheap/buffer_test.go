package offheap

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// TestBufferReadsWhatWasWritten writes pieces of every size around the
// chunk size and reads them back every way a Buffer is read.
func TestBufferReadsWhatWasWritten(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var b Buffer
	for round, total := range []int{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + 12345} {
		var want bytes.Buffer
		for want.Len() < total {
			p := make([]byte, min(total-want.Len(), []int{1, 7, 4096, ChunkSize - 3, ChunkSize, 2*ChunkSize + 5}[rng.IntN(6)]))
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			if n, err := b.Write(p); n != len(p) || err != nil {
				t.Fatalf("Write of %d bytes: %d, %v", len(p), n, err)
			}
			want.Write(p)
		}
		if b.Len() != int64(total) {
			t.Fatalf("round %d: Len %d, want %d", round, b.Len(), total)
		}
		if !bytes.Equal(b.Bytes(), want.Bytes()) {
			t.Fatalf("round %d: Bytes differ from what was written (%d bytes)", round, total)
		}
		// Read in odd sizes.
		r := b.Reader()
		var got []byte
		buf := make([]byte, 99_991)
		for {
			n, err := r.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil || n == 0 {
				t.Fatalf("round %d: Read: %d, %v", round, n, err)
			}
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("round %d: Read differs from what was written", round)
		}
		// Seek back into the middle and copy the rest (WriteTo).
		mid := int64(total / 3)
		if off, err := r.Seek(mid, io.SeekStart); off != mid || err != nil {
			t.Fatalf("round %d: Seek(%d): %d, %v", round, mid, off, err)
		}
		var rest bytes.Buffer
		if n, err := io.Copy(&rest, r); n != int64(total)-mid || err != nil {
			t.Fatalf("round %d: io.Copy after Seek: %d, %v", round, n, err)
		}
		if !bytes.Equal(rest.Bytes(), want.Bytes()[mid:]) {
			t.Fatalf("round %d: the rest after Seek(%d) differs", round, mid)
		}
		if off, err := r.Seek(-1, io.SeekEnd); total > 0 && (off != int64(total)-1 || err != nil) {
			t.Fatalf("round %d: Seek(-1, end): %d, %v", round, off, err)
		}
		if _, err := r.Seek(-int64(total)-1, io.SeekEnd); err == nil {
			t.Fatalf("round %d: a seek before the start did not fail", round)
		}
		b.Release()
		if b.Len() != 0 || len(b.Bytes()) != 0 {
			t.Fatalf("round %d: a released buffer holds %d bytes", round, b.Len())
		}
	}
}
