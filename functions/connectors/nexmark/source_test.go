package nexmark

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

func nexmarkSpec(count int64) *spec.Source {
	return &spec.Source{Name: "nx", Type: spec.SourceNexmark, Count: count, Nexmark: &spec.NexmarkOpt{EventsPerSecond: 1000}}
}

func openNexmark(t *testing.T, src *spec.Source, subtask, par int, pos json.RawMessage) *nexmarkSource {
	t.Helper()
	s, err := NewSource(src, stream.Stream{})
	if err != nil {
		t.Fatal(err)
	}
	ns := s.(*nexmarkSource)
	if pos != nil {
		if err := ns.Restore(pos); err != nil {
			t.Fatal(err)
		}
	}
	ctx := &task.SourceContext{Context: task.Context{Subtask: subtask, Parallelism: par, Mem: memory.DefaultAllocator, Now: time.Now}}
	if err := ns.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// drain polls s to the end (or polls times, if not negative) and returns
// the persons' and auctions' ids and the bids' dateTimes, per output.
func drain(t *testing.T, s *nexmarkSource, maxRows, polls int) (ids [3][]int64) {
	t.Helper()
	for i := 0; polls < 0 || i < polls; i++ {
		bs, err := s.PollOutputs(context.Background(), maxRows, 0)
		if errors.Is(err, io.EOF) {
			return ids
		}
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for k, b := range bs {
			if b == nil {
				continue
			}
			total += int(b.NumRows())
			if k == 2 {
				ts := b.Column(BidDateTime).(*array.Timestamp)
				for r := range ts.Len() {
					ids[k] = append(ids[k], int64(ts.Value(r)))
				}
			} else {
				// person.id, auction.id
				ids[k] = append(ids[k], b.Column(0).(*array.Int64).Int64Values()...)
			}
			b.Release()
		}
		if total > maxRows {
			t.Fatalf("poll returned %d rows, max %d", total, maxRows)
		}
	}
	return ids
}

// Subtasks split the event numbers between them: together they generate
// every event of one generator exactly once, whatever the parallelism.
func TestNexmarkSourceParallelSplit(t *testing.T) {
	const count = 5_017
	one := drain(t, openNexmark(t, nexmarkSpec(count), 0, 1, nil), 512, -1)
	if len(one[0])+len(one[1])+len(one[2]) != count {
		t.Fatalf("parallelism 1 generated %d events, want %d", len(one[0])+len(one[1])+len(one[2]), count)
	}
	g := NewGenerator(Config{EventsPerSecond: 1000, BaseTime: mustTime(t, DefaultStart)})
	var wantP, wantA []int64
	for n := range int64(count) {
		switch e := g.Event(n); {
		case e.Person != nil:
			wantP = append(wantP, e.Person.ID)
		case e.Auction != nil:
			wantA = append(wantA, e.Auction.ID)
		}
	}
	if !equalInts(one[0], wantP) || !equalInts(one[1], wantA) {
		t.Fatalf("parallelism 1: person/auction ids differ from the generator's")
	}
	for _, par := range []int{2, 3} {
		seen := map[int64]int{}
		total := 0
		for st := range par {
			ids := drain(t, openNexmark(t, nexmarkSpec(count), st, par, nil), 300, -1)
			for _, id := range ids[0] {
				seen[id]++
			}
			total += len(ids[0]) + len(ids[1]) + len(ids[2])
		}
		if total != count {
			t.Errorf("parallelism %d: %d events, want %d", par, total, count)
		}
		for _, id := range wantP {
			if seen[id] != 1 {
				t.Errorf("parallelism %d: person %d generated %d times", par, id, seen[id])
			}
		}
	}
}

// A source restored at its position goes on with exactly the events it had
// not returned, with the same event times even for start: now.
func TestNexmarkSourceResume(t *testing.T) {
	src := nexmarkSpec(3_000)
	src.Nexmark.Start = "now"
	whole := drain(t, openNexmark(t, src, 1, 2, nil), 100, -1)
	s := openNexmark(t, src, 1, 2, nil)
	first := drain(t, s, 100, 4)
	pos, err := s.Position()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	rest := drain(t, openNexmark(t, src, 1, 2, pos), 100, -1)
	for k := range 3 {
		got := append(append([]int64(nil), first[k]...), rest[k]...)
		if k == 2 {
			// Event times: "now" at the first open, kept by the position.
			base := whole[2][0] - first[2][0]
			for i := range got {
				got[i] += base
			}
		}
		if !equalInts(got, whole[k]) {
			t.Errorf("output %d: resumed run differs from the whole run (%d vs %d values)", k, len(got), len(whole[k]))
		}
	}
}

func TestNexmarkSourceBadPositions(t *testing.T) {
	s, err := NewSource(nexmarkSpec(10), stream.Stream{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ pos, msg string }{
		{`{"next": 5}`, "lacks baseTime"},
		{`{"baseTime": 5}`, "lacks next"},
		{`{"next": -1, "baseTime": 0}`, "negative"},
		{`{"next": "x", "baseTime": 0}`, "next"},
		{`{"next": 1, "baseTime": 0, "offset": 2}`, "offset"},
	} {
		err := s.(task.Resumable).Restore(json.RawMessage(c.pos))
		if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "nexmark source nx") {
			t.Errorf("Restore(%s) = %v, want an error naming the source and %q", c.pos, err, c.msg)
		}
	}
	// A position of another subtask is refused at Open.
	ns := s.(*nexmarkSource)
	if err := ns.Restore(json.RawMessage(`{"next": 100, "baseTime": 0}`)); err != nil {
		t.Fatal(err)
	}
	err = ns.Open(&task.SourceContext{Context: task.Context{Subtask: 0, Parallelism: 2, Now: time.Now}})
	if err == nil || !strings.Contains(err.Error(), "not an event of subtask 0 of 2") {
		t.Errorf("Open with another subtask's position: %v", err)
	}
	ns.Close()
}

func mustTime(t *testing.T, s string) int64 {
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
