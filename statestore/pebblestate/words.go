package pebblestate

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Values of words, and merging them. A table's values may be words: a
// header byte, whose low seven bits are flags of the value's owner, then
// 8-byte little-endian words (a window's accumulators). Such a value can
// be changed without reading it: Merge writes an operand, which pebble
// combines with the value beneath it when it is read or compacted (its
// merge operator, wordMerger), so that adding a row to a window that is
// on disk costs a write instead of a Get and a write.
//
// An operand is marked by the header's high bit. After the header it
// has one kind byte per word (WordKind: how the word combines), then the
// words. A merge ORs the flags and combines each word of the older value
// (or operand) with the newer operand's, the older on the left. A full
// value (high bit clear) is a base: what is older than it does not count.
// An operand with nothing beneath it counts as if it were on the words'
// identities: read, it is the full value of its flags and words.
//
// Every kind is associative and the older word stays on the left, so an
// entry's value does not depend on how pebble groups its operands: it is
// the value the words would have if each operand had been applied in
// turn. A float's sum is not associative, and has no kind.

// WordKind says how a merge combines a word of an older value (a) with
// the newer operand's (b).
type WordKind byte

const (
	WordAdd      WordKind = iota + 1 // a + b as int64s, wrapping
	WordMin                          // min(a, b) as int64s
	WordMax                          // max(a, b) as int64s
	WordMinFloat                     // float64 bits: the lesser; a NaN gives way to a number (a if equal)
	WordMaxFloat                     // float64 bits: the greater, or b if it is NaN (a if equal)
)

// mergerName is the name of the stores' merge operator; pebble writes it
// in a database's OPTIONS file and refuses to open one of another name.
const mergerName = "weir.words.v1"

// legacyMerger is pebble's default merge operator, the one stores had
// before they merged words: they hold no operand, but their sstables
// name it, and pebble reads an sstable with the merge operator it names
// only (see Restore).
const legacyMerger = "pebble.concatenate"

// storeMerger is the merge operator of the stores made from now on.
var storeMerger = wordMerger

// operandBit marks an operand in a value's header.
const operandBit = 0x80

// AppendOperand appends to dst a merge operand of flags (the low seven
// bits) and words, which combine as kinds says (one kind a word).
func AppendOperand(dst []byte, flags byte, kinds []WordKind, words []int64) []byte {
	if len(kinds) != len(words) {
		panic(fmt.Sprintf("pebblestate: an operand of %d words and %d kinds", len(words), len(kinds)))
	}
	dst = append(dst, flags&^operandBit|operandBit)
	for _, k := range kinds {
		dst = append(dst, byte(k))
	}
	for _, w := range words {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(w))
	}
	return dst
}

// operandWords returns the number of words of operand v.
func operandWords(v []byte) (int, error) {
	if len(v) == 0 || v[0]&operandBit == 0 || (len(v)-1)%9 != 0 {
		return 0, fmt.Errorf("a merge operand of %d bytes (header %s): want a marked header, then a kind and 8 bytes a word", len(v), header(v))
	}
	return (len(v) - 1) / 9, nil
}

func header(v []byte) string {
	if len(v) == 0 {
		return "none"
	}
	return fmt.Sprintf("%#x", v[0])
}

// mergeWords appends to dst what older and then newer, an operand, make.
// A full older value makes a full value, an operand another operand.
func mergeWords(dst, older, newer []byte) ([]byte, error) {
	n, err := operandWords(newer)
	if err != nil {
		return dst, err
	}
	kinds, nw := newer[1:1+n], newer[1+n:]
	var ow []byte // older's words
	switch {
	case len(older) == 0:
		return dst, errors.New("an empty value beneath a merge operand")
	case older[0]&operandBit != 0:
		m, err := operandWords(older)
		if err != nil {
			return dst, err
		}
		if m != n || !bytes.Equal(older[1:1+m], kinds) {
			return dst, fmt.Errorf("merge operands of different words: kinds %x and %x", older[1:1+m], kinds)
		}
		dst = append(dst, older[0]|newer[0])
		dst = append(dst, kinds...)
		ow = older[1+m:]
	default:
		if len(older) != 1+8*n {
			return dst, fmt.Errorf("a merge operand of %d words onto a value of %d bytes, want %d", n, len(older), 1+8*n)
		}
		dst = append(dst, older[0]|newer[0]&^operandBit)
		ow = older[1:]
	}
	for i := range n {
		a := int64(binary.LittleEndian.Uint64(ow[8*i:]))
		b := int64(binary.LittleEndian.Uint64(nw[8*i:]))
		var r int64
		switch WordKind(kinds[i]) {
		case WordAdd:
			r = a + b
		case WordMin:
			r = min(a, b)
		case WordMax:
			r = max(a, b)
		case WordMinFloat:
			x, y := math.Float64frombits(uint64(a)), math.Float64frombits(uint64(b))
			r = a
			if y < x || x != x {
				r = b
			}
		case WordMaxFloat:
			x, y := math.Float64frombits(uint64(a)), math.Float64frombits(uint64(b))
			r = a
			if y > x || y != y {
				r = b
			}
		default:
			return dst, fmt.Errorf("a merge operand's word %d has kind %d, which is none", i, kinds[i])
		}
		dst = binary.LittleEndian.AppendUint64(dst, uint64(r))
	}
	return dst, nil
}

// baseOf appends to dst the full value that v is with nothing beneath
// it: v itself if it is one, else its flags and words.
func baseOf(dst, v []byte) ([]byte, error) {
	if len(v) == 0 || v[0]&operandBit == 0 {
		return append(dst, v...), nil
	}
	n, err := operandWords(v)
	if err != nil {
		return dst, err
	}
	dst = append(dst, v[0]&^operandBit)
	return append(dst, v[1+n:]...), nil
}

// wordMerger is the stores' merge operator (pebble.Merger) over values
// of words.
var wordMerger = &pebble.Merger{
	Name: mergerName,
	Merge: func(key, value []byte) (pebble.ValueMerger, error) {
		return &wordValueMerger{v: bytes.Clone(value)}, nil
	},
}

// wordValueMerger merges one entry's operands: v is the merge of those
// it was given.
type wordValueMerger struct {
	v, scratch []byte
}

func (m *wordValueMerger) MergeNewer(value []byte) error {
	if len(value) == 0 || value[0]&operandBit == 0 {
		m.v = append(m.v[:0], value...) // a base: what is older does not count
		return nil
	}
	return m.merge(m.v, value)
}

func (m *wordValueMerger) MergeOlder(value []byte) error {
	if len(m.v) > 0 && m.v[0]&operandBit == 0 {
		return nil // a base: what is older does not count
	}
	return m.merge(value, m.v)
}

func (m *wordValueMerger) merge(older, newer []byte) error {
	r, err := mergeWords(m.scratch[:0], older, newer)
	if err != nil {
		return fmt.Errorf("pebblestate: merge: %w", err)
	}
	m.v, m.scratch = r, m.v
	return nil
}

// Finish returns the merge; with the oldest operand in it, a full value.
func (m *wordValueMerger) Finish(includesBase bool) ([]byte, io.Closer, error) {
	if !includesBase {
		return m.v, nil, nil
	}
	v, err := baseOf(nil, m.v)
	if err != nil {
		return nil, nil, fmt.Errorf("pebblestate: merge: %w", err)
	}
	return v, nil, nil
}

// isLegacy reports whether the database in dir was made before stores
// merged words: its OPTIONS file names pebble's default merge operator.
func isLegacy(dir string) (bool, error) {
	desc, err := pebble.Peek(dir, vfs.Default)
	if err != nil || desc.OptionsFilename == "" {
		return false, err
	}
	f, err := os.Open(desc.OptionsFilename)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "merger="); ok {
			return v == legacyMerger, nil
		}
	}
	return false, sc.Err()
}
