package arrowfmt

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Compact payloads: integers in the width their values need.
//
// An Encoder with WireOptions.Compact sends an int64 or timestamp_ms
// column as unsigned offsets from a base, 1, 2 or 4 bytes each, when its
// values fit: keys drawn from a few thousand ids, small counts, and the
// timestamps of one batch (a few milliseconds apart) take a quarter of
// their 8 bytes or less. On the wire such a column is an Arrow uint8,
// uint16 or uint32 column whose field metadata names its weir type
// (weir.type) and its base (weir.base, decimal); a Decoder widens it
// back, so what a consumer sees is the schema the producer encoded.
//
// Width and base are the channel's, not the batch's: they sit in the
// schema message, which a channel sends once, and again only when a batch
// does not fit them (the next payload then carries the new schema; a
// Decoder switches to it). A column is given room for its values to move
// (a quarter of the free range below its lowest value, the rest above),
// one that missed again soon after a change is given the next width, and
// one whose values have for a while needed a narrower width gets it back.

// Field metadata keys of a compacted column.
const (
	metaWeirType = "weir.type"
	metaWeirBase = "weir.base"
)

const (
	// missWindow: a column whose values leave their range within this many
	// batches of the range's last change gets the next width.
	missWindow = 64
	// shrinkEvery: every this many batches, a column whose values since
	// the last look would fit a narrower width gets it.
	shrinkEvery = 256
)

// compactor turns a channel's batches into their compact wire form.
type compactor struct {
	logical *arrow.Schema
	wire    *arrow.Schema // nil before the first batch
	cols    []compactCol
	batch   int // batches seen
}

// compactCol is the wire form of one int64 or timestamp_ms column.
type compactCol struct {
	index   int
	width   int // bytes a value on the wire: 1, 2 or 4; 8 sends it as is; 0 before the first values
	base    int64
	changed int   // batch of the last change of width or base
	looked  int   // batch of the last look at shrinking
	lo, hi  int64 // the values seen since that look
	seen    bool  // lo and hi hold something
	buf     []byte
}

func newCompactor(schema *arrow.Schema) *compactor {
	c := &compactor{logical: schema}
	for i, f := range schema.Fields() {
		if t, err := TypeOf(f.Type); err == nil && (t == Int64 || t == TimestampMs) {
			c.cols = append(c.cols, newCompactCol(i))
		}
	}
	return c
}

// newCompactCol is column index before its first batch: no width yet,
// and no change recent enough to count as a miss.
func newCompactCol(index int) compactCol {
	return compactCol{index: index, changed: -missWindow}
}

// maxOffset is the largest offset a value of width bytes holds.
func maxOffset(width int) uint64 {
	if width >= 8 {
		return math.MaxUint64
	}
	return 1<<(8*width) - 1
}

// widthFor is the narrowest width that holds offsets up to span.
func widthFor(span uint64) int {
	switch {
	case span <= math.MaxUint8:
		return 1
	case span <= math.MaxUint16:
		return 2
	case span <= math.MaxUint32:
		return 4
	}
	return 8
}

// Bounds returns the lowest and highest valid value of an int64 or
// timestamp column; ok is false when it has none or is of another type.
func Bounds(col arrow.Array) (lo, hi int64, ok bool) {
	if id := col.DataType().ID(); id != arrow.INT64 && id != arrow.TIMESTAMP {
		return 0, 0, false
	}
	return bounds(col.Data())
}

// bounds returns the lowest and highest valid value of an int64-backed
// array; ok is false when it has none.
func bounds(data arrow.ArrayData) (lo, hi int64, ok bool) {
	vals := int64Values(data)
	if len(vals) == 0 {
		return 0, 0, false
	}
	if data.NullN() == 0 {
		lo, hi = boundsOf(vals)
		return lo, hi, true
	}
	bitmap, off := data.Buffers()[0].Bytes(), data.Offset()
	for i, v := range vals {
		if !bitutil.BitIsSet(bitmap, off+i) {
			continue
		}
		if !ok {
			lo, hi, ok = v, v, true
			continue
		}
		lo = min(lo, v)
		hi = max(hi, v)
	}
	return lo, hi, ok
}

// boundsOf returns the lowest and highest of vals, which is not empty, in
// four independent lanes (a third faster than one).
func boundsOf(vals []int64) (lo, hi int64) {
	l0, h0 := vals[0], vals[0]
	l1, h1, l2, h2, l3, h3 := l0, h0, l0, h0, l0, h0
	i := 0
	for ; i+4 <= len(vals); i += 4 {
		v := vals[i : i+4 : i+4]
		l0, h0 = min(l0, v[0]), max(h0, v[0])
		l1, h1 = min(l1, v[1]), max(h1, v[1])
		l2, h2 = min(l2, v[2]), max(h2, v[2])
		l3, h3 = min(l3, v[3]), max(h3, v[3])
	}
	for ; i < len(vals); i++ {
		l0, h0 = min(l0, vals[i]), max(h0, vals[i])
	}
	return min(l0, l1, l2, l3), max(h0, h1, h2, h3)
}

// int64Values returns the values of an int64 or timestamp array.
func int64Values(data arrow.ArrayData) []int64 {
	if data.Len() == 0 {
		return nil
	}
	off := data.Offset()
	return arrow.Int64Traits.CastFromBytes(data.Buffers()[1].Bytes())[off : off+data.Len()]
}

// fit makes the column's range hold [lo, hi], the valid values of batch
// number batch, and reports whether its width or base changed.
func (c *compactCol) fit(lo, hi int64, batch int) bool {
	if c.seen {
		c.lo, c.hi = min(c.lo, lo), max(c.hi, hi)
	} else {
		c.lo, c.hi, c.seen = lo, hi, true
	}
	fits := c.width > 0 && (c.width == 8 || lo >= c.base && uint64(hi)-uint64(c.base) <= maxOffset(c.width))
	if fits {
		if batch-c.looked < shrinkEvery {
			return false
		}
		// A look at shrinking: what the values since the last look needed.
		w := widthFor(uint64(c.hi) - uint64(c.lo))
		c.lo, c.hi, c.looked = lo, hi, batch
		if w >= c.width {
			return false
		}
		c.set(w, lo, hi, batch)
		return true
	}
	w := widthFor(uint64(hi) - uint64(lo))
	if w <= c.width && batch-c.changed < missWindow {
		// Missed soon after the last change: give the values more room.
		w = min(2*c.width, 8)
	}
	c.set(w, lo, hi, batch)
	return true
}

// set gives the column width w and a base for values around [lo, hi].
func (c *compactCol) set(w int, lo, hi int64, batch int) {
	c.width, c.changed, c.looked = w, batch, batch
	c.lo, c.hi = lo, hi
	if w == 8 {
		c.base = 0
		return
	}
	// A quarter of the room the batch leaves goes below it (late events),
	// the rest above (time moves on).
	slack := (maxOffset(w) - (uint64(hi) - uint64(lo))) / 4
	if uint64(lo)^1<<63 < slack { // lo - MinInt64 < slack
		c.base = math.MinInt64
	} else {
		c.base = int64(uint64(lo) - slack)
	}
}

// apply returns rec in wire form and the wire schema; the caller releases
// the record. The schema is the one apply returned last unless a column's
// width or base changed.
func (c *compactor) apply(rec arrow.RecordBatch) (arrow.RecordBatch, *arrow.Schema) {
	changed := c.wire == nil
	for i := range c.cols {
		col := &c.cols[i]
		if lo, hi, ok := bounds(rec.Column(col.index).Data()); ok {
			changed = col.fit(lo, hi, c.batch) || changed
		}
	}
	c.batch++
	if changed {
		c.wire = c.wireSchema()
	}
	cols := rec.Columns()
	var made []arrow.Array
	for i := range c.cols {
		col := &c.cols[i]
		if col.width == 0 || col.width == 8 {
			continue
		}
		if made == nil {
			cols = append([]arrow.Array(nil), cols...)
		}
		a := col.narrow(rec.Column(col.index).Data())
		cols[col.index] = a
		made = append(made, a)
	}
	wire := array.NewRecordBatch(c.wire, cols, rec.NumRows())
	for _, a := range made {
		a.Release()
	}
	return wire, c.wire
}

// wireSchema is the logical schema with each narrowed column's wire type
// and metadata.
func (c *compactor) wireSchema() *arrow.Schema {
	fields := append([]arrow.Field(nil), c.logical.Fields()...)
	for _, col := range c.cols {
		if col.width == 0 || col.width == 8 {
			continue
		}
		t, _ := TypeOf(fields[col.index].Type)
		fields[col.index] = narrowField(fields[col.index], t, col.width, col.base)
	}
	md := c.logical.Metadata()
	return arrow.NewSchema(fields, &md)
}

func wireType(width int) arrow.DataType {
	switch width {
	case 1:
		return arrow.PrimitiveTypes.Uint8
	case 2:
		return arrow.PrimitiveTypes.Uint16
	}
	return arrow.PrimitiveTypes.Uint32
}

// narrow returns the column's values as offsets from its base, in a
// buffer the column reuses (the array is valid until the next batch).
// Null slots hold whatever their value gave; a Decoder zeroes them.
func (col *compactCol) narrow(data arrow.ArrayData) arrow.Array {
	off, n := data.Offset(), data.Len()
	size := (off + n) * col.width
	if cap(col.buf) < size {
		col.buf = make([]byte, size)
	}
	buf := col.buf[:size]
	vals := int64Values(data)
	switch col.width {
	case 1:
		narrowTo(buf[off:], vals, col.base)
	case 2:
		narrowTo(arrow.Uint16Traits.CastFromBytes(buf)[off:], vals, col.base)
	case 4:
		narrowTo(arrow.Uint32Traits.CastFromBytes(buf)[off:], vals, col.base)
	}
	d := array.NewData(wireType(col.width), n, []*memory.Buffer{data.Buffers()[0], memory.NewBufferBytes(buf)}, nil, data.NullN(), off)
	defer d.Release()
	return array.MakeFromData(d)
}

func narrowTo[T uint8 | uint16 | uint32](dst []T, src []int64, base int64) {
	dst = dst[:len(src)]
	b := uint64(base)
	i := 0
	for ; i+4 <= len(src); i += 4 {
		s, d := src[i:i+4:i+4], dst[i:i+4:i+4]
		d[0], d[1], d[2], d[3] = T(uint64(s[0])-b), T(uint64(s[1])-b), T(uint64(s[2])-b), T(uint64(s[3])-b)
	}
	for ; i < len(src); i++ {
		dst[i] = T(uint64(src[i]) - b)
	}
}

// expandCol is a column a Decoder widens back.
type expandCol struct {
	index int
	width int
	base  int64
	typ   arrow.DataType
}

// logicalSchema returns the schema a wire schema stands for and the
// columns to widen (none when it has no compact column). A field with
// weir.type must be uint8, uint16 or uint32 of an int64 or timestamp_ms
// column and have a decimal weir.base.
func logicalSchema(wire *arrow.Schema) (*arrow.Schema, []expandCol, error) {
	var cols []expandCol
	var fields []arrow.Field
	for i, f := range wire.Fields() {
		ti := f.Metadata.FindKey(metaWeirType)
		if ti < 0 {
			continue
		}
		if fields == nil {
			fields = append([]arrow.Field(nil), wire.Fields()...)
		}
		t := Type(f.Metadata.Values()[ti])
		if t != Int64 && t != TimestampMs {
			return nil, nil, fmt.Errorf("field %q: %s %q: want int64 or timestamp_ms", f.Name, metaWeirType, t)
		}
		var width int
		switch f.Type.ID() {
		case arrow.UINT8:
			width = 1
		case arrow.UINT16:
			width = 2
		case arrow.UINT32:
			width = 4
		default:
			return nil, nil, fmt.Errorf("field %q: a compact %s column of type %s: want uint8, uint16 or uint32", f.Name, t, f.Type)
		}
		bi := f.Metadata.FindKey(metaWeirBase)
		if bi < 0 {
			return nil, nil, fmt.Errorf("field %q: a compact column without %s", f.Name, metaWeirBase)
		}
		base, err := strconv.ParseInt(f.Metadata.Values()[bi], 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("field %q: %s %q: want a decimal int64", f.Name, metaWeirBase, f.Metadata.Values()[bi])
		}
		var keys, vals []string
		for k, key := range f.Metadata.Keys() {
			if key != metaWeirType && key != metaWeirBase {
				keys = append(keys, key)
				vals = append(vals, f.Metadata.Values()[k])
			}
		}
		fields[i] = arrow.Field{Name: f.Name, Type: t.Arrow(), Nullable: f.Nullable}
		if len(keys) > 0 {
			fields[i].Metadata = arrow.NewMetadata(keys, vals)
		}
		cols = append(cols, expandCol{index: i, width: width, base: base, typ: t.Arrow()})
	}
	if fields == nil {
		return wire, nil, nil
	}
	md := wire.Metadata()
	return arrow.NewSchema(fields, &md), cols, nil
}

// expand returns a validated wire record as the logical schema's record,
// the compact columns widened into buffers of rc; the caller releases it,
// and rec stays the caller's.
func expand(rec arrow.RecordBatch, schema *arrow.Schema, cols []expandCol, mem memory.Allocator) arrow.RecordBatch {
	out := append([]arrow.Array(nil), rec.Columns()...)
	made := make([]arrow.Array, 0, len(cols))
	for _, c := range cols {
		a := c.widen(out[c.index].Data(), mem)
		out[c.index] = a
		made = append(made, a)
	}
	res := array.NewRecordBatch(schema, out, rec.NumRows())
	for _, a := range made {
		a.Release()
	}
	return res
}

// widen returns the int64 values base + offset of a validated wire array,
// with 0 in null slots, in a buffer of mem (a Decoder's recycler).
func (c expandCol) widen(data arrow.ArrayData, mem memory.Allocator) arrow.Array {
	off, n := data.Offset(), data.Len()
	raw := mem.Allocate((off + n) * 8)
	vals := arrow.Int64Traits.CastFromBytes(raw)
	clear(vals[:off])
	if n > 0 {
		wire := data.Buffers()[1].Bytes()
		switch c.width {
		case 1:
			widenFrom(vals[off:], wire[off:off+n], c.base)
		case 2:
			widenFrom(vals[off:], arrow.Uint16Traits.CastFromBytes(wire)[off:off+n], c.base)
		case 4:
			widenFrom(vals[off:], arrow.Uint32Traits.CastFromBytes(wire)[off:off+n], c.base)
		}
	}
	var validity *memory.Buffer
	if b := data.Buffers()[0]; b != nil && b.Len() > 0 && data.NullN() != 0 {
		validity = b
		bitmap := validity.Bytes()
		for i := off; i < off+n; i++ {
			if !bitutil.BitIsSet(bitmap, i) {
				vals[i] = 0
			}
		}
	}
	buf := memory.NewBufferWithAllocator(raw, mem)
	defer buf.Release()
	d := array.NewData(c.typ, n, []*memory.Buffer{validity, buf}, nil, data.NullN(), off)
	defer d.Release()
	return array.MakeFromData(d)
}

// recycler is the allocator of a Decoder's widened columns. Arrow hands
// a buffer back (Free) when the last array holding it is released, and a
// later batch of the channel reuses it: once a channel runs, widening
// allocates nothing, and the runtime zeroes nothing. Buffers released
// after the Decoder is gone are left to the garbage collector.
//
// A consumer that reads a column after releasing it would read another
// batch's values; with WEIR_POISON_FREED set (the integration tests set
// it), every buffer given back is first overwritten with poisonByte, so
// such a read shows at once as wrong output.
type recycler struct {
	mu   sync.Mutex
	free [][]byte
}

// recycleKeep bounds the buffers a recycler keeps: about what a consumer
// holds at once (the batch in hand, a few retained by its operators).
const recycleKeep = 16

// poisonByte fills a freed buffer under WEIR_POISON_FREED: every int64 of
// it reads as -6510615555426900571, a timestamp in the year -206 million.
const poisonByte = 0xA5

// poisonFreed reads WEIR_POISON_FREED at the first Free, so that a test's
// TestMain may set it.
var poisonFreed = sync.OnceValue(func() bool { return os.Getenv("WEIR_POISON_FREED") != "" })

var _ memory.Allocator = (*recycler)(nil)

// Allocate returns a buffer of size bytes whose contents are not zeroed.
func (r *recycler) Allocate(size int) []byte {
	r.mu.Lock()
	for i := len(r.free) - 1; i >= 0; i-- {
		if b := r.free[i]; cap(b) >= size {
			last := len(r.free) - 1
			r.free[i], r.free[last] = r.free[last], nil
			r.free = r.free[:last]
			r.mu.Unlock()
			return b[:size]
		}
	}
	r.mu.Unlock()
	return make([]byte, size)
}

func (r *recycler) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		return b[:size]
	}
	nb := r.Allocate(size)
	copy(nb, b)
	r.Free(b)
	return nb
}

func (r *recycler) Free(b []byte) {
	b = b[:cap(b)]
	if poisonFreed() {
		for i := range b {
			b[i] = poisonByte
		}
	}
	r.mu.Lock()
	if len(r.free) < recycleKeep {
		r.free = append(r.free, b)
	}
	r.mu.Unlock()
}

func widenFrom[T uint8 | uint16 | uint32](dst []int64, src []T, base int64) {
	dst = dst[:len(src)]
	b := uint64(base)
	i := 0
	for ; i+4 <= len(src); i += 4 {
		s, d := src[i:i+4:i+4], dst[i:i+4:i+4]
		d[0], d[1], d[2], d[3] = int64(b+uint64(s[0])), int64(b+uint64(s[1])), int64(b+uint64(s[2])), int64(b+uint64(s[3]))
	}
	for ; i < len(src); i++ {
		dst[i] = int64(b + uint64(src[i]))
	}
}
