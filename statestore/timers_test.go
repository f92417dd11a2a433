package statestore

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func TestTimersFireInOrderAndDedup(t *testing.T) {
	b := NewMemory(0, 4)
	ts := b.Timers()
	reg := func(d Domain, tm Timer, want bool) {
		t.Helper()
		if got := ts.Register(d, tm); got != want {
			t.Fatalf("Register(%v, %+v) = %v, want %v", d, tm, got, want)
		}
	}
	reg(EventTime, Timer{Timestamp: 30, KeyGroup: 1, Key: "a"}, true)
	reg(EventTime, Timer{Timestamp: 10, KeyGroup: 2, Key: "b"}, true)
	reg(EventTime, Timer{Timestamp: 10, KeyGroup: 1, Key: "z"}, true)
	reg(EventTime, Timer{Timestamp: 10, KeyGroup: 1, Key: "z"}, false)                // duplicate
	reg(EventTime, Timer{Timestamp: 10, KeyGroup: 1, Key: "z", Namespace: "w"}, true) // another namespace
	reg(EventTime, Timer{Timestamp: 20, KeyGroup: 3, Key: "c"}, true)
	reg(ProcessingTime, Timer{Timestamp: 10, KeyGroup: 1, Key: "z"}, true) // domains are apart
	if n := ts.Len(EventTime); n != 5 {
		t.Fatalf("Len(EventTime) = %d, want 5", n)
	}
	if next, ok := ts.NextEventTime(); !ok || next != 10 {
		t.Errorf("NextEventTime = %d,%v", next, ok)
	}
	if got := ts.AdvanceWatermark(9); len(got) != 0 {
		t.Fatalf("AdvanceWatermark(9) fired %v", got)
	}
	got := ts.AdvanceWatermark(20) // timers at the watermark fire
	want := []Timer{
		{Timestamp: 10, KeyGroup: 1, Key: "z"},
		{Timestamp: 10, KeyGroup: 1, Key: "z", Namespace: "w"},
		{Timestamp: 10, KeyGroup: 2, Key: "b"},
		{Timestamp: 20, KeyGroup: 3, Key: "c"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("AdvanceWatermark(20) = %+v\nwant %+v", got, want)
	}
	// A fired timer is gone: registering it again sets it again.
	reg(EventTime, Timer{Timestamp: 10, KeyGroup: 2, Key: "b"}, true)
	if !ts.Delete(EventTime, Timer{Timestamp: 10, KeyGroup: 2, Key: "b"}) {
		t.Fatal("Delete of a set timer returned false")
	}
	if ts.Delete(EventTime, Timer{Timestamp: 10, KeyGroup: 2, Key: "b"}) {
		t.Fatal("Delete of an unset timer returned true")
	}
	if got := ts.AdvanceWatermark(100); !reflect.DeepEqual(got, []Timer{{Timestamp: 30, KeyGroup: 1, Key: "a"}}) {
		t.Fatalf("AdvanceWatermark(100) = %+v", got)
	}
	if _, ok := ts.NextEventTime(); ok {
		t.Error("event-time timers left")
	}
	if !ts.Contains(ProcessingTime, Timer{Timestamp: 10, KeyGroup: 1, Key: "z"}) {
		t.Error("advancing the watermark fired a processing-time timer")
	}
}

func TestTimersProcessing(t *testing.T) {
	ts := NewMemory(0, 1).Timers()
	if _, ok := ts.NextProcessing(); ok {
		t.Fatal("NextProcessing on no timers")
	}
	ts.Register(ProcessingTime, Timer{Timestamp: 2000, Key: "b"})
	ts.Register(ProcessingTime, Timer{Timestamp: 1000, Key: "a"})
	if next, ok := ts.NextProcessing(); !ok || next != 1000 {
		t.Fatalf("NextProcessing = %d,%v", next, ok)
	}
	if got := ts.DueProcessing(999); len(got) != 0 {
		t.Fatalf("DueProcessing(999) = %v", got)
	}
	if got, ok := ts.PopProcessing(1500); !ok || got.Key != "a" {
		t.Fatalf("PopProcessing(1500) = %+v,%v", got, ok)
	}
	if _, ok := ts.PopProcessing(1500); ok {
		t.Fatal("PopProcessing popped a timer not due")
	}
	if got := ts.DueProcessing(5000); len(got) != 1 || got[0].Key != "b" {
		t.Fatalf("DueProcessing(5000) = %v", got)
	}
}

// TestTimersHeapRandom checks the heap against a sorted model under random
// registrations, deletions and pops.
func TestTimersHeapRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ts := NewMemory(0, 8).Timers()
	model := map[Timer]bool{}
	keys := []string{"a", "b", "c"}
	for i := range 20000 {
		tm := Timer{Timestamp: rng.Int64N(200), KeyGroup: rng.IntN(8), Key: keys[rng.IntN(3)]}
		switch op := rng.IntN(10); {
		case op < 5:
			if got := ts.Register(EventTime, tm); got == model[tm] {
				t.Fatalf("step %d: Register(%+v) = %v with model %v", i, tm, got, model[tm])
			}
			model[tm] = true
		case op < 8:
			if got := ts.Delete(EventTime, tm); got != model[tm] {
				t.Fatalf("step %d: Delete(%+v) = %v with model %v", i, tm, got, model[tm])
			}
			delete(model, tm)
		default:
			wm := rng.Int64N(200)
			got := ts.AdvanceWatermark(wm)
			var want []Timer
			for m := range model {
				if m.Timestamp <= wm {
					want = append(want, m)
					delete(model, m)
				}
			}
			slices.SortFunc(want, Timer.compare)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: AdvanceWatermark(%d) = %v, want %v", i, wm, got, want)
			}
		}
		if ts.Len(EventTime) != len(model) {
			t.Fatalf("step %d: Len = %d, model %d", i, ts.Len(EventTime), len(model))
		}
	}
	var all []Timer
	for kg := range 8 {
		ts.Range(EventTime, kg, func(tm Timer) bool { all = append(all, tm); return true })
	}
	if len(all) != len(model) {
		t.Fatalf("Range found %d timers, model has %d", len(all), len(model))
	}
	for _, tm := range all {
		if !model[tm] {
			t.Fatalf("Range found %+v, not in the model", tm)
		}
	}
}

func TestTimersTakeDirty(t *testing.T) {
	ts := NewMemory(2, 4).Timers()
	ts.Register(EventTime, Timer{Timestamp: 5, KeyGroup: 3, Key: "k"})
	ts.Register(EventTime, Timer{Timestamp: 1, KeyGroup: 3, Key: "k"})
	ts.Register(ProcessingTime, Timer{Timestamp: 9, KeyGroup: 2, Key: "p"})
	ts.Register(EventTime, Timer{Timestamp: 7, KeyGroup: 2, Key: "gone"})
	ts.Delete(EventTime, Timer{Timestamp: 7, KeyGroup: 2, Key: "gone"})
	want := []DirtyTimer{
		{Domain: EventTime, Timer: Timer{Timestamp: 7, KeyGroup: 2, Key: "gone"}, Set: false},
		{Domain: EventTime, Timer: Timer{Timestamp: 1, KeyGroup: 3, Key: "k"}, Set: true},
		{Domain: EventTime, Timer: Timer{Timestamp: 5, KeyGroup: 3, Key: "k"}, Set: true},
		{Domain: ProcessingTime, Timer: Timer{Timestamp: 9, KeyGroup: 2, Key: "p"}, Set: true},
	}
	if got := ts.TakeDirty(); !reflect.DeepEqual(got, want) {
		t.Fatalf("TakeDirty = %+v\nwant %+v", got, want)
	}
	if got := ts.TakeDirty(); len(got) != 0 {
		t.Fatalf("TakeDirty after take = %+v", got)
	}
	ts.AdvanceWatermark(1) // firing removes: dirty, unset
	want = []DirtyTimer{{Domain: EventTime, Timer: Timer{Timestamp: 1, KeyGroup: 3, Key: "k"}, Set: false}}
	if got := ts.TakeDirty(); !reflect.DeepEqual(got, want) {
		t.Fatalf("TakeDirty after firing = %+v, want %+v", got, want)
	}
}

func BenchmarkTimersRegisterPop(b *testing.B) {
	ts := NewMemory(0, 128).Timers()
	var wm int64
	for i := 0; b.Loop(); i++ {
		ts.Register(EventTime, Timer{Timestamp: int64(i) + 1000, KeyGroup: i % 128, Key: "k"})
		if i%1000 == 999 {
			wm += 1000
			ts.AdvanceWatermark(wm)
		}
		if i%100000 == 99999 {
			ts.TakeDirty() // a checkpoint
		}
	}
}
