package statepack

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// gather decides which state files go into one object: the protocol core
// of a Group, a plain state machine (no I/O, no goroutines, no clock of
// its own) driven by its Group and by trace tests.
//
// Members are the stateful tasks of one job attempt on one worker. Each
// reports every checkpoint it takes, in order: with files to write, or
// with none (it declined, or had nothing). Files of one checkpoint gather
// in an open batch. A batch is due, and closes, once every member it
// waits for has reported its checkpoint or a later one (a member that
// skips a checkpoint, its barrier subsumed, never reports it), or has
// left, or once the batch has been open for linger: a member far behind
// does not hold the others' acknowledgements for longer than that. A
// member reporting a checkpoint whose batch has closed opens another for
// it. A batch waits for the members there were when it opened, so a task
// joining late does not hold up a checkpoint it never saw.
type gather struct {
	linger  time.Duration
	members map[int]*member
	open    []*batch // not yet due, oldest first
	nextID  int      // member ids
	nextSeq int      // batch sequence numbers
}

type member struct {
	last int64 // the last checkpoint it reported, 0 for none
}

// batch is the files of one checkpoint that go into one object.
type batch struct {
	seq        int
	checkpoint int64
	opened     time.Time
	waitFor    []int        // the members when it opened, sorted
	in         map[int]bool // members whose files it holds
}

func newGather(linger time.Duration) *gather {
	return &gather{linger: linger, members: map[int]*member{}, nextID: 1, nextSeq: 1}
}

// join adds a member and returns its id.
func (g *gather) join() int {
	id := g.nextID
	g.nextID++
	g.members[id] = &member{}
	return id
}

// leave removes a member: no open batch waits for it any more.
func (g *gather) leave(id int) { delete(g.members, id) }

// report records that member id took checkpoint: with files (it returns
// the sequence number of the batch they go into), or without (0).
func (g *gather) report(id int, checkpoint int64, files bool, now time.Time) int {
	m := g.members[id]
	if m == nil {
		return 0
	}
	m.last = max(m.last, checkpoint)
	if !files {
		return 0
	}
	for _, b := range g.open {
		if b.checkpoint == checkpoint {
			b.in[id] = true
			return b.seq
		}
	}
	b := &batch{seq: g.nextSeq, checkpoint: checkpoint, opened: now, in: map[int]bool{id: true}}
	g.nextSeq++
	for m := range g.members {
		b.waitFor = append(b.waitFor, m)
	}
	slices.Sort(b.waitFor)
	g.open = append(g.open, b)
	return b.seq
}

// withdraw takes member id's files out of open batch seq (its writer gave
// up before the batch was due); a batch left empty is dropped. It reports
// whether the files were still there to take.
func (g *gather) withdraw(id, seq int) bool {
	for i, b := range g.open {
		if b.seq != seq || !b.in[id] {
			continue
		}
		delete(b.in, id)
		if len(b.in) == 0 {
			g.open = slices.Delete(g.open, i, i+1)
		}
		return true
	}
	return false
}

// due closes and returns the batches that are due at now, oldest first.
func (g *gather) due(now time.Time) []*batch {
	var out []*batch
	g.open = slices.DeleteFunc(g.open, func(b *batch) bool {
		if !g.ready(b, now) {
			return false
		}
		out = append(out, b)
		return true
	})
	return out
}

func (g *gather) ready(b *batch, now time.Time) bool {
	if !now.Before(b.opened.Add(g.linger)) {
		return true
	}
	for _, id := range b.waitFor {
		if m := g.members[id]; m != nil && m.last < b.checkpoint {
			return false
		}
	}
	return true
}

// deadline is when open batch seq is due at the latest (zero if it is
// not open).
func (g *gather) deadline(seq int) time.Time {
	for _, b := range g.open {
		if b.seq == seq {
			return b.opened.Add(g.linger)
		}
	}
	return time.Time{}
}

// String is the batch for traces: "#seq ckpt N [members]".
func (b *batch) String() string {
	return fmt.Sprintf("#%d ckpt %d %v", b.seq, b.checkpoint, b.members())
}

// summary is the open batches for traces.
func (g *gather) summary() string {
	if len(g.open) == 0 {
		return "open: none"
	}
	var s []string
	for _, b := range g.open {
		var waiting []int
		for _, id := range b.waitFor {
			if m := g.members[id]; m != nil && m.last < b.checkpoint {
				waiting = append(waiting, id)
			}
		}
		s = append(s, fmt.Sprintf("%v waiting for %v", b, waiting))
	}
	return "open: " + strings.Join(s, "; ")
}
