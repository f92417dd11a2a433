package splitseq

import (
	"fmt"
	"slices"
)

// Layout is how events are cut into splits: K splits of blocks of Block
// events, below Count (0: unbounded).
type Layout struct {
	K, Block, Count int64
}

// Of returns the split that holds event n.
func (l Layout) Of(n int64) int { return int(n / l.Block % l.K) }

// AtOrAfter returns the first event of split j at or after event n.
func (l Layout) AtOrAfter(j int, n int64) int64 {
	b := n / l.Block
	d := (int64(j) - b%l.K + l.K) % l.K
	if d == 0 {
		return n
	}
	return (b + d) * l.Block
}

// Below counts the events of split j below event n (below Count too).
func (l Layout) Below(j int, n int64) int64 {
	if l.Count > 0 {
		n = min(n, l.Count)
	}
	cycle := l.K * l.Block
	rest := n%cycle - int64(j)*l.Block
	return n/cycle*l.Block + min(max(rest, 0), l.Block)
}

// End returns the position of split j once all its events below Count
// are generated, and -1 for an unbounded layout.
func (l Layout) End(j int) int64 {
	if l.Count == 0 {
		return -1
	}
	return l.AtOrAfter(j, l.Count)
}

// Check returns an error if next is not a position of split j: an event
// of the split, not past its end.
func (l Layout) Check(j int, next int64) error {
	switch {
	case next < 0:
		return fmt.Errorf("%d is negative: want an event index >= 0", next)
	case l.Of(next) != j:
		return fmt.Errorf("%d is an event of split %d, not %d (of %d splits of %d events)", next, l.Of(next), j, l.K, l.Block)
	case l.Count > 0 && next > l.End(j):
		return fmt.Errorf("%d is past the end: the split's events below count %d end before %d", next, l.Count, l.End(j))
	}
	return nil
}

// Split is one split and the next event it generates.
type Split struct {
	ID   int
	Next int64
}

// Seq generates the events of some splits in increasing event index. It is
// not safe for concurrent use.
type Seq struct {
	l      Layout
	splits []Split // by ID
	heap   []int   // indexes of splits with events left, by Next
	read   int64
	total  int64
}

// New returns the sequence of splits (each at its Next, a valid position:
// Layout.Check) under l.
func New(l Layout, splits []Split) *Seq {
	s := &Seq{l: l, splits: slices.Clone(splits)}
	slices.SortFunc(s.splits, func(a, b Split) int { return a.ID - b.ID })
	for i, sp := range s.splits {
		s.read += l.Below(sp.ID, sp.Next)
		if l.Count > 0 {
			s.total += l.Below(sp.ID, l.Count)
		}
		if l.Count == 0 || sp.Next < l.Count {
			s.push(i)
		}
	}
	return s
}

// Next appends to dst the next events, at most max, and returns it; none
// once every split is done.
func (s *Seq) Next(dst []int64, max int) []int64 {
	for want := len(dst) + max; len(dst) < want && len(s.heap) > 0; {
		sp := &s.splits[s.heap[0]]
		// No other split has an event in this split's current block,
		// so the rest of the block comes next.
		end := (sp.Next/s.l.Block + 1) * s.l.Block
		if s.l.Count > 0 {
			end = min(end, s.l.Count)
		}
		n := min(end-sp.Next, int64(want-len(dst)))
		for k := range n {
			dst = append(dst, sp.Next+k)
		}
		sp.Next += n
		s.read += n
		if sp.Next%s.l.Block == 0 {
			sp.Next += (s.l.K - 1) * s.l.Block // the split's next block
		}
		if s.l.Count > 0 && sp.Next >= s.l.Count {
			sp.Next = s.l.End(sp.ID)
			s.pop()
		} else {
			s.down(0)
		}
	}
	return dst
}

// Done reports whether every split's events below Count are generated
// (never for an unbounded layout, unless there are no splits).
func (s *Seq) Done() bool { return len(s.heap) == 0 }

// Splits returns the splits with their next events, by ID.
func (s *Seq) Splits() []Split { return slices.Clone(s.splits) }

// Progress returns the events of the splits generated (before the
// position restored too) and, under a Count, in all.
func (s *Seq) Progress() (read, total int64) { return s.read, s.total }

// The heap of splits with events left, smallest Next first.

func (s *Seq) less(a, b int) bool {
	return s.splits[s.heap[a]].Next < s.splits[s.heap[b]].Next
}

func (s *Seq) push(i int) {
	s.heap = append(s.heap, i)
	for c := len(s.heap) - 1; c > 0; {
		p := (c - 1) / 2
		if !s.less(c, p) {
			break
		}
		s.heap[c], s.heap[p] = s.heap[p], s.heap[c]
		c = p
	}
}

func (s *Seq) pop() {
	last := len(s.heap) - 1
	s.heap[0] = s.heap[last]
	s.heap = s.heap[:last]
	if last > 0 {
		s.down(0)
	}
}

func (s *Seq) down(p int) {
	for {
		c := 2*p + 1
		if c >= len(s.heap) {
			return
		}
		if c+1 < len(s.heap) && s.less(c+1, c) {
			c++
		}
		if !s.less(c, p) {
			return
		}
		s.heap[c], s.heap[p] = s.heap[p], s.heap[c]
		p = c
	}
}
