package coordinator

import (
	"testing"
	"time"

	"github.com/weirstream/weir/exchange/control"
)

func TestRatesBetweenReports(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ti taskInfo
	ti.observe(control.Stats{RecordsIn: 100, RecordsOut: 50, BusySeconds: 1, IdleSeconds: 1}, t0)
	if ti.hasRates {
		t.Fatal("rates after one report")
	}
	// A report 100 ms later (a state change) is too close: kept as the
	// current counters, but the sample stays.
	ti.observe(control.Stats{RecordsIn: 110, RecordsOut: 55, BusySeconds: 1.05, IdleSeconds: 1.05}, t0.Add(100*time.Millisecond))
	if ti.hasRates || ti.stats.RecordsIn != 110 {
		t.Fatalf("after a close report: rates %v, stats %+v", ti.hasRates, ti.stats)
	}
	// Two seconds after the first: 2000 in, 1000 out, busy 1.5 s of 2,
	// idle 0.2 s, backpressured 0.3 s.
	ti.observe(control.Stats{RecordsIn: 4100, RecordsOut: 2050, BusySeconds: 2.5, IdleSeconds: 1.2, BackpressureSec: 0.3}, t0.Add(2*time.Second))
	want := TaskRates{RecordsInPerSecond: 2000, RecordsOutPerSecond: 1000, BusyMsPerSecond: 750, IdleMsPerSecond: 100, BackPressuredMsPerSecond: 150}
	if !ti.hasRates || !near(ti.rates, want) {
		t.Fatalf("rates = %+v (%v), want %+v", ti.rates, ti.hasRates, want)
	}
	// A restarted task's counters start over: no rates until two reports.
	ti.observe(control.Stats{RecordsIn: 10, BusySeconds: 0.1}, t0.Add(3*time.Second))
	if ti.hasRates {
		t.Fatalf("rates across a restart: %+v", ti.rates)
	}
	// Ratios are capped to a second per second (clock skew between two
	// reports must not show 1200 ms/s).
	if r, ok := ratesBetween(control.Stats{}, control.Stats{BusySeconds: 1.2}, time.Second); !ok || r.BusyMsPerSecond != 1000 {
		t.Fatalf("capped busy = %+v %v", r, ok)
	}
	// Bytes per second per consumer vertex, summed over its channels.
	ch := func(to string, sub int, b int64) control.ChannelStats {
		return control.ChannelStats{ToVertex: to, ToSubtask: sub, Bytes: b}
	}
	prev := control.Stats{Channels: []control.ChannelStats{ch("win", 0, 100), ch("win", 1, 100), ch("sink", 0, 0)}}
	cur := control.Stats{Channels: []control.ChannelStats{ch("win", 0, 2100), ch("win", 1, 1100), ch("sink", 0, 500)}}
	r, ok := ratesBetween(prev, cur, 2*time.Second)
	if !ok || r.BytesOutPerSecond["win"] != 1500 || r.BytesOutPerSecond["sink"] != 250 || len(r.BytesOutPerSecond) != 2 {
		t.Fatalf("bytes per second by consumer vertex = %v %v", r.BytesOutPerSecond, ok)
	}
}

func near(a, b TaskRates) bool {
	d := func(x, y float64) bool { return x-y < 1e-6 && y-x < 1e-6 }
	return d(a.RecordsInPerSecond, b.RecordsInPerSecond) && d(a.RecordsOutPerSecond, b.RecordsOutPerSecond) &&
		d(a.BusyMsPerSecond, b.BusyMsPerSecond) && d(a.IdleMsPerSecond, b.IdleMsPerSecond) && d(a.BackPressuredMsPerSecond, b.BackPressuredMsPerSecond)
}
