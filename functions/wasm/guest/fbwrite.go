package guest

import "encoding/binary"

var le = binary.LittleEndian

// fbWriter lays out a flatbuffer front to back: a table's vtable just
// before it, and whatever a table points to (strings, vectors, other
// tables) after it, since flatbuffer offsets point forward. Callers write
// a table's scalar fields at the positions table returns and link offset
// fields with link once the target is written. The IPC messages the SDK
// sends have a fixed shape per schema, so this is built once per schema;
// record batch metadata is then patched in place (see encoder).
type fbWriter struct{ b []byte }

// newFBWriter starts a flatbuffer with room for the root table's offset.
func newFBWriter() *fbWriter { return &fbWriter{b: make([]byte, 4, 256)} }

func (w *fbWriter) pad(align int) {
	for len(w.b)%align != 0 {
		w.b = append(w.b, 0)
	}
}

// table writes a vtable and a zeroed table whose fields (by id) take the
// given sizes in bytes, 0 for a field left out, and returns the table's
// position and each field's position (0 for one left out). Fields are
// aligned to their size.
func (w *fbWriter) table(sizes ...int) (int, []int) {
	w.pad(2)
	vt := len(w.b)
	vtSize := 4 + 2*len(sizes)
	w.b = append(w.b, make([]byte, vtSize)...)
	w.pad(4)
	pos := len(w.b)
	w.b = le.AppendUint32(w.b, uint32(pos-vt)) // soffset: the vtable is pos - it
	at := make([]int, len(sizes))
	for i, s := range sizes {
		if s == 0 {
			continue
		}
		w.pad(s)
		at[i] = len(w.b)
		w.b = append(w.b, make([]byte, s)...)
	}
	le.PutUint16(w.b[vt:], uint16(vtSize))
	le.PutUint16(w.b[vt+2:], uint16(len(w.b)-pos))
	for i, p := range at {
		if p != 0 {
			le.PutUint16(w.b[vt+4+2*i:], uint16(p-pos))
		}
	}
	return pos, at
}

// vector writes the length and n zeroed elements of size bytes aligned to
// align (at least 4), and returns the vector's position (what an offset to
// it points at) and its first element's.
func (w *fbWriter) vector(n, size, align int) (pos, elems int) {
	for (len(w.b)+4)%align != 0 {
		w.b = append(w.b, 0)
	}
	pos = len(w.b)
	w.b = le.AppendUint32(w.b, uint32(n))
	elems = len(w.b)
	w.b = append(w.b, make([]byte, n*size)...)
	return pos, elems
}

// str writes s as a flatbuffer string and returns its position.
func (w *fbWriter) str(s string) int {
	w.pad(4)
	pos := len(w.b)
	w.b = le.AppendUint32(w.b, uint32(len(s)))
	w.b = append(w.b, s...)
	w.b = append(w.b, 0)
	return pos
}

// link stores at at the offset to target, which lies after it.
func (w *fbWriter) link(at, target int) { le.PutUint32(w.b[at:], uint32(target-at)) }

func (w *fbWriter) put8(at int, v uint8)  { w.b[at] = v }
func (w *fbWriter) put16(at int, v int16) { le.PutUint16(w.b[at:], uint16(v)) }
func (w *fbWriter) put32(at int, v int32) { le.PutUint32(w.b[at:], uint32(v)) }
func (w *fbWriter) root(table int)        { w.link(0, table) }
func (w *fbWriter) finish() []byte        { w.pad(8); return w.b }
