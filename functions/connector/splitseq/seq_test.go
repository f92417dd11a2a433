package splitseq_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weirstream/weir/functions/connector/splitseq"
)

// TestSeqCoversEvents: the subtasks of any parallelism up to K generate
// every event below Count once, each in increasing order, and a Seq made
// again from the splits of another, cut anywhere, goes on with exactly the
// rest.
func TestSeqCoversEvents(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		l := splitseq.Layout{K: 1 + r.Int64N(12), Block: 1 + r.Int64N(5), Count: 1 + r.Int64N(200)}
		p := 1 + r.IntN(int(l.K))
		seen := make([]int, l.Count)
		for s := range p {
			q := splitseq.New(l, l.Owned(s, p))
			_, total := q.Progress()
			var got []int64
			for !q.Done() {
				got = q.Next(got, 1+r.IntN(9))
				if r.IntN(3) == 0 { // restore here
					q = splitseq.New(l, q.Splits())
				}
				if read, _ := q.Progress(); read != int64(len(got)) {
					t.Fatalf("%+v p=%d subtask %d: read %d after %d events", l, p, s, read, len(got))
				}
			}
			if total != int64(len(got)) {
				t.Errorf("%+v p=%d subtask %d: total %d, generated %d", l, p, s, total, len(got))
			}
			for i, n := range got {
				if i > 0 && n <= got[i-1] {
					t.Fatalf("%+v p=%d subtask %d: %d after %d", l, p, s, n, got[i-1])
				}
				seen[n]++
			}
			for _, sp := range q.Splits() {
				if sp.Next != l.End(sp.ID) {
					t.Errorf("%+v: done split %d at %d, want its end %d", l, sp.ID, sp.Next, l.End(sp.ID))
				}
				if err := l.Check(sp.ID, sp.Next); err != nil {
					t.Errorf("%+v: the end of split %d: %v", l, sp.ID, err)
				}
			}
		}
		for n, c := range seen {
			if c != 1 {
				t.Fatalf("%+v p=%d: event %d generated %d times", l, p, n, c)
			}
		}
	}
}

// TestSeqUnbounded: splits at uneven positions (as after a rescale) still
// come out in increasing order, the one behind first.
func TestSeqUnbounded(t *testing.T) {
	l := splitseq.Layout{K: 4, Block: 2}
	q := splitseq.New(l, []splitseq.Split{{ID: 1, Next: 3}, {ID: 3, Next: 6 + 3*8}})
	got := q.Next(nil, 8)
	want := []int64{3, 10, 11, 18, 19, 26, 27, 30}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if q.Done() {
		t.Error("an unbounded sequence is done")
	}
}

// TestSeqUneven: any splits at any positions, however far apart (a
// rescale joins splits of subtasks that got to different points), come
// out as all their events from those positions on, in increasing order.
func TestSeqUneven(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		l := splitseq.Layout{K: 1 + r.Int64N(12), Block: 1 + r.Int64N(5)}
		limit := 50 + r.Int64N(400) // events looked at, and Count if bounded
		if r.IntN(2) == 0 {
			l.Count = limit
		}
		var splits []splitseq.Split
		for j := range int(l.K) {
			if r.IntN(3) == 0 {
				continue
			}
			next := l.AtOrAfter(j, r.Int64N(limit))
			if l.Count > 0 {
				next = min(next, l.End(j))
			}
			splits = append(splits, splitseq.Split{ID: j, Next: next})
		}
		from := map[int]int64{}
		for _, sp := range splits {
			from[sp.ID] = sp.Next
		}
		var want []int64
		for n := range limit {
			if start, ok := from[l.Of(n)]; ok && n >= start {
				want = append(want, n)
			}
		}
		q := splitseq.New(l, splits)
		var got []int64
		for len(got) < len(want) && !q.Done() {
			got = q.Next(got, 1+r.IntN(9))
			if r.IntN(4) == 0 {
				q = splitseq.New(l, q.Splits())
			}
		}
		if len(got) > len(want) {
			got = got[:len(want)] // unbounded: past the events looked at
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%+v from %v:\n got %v\nwant %v", l, splits, got, want)
		}
		if l.Count > 0 && !q.Done() {
			t.Fatalf("%+v from %v: not done after every event", l, splits)
		}
	}
}

func TestLayoutCheck(t *testing.T) {
	l := splitseq.Layout{K: 3, Block: 2, Count: 10}
	for _, tc := range []struct {
		j    int
		next int64
		ok   bool
	}{
		{0, 0, true}, {0, 1, true}, {0, 6, true}, {1, 2, true}, {1, 9, true},
		{1, 14, true}, // the end: count 10 falls in split 2's block
		{1, 20, false}, {0, 2, false}, {2, -1, false},
	} {
		if err := l.Check(tc.j, tc.next); (err == nil) != tc.ok {
			t.Errorf("Check(%d, %d) = %v, want ok %v", tc.j, tc.next, err, tc.ok)
		}
	}
}

func TestIDs(t *testing.T) {
	if got := splitseq.ID(7, 120); got != "007" {
		t.Errorf("ID(7, 120) = %q", got)
	}
	if got := splitseq.ID(9, 10); got != "9" {
		t.Errorf("ID(9, 10) = %q", got)
	}
	for _, bad := range []string{"7", "0007", "120", "-01", "x"} {
		if _, err := splitseq.ParseID(bad, 120); err == nil {
			t.Errorf("ParseID(%q, 120) accepted", bad)
		}
	}
	if j, err := splitseq.ParseID("119", 120); err != nil || j != 119 {
		t.Errorf("ParseID(119) = %d, %v", j, err)
	}
}

// BenchmarkSeq: the events of 60 of 120 splits of one event each, as a
// datagen subtask at parallelism 2 walks them.
func BenchmarkSeq(b *testing.B) {
	l := splitseq.Layout{K: splitseq.DefaultSplits, Block: 1}
	q := splitseq.New(l, l.Owned(0, 2))
	dst := make([]int64, 0, 8192)
	events := 0
	for b.Loop() {
		dst = q.Next(dst[:0], 8192)
		events += len(dst)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}
