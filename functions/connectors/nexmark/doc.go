// Package nexmark is the nexmark source (SourceType) and the generator of
// its events, those of the Nexmark benchmark (docs/nexmark.md): people
// who join an auction site, auctions they open, and bids on them, as Apache
// Beam's generator (org.apache.beam.sdk.nexmark.sources.generator) makes
// them, with the bid channel and URL of the Flink port
// (github.com/nexmark/nexmark).
//
// Event n (n = 0, 1, 2, ...) is a pure function of the Config and n: its
// kind is fixed by n mod 50 (one person, three auctions, 46 bids), its
// event time by n and the event rate, and its fields by a java.util.Random
// seeded with n, drawn in Beam's order. So any subset of events can be
// generated in any order, by any number of workers, and a restarted source
// regenerates exactly what it produced before. Ids are consecutive per
// kind from 1000, and bids and auctions refer to people and auctions that
// exist by then or come within a few ids after.
//
// There are two ways to get events, with equal values:
//
//   - Generator.Event(n) returns one event as Go structs. It is the
//     reference, for tests and for computing a query's expected output
//     without Arrow.
//   - BatchBuilder writes events straight into Arrow column buffers, without
//     heap allocation per event, and Flush returns a record batch per kind
//     (PersonSchema, AuctionSchema, BidSchema).
//
// A source's loop, in outline:
//
//	b := nexmark.NewBatchBuilder(cfg, mem)
//	defer b.Release()
//	for n := first; n < last; n += parallelism {
//		b.Append(n)
//		if b.Len()[nexmark.KindBid] >= batchRows {
//			person, auction, bid := b.Flush()
//			// emit the non-nil batches
//		}
//	}
//
// The two ways share one implementation of the generator, tested against
// events that a JVM computed (testdata/GoldenEvents.java).
//
// The nexmark source (source.go) is such a loop over splits
// (functions/connector/splitseq): the blocks of 100 consecutive events n
// with (n/100) % K == j are split j of K, subtask k of p generates the
// splits j with j % p == k in increasing event number, into three
// outputs, and its checkpointed position is each split's next event
// number and the event time of event 0, so it rescales.
//
// Like Beam's, the stream inherits a quirk of java.util.Random: the first
// draw of Randoms seeded with consecutive numbers is biased, so about 52%
// of bids, rather than 1 - 1/HotAuctionRatio = 50%, choose the hot
// auction.
//
// # Differences from Beam's generator
//
// With Seed 0, people and auctions are Beam's, field for field (up to the
// last item below), and bids are Beam's but for extra. In full:
//
//   - Bids have a channel and a URL, which Beam's Bid does not: they are
//     the Flink port's, drawn as it draws them, after the price and before
//     extra. Half the bids come through one of the hot channels Google,
//     Facebook, Baidu and Apple, the rest through channel-0 to
//     channel-9999. Because of these draws, a bid's extra is not Beam's
//     for the same event; its auction, bidder, price and time are.
//   - The URLs are deterministic. The Flink port makes the four hot URLs
//     and each channel's URL with unseeded Randoms, so they change from
//     run to run. Here hot channel i's URL comes from new Random(-1-i),
//     and channel n's from new Random(n): the base URL
//     https://www.nexmark.com/<a>/<b>/<c>/item.htm?query=1, then, if
//     nextInt(10) > 0 (nine channels in ten), "&channel_id=" and
//     abs(Integer.reverse(n)). The URLs are the same for every Seed.
//   - The bidder is Beam's. The Flink port adds FIRST_PERSON_ID to it
//     twice, so its bidder ids start at 2000 and match no person.
//   - Every event has its own Random seeded with its number, as in Beam;
//     the Flink port draws all events from one unseeded Random.
//   - A non-zero Seed seeds event n's Random with n ^ mix(Seed), mix being
//     the SplitMix64 finalizer; Beam has no seed.
//   - The rate is a float, EventsPerSecond, and the delay between events
//     is 1e6/EventsPerSecond microseconds unrounded. Beam takes an integer
//     rate and rounds the delay to whole microseconds. The times are
//     Beam's whenever the delay is a whole number of microseconds (the
//     default 10,000 events/s: 100 µs); otherwise event n's time is
//     BaseTime + (long)(n*delay)/1000, as in the Flink port.
//   - Only Beam's simplest timeline is supported: one rate (the SQUARE
//     shape with firstEventRate = nextEventRate), one generator
//     (numEventGenerators 1), first event id 0 and outOfOrderGroupSize 1.
//     Event id and event number are both n, no event is out of order or
//     delayed (probDelayedEvent is 0), and auction lengths are computed
//     from n. Wall-clock pacing, watermarks and the maximum number of
//     events are the caller's.
//   - Prices compute 10^x in Go where Beam calls Java's Math.pow(10, x).
//     The two may differ in the last bit, but a price is rounded to a
//     whole cent, so it can differ only if 10^x * 100 falls within about
//     1e-8 of a half cent; in 20 million draws compared with a JVM, no
//     price differed.
package nexmark
