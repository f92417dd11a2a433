package datagen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connector/splitseq"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

// Defaults (see spec.DatagenOpt and spec.FieldGen).
const (
	DefaultStart           = "2026-01-01T00:00:00Z"
	DefaultEventsPerSecond = 1000.0
	DefaultCardinality     = 100
	defaultDatagenMin      = 0.0
	defaultDatagenMax      = 100.0
)

// SourceType is the datagen source, for connector.RegisterSource.
func SourceType() connector.SourceType {
	return connector.SourceType{
		Name:   spec.SourceDatagen,
		Check:  check,
		Plan:   splitseq.Plan,
		New:    NewSource,
		Splits: true,
		Share:  splitseq.Share,
	}
}

// check reports the problems of src's datagen options that need no
// schema types; NewSource checks them against the schema.
func check(s *spec.Source) spec.Problems {
	var ps spec.Problems
	p := fmt.Sprintf("sources[%s]", s.Name)
	if s.Path != "" || s.Stream != "" || len(s.Streams) > 0 {
		ps.Add(p, "datagen takes no path or stream")
	}
	ps = append(ps, splitseq.Check(s)...)
	if s.Gen != nil {
		for name, fg := range s.Gen.Fields {
			if _, ok := s.Schema.Get(name); !ok {
				ps.Add(p+".datagen.fields."+name, "%q is not a column of the schema", name)
			}
			if fg.NullRate < 0 || fg.NullRate >= 1 {
				ps.Add(p+".datagen.fields."+name+".nullRate", "%g is out of range: want [0,1)", fg.NullRate)
			}
			if fg.Min != nil && fg.Max != nil && *fg.Min >= *fg.Max {
				ps.Add(p+".datagen.fields."+name, "min %g must be below max %g", *fg.Min, *fg.Max)
			}
		}
		if s.Gen.OutOfOrderness < 0 {
			ps.Add(p+".datagen.outOfOrderness", "%s is negative", s.Gen.OutOfOrderness)
		}
	}
	return ps
}

// datagen is the datagen source. Event i (0-based, over all subtasks)
// belongs to split i % K of its K splits (sources[].splits, default
// splitseq.DefaultSplits), and subtask s of p generates the splits j with
// connector.OwnsSplit(j, s, p), in increasing event index. Its values are
// a pure function of (seed, column name, i), so the generated set does not
// depend on parallelism and a restarted source regenerates exactly what it
// produced before.
//
// Its position is {"splits": {"<j>": {"next": i, "of": K}, ...}} with the
// splits it owns, ids zero-padded to sort as numbers: the index of each
// split's next event. A restored position may hold other subtasks' splits
// (after a rescale), which are ignored; an owned split it lacks starts at
// its first event. A position from before splits, {"next": i} (the next
// event of subtask i % p), restores at the parallelism it was taken at:
// exactly as splits when p divides K (the same events), else the subtask
// goes on generating every p-th event, with that position, as before.
type datagen struct {
	node     string
	gen      *datagenGen
	k        int // splits
	mem      memory.Allocator
	seq      *splitseq.Seq
	legacy   bool          // generating i % p == subtask; position {"next": i}
	restored map[int]int64 // split -> next event, from Restore, applied at Open
	oldNext  *int64        // a position from before splits, from Restore
	idx      []int64       // the event indexes of one batch
	scr      []byte        // string bytes of one column of a batch
}

var (
	_ task.Resumable = (*datagen)(nil)
	_ task.Bounded   = (*datagen)(nil)
)

// NewSource returns the datagen source src describes, producing out. Its
// errors name every problem of src's datagen options against the schema.
func NewSource(src *spec.Source, out stream.Stream) (task.Source, error) {
	d, err := newDatagen(src, out)
	if err != nil {
		return nil, err
	}
	return d, nil
}

func newDatagen(src *spec.Source, out stream.Stream) (*datagen, error) {
	g, err := newDatagenGen(src, out)
	if err != nil {
		return nil, err
	}
	if ps := splitseq.Check(&spec.Source{Name: src.Name, Splits: src.Splits}); len(ps) > 0 {
		return nil, ps[0]
	}
	return &datagen{node: src.Name, gen: g, k: splitseq.Splits(src)}, nil
}

// layout is how the source's events are cut into splits.
func (d *datagen) layout() splitseq.Layout {
	return splitseq.Layout{K: int64(d.k), Block: 1, Count: d.gen.count}
}

func (d *datagen) Open(ctx *task.SourceContext) error {
	p, s := ctx.Parallelism, ctx.Subtask
	if p < 1 || s < 0 || s >= p {
		return fmt.Errorf("open datagen source %s: subtask %d of parallelism %d", ctx.Node, s, p)
	}
	if p > d.k {
		return fmt.Errorf("open datagen source %s: parallelism %d is above its %d splits (sources[%s].splits)", d.node, p, d.k, d.node)
	}
	l := d.layout()
	owned := l.Owned(s, p)
	switch r := d.oldNext; {
	case r != nil:
		stride := int64(p)
		if *r%stride != int64(s) {
			return fmt.Errorf("open datagen source %s: restored position.next %d is an event of subtask %d, not %d (event i was generated by subtask i %% parallelism %d): the position is another subtask's, or parallelism changed",
				d.node, *r, *r%stride, s, stride)
		}
		old := splitseq.Layout{K: stride, Block: 1, Count: d.gen.count}
		if end := old.End(s); end >= 0 && *r > end {
			return fmt.Errorf("open datagen source %s: restored position.next %d is past the end: this subtask's events of count %d end before %d",
				d.node, *r, d.gen.count, end)
		}
		if d.k%p != 0 {
			// The subtask's events are not a union of splits.
			d.legacy = true
			d.seq = splitseq.New(old, []splitseq.Split{{ID: s, Next: *r}})
			break
		}
		for i := range owned {
			owned[i].Next = l.AtOrAfter(owned[i].ID, *r)
		}
		d.seq = splitseq.New(l, owned)
	default:
		for i := range owned {
			if next, ok := d.restored[owned[i].ID]; ok {
				owned[i].Next = next
			}
		}
		d.seq = splitseq.New(l, owned)
	}
	d.restored, d.oldNext = nil, nil
	d.mem = ctx.Mem
	if d.mem == nil {
		d.mem = memory.DefaultAllocator
	}
	return nil
}

// Progress counts this subtask's events: generated, and in all below
// Count (unbounded without one).
func (d *datagen) Progress() (read, total int64, unit string, ok bool) {
	if d.gen.count == 0 || d.seq == nil {
		return 0, 0, "", false
	}
	read, total = d.seq.Progress()
	return read, total, "records", true
}

// datagenPosition is the datagen source's position, as JSON: Splits, or
// Next from before splits.
type datagenPosition struct {
	Splits map[string]*splitPosition `json:"splits,omitempty"`
	Next   *int64                    `json:"next,omitempty"`
}

// splitPosition is the position of one split: its next event, and how
// many splits the source has (a position of another cut is refused).
type splitPosition struct {
	Next *int64 `json:"next"`
	Of   *int   `json:"of"`
}

// Position returns {"splits": {"<j>": {"next": i, "of": K}}}, the index of
// the next event of each split the subtask owns ({"next": i} while it
// goes on from a position from before splits).
func (d *datagen) Position() (json.RawMessage, error) {
	if d.mem == nil {
		return nil, fmt.Errorf("position of datagen source %s: not open", d.node)
	}
	splits := d.seq.Splits()
	if d.legacy {
		return json.Marshal(datagenPosition{Next: &splits[0].Next})
	}
	p := datagenPosition{Splits: make(map[string]*splitPosition, len(splits))}
	for _, sp := range splits {
		p.Splits[splitseq.ID(sp.ID, d.k)] = &splitPosition{Next: &sp.Next, Of: &d.k}
	}
	return json.Marshal(p)
}

// Restore makes the subtask continue at the events in pos. Open checks
// that a position from before splits belongs to the subtask.
func (d *datagen) Restore(pos json.RawMessage) error {
	what := "datagen source " + d.node
	if d.mem != nil {
		return fmt.Errorf("restore %s: the source is already open", what)
	}
	var p datagenPosition
	if err := connector.DecodePosition(what, pos, &p); err != nil {
		return err
	}
	example := fmt.Sprintf(`{"splits": {%q: {"next": 42, "of": %d}}}`, splitseq.ID(42%d.k, d.k), d.k)
	switch {
	case p.Splits != nil && p.Next != nil:
		return fmt.Errorf("restore %s: position: splits and next: want one of them, e.g. %s", what, example)
	case p.Next != nil && *p.Next < 0:
		return fmt.Errorf("restore %s: position.next: %d is negative: want an event index >= 0", what, *p.Next)
	case p.Next != nil:
		d.oldNext = p.Next
		return nil
	case p.Splits == nil:
		return fmt.Errorf("restore %s: position.splits: missing: want the next event of each split, e.g. %s", what, example)
	}
	l := d.layout()
	restored := make(map[int]int64, len(p.Splits))
	for id, sp := range p.Splits {
		f := fmt.Sprintf("position.splits[%q]", id)
		j, err := splitseq.ParseID(id, d.k)
		if err != nil {
			return fmt.Errorf("restore %s: %s: %w", what, f, err)
		}
		switch {
		case sp == nil || sp.Next == nil:
			return fmt.Errorf("restore %s: %s.next: missing: want the index of the split's next event, e.g. %s", what, f, example)
		case sp.Of == nil:
			return fmt.Errorf("restore %s: %s.of: missing: want the number of splits, %d", what, f, d.k)
		case *sp.Of != d.k:
			return fmt.Errorf("restore %s: %s.of: the position is of %d splits, and the source has %d (sources[%s].splits changed?): restore with splits: %d", what, f, *sp.Of, d.k, d.node, *sp.Of)
		}
		if err := l.Check(j, *sp.Next); err != nil {
			return fmt.Errorf("restore %s: %s.next: %w", what, f, err)
		}
		restored[j] = *sp.Next
	}
	d.restored = restored
	return nil
}

// Poll generates the next rows of this subtask, column by column. It never
// waits: a datagen source always has data until Count is reached.
func (d *datagen) Poll(ctx context.Context, maxRows int, _ time.Duration) (arrow.RecordBatch, error) {
	if maxRows < 1 {
		return nil, fmt.Errorf("poll datagen: maxRows %d is not positive", maxRows)
	}
	if d.seq.Done() {
		return nil, io.EOF
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("poll datagen: %w", err)
	}
	d.idx = d.seq.Next(d.idx[:0], maxRows)
	n := len(d.idx)
	cols := make([]arrow.Array, len(d.gen.cols))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for c := range cols {
		col, err := d.column(c, d.idx)
		if err != nil {
			return nil, fmt.Errorf("poll datagen: %w", err)
		}
		cols[c] = col
	}
	return array.NewRecordBatch(d.gen.schema, cols, int64(n)), nil
}

// column generates column c for the events idx straight into Arrow
// buffers: a tight loop per column, no builder, no boxing.
func (d *datagen) column(c int, idx []int64) (arrow.Array, error) {
	col := &d.gen.cols[c]
	g, n := d.gen, len(idx)
	bufs := make([]*memory.Buffer, 2, 3)
	defer func() {
		for _, b := range bufs {
			if b != nil {
				b.Release()
			}
		}
	}()
	nulls := 0
	if col.nullBelow != 0 {
		bufs[0] = d.buffer(int(bitutil.BytesForBits(int64(n))))
		bm := bufs[0].Bytes()
		clear(bm)
		for k, i := range idx {
			if col.isNull(i) {
				nulls++
			} else {
				bitutil.SetBit(bm, k)
			}
		}
	}
	switch col.typ {
	case arrowfmt.Int64:
		bufs[1] = d.buffer(n * 8)
		vals := arrow.Int64Traits.CastFromBytes(bufs[1].Bytes())[:n]
		for k, i := range idx {
			vals[k] = col.int64At(i)
		}
	case arrowfmt.TimestampMs:
		bufs[1] = d.buffer(n * 8)
		vals := arrow.TimestampTraits.CastFromBytes(bufs[1].Bytes())[:n]
		for k, i := range idx {
			vals[k] = arrow.Timestamp(g.timeAt(col, i))
		}
	case arrowfmt.Float64:
		bufs[1] = d.buffer(n * 8)
		vals := arrow.Float64Traits.CastFromBytes(bufs[1].Bytes())[:n]
		for k, i := range idx {
			vals[k] = col.float64At(i)
		}
	case arrowfmt.Bool:
		bufs[1] = d.buffer(int(bitutil.BytesForBits(int64(n))))
		bm := bufs[1].Bytes()
		clear(bm)
		for k, i := range idx {
			if col.boolAt(i) {
				bitutil.SetBit(bm, k)
			}
		}
	case arrowfmt.String:
		// Offsets and bytes; a null is an empty slot.
		bufs[1] = d.buffer((n + 1) * 4)
		offs := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())[:n+1]
		data := d.scr[:0]
		offs[0] = 0
		for k, i := range idx {
			if nulls == 0 || bitutil.BitIsSet(bufs[0].Bytes(), k) {
				data = col.appendString(data, i)
			}
			if len(data) > math.MaxInt32 {
				return nil, fmt.Errorf("column %q: more than 2 GiB of strings in %d rows: poll fewer rows", col.name, n)
			}
			offs[k+1] = int32(len(data))
		}
		d.scr = data
		bufs = append(bufs, d.buffer(len(data)))
		copy(bufs[2].Bytes(), data)
	}
	if nulls == 0 && bufs[0] != nil {
		bufs[0].Release()
		bufs[0] = nil
	}
	ad := array.NewData(g.schema.Field(c).Type, n, bufs, nil, nulls, 0)
	defer ad.Release()
	return array.MakeFromData(ad), nil
}

// buffer returns a buffer of size bytes from the source's allocator.
func (d *datagen) buffer(size int) *memory.Buffer {
	b := memory.NewResizableBuffer(d.mem)
	b.Resize(size)
	return b
}

func (d *datagen) Close() error { return nil }

// Row returns the values of event i of the datagen source src with the
// given output stream, typed as arrowfmt.Value returns them: int64,
// float64, string, bool, time.Time (UTC) for timestamp_ms, nil for null.
// It evaluates the same value functions as the source, for tests that
// recompute a job's input. It panics if src is not a valid datagen source
// for schema (NewSource reports that as an error).
func Row(src *spec.Source, schema stream.Stream, i int64) []any {
	return NewRows(src, schema).Row(i, nil)
}

// Rows is a datagen source's events by index, its options compiled once:
// a test that recomputes millions of events calls Row on one Rows rather
// than the package's Row, which compiles them for every event.
type Rows struct{ g *datagenGen }

// NewRows compiles src's options against schema. It panics as Row does.
func NewRows(src *spec.Source, schema stream.Stream) *Rows {
	g, err := newDatagenGen(src, schema)
	if err != nil {
		panic(fmt.Sprintf("datagen: Row: %v", err))
	}
	return &Rows{g: g}
}

// Row appends the values of event i to dst, typed as the package's Row
// returns them.
func (r *Rows) Row(i int64, dst []any) []any { return r.g.row(i, dst) }

// datagenGen is the compiled generator: what event i holds, for any i.
type datagenGen struct {
	schema  *arrow.Schema
	cols    []genColumn
	count   int64 // 0: unbounded
	startMs int64
	eps     float64 // events per second of synthetic event time
	oooMs   int64   // the event-time column's jitter is in [0, oooMs]
}

// genColumn holds what one column's values are drawn from.
type genColumn struct {
	name      string
	typ       arrowfmt.Type
	salt      uint64 // value draws
	nullSalt  uint64 // null draws
	nullBelow uint64 // a value is null when its null draw is below this
	eventTime bool

	ranged bool // int64: uniform in [lo, lo+span) instead of the index
	lo     int64
	span   uint64
	flo    float64 // float64: uniform in [flo, fhi)
	fhi    float64
	fmax   float64 // the largest float64 below fhi

	card   uint64   // string: value k < card is table[k], or prefix + k
	table  [][]byte // the listed values, or prefix + k formatted up front
	prefix string
}

// maxStringTable bounds the values of a string column that are formatted
// once up front rather than per row.
const maxStringTable = 1 << 16

// Counter-based random numbers: draw i of a stream with seed s is the i-th
// output of splitmix64 started at s. No state is shared between draws.
const splitmixGamma = 0x9e3779b97f4a7c15

func splitmixMix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func genDraw(salt uint64, i int64) uint64 {
	return splitmixMix(salt + uint64(i)*splitmixGamma + splitmixGamma)
}

// genBelow maps a uniform 64-bit draw to [0, n) (Lemire's multiply-shift).
func genBelow(r, n uint64) uint64 {
	hi, _ := bits.Mul64(r, n)
	return hi
}

func (c *genColumn) isNull(i int64) bool {
	return c.nullBelow != 0 && genDraw(c.nullSalt, i) < c.nullBelow
}

func (c *genColumn) int64At(i int64) int64 {
	if !c.ranged {
		return i
	}
	return c.lo + int64(genBelow(genDraw(c.salt, i), c.span))
}

func (c *genColumn) float64At(i int64) float64 {
	u := float64(genDraw(c.salt, i)>>11) * 0x1p-53 // [0, 1)
	v := c.flo + u*(c.fhi-c.flo)
	if v >= c.fhi { // rounding can reach the open end
		v = c.fmax
	}
	return v
}

func (c *genColumn) boolAt(i int64) bool { return genDraw(c.salt, i)>>63 == 1 }

func (c *genColumn) stringIndex(i int64) uint64 { return genBelow(genDraw(c.salt, i), c.card) }

func (c *genColumn) appendString(dst []byte, i int64) []byte {
	k := c.stringIndex(i)
	if c.table != nil {
		return append(dst, c.table[k]...)
	}
	dst = append(dst, c.prefix...)
	return strconv.AppendUint(dst, k, 10)
}

// timeAt is start + floor(i*1000/eps) ms; on the event-time column minus a
// uniform jitter in [0, oooMs].
func (g *datagenGen) timeAt(c *genColumn, i int64) int64 {
	t := g.startMs + int64(float64(i)*1000/g.eps) // i >= 0: truncation is floor
	if c.eventTime && g.oooMs > 0 {
		t -= int64(genBelow(genDraw(c.salt, i), uint64(g.oooMs)+1))
	}
	return t
}

// row appends the values of event i to dst.
func (g *datagenGen) row(i int64, dst []any) []any {
	var scr []byte
	for c := range g.cols {
		col := &g.cols[c]
		if col.isNull(i) {
			dst = append(dst, nil)
			continue
		}
		switch col.typ {
		case arrowfmt.Int64:
			dst = append(dst, col.int64At(i))
		case arrowfmt.Float64:
			dst = append(dst, col.float64At(i))
		case arrowfmt.Bool:
			dst = append(dst, col.boolAt(i))
		case arrowfmt.TimestampMs:
			dst = append(dst, time.UnixMilli(g.timeAt(col, i)).UTC())
		case arrowfmt.String:
			scr = col.appendString(scr[:0], i)
			dst = append(dst, string(scr))
		}
	}
	return dst
}

// newDatagenGen compiles src's datagen options against the output schema,
// reporting every problem at once with the field it is in.
func newDatagenGen(src *spec.Source, out stream.Stream) (*datagenGen, error) {
	p := fmt.Sprintf("sources[%s]", src.Name)
	types, err := arrowfmt.Types(out.Schema)
	if err != nil {
		return nil, spec.Errorf(p+".schema", "%w", err)
	}
	opt := spec.DatagenOpt{}
	if src.Gen != nil {
		opt = *src.Gen
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, spec.Errorf(p+"."+field, format, args...))
	}
	g := &datagenGen{schema: out.Schema, count: src.Count, eps: opt.EventsPerSecond}
	if src.Count < 0 {
		bad("count", "%d is negative", src.Count)
	}

	start := opt.Start
	if start == "" {
		start = DefaultStart
	}
	if t, err := time.Parse(time.RFC3339, start); err != nil {
		bad("datagen.start", "%q is not an RFC 3339 time, e.g. %s", opt.Start, DefaultStart)
	} else {
		g.startMs = t.UnixMilli()
	}
	switch {
	case g.eps < 0 || math.IsNaN(g.eps) || math.IsInf(g.eps, 0):
		bad("datagen.eventsPerSecond", "%g is not a positive number", g.eps)
	case g.eps == 0 && src.Rate > 0:
		g.eps = src.Rate
	case g.eps == 0:
		g.eps = DefaultEventsPerSecond
	}
	if opt.OutOfOrderness < 0 {
		bad("datagen.outOfOrderness", "%s is negative", opt.OutOfOrderness)
	} else {
		g.oooMs = opt.OutOfOrderness.D().Milliseconds()
	}

	names := make([]string, 0, len(opt.Fields))
	for name := range opt.Fields {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if len(out.Schema.FieldIndices(name)) == 0 {
			bad("datagen.fields."+name, "%q is not a column of the schema (columns: %s)", name, stream.ColumnList(out.Schema))
		}
	}

	g.cols = make([]genColumn, len(types))
	for c, typ := range types {
		name := out.Schema.Field(c).Name
		fp := "datagen.fields." + name
		fg := opt.Fields[name]
		salt := splitmixMix(uint64(opt.Seed) ^ hashName(name))
		col := genColumn{
			name:      name,
			typ:       typ,
			salt:      salt,
			nullSalt:  splitmixMix(salt ^ 0x6e756c6c6e756c6c),
			eventTime: c == out.TimeColumn,
		}
		switch {
		case fg.NullRate < 0 || fg.NullRate >= 1 || math.IsNaN(fg.NullRate):
			bad(fp+".nullRate", "%g is out of range: want [0,1)", fg.NullRate)
		case fg.NullRate > 0 && col.eventTime:
			bad(fp+".nullRate", "%g: the event-time column is never null", fg.NullRate)
		case fg.NullRate > 0:
			col.nullBelow = max(uint64(fg.NullRate*(1<<64)), 1)
		}
		numeric := typ == arrowfmt.Int64 || typ == arrowfmt.Float64
		if !numeric && (fg.Min != nil || fg.Max != nil) {
			bad(fp, "min and max apply to int64 and float64 columns; %q is %s", name, typ)
		}
		if typ != arrowfmt.String && (fg.Values != nil || fg.Cardinality != 0) {
			bad(fp, "values and cardinality apply to string columns; %q is %s", name, typ)
		}
		switch typ {
		case arrowfmt.Int64, arrowfmt.Float64:
			if err := col.setRange(typ, fg.Min, fg.Max); err != nil {
				bad(fp, "%v", err)
			}
		case arrowfmt.String:
			if err := col.setStrings(fg.Values, fg.Cardinality); err != nil {
				bad(fp, "%v", err)
			}
		}
		g.cols[c] = col
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return g, nil
}

func (c *genColumn) setRange(typ arrowfmt.Type, minp, maxp *float64) error {
	if minp == nil && maxp == nil {
		c.flo, c.fhi = defaultDatagenMin, defaultDatagenMax
		c.fmax = math.Nextafter(c.fhi, math.Inf(-1))
		return nil
	}
	lo, hi := defaultDatagenMin, defaultDatagenMax
	loNote, hiNote := " (default)", " (default)"
	if minp != nil {
		lo, loNote = *minp, ""
	}
	if maxp != nil {
		hi, hiNote = *maxp, ""
	}
	for _, v := range []float64{lo, hi} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("min and max must be finite, got %g", v)
		}
		if typ == arrowfmt.Int64 && (v != math.Trunc(v) || v < -(1<<63) || v >= 1<<63) {
			return fmt.Errorf("%g is not an int64: min and max of an int64 column are integers", v)
		}
	}
	if lo >= hi {
		return fmt.Errorf("min %g%s must be below max %g%s", lo, loNote, hi, hiNote)
	}
	c.flo, c.fhi, c.fmax = lo, hi, math.Nextafter(hi, math.Inf(-1))
	if typ == arrowfmt.Int64 {
		c.ranged = true
		c.lo = int64(lo)
		c.span = uint64(int64(hi)) - uint64(int64(lo))
	}
	return nil
}

func (c *genColumn) setStrings(values []string, card int) error {
	switch {
	case values != nil && card != 0:
		return fmt.Errorf("give values or cardinality, not both")
	case values != nil && len(values) == 0:
		return fmt.Errorf("values is empty: list at least one")
	case values != nil:
		c.card = uint64(len(values))
		c.table = make([][]byte, len(values))
		for k, v := range values {
			c.table[k] = []byte(v)
		}
		return nil
	case card < 0:
		return fmt.Errorf("cardinality %d is negative", card)
	case card == 0:
		card = DefaultCardinality
	}
	c.prefix, c.card = c.name+"-", uint64(card)
	if card <= maxStringTable {
		c.table = make([][]byte, card)
		for k := range c.table {
			c.table[k] = strconv.AppendInt([]byte(c.prefix), int64(k), 10)
		}
	}
	return nil
}

func hashName(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}
