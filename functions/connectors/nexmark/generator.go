package nexmark

import (
	"fmt"
	"math"
)

// Kind is the kind of an event.
type Kind int

// The kinds of events, usable as indexes of BatchBuilder.Len.
const (
	KindPerson Kind = iota
	KindAuction
	KindBid
)

func (k Kind) String() string {
	switch k {
	case KindPerson:
		return "person"
	case KindAuction:
		return "auction"
	case KindBid:
		return "bid"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// KindOf returns the kind of event n (n >= 0): of every 50 events, one
// person, then three auctions, then 46 bids.
func KindOf(n int64) Kind {
	switch r := n % ProportionDenominator; {
	case r < PersonProportion:
		return KindPerson
	case r < PersonProportion+AuctionProportion:
		return KindAuction
	}
	return KindBid
}

// Person is a new user of the auction site. Times are Unix milliseconds.
type Person struct {
	ID           int64
	Name         string
	EmailAddress string
	CreditCard   string
	City         string
	State        string
	DateTime     int64
	Extra        string
}

// Auction is an item put up for auction.
type Auction struct {
	ID          int64
	ItemName    string
	Description string
	InitialBid  int64
	Reserve     int64
	DateTime    int64
	Expires     int64
	Seller      int64
	Category    int64
	Extra       string
}

// Bid is a bid for an auction.
type Bid struct {
	Auction  int64
	Bidder   int64
	Price    int64
	Channel  string
	URL      string
	DateTime int64
	Extra    string
}

// Event is one generated event: the field that Kind names is set, the
// others are nil.
type Event struct {
	Kind    Kind
	Person  *Person
	Auction *Auction
	Bid     *Bid
}

// Generator generates single events as Go values. It is the reference
// that BatchBuilder's output is tested against, and the way to compute the
// expected output of a query independently of Arrow. A Generator is not
// safe for concurrent use; make one per goroutine.
type Generator struct{ core core }

// NewGenerator returns a generator for cfg, whose zero fields take their
// defaults. It panics if cfg.Validate fails.
func NewGenerator(cfg Config) *Generator {
	g := &Generator{}
	g.core.init(cfg)
	return g
}

// Config returns the generator's configuration, defaults filled in.
func (g *Generator) Config() Config { return g.core.cfg }

// Timestamp returns the event time of event n, in Unix milliseconds.
func (g *Generator) Timestamp(n int64) int64 { return g.core.clock.at(n) }

// Event generates event n (n >= 0). The same configuration and n always
// give the same event, whatever was generated before.
func (g *Generator) Event(n int64) Event {
	c := &g.core
	switch KindOf(n) {
	case KindPerson:
		var p personRow
		c.person(n, &p)
		return Event{Kind: KindPerson, Person: &Person{
			ID: p.id, Name: string(p.name), EmailAddress: string(p.email), CreditCard: string(p.creditCard),
			City: string(p.city), State: string(p.state), DateTime: p.dateTime, Extra: string(p.extra),
		}}
	case KindAuction:
		var a auctionRow
		c.auction(n, &a)
		return Event{Kind: KindAuction, Auction: &Auction{
			ID: a.id, ItemName: string(a.itemName), Description: string(a.description),
			InitialBid: a.initialBid, Reserve: a.reserve, DateTime: a.dateTime, Expires: a.expires,
			Seller: a.seller, Category: a.category, Extra: string(a.extra),
		}}
	}
	var b bidRow
	c.bid(n, &b)
	return Event{Kind: KindBid, Bid: &Bid{
		Auction: b.auction, Bidder: b.bidder, Price: b.price, Channel: string(b.channel),
		URL: string(b.url), DateTime: b.dateTime, Extra: string(b.extra),
	}}
}

// The rows that core generates. Their byte slices point into core.buf or
// into the constant tables, and are valid until the next event.
type personRow struct {
	id                      int64
	name, email, creditCard []byte
	city, state             []byte
	dateTime                int64
	extra                   []byte
}

type auctionRow struct {
	id                                  int64
	itemName, description               []byte
	initialBid, reserve                 int64
	dateTime, expires, seller, category int64
	extra                               []byte
}

type bidRow struct {
	auction, bidder, price int64
	channel, url           []byte
	dateTime               int64
	extra                  []byte
}

// core is the one implementation of event generation, shared by the
// reference Generator and the Arrow BatchBuilder so that they cannot
// disagree. It allocates nothing per event: generated strings go to buf,
// whose capacity covers the largest possible event, and constant strings
// come from the tables.
type core struct {
	cfg   Config
	clock clock
	salt  int64
	// numEventsForAuctions is how many events it takes to generate
	// NumInFlightAuctions auctions.
	numEventsForAuctions int64
	t                    *tables
	rnd                  javaRandom
	buf                  []byte
}

func (c *core) init(cfg Config) {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	c.cfg = cfg.withDefaults()
	c.clock = newClock(c.cfg)
	c.salt = seedSalt(c.cfg.Seed)
	c.numEventsForAuctions = int64(c.cfg.NumInFlightAuctions) * ProportionDenominator / AuctionProportion
	c.t = loadTables()
	// Extra is shorter than 1.2 times the average size plus one; the
	// other generated strings of an event add up to less than 150 bytes.
	maxAvg := max(c.cfg.AvgPersonByteSize, c.cfg.AvgAuctionByteSize, c.cfg.AvgBidByteSize)
	c.buf = make([]byte, 0, maxAvg+maxAvg/5+256)
}

// begin seeds the random source for event n and returns the event's time
// and the emptied scratch buffer. The event's methods append to the buffer
// in a local variable, and store it back once, so that storing the growing
// slice costs no GC write barrier per string.
func (c *core) begin(n int64) (int64, []byte) {
	c.rnd.setSeed(n ^ c.salt)
	return c.clock.at(n), c.buf[:0]
}

// take returns what was appended to buf since start.
func take(buf []byte, start int) []byte { return buf[start:len(buf):len(buf)] }

// nextPrice is Beam's PriceGenerator.nextPrice: cents, log-uniform from
// $1 to $1,000,000.
func (c *core) nextPrice() int64 {
	return javaRound(pow10(c.rnd.nextDouble()*6.0) * 100.0)
}

// pow10 is 10^y for y in [0, 6], standing in for Java's Math.pow(10, y),
// which is within an ulp of exact. It is 10^k * e^(f ln 10) for the whole
// and fractional parts k and f of y, with the rounding error of f ln 10
// (found with a fused multiply-add, and that of the constant ln 10)
// folded back in, so it is as close as math.Exp allows: nearer the exact
// value than math.Pow, and twice as fast. Prices agreed with a JVM's for
// all of 20 million draws.
func pow10(y float64) float64 {
	k := math.Floor(y)
	f := y - k
	t := f * math.Ln10
	e := math.FMA(f, math.Ln10, -t) + f*ln10Lo
	v := math.Exp(t)
	return (v + v*e) * pow10Table[int(k)]
}

// ln10Lo is ln 10 - float64(math.Ln10).
const ln10Lo = -2.1707562233822494e-16

var pow10Table = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6}

// nextBase0PersonID is Beam's nextBase0PersonId: one of the active people,
// or a few ahead of the latest.
func (c *core) nextBase0PersonID(n int64) int64 {
	numPeople := LastBase0PersonID(n) + 1
	active := min(numPeople, int64(c.cfg.NumActivePeople))
	return numPeople - active + beamNextLong(&c.rnd, active+PersonIDLead)
}

// nextBase0AuctionID is Beam's nextBase0AuctionId: one of the auctions
// likely still in flight, or a few ahead of the latest.
func (c *core) nextBase0AuctionID(n int64) int64 {
	maxAuction := LastBase0AuctionID(n)
	minAuction := max(maxAuction-int64(c.cfg.NumInFlightAuctions), 0)
	return minAuction + beamNextLong(&c.rnd, maxAuction-minAuction+1+AuctionIDLead)
}

// nextAuctionLengthMs is Beam's nextAuctionLengthMs: uniform up to twice
// the event time it takes to generate NumInFlightAuctions more auctions.
func (c *core) nextAuctionLengthMs(n, timestamp int64) int64 {
	horizon := c.clock.at(n+c.numEventsForAuctions) - timestamp
	return 1 + beamNextLong(&c.rnd, max(horizon*2, 1))
}

// person is Beam's PersonGenerator.nextPerson.
func (c *core) person(n int64, p *personRow) {
	var buf []byte
	p.dateTime, buf = c.begin(n)
	r := &c.rnd
	p.id = LastBase0PersonID(n) + FirstPersonID
	first := int(r.nextIntn(int32(len(firstNames))))
	p.name = c.t.names.get(first*len(lastNames) + int(r.nextIntn(int32(len(lastNames)))))
	start := len(buf)
	buf = appendNextString(buf, r, 7, ' ')
	buf = append(buf, '@')
	buf = appendNextString(buf, r, 5, ' ')
	buf = append(buf, ".com"...)
	p.email = take(buf, start)
	start = len(buf)
	buf = appendCreditCard(buf, r)
	p.creditCard = take(buf, start)
	p.city = c.t.cities.get(int(r.nextIntn(int32(len(usCities)))))
	p.state = c.t.states.get(int(r.nextIntn(int32(len(usStates)))))
	size := 8 + len(p.name) + len(p.email) + len(p.creditCard) + len(p.city) + len(p.state)
	start = len(buf)
	buf = appendNextExtra(buf, r, size, c.cfg.AvgPersonByteSize)
	p.extra = take(buf, start)
	c.buf = buf
}

// auction is Beam's AuctionGenerator.nextAuction.
func (c *core) auction(n int64, a *auctionRow) {
	var buf []byte
	a.dateTime, buf = c.begin(n)
	r := &c.rnd
	a.id = LastBase0AuctionID(n) + FirstAuctionID
	if r.nextIntn(int32(c.cfg.HotSellersRatio)) > 0 {
		a.seller = LastBase0PersonID(n) / HotSellerGroup * HotSellerGroup
	} else {
		a.seller = c.nextBase0PersonID(n)
	}
	a.seller += FirstPersonID
	a.category = FirstCategoryID + int64(r.nextIntn(NumCategories))
	a.initialBid = c.nextPrice()
	a.expires = a.dateTime + c.nextAuctionLengthMs(n, a.dateTime)
	start := len(buf)
	buf = appendNextString(buf, r, 20, ' ')
	a.itemName = take(buf, start)
	start = len(buf)
	buf = appendNextString(buf, r, 100, ' ')
	a.description = take(buf, start)
	a.reserve = a.initialBid + c.nextPrice()
	size := 8 + len(a.itemName) + len(a.description) + 8 + 8 + 8 + 8 + 8
	start = len(buf)
	buf = appendNextExtra(buf, r, size, c.cfg.AvgAuctionByteSize)
	a.extra = take(buf, start)
	c.buf = buf
}

// bid is Beam's BidGenerator.nextBid with the Flink port's channel and URL,
// drawn after the price.
func (c *core) bid(n int64, b *bidRow) {
	var buf []byte
	b.dateTime, buf = c.begin(n)
	r := &c.rnd
	if r.nextIntn(int32(c.cfg.HotAuctionRatio)) > 0 {
		b.auction = LastBase0AuctionID(n) / HotAuctionGroup * HotAuctionGroup
	} else {
		b.auction = c.nextBase0AuctionID(n)
	}
	b.auction += FirstAuctionID
	if r.nextIntn(int32(c.cfg.HotBiddersRatio)) > 0 {
		b.bidder = LastBase0PersonID(n)/HotBidderGroup*HotBidderGroup + 1
	} else {
		b.bidder = c.nextBase0PersonID(n)
	}
	b.bidder += FirstPersonID
	b.price = c.nextPrice()
	if r.nextIntn(HotChannelsRatio) > 0 {
		i := int(r.nextIntn(int32(len(hotChannels))))
		b.channel, b.url = c.t.hotChannels.get(i), c.t.hotURLs.get(i)
	} else {
		ch := r.nextIntn(NumChannels)
		start := len(buf)
		buf = appendChannelName(buf, ch)
		b.channel = take(buf, start)
		start = len(buf)
		buf = appendChannelURL(buf, c.t.channelURLs[ch], ch)
		b.url = take(buf, start)
	}
	start := len(buf)
	buf = appendNextExtra(buf, r, 8+8+8+8, c.cfg.AvgBidByteSize)
	b.extra = take(buf, start)
	c.buf = buf
}
