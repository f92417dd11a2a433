package nexmark

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// goldenLine formats an event as testdata/GoldenEvents.java does.
func goldenLine(e Event) string {
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	var f []string
	switch e.Kind {
	case KindPerson:
		p := e.Person
		f = []string{"P", i(p.ID), p.Name, p.EmailAddress, p.CreditCard, p.City, p.State, i(p.DateTime), p.Extra}
	case KindAuction:
		a := e.Auction
		f = []string{"A", i(a.ID), a.ItemName, a.Description, i(a.InitialBid), i(a.Reserve), i(a.DateTime),
			i(a.Expires), i(a.Seller), i(a.Category), a.Extra}
	case KindBid:
		b := e.Bid
		f = []string{"B", i(b.Auction), i(b.Bidder), i(b.Price), b.Channel, b.URL, i(b.DateTime), b.Extra}
	}
	return strings.Join(f, "\t")
}

// customGoldenConfig and customGoldenEvents are the "custom" case of
// GoldenEvents.java: a seed, a rate slow enough for Beam's nextLong
// fallback and not dividing a second into whole microseconds, and large
// event numbers.
var customGoldenConfig = Config{
	Seed: 12345, BaseTime: 1_700_000_000_000, EventsPerSecond: 0.0003,
	AvgPersonByteSize: 300, AvgAuctionByteSize: 700, AvgBidByteSize: 40,
	HotAuctionRatio: 3, HotSellersRatio: 5, HotBiddersRatio: 7,
	NumActivePeople: 50, NumInFlightAuctions: 20,
}

func customGoldenEvents() []int64 {
	var ns []int64
	for _, r := range [][2]int64{{0, 300}, {1_000_000_000, 1_000_000_100}, {2_000_000_000, 2_000_000_050}} {
		for n := r[0]; n < r[1]; n++ {
			ns = append(ns, n)
		}
	}
	return ns
}

// TestGolden compares the generator with events that a JVM computed with
// Beam's algorithm and the JDK's own Random, Math.pow, Math.round,
// String.format and String.trim.
func TestGolden(t *testing.T) {
	var def []int64
	for n := range int64(1500) {
		def = append(def, n)
	}
	for _, tc := range []struct {
		file   string
		cfg    Config
		events []int64
	}{
		{"testdata/golden_default.txt", Config{}, def},
		{"testdata/golden_custom.txt", customGoldenConfig, customGoldenEvents()},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			g := NewGenerator(tc.cfg)
			i, bad := 0, 0
			for ; sc.Scan(); i++ {
				if i >= len(tc.events) {
					t.Fatalf("more than %d lines", len(tc.events))
				}
				n := tc.events[i]
				if got := goldenLine(g.Event(n)); got != sc.Text() {
					if bad++; bad <= 3 {
						t.Errorf("event %d:\n got %q\nwant %q", n, got, sc.Text())
					}
				}
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			if i != len(tc.events) {
				t.Fatalf("%d lines, want %d", i, len(tc.events))
			}
			if bad > 0 {
				t.Fatalf("%d of %d events differ", bad, i)
			}
		})
	}
}
