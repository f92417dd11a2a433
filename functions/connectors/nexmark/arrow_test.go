package nexmark

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestSchemas(t *testing.T) {
	for _, tc := range []struct {
		s        *arrow.Schema
		names    string
		dateTime int
	}{
		{PersonSchema, "id name emailAddress creditCard city state dateTime extra", PersonDateTime},
		{AuctionSchema, "id itemName description initialBid reserve dateTime expires seller category extra", AuctionDateTime},
		{BidSchema, "auction bidder price channel url dateTime extra", BidDateTime},
	} {
		var names string
		for i, f := range tc.s.Fields() {
			if i > 0 {
				names += " "
			}
			names += f.Name
		}
		if names != tc.names {
			t.Errorf("columns %q, want %q", names, tc.names)
		}
		if f := tc.s.Field(tc.dateTime); f.Name != "dateTime" || !arrow.TypeEqual(f.Type, arrow.FixedWidthTypes.Timestamp_ms) {
			t.Errorf("column %d is %v, want dateTime timestamp[ms, UTC]", tc.dateTime, f)
		}
	}
}

// rowsOf turns the batches of one kind back into events, as the reference
// path makes them.
func rowsOf(t *testing.T, k Kind, rec arrow.RecordBatch) []Event {
	t.Helper()
	if rec == nil {
		return nil
	}
	i64 := func(c int) *array.Int64 { return rec.Column(c).(*array.Int64) }
	str := func(c int) *array.String { return rec.Column(c).(*array.String) }
	ts := func(c int) *array.Timestamp { return rec.Column(c).(*array.Timestamp) }
	if err := array.ValidateRecordFull(rec); err != nil {
		t.Fatalf("%v batch: %v", k, err)
	}
	var out []Event
	for r := range int(rec.NumRows()) {
		for c := range int(rec.NumCols()) {
			if rec.Column(c).IsNull(r) {
				t.Fatalf("%v row %d column %d is null", k, r, c)
			}
		}
		switch k {
		case KindPerson:
			out = append(out, Event{Kind: k, Person: &Person{
				ID: i64(0).Value(r), Name: str(1).Value(r), EmailAddress: str(2).Value(r), CreditCard: str(3).Value(r),
				City: str(4).Value(r), State: str(5).Value(r), DateTime: int64(ts(6).Value(r)), Extra: str(7).Value(r),
			}})
		case KindAuction:
			out = append(out, Event{Kind: k, Auction: &Auction{
				ID: i64(0).Value(r), ItemName: str(1).Value(r), Description: str(2).Value(r),
				InitialBid: i64(3).Value(r), Reserve: i64(4).Value(r), DateTime: int64(ts(5).Value(r)),
				Expires: int64(ts(6).Value(r)), Seller: i64(7).Value(r), Category: i64(8).Value(r), Extra: str(9).Value(r),
			}})
		case KindBid:
			out = append(out, Event{Kind: k, Bid: &Bid{
				Auction: i64(0).Value(r), Bidder: i64(1).Value(r), Price: i64(2).Value(r), Channel: str(3).Value(r),
				URL: str(4).Value(r), DateTime: int64(ts(5).Value(r)), Extra: str(6).Value(r),
			}})
		}
	}
	return out
}

// TestBatchBuilderMatchesGenerator appends events in batches of several
// sizes, all of them or only some, and checks every row of every batch
// against Generator.Event.
func TestBatchBuilderMatchesGenerator(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		keep  func(n int64) bool
		limit int64
		flush int // flush after this many appends
	}{
		{"all", Config{}, func(int64) bool { return true }, 20_001, 4096},
		{"n%3==1", Config{}, func(n int64) bool { return n%3 == 1 }, 20_001, 1000},
		{"descending", Config{Seed: 99}, func(int64) bool { return true }, 3000, 777},
		{"custom", customGoldenConfig, func(n int64) bool { return n%7 != 0 }, 5000, 1 << 30},
		{"flush every row", Config{}, func(int64) bool { return true }, 300, 1},
		{"large events", Config{AvgPersonByteSize: 5000, AvgAuctionByteSize: 20000, AvgBidByteSize: 3000},
			func(int64) bool { return true }, 600, 250},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			b := NewBatchBuilder(tc.cfg, mem)
			defer b.Release()
			g := NewGenerator(tc.cfg)

			var want [3][]Event
			var got [3][]Event
			flush := func() {
				var recs [3]arrow.RecordBatch
				recs[KindPerson], recs[KindAuction], recs[KindBid] = b.Flush()
				for k, rec := range recs {
					if rec == nil {
						continue
					}
					if !rec.Schema().Equal([]*arrow.Schema{PersonSchema, AuctionSchema, BidSchema}[k]) {
						t.Fatalf("%v batch schema %v", Kind(k), rec.Schema())
					}
					got[k] = append(got[k], rowsOf(t, Kind(k), rec)...)
					rec.Release()
				}
				if b.Len() != [3]int{} {
					t.Fatalf("Len after Flush = %v", b.Len())
				}
			}
			appended := 0
			step := func(n int64) {
				if !tc.keep(n) {
					return
				}
				b.Append(n)
				e := g.Event(n)
				want[e.Kind] = append(want[e.Kind], e)
				if appended++; appended%tc.flush == 0 {
					flush()
				}
			}
			if tc.name == "descending" {
				for n := tc.limit - 1; n >= 0; n-- {
					step(n)
				}
			} else {
				for n := range tc.limit {
					step(n)
				}
			}
			flush()
			for k := range want {
				if len(got[k]) != len(want[k]) {
					t.Fatalf("%v: %d rows, want %d", Kind(k), len(got[k]), len(want[k]))
				}
				for i := range want[k] {
					if g, w := goldenLine(got[k][i]), goldenLine(want[k][i]); g != w {
						t.Fatalf("%v row %d:\n got %q\nwant %q", Kind(k), i, g, w)
					}
				}
			}
		})
	}
}

func TestBatchBuilderFlushAndLen(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := NewBatchBuilder(Config{}, mem)
	defer b.Release()

	if p, a, bid := b.Flush(); p != nil || a != nil || bid != nil {
		t.Fatal("Flush of an empty builder returned a batch")
	}
	for _, n := range []int64{4, 5, 1, 54} { // three bids, one auction
		b.Append(n)
	}
	if got := b.Len(); got != [3]int{0, 1, 3} {
		t.Fatalf("Len = %v, want [0 1 3]", got)
	}
	p, a, bid := b.Flush()
	if p != nil || a == nil || bid == nil || a.NumRows() != 1 || bid.NumRows() != 3 {
		t.Fatalf("Flush = %v, %v, %v", p, a, bid)
	}
	a.Release()
	bid.Release()

	// Release with rows not flushed frees them; a second Release is safe.
	b.Append(0)
	b.Release()
	b.Release()
	if b.Len() != [3]int{} {
		t.Fatalf("Len after Release = %v", b.Len())
	}
}

// TestBatchBuilderAllocs checks that appending events allocates nothing on
// the Go heap: a batch allocates its buffers when its first row comes, and
// its arrays and record at Flush, but nothing per event.
func TestBatchBuilderAllocs(t *testing.T) {
	b := NewBatchBuilder(Config{}, memory.NewGoAllocator())
	defer b.Release()
	var n int64
	appendN := func(k int) {
		for range k {
			b.Append(n)
			n++
		}
	}
	flush := func() int {
		p, a, bid := b.Flush()
		rows := int(p.NumRows() + a.NumRows() + bid.NumRows())
		p.Release()
		a.Release()
		bid.Release()
		return rows
	}
	appendN(10_000) // sets the size of the next batches' buffers
	flush()
	for range 3 {
		appendN(50) // the first row of each kind allocates the batch's buffers
		// AllocsPerRun runs the function once more to warm up: 8,000
		// events, fewer than in the first batch.
		if allocs := testing.AllocsPerRun(1, func() { appendN(4_000) }); allocs != 0 && !raceEnabled {
			t.Fatalf("%v allocations appending 4,000 events", allocs)
		}
		flush()
	}
	appendN(9_000)
	perBatch := testing.AllocsPerRun(3, func() { appendN(9_000); flush() })
	if perBatch > 200 {
		t.Fatalf("%v allocations per batch", perBatch)
	}
	t.Logf("%v allocations per batch of 9,000 events, none per event", perBatch)
}

func TestBatchBuilderReleaseThenReuse(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := NewBatchBuilder(Config{}, mem)
	for n := range int64(120) {
		b.Append(n)
	}
	b.Release()
	b.Append(7)
	p, a, bid := b.Flush()
	if p != nil || a != nil || bid == nil || bid.NumRows() != 1 {
		t.Fatalf("after Release, Flush = %v, %v, %v", p, a, bid)
	}
	if got, want := rowsOf(t, KindBid, bid)[0], NewGenerator(Config{}).Event(7); goldenLine(got) != goldenLine(want) {
		t.Fatalf("event 7 = %q, want %q", goldenLine(got), goldenLine(want))
	}
	bid.Release()
	b.Release()
}

// recycler is a memory.Allocator that keeps freed buffers for reuse, as a
// pooling allocator would in a pipeline that releases its batches. With
// it, the benchmark measures the generator rather than the Go heap and the
// kernel providing fresh memory for every batch.
type recycler struct{ free map[int][][]byte }

func (a *recycler) Allocate(size int) []byte {
	c := 64
	for c < size {
		c *= 2
	}
	if l := a.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		a.free[c] = l[:len(l)-1]
		return b[:size]
	}
	return make([]byte, size, c)
}

func (a *recycler) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	n := a.Allocate(size)
	copy(n, b)
	a.Free(b)
	return n
}

func (a *recycler) Free(b []byte) {
	if a.free == nil {
		a.free = map[int][][]byte{}
	}
	a.free[cap(b)] = append(a.free[cap(b)], b[:0])
}

// BenchmarkBatchBuilder generates events 0, 1, 2, ... of the default
// configuration in batches of 8,192, with the Go allocator and with one
// that recycles the released batches' memory.
func BenchmarkBatchBuilder(b *testing.B) {
	for _, bc := range []struct {
		name string
		mem  memory.Allocator
	}{
		{"go-allocator", memory.NewGoAllocator()},
		{"recycled", &recycler{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bb := NewBatchBuilder(Config{}, bc.mem)
			defer bb.Release()
			const batch = 8192
			b.ReportAllocs()
			var n int64
			cpu := processCPU()
			for b.Loop() {
				bb.Append(n)
				if n++; n%batch == 0 {
					p, a, bid := bb.Flush()
					p.Release()
					a.Release()
					bid.Release()
				}
			}
			reportRate(b, n, processCPU()-cpu)
		})
	}
}

// BenchmarkGenerate is the generator without Arrow: the cost of the
// random draws and strings alone.
func BenchmarkGenerate(b *testing.B) {
	var c core
	c.init(Config{})
	var p personRow
	var a auctionRow
	var r bidRow
	var n int64
	cpu := processCPU()
	for b.Loop() {
		switch KindOf(n) {
		case KindPerson:
			c.person(n, &p)
		case KindAuction:
			c.auction(n, &a)
		default:
			c.bid(n, &r)
		}
		n++
	}
	reportRate(b, n, processCPU()-cpu)
}

func BenchmarkGeneratorEvent(b *testing.B) {
	g := NewGenerator(Config{})
	b.ReportAllocs()
	var n int64
	cpu := processCPU()
	for b.Loop() {
		g.Event(n)
		n++
	}
	reportRate(b, n, processCPU()-cpu)
}

// reportRate reports events per second of wall time and, where the
// process's CPU time is known, per second of CPU time (user and system,
// all threads, so the garbage collector's work counts too).
func reportRate(b *testing.B, events int64, cpu time.Duration) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	if cpu > 0 {
		b.ReportMetric(float64(events)/cpu.Seconds(), "events/cpu-s")
	}
}
