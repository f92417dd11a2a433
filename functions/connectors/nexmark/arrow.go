package nexmark

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The Arrow schemas of the three kinds of events, with Nexmark's column
// names. Times are timestamp[ms, UTC]. Columns are nullable, as everywhere
// in weir, but never hold a null.
var (
	PersonSchema = arrow.NewSchema([]arrow.Field{
		field("id", arrow.PrimitiveTypes.Int64),
		field("name", arrow.BinaryTypes.String),
		field("emailAddress", arrow.BinaryTypes.String),
		field("creditCard", arrow.BinaryTypes.String),
		field("city", arrow.BinaryTypes.String),
		field("state", arrow.BinaryTypes.String),
		field("dateTime", arrow.FixedWidthTypes.Timestamp_ms),
		field("extra", arrow.BinaryTypes.String),
	}, nil)
	AuctionSchema = arrow.NewSchema([]arrow.Field{
		field("id", arrow.PrimitiveTypes.Int64),
		field("itemName", arrow.BinaryTypes.String),
		field("description", arrow.BinaryTypes.String),
		field("initialBid", arrow.PrimitiveTypes.Int64),
		field("reserve", arrow.PrimitiveTypes.Int64),
		field("dateTime", arrow.FixedWidthTypes.Timestamp_ms),
		field("expires", arrow.FixedWidthTypes.Timestamp_ms),
		field("seller", arrow.PrimitiveTypes.Int64),
		field("category", arrow.PrimitiveTypes.Int64),
		field("extra", arrow.BinaryTypes.String),
	}, nil)
	BidSchema = arrow.NewSchema([]arrow.Field{
		field("auction", arrow.PrimitiveTypes.Int64),
		field("bidder", arrow.PrimitiveTypes.Int64),
		field("price", arrow.PrimitiveTypes.Int64),
		field("channel", arrow.BinaryTypes.String),
		field("url", arrow.BinaryTypes.String),
		field("dateTime", arrow.FixedWidthTypes.Timestamp_ms),
		field("extra", arrow.BinaryTypes.String),
	}, nil)
)

// Indexes of the event-time columns of the schemas.
const (
	PersonDateTime  = 6
	AuctionDateTime = 5
	BidDateTime     = 5
)

func field(name string, t arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: true}
}

// BatchBuilder generates events straight into Arrow column buffers, one
// set per kind, and hands them out as record batches. Appending an event
// allocates nothing on the Go heap: strings are copied from the
// generator's scratch buffer into the column's data buffer, and buffers
// are allocated from mem once per batch, sized after the batch before. A
// BatchBuilder is not safe for concurrent use.
type BatchBuilder struct {
	core    core
	mem     memory.Allocator
	person  personColumns
	auction auctionColumns
	bid     bidColumns
}

// NewBatchBuilder returns a BatchBuilder for cfg, whose zero fields take
// their defaults, allocating Arrow memory from mem. It panics if
// cfg.Validate fails. Release it when done.
func NewBatchBuilder(cfg Config, mem memory.Allocator) *BatchBuilder {
	b := &BatchBuilder{mem: mem}
	b.core.init(cfg)
	p, a, d := &b.person, &b.auction, &b.bid
	p.init(PersonSchema, &p.id, &p.name, &p.email, &p.creditCard, &p.city, &p.state, &p.dateTime, &p.extra)
	a.init(AuctionSchema, &a.id, &a.itemName, &a.description, &a.initialBid, &a.reserve, &a.dateTime, &a.expires,
		&a.seller, &a.category, &a.extra)
	d.init(BidSchema, &d.auction, &d.bidder, &d.price, &d.channel, &d.url, &d.dateTime, &d.extra)
	return b
}

// Config returns the configuration, defaults filled in.
func (b *BatchBuilder) Config() Config { return b.core.cfg }

// Timestamp returns the event time of event n, in Unix milliseconds.
func (b *BatchBuilder) Timestamp(n int64) int64 { return b.core.clock.at(n) }

// Append generates event n (n >= 0) and appends it to the columns of its
// kind. Its values are those of Generator.Event(n) for the same Config.
// Event numbers need not be consecutive or increasing.
func (b *BatchBuilder) Append(n int64) {
	// The rows live on the stack: storing their slices costs no write
	// barrier.
	switch KindOf(n) {
	case KindPerson:
		var r personRow
		b.core.person(n, &r)
		b.person.append(b.mem, &r)
	case KindAuction:
		var r auctionRow
		b.core.auction(n, &r)
		b.auction.append(b.mem, &r)
	default:
		var r bidRow
		b.core.bid(n, &r)
		b.bid.append(b.mem, &r)
	}
}

// Len returns how many events of each kind were appended since the last
// Flush, indexed by Kind.
func (b *BatchBuilder) Len() [3]int {
	return [3]int{b.person.rows, b.auction.rows, b.bid.rows}
}

// Flush returns the events appended since the last Flush as one batch per
// kind, in PersonSchema, AuctionSchema and BidSchema, and starts new
// batches. A kind without events gets nil. The caller owns the batches
// and must release them.
func (b *BatchBuilder) Flush() (person, auction, bid arrow.RecordBatch) {
	return b.person.flush(), b.auction.flush(), b.bid.flush()
}

// Release frees the buffers of events appended but not flushed. The
// BatchBuilder can still be used afterwards; it is safe to call twice.
func (b *BatchBuilder) Release() {
	b.person.release()
	b.auction.release()
	b.bid.release()
}

// column is a column being built. Only flushing and allocating go through
// this interface; appending calls the concrete types.
type column interface {
	// start allocates room for rows rows and, for strings, bytes bytes.
	start(mem memory.Allocator, rows, bytes int)
	// finish hands the buffers over to an array of type t with rows rows.
	finish(t arrow.DataType, rows int) arrow.Array
	dataLen() int
	release()
}

// int64Column is an int64 or timestamp column: values only, no validity
// bitmap, since no value is null.
type int64Column struct {
	buf  *memory.Buffer
	vals []int64 // buf's memory
}

func (c *int64Column) start(mem memory.Allocator, rows, _ int) {
	c.buf = memory.NewResizableBuffer(mem)
	c.reserve(rows)
}

func (c *int64Column) reserve(rows int) {
	c.buf.Reserve(rows * 8)
	c.vals = arrow.Int64Traits.CastFromBytes(c.buf.Buf())
}

func (c *int64Column) set(i int, v int64) {
	if i >= len(c.vals) {
		c.reserve(max(2*len(c.vals), 64))
	}
	c.vals[i] = v
}

func (c *int64Column) finish(t arrow.DataType, rows int) arrow.Array {
	c.buf.ResizeNoShrink(rows * 8)
	data := array.NewData(t, rows, []*memory.Buffer{nil, c.buf}, nil, 0, 0)
	defer data.Release()
	c.release()
	return array.MakeFromData(data)
}

func (c *int64Column) dataLen() int { return 0 }

func (c *int64Column) release() {
	if c.buf != nil {
		c.buf.Release()
		c.buf, c.vals = nil, nil
	}
}

// stringColumn is a utf8 column: int32 offsets and the bytes, no validity
// bitmap.
type stringColumn struct {
	offBuf, dataBuf *memory.Buffer
	offs            []int32 // offBuf's memory; offs[i+1] ends row i
	data            []byte  // dataBuf's memory
	size            int     // bytes used
}

func (c *stringColumn) start(mem memory.Allocator, rows, bytes int) {
	c.offBuf = memory.NewResizableBuffer(mem)
	c.dataBuf = memory.NewResizableBuffer(mem)
	c.reserveRows(rows)
	c.offs[0] = 0
	c.reserveData(bytes)
	c.size = 0
}

func (c *stringColumn) reserveRows(rows int) {
	c.offBuf.Reserve((rows + 1) * 4)
	c.offs = arrow.Int32Traits.CastFromBytes(c.offBuf.Buf())
}

func (c *stringColumn) reserveData(bytes int) {
	c.dataBuf.Reserve(bytes)
	c.data = c.dataBuf.Buf()
}

func (c *stringColumn) set(i int, s []byte) {
	if i+1 >= len(c.offs) {
		c.reserveRows(max(2*len(c.offs), 64))
	}
	end := c.size + len(s)
	if end > len(c.data) {
		if end > math.MaxInt32 {
			panic("nexmark: more than 2 GiB in one string column; flush more often")
		}
		c.reserveData(max(2*len(c.data), end))
	}
	copy(c.data[c.size:end], s)
	c.size = end
	c.offs[i+1] = int32(end)
}

func (c *stringColumn) finish(t arrow.DataType, rows int) arrow.Array {
	c.offBuf.ResizeNoShrink((rows + 1) * 4)
	c.dataBuf.ResizeNoShrink(c.size)
	data := array.NewData(t, rows, []*memory.Buffer{nil, c.offBuf, c.dataBuf}, nil, 0, 0)
	defer data.Release()
	c.release()
	return array.MakeFromData(data)
}

func (c *stringColumn) dataLen() int { return c.size }

func (c *stringColumn) release() {
	if c.offBuf != nil {
		c.offBuf.Release()
		c.dataBuf.Release()
		c.offBuf, c.dataBuf, c.offs, c.data = nil, nil, nil, nil
	}
}

// kindColumns are the columns of one kind, in schema order, with the
// sizes of the last batch to allocate the next one by.
type kindColumns struct {
	schema *arrow.Schema
	cols   []column
	rows   int  // rows appended since the last flush
	live   bool // the columns' buffers are allocated
	// Size of the next batch's buffers: the last batch's and an eighth
	// more, so that batches of about equal size grow no buffer.
	rowsHint  int
	bytesHint []int
}

// Sizes of the first batch's buffers; they double as needed.
const (
	firstRowsHint  = 1024
	firstBytesHint = 16 * firstRowsHint
)

func (k *kindColumns) init(s *arrow.Schema, cols ...column) {
	k.schema, k.cols = s, cols
	k.rowsHint = firstRowsHint
	k.bytesHint = make([]int, len(cols))
	for i := range k.bytesHint {
		k.bytesHint[i] = firstBytesHint
	}
}

// begin allocates the buffers of a new batch, before its first row.
func (k *kindColumns) begin(mem memory.Allocator) {
	for i, c := range k.cols {
		c.start(mem, k.rowsHint, k.bytesHint[i])
	}
	k.live = true
}

func (k *kindColumns) flush() arrow.RecordBatch {
	if k.rows == 0 {
		return nil
	}
	arrs := make([]arrow.Array, len(k.cols))
	for i, c := range k.cols {
		if n := c.dataLen(); n > 0 {
			k.bytesHint[i] = n + n/8
		}
		arrs[i] = c.finish(k.schema.Field(i).Type, k.rows)
	}
	rec := array.NewRecordBatch(k.schema, arrs, int64(k.rows))
	for _, a := range arrs {
		a.Release()
	}
	k.rowsHint = k.rows + k.rows/8
	k.rows, k.live = 0, false
	return rec
}

func (k *kindColumns) release() {
	for _, c := range k.cols {
		c.release()
	}
	k.rows, k.live = 0, false
}

type personColumns struct {
	kindColumns
	id                                   int64Column
	name, email, creditCard, city, state stringColumn
	dateTime                             int64Column
	extra                                stringColumn
}

func (p *personColumns) append(mem memory.Allocator, r *personRow) {
	if !p.live {
		p.begin(mem)
	}
	i := p.rows
	p.id.set(i, r.id)
	p.name.set(i, r.name)
	p.email.set(i, r.email)
	p.creditCard.set(i, r.creditCard)
	p.city.set(i, r.city)
	p.state.set(i, r.state)
	p.dateTime.set(i, r.dateTime)
	p.extra.set(i, r.extra)
	p.rows++
}

type auctionColumns struct {
	kindColumns
	id                    int64Column
	itemName, description stringColumn
	initialBid, reserve   int64Column
	dateTime, expires     int64Column
	seller, category      int64Column
	extra                 stringColumn
}

func (a *auctionColumns) append(mem memory.Allocator, r *auctionRow) {
	if !a.live {
		a.begin(mem)
	}
	i := a.rows
	a.id.set(i, r.id)
	a.itemName.set(i, r.itemName)
	a.description.set(i, r.description)
	a.initialBid.set(i, r.initialBid)
	a.reserve.set(i, r.reserve)
	a.dateTime.set(i, r.dateTime)
	a.expires.set(i, r.expires)
	a.seller.set(i, r.seller)
	a.category.set(i, r.category)
	a.extra.set(i, r.extra)
	a.rows++
}

type bidColumns struct {
	kindColumns
	auction, bidder, price int64Column
	channel, url           stringColumn
	dateTime               int64Column
	extra                  stringColumn
}

func (b *bidColumns) append(mem memory.Allocator, r *bidRow) {
	if !b.live {
		b.begin(mem)
	}
	i := b.rows
	b.auction.set(i, r.auction)
	b.bidder.set(i, r.bidder)
	b.price.set(i, r.price)
	b.channel.set(i, r.channel)
	b.url.set(i, r.url)
	b.dateTime.set(i, r.dateTime)
	b.extra.set(i, r.extra)
	b.rows++
}
