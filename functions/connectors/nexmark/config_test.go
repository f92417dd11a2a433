package nexmark

import (
	"strings"
	"testing"
)

func TestKindOfProportions(t *testing.T) {
	var count [3]int
	for n := range int64(ProportionDenominator) {
		count[KindOf(n)]++
	}
	if count != [3]int{1, 3, 46} {
		t.Fatalf("kinds of events 0..49 = %v, want [1 3 46]", count)
	}
	for n, want := range map[int64]Kind{0: KindPerson, 1: KindAuction, 3: KindAuction, 4: KindBid, 49: KindBid, 50: KindPerson, 53: KindAuction, 54: KindBid} {
		if got := KindOf(n); got != want {
			t.Errorf("KindOf(%d) = %v, want %v", n, got, want)
		}
	}
}

// Worked by hand from Beam's lastBase0PersonId and lastBase0AuctionId.
func TestLastBase0IDs(t *testing.T) {
	for _, tc := range []struct{ n, person, auction int64 }{
		{0, 0, -1}, // the first person; no auction yet
		{1, 0, 0},  // the first auction
		{2, 0, 1},
		{3, 0, 2},
		{4, 0, 2}, // the first bid: the latest auction is the third
		{49, 0, 2},
		{50, 1, 2}, // the second person; the latest auction is still the third
		{51, 1, 3},
		{104, 2, 8},
		{5000, 100, 299},
		{5003, 100, 302},
	} {
		if got := LastBase0PersonID(tc.n); got != tc.person {
			t.Errorf("LastBase0PersonID(%d) = %d, want %d", tc.n, got, tc.person)
		}
		if got := LastBase0AuctionID(tc.n); got != tc.auction {
			t.Errorf("LastBase0AuctionID(%d) = %d, want %d", tc.n, got, tc.auction)
		}
	}
}

func TestClock(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		n    int64
		want int64
	}{
		{Config{}, 0, 0},
		{Config{}, 9, 0}, // 900 µs
		{Config{}, 10, 1},
		{Config{}, 12345, 1234},
		{Config{BaseTime: 1000, EventsPerSecond: 1000}, 7, 1007},
		// 1e6/3 µs is not a whole number: (long)(n*delay)/1000.
		{Config{EventsPerSecond: 3}, 1, 333},
		{Config{EventsPerSecond: 3}, 3, 1000},
		{Config{EventsPerSecond: 3}, 4, 1333},
		// A whole delay is multiplied as an integer, exactly, past 2^53.
		{Config{EventsPerSecond: 1e6}, 1<<53 + 1, (1<<53 + 1) / 1000},
	} {
		if got := NewGenerator(tc.cfg).Timestamp(tc.n); got != tc.want {
			t.Errorf("%+v: Timestamp(%d) = %d, want %d", tc.cfg, tc.n, got, tc.want)
		}
	}
}

func TestConfigDefaultsAndValidate(t *testing.T) {
	d := DefaultConfig()
	want := Config{EventsPerSecond: 10000, AvgPersonByteSize: 200, AvgAuctionByteSize: 500, AvgBidByteSize: 100,
		HotAuctionRatio: 2, HotSellersRatio: 4, HotBiddersRatio: 4, NumActivePeople: 1000, NumInFlightAuctions: 100}
	if d != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", d, want)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	err := Config{EventsPerSecond: -1, AvgBidByteSize: -5, HotAuctionRatio: -1, NumActivePeople: 1 << 40}.Validate()
	if err == nil {
		t.Fatal("invalid Config passed Validate")
	}
	for _, s := range []string{"EventsPerSecond -1", "AvgBidByteSize -5", "HotAuctionRatio -1", "NumActivePeople"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Validate error %q does not report %q", err, s)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("NewGenerator did not panic on an invalid Config")
		}
	}()
	NewGenerator(Config{HotSellersRatio: -1})
}
