package nexmark

import (
	"errors"
	"fmt"
	"math"
)

// Fixed parameters of the generator, as in Beam's GeneratorConfig and the
// per-kind generators. Beam's names are given where ours differ.
const (
	// Out of every ProportionDenominator consecutive events, the first
	// PersonProportion are people, the next AuctionProportion auctions and
	// the rest bids.
	PersonProportion      = 1
	AuctionProportion     = 3
	BidProportion         = 46
	ProportionDenominator = PersonProportion + AuctionProportion + BidProportion

	// Ids start here so that queries find matches even on small data sets.
	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10
	NumCategories   = 5

	// How many not-yet-generated person (auction) ids a random reference
	// may run ahead of the last generated one.
	PersonIDLead  = 10
	AuctionIDLead = 10

	// Beam's HOT_AUCTION_RATIO, HOT_SELLER_RATIO and HOT_BIDDER_RATIO: a
	// hot auction (seller, bidder) is the first (first, second) of the
	// group of this many that the latest auction (person) belongs to. Not
	// to be confused with Config.HotAuctionRatio and its siblings, which
	// set how often a reference is hot.
	HotAuctionGroup = 100
	HotSellerGroup  = 100
	HotBidderGroup  = 100

	// Bids come through one of NumChannels channels, or, one time in
	// HotChannelsRatio (the Flink port's HOT_CHANNELS_RATIO), through one
	// of the four hot channels.
	NumChannels      = 10_000
	HotChannelsRatio = 2
)

// Defaults of Config, which are Beam's NexmarkConfiguration defaults.
const (
	DefaultEventsPerSecond     = 10_000
	DefaultAvgPersonByteSize   = 200
	DefaultAvgAuctionByteSize  = 500
	DefaultAvgBidByteSize      = 100
	DefaultHotAuctionRatio     = 2
	DefaultHotSellersRatio     = 4
	DefaultHotBiddersRatio     = 4
	DefaultNumActivePeople     = 1000
	DefaultNumInFlightAuctions = 100
)

// Config holds the generator's knobs. A zero field takes its default, so
// the zero Config is Beam's default configuration with event 0 at the Unix
// epoch.
type Config struct {
	// Seed 0 generates event n from new Random(n), exactly as Beam does.
	// Any other seed generates it from new Random(n ^ mix(Seed)), where mix
	// is the SplitMix64 finalizer, so different seeds give unrelated
	// streams with the same distributions.
	Seed int64

	// BaseTime is the event time of event 0, in Unix milliseconds.
	BaseTime int64

	// EventsPerSecond is the event-time rate (Beam's firstEventRate with
	// the single-rate SQUARE shape, one generator): event n happens
	// floor(n * 1e6/EventsPerSecond µs) after BaseTime, to the millisecond
	// below. It sets timestamps only; how fast events are produced is up
	// to the caller. Default 10,000.
	EventsPerSecond float64

	// Average sizes, in bytes, that the extra field pads each kind of
	// event to. Defaults 200, 500 and 100.
	AvgPersonByteSize  int
	AvgAuctionByteSize int
	AvgBidByteSize     int

	// One reference in this many is to a random auction (seller, bidder)
	// rather than a hot one. Defaults 2, 4 and 4.
	HotAuctionRatio int
	HotSellersRatio int
	HotBiddersRatio int

	// NumActivePeople is how many of the latest people a random seller or
	// bidder is drawn from. Default 1000.
	NumActivePeople int

	// NumInFlightAuctions is how many of the latest auctions a random bid
	// is for; it also sets auction lengths, which average the event time
	// it takes to generate that many auctions. Default 100.
	NumInFlightAuctions int
}

// DefaultConfig returns the zero Config with every default filled in.
func DefaultConfig() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if c.EventsPerSecond == 0 {
		c.EventsPerSecond = DefaultEventsPerSecond
	}
	def(&c.AvgPersonByteSize, DefaultAvgPersonByteSize)
	def(&c.AvgAuctionByteSize, DefaultAvgAuctionByteSize)
	def(&c.AvgBidByteSize, DefaultAvgBidByteSize)
	def(&c.HotAuctionRatio, DefaultHotAuctionRatio)
	def(&c.HotSellersRatio, DefaultHotSellersRatio)
	def(&c.HotBiddersRatio, DefaultHotBiddersRatio)
	def(&c.NumActivePeople, DefaultNumActivePeople)
	def(&c.NumInFlightAuctions, DefaultNumInFlightAuctions)
	return c
}

// maxByteSize bounds the Avg*ByteSize fields so that an event's strings
// stay small and Java's int arithmetic on sizes cannot overflow.
const maxByteSize = 1 << 20

// Validate reports every field that is out of range, after defaults are
// applied (so zero is always valid).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if !(c.EventsPerSecond > 0) || math.IsInf(c.EventsPerSecond, 0) {
		errs = append(errs, fmt.Errorf("nexmark: EventsPerSecond %v: want a finite number > 0", c.EventsPerSecond))
	}
	for _, f := range []struct {
		name      string
		v, lo, hi int
	}{
		{"AvgPersonByteSize", c.AvgPersonByteSize, 1, maxByteSize},
		{"AvgAuctionByteSize", c.AvgAuctionByteSize, 1, maxByteSize},
		{"AvgBidByteSize", c.AvgBidByteSize, 1, maxByteSize},
		{"HotAuctionRatio", c.HotAuctionRatio, 1, math.MaxInt32},
		{"HotSellersRatio", c.HotSellersRatio, 1, math.MaxInt32},
		{"HotBiddersRatio", c.HotBiddersRatio, 1, math.MaxInt32},
		{"NumActivePeople", c.NumActivePeople, 1, math.MaxInt32 - PersonIDLead},
		{"NumInFlightAuctions", c.NumInFlightAuctions, 1, math.MaxInt32 - AuctionIDLead},
	} {
		if f.v < f.lo || f.v > f.hi {
			errs = append(errs, fmt.Errorf("nexmark: %s %d: want %d to %d", f.name, f.v, f.lo, f.hi))
		}
	}
	return errors.Join(errs...)
}

// LastBase0PersonID is Beam's lastBase0PersonId: the id, less
// FirstPersonID, of the latest person generated up to event n (of event n
// itself if it is a person).
func LastBase0PersonID(n int64) int64 {
	epoch, offset := n/ProportionDenominator, n%ProportionDenominator
	if offset >= PersonProportion {
		offset = PersonProportion - 1
	}
	return epoch*PersonProportion + offset
}

// LastBase0AuctionID is Beam's lastBase0AuctionId: the id, less
// FirstAuctionID, of the latest auction generated up to event n (of event
// n itself if it is an auction). It is -1 before the first auction.
func LastBase0AuctionID(n int64) int64 {
	epoch, offset := n/ProportionDenominator, n%ProportionDenominator
	switch {
	case offset < PersonProportion:
		epoch--
		offset = AuctionProportion - 1
	case offset >= PersonProportion+AuctionProportion:
		offset = AuctionProportion - 1
	default:
		offset -= PersonProportion
	}
	return epoch*AuctionProportion + offset
}

// clock turns event numbers into event times.
type clock struct {
	base    int64
	delayUs float64 // microseconds between events
	// delayInt is delayUs when that is a whole number, so that the common
	// rates use Beam's exact integer arithmetic; 0 otherwise.
	delayInt int64
}

func newClock(c Config) clock {
	k := clock{base: c.BaseTime, delayUs: 1e6 / c.EventsPerSecond}
	if k.delayUs == math.Trunc(k.delayUs) && k.delayUs < 1<<53 {
		k.delayInt = int64(k.delayUs)
	}
	return k
}

// at is Beam's timestampUsForEvent(n)/1000 plus the base time.
func (k clock) at(n int64) int64 {
	if k.delayInt > 0 {
		return k.base + n*k.delayInt/1000
	}
	return k.base + int64(float64(n)*k.delayUs)/1000
}

// seedSalt is what event numbers are xor-ed with to seed their Random.
func seedSalt(seed int64) int64 {
	if seed == 0 {
		return 0
	}
	z := uint64(seed)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return int64(z ^ z>>31)
}
