package splitseq

import (
	"cmp"
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
	// queue[head:] are the indexes of the splits with events left, by
	// Next. A split whose block is generated moves a whole cycle on,
	// past every other split while they all lie within one cycle (as a
	// subtask's always do once it has generated a block of each; after a
	// rescale they may not), so it mostly goes to the back: the queue
	// turns as a ring, one step an event, where a heap took a sift.
	queue []int
	head  int
	read  int64
	total int64
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
			s.enqueue(i)
		}
	}
	return s
}

// Next appends to dst the next events, at most max, and returns it; none
// once every split is done.
func (s *Seq) Next(dst []int64, max int) []int64 {
	for want := len(dst) + max; len(dst) < want && s.head < len(s.queue); {
		i := s.queue[s.head]
		sp := &s.splits[i]
		// No other split has an event in this split's current block,
		// so the rest of the block comes next.
		end := sp.Next + s.l.Block
		if s.l.Block > 1 { // a division costs more than the rest of an event
			end -= sp.Next % s.l.Block
		}
		blockEnd := end
		if s.l.Count > 0 {
			end = min(end, s.l.Count)
		}
		n := min(end-sp.Next, int64(want-len(dst)))
		for k := range n {
			dst = append(dst, sp.Next+k)
		}
		sp.Next += n
		s.read += n
		moved := sp.Next == blockEnd
		if moved {
			sp.Next += (s.l.K - 1) * s.l.Block // the split's next block
		}
		switch {
		case s.l.Count > 0 && sp.Next >= s.l.Count:
			sp.Next = s.l.End(sp.ID)
			s.dequeue()
		case moved:
			s.dequeue()
			s.enqueue(i)
		}
		// Otherwise max ended the batch within the block, and the split
		// stays first.
	}
	return dst
}

// Done reports whether every split's events below Count are generated
// (never for an unbounded layout, unless there are no splits).
func (s *Seq) Done() bool { return s.head == len(s.queue) }

// Splits returns the splits with their next events, by ID.
func (s *Seq) Splits() []Split { return slices.Clone(s.splits) }

// Progress returns the events of the splits generated (before the
// position restored too) and, under a Count, in all.
func (s *Seq) Progress() (read, total int64) { return s.read, s.total }

// enqueue puts split i in the queue by its Next.
func (s *Seq) enqueue(i int) {
	next := s.splits[i].Next
	live := s.queue[s.head:]
	if len(live) == 0 || s.splits[live[len(live)-1]].Next < next {
		s.queue = append(s.queue, i)
		return
	}
	at, _ := slices.BinarySearchFunc(live, next, func(j int, next int64) int {
		return cmp.Compare(s.splits[j].Next, next)
	})
	s.queue = slices.Insert(s.queue, s.head+at, i)
}

// dequeue drops the queue's first split, and moves the queue to the front
// of its slice once half of it is dropped ones.
func (s *Seq) dequeue() {
	s.head++
	if s.head >= 64 && 2*s.head >= len(s.queue) {
		s.queue = s.queue[:copy(s.queue, s.queue[s.head:])]
		s.head = 0
	}
}
