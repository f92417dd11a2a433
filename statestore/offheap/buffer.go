package offheap

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// Buffer holds bytes written to it in chunks outside the Go heap: an
// encoded state file on its way to the bucket, say. Writing never moves
// what was written, where a bytes.Buffer doubles, zeroing its new room
// and copying the old, and leaves the halves it outgrew to the collector,
// whose next goal is then about twice what is live (see the package
// comment). Its zero value is ready; it is not safe for concurrent use.
//
// Release gives the chunks back to a pool the process keeps, and their
// pages back to the system. The pool never unmaps them: something may
// still read a released chunk. net/http, for one, may go on writing a
// request's body after the response came (an early error reply), so a
// body read from a Buffer released once its upload returned may still be
// read from; it reads zeros or another Buffer's bytes, never unmapped
// memory.
type Buffer struct {
	chunks [][]byte // each ChunkSize long
	n      int64
}

// ChunkSize is the size of a Buffer's chunks.
const ChunkSize = 1 << 20

// Len returns the bytes written.
func (b *Buffer) Len() int64 { return b.n }

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		off := int(b.n % ChunkSize)
		if off == 0 && b.n == int64(len(b.chunks))*ChunkSize {
			b.chunks = append(b.chunks, chunks.get())
		}
		c := copy(b.chunks[len(b.chunks)-1][off:], p)
		p = p[c:]
		b.n += int64(c)
	}
	return n, nil
}

// Bytes returns a copy of the bytes written, on the Go heap.
func (b *Buffer) Bytes() []byte {
	out := make([]byte, b.n)
	for i, c := range b.chunks {
		copy(out[i*ChunkSize:], c)
	}
	return out
}

// Reader returns a reader of the bytes written, from the first, which
// can seek (as an upload that is retried rewinds its body). It reads
// the Buffer: writing to it or releasing it changes what it reads.
func (b *Buffer) Reader() *BufferReader { return &BufferReader{b: b} }

// Release gives back the chunks and empties the Buffer, which can be
// written again. What it held must not be used after (see Buffer).
func (b *Buffer) Release() {
	for _, c := range b.chunks {
		chunks.put(c)
	}
	clear(b.chunks)
	b.chunks, b.n = b.chunks[:0], 0
}

// BufferReader reads a Buffer (Buffer.Reader).
type BufferReader struct {
	b   *Buffer
	off int64
}

var (
	_ io.ReadSeeker = (*BufferReader)(nil)
	_ io.WriterTo   = (*BufferReader)(nil)
)

// Read implements io.Reader.
func (r *BufferReader) Read(p []byte) (int, error) {
	if r.off >= r.b.n {
		return 0, io.EOF
	}
	n := 0
	for len(p) > 0 && r.off < r.b.n {
		c := r.chunk()
		k := copy(p, c)
		p = p[k:]
		n += k
		r.off += int64(k)
	}
	return n, nil
}

// chunk returns the rest of the chunk the reader is in, up to the end of
// what was written.
func (r *BufferReader) chunk() []byte {
	i, off := r.off/ChunkSize, r.off%ChunkSize
	end := min(int64(ChunkSize), r.b.n-i*ChunkSize)
	return r.b.chunks[i][off:end]
}

// WriteTo writes the rest to w chunk by chunk (io.Copy uses it).
func (r *BufferReader) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for r.off < r.b.n {
		k, err := w.Write(r.chunk())
		n += int64(k)
		r.off += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Seek implements io.Seeker.
func (r *BufferReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.b.n
	default:
		return r.off, fmt.Errorf("offheap: seek: whence %d", whence)
	}
	if offset < 0 {
		return r.off, errors.New("offheap: seek before the start")
	}
	r.off = offset
	return offset, nil
}

// chunkPool holds the chunks no Buffer holds. Up to hotChunks of them keep
// their pages, so that a small file after a small file faults in none;
// the others give their pages back (dropPages) and fault them in, zeroed,
// when written again.
type chunkPool struct {
	mu   sync.Mutex
	hot  [][]byte
	cold [][]byte
	// mapped holds the first byte of every chunk mapped: a chunk from
	// the heap (where nothing can be mapped) is left to the collector.
	mapped map[*byte]bool
}

const hotChunks = 8

var (
	chunks chunkPool
	// chunksHeld counts the chunks Buffers hold (BufferChunks).
	chunksHeld atomic.Int64
)

// BufferChunks returns how many chunks the process's Buffers hold: a
// Buffer never released keeps its chunks for good.
func BufferChunks() int64 { return chunksHeld.Load() }

func (p *chunkPool) get() []byte {
	chunksHeld.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range []*[][]byte{&p.hot, &p.cold} {
		if n := len(*l); n > 0 {
			c := (*l)[n-1]
			*l = (*l)[:n-1]
			return c
		}
	}
	c, err := mapAnon(ChunkSize, false)
	if err != nil { // not supported here, or out of address space: the heap
		return make([]byte, ChunkSize)
	}
	if p.mapped == nil {
		p.mapped = map[*byte]bool{}
	}
	p.mapped[&c[0]] = true
	return c
}

func (p *chunkPool) put(c []byte) {
	chunksHeld.Add(-1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mapped[&c[0]] {
		return
	}
	if len(p.hot) < hotChunks {
		p.hot = append(p.hot, c)
		return
	}
	dropPages(c)
	p.cold = append(p.cold, c)
}

// pooled returns the chunks in the pool and how many of them keep their
// pages (tests).
func (p *chunkPool) pooled() (all, hot int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.hot) + len(p.cold), len(p.hot)
}
