package statestore

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Domain is the time a timer is set in.
type Domain uint8

// Time domains.
const (
	// EventTime timers fire when the watermark reaches their timestamp.
	EventTime Domain = iota
	// ProcessingTime timers fire when the wall clock reaches their timestamp.
	ProcessingTime
)

func (d Domain) String() string {
	switch d {
	case EventTime:
		return "event time"
	case ProcessingTime:
		return "processing time"
	}
	return fmt.Sprintf("Domain(%d)", uint8(d))
}

// Timer is one timer: at Timestamp (milliseconds since the Unix epoch) for
// the key and namespace. A timer is set at most once: registering it again
// does nothing.
type Timer struct {
	Timestamp int64
	KeyGroup  int
	Key       string
	Namespace string
}

// compare orders timers by timestamp, then scope, so timers due together
// fire in the same order in every run.
func (t Timer) compare(o Timer) int {
	if c := cmp.Compare(t.Timestamp, o.Timestamp); c != 0 {
		return c
	}
	if c := cmp.Compare(t.KeyGroup, o.KeyGroup); c != 0 {
		return c
	}
	if c := strings.Compare(t.Key, o.Key); c != 0 {
		return c
	}
	return strings.Compare(t.Namespace, o.Namespace)
}

// TimerService is the timers of one operator instance, as state: they are
// snapshotted and restored with its tables. Event-time and processing-time
// timers are kept apart (Domain); a timer is (timestamp, key group, key,
// namespace) and is set at most once. Timers due together fire in
// timestamp order, ties by key group, key and namespace, in every run.
// Nothing here fails; an unknown domain or a key group outside the
// backend's range is a bug in the caller and panics. The backend owns the
// timers; one goroutine, the task's, uses them.
type TimerService interface {
	// Register sets timer t in domain d; false if it was already set.
	Register(d Domain, t Timer) bool
	// Delete removes timer t from domain d; false if it was not set.
	Delete(d Domain, t Timer) bool
	// Contains reports whether timer t is set in domain d.
	Contains(d Domain, t Timer) bool
	// Len returns the number of timers set in domain d.
	Len(d Domain) int
	// PopEventTime removes and returns the earliest event-time timer if
	// the watermark wm has reached it (timestamp <= wm), and raises
	// Watermark to wm. Operators fire timers one at a time with it, so
	// that a timer deleted or registered by an earlier firing counts.
	PopEventTime(wm int64) (Timer, bool)
	// PopProcessing removes and returns the earliest processing-time
	// timer if it is due at now (milliseconds).
	PopProcessing(now int64) (Timer, bool)
	// AdvanceWatermark pops every event-time timer due at wm, in order.
	AdvanceWatermark(wm int64) []Timer
	// DueProcessing pops every processing-time timer due at now, in
	// order.
	DueProcessing(now int64) []Timer
	// NextEventTime returns the earliest event-time timer's timestamp.
	NextEventTime() (int64, bool)
	// NextProcessing returns the earliest processing-time timer's
	// timestamp.
	NextProcessing() (int64, bool)
	// Watermark returns the highest watermark event-time timers were
	// popped at or restored with, math.MinInt64 before any. A restored
	// event-time timer at or before it was set after that watermark was
	// processed: it is due, and fires with the next watermark.
	Watermark() int64
	// Range calls fn for every timer of domain d in key group kg, in no
	// particular order, until fn returns false. fn must not register or
	// delete timers.
	Range(d Domain, kg int, fn func(Timer) bool)
	// TakeDirty returns the timers registered, deleted or fired since the
	// last call or snapshot, sorted by domain, key group, timestamp, key
	// and namespace, and clears the dirty sets.
	TakeDirty() []DirtyTimer
}

var _ TimerService = (*Timers)(nil)

// Timers is the in-memory timer service of one operator instance: event-time and
// processing-time timers, each domain in a min-heap for firing in timestamp
// order and indexed per key group (what snapshots and rescaling need).
// Timers are state: they are snapshotted and restored with the tables.
type Timers struct {
	start, end int
	domains    [2]timerQueue
	// watermark is the highest event time timers were popped at, or
	// restored (math.MinInt64 before any).
	watermark int64
	// rowWatermark is, per key group, the watermark the snapshots since
	// the last base (or the restored rows) recorded for it (snapshot.go).
	rowWatermark []int64
	// capture is the snapshot being captured in steps, or nil.
	capture *memCapture
}

func newTimers(start, end int) *Timers {
	t := &Timers{start: start, end: end, watermark: math.MinInt64, rowWatermark: make([]int64, end-start)}
	for i := range t.domains {
		t.domains[i].groups = make([]timerGroup, end-start)
	}
	for i := range t.rowWatermark {
		t.rowWatermark[i] = math.MinInt64
	}
	return t
}

// Watermark returns the highest watermark event-time timers were popped
// at (PopEventTime, AdvanceWatermark), or restored with (Restore), and
// math.MinInt64 before any. An event-time timer at or before it was set
// after that watermark: it is due, and fires with the next one.
func (s *Timers) Watermark() int64 { return s.watermark }

type timerKey struct {
	ts      int64
	key, ns string
}

type timerItem struct {
	Timer
	index int // position in the heap
}

type timerGroup struct {
	set   map[timerKey]*timerItem
	dirty map[timerKey]struct{}
}

type timerQueue struct {
	heap   []*timerItem
	groups []timerGroup
}

func (s *Timers) queue(d Domain) *timerQueue {
	if d > ProcessingTime {
		panic(fmt.Sprintf("statestore: unknown timer domain %d", d))
	}
	return &s.domains[d]
}

func (s *Timers) group(q *timerQueue, kg int) *timerGroup {
	checkGroup(kg, s.start, s.end)
	return &q.groups[kg-s.start]
}

func (g *timerGroup) markDirty(k timerKey) {
	if g.dirty == nil {
		g.dirty = map[timerKey]struct{}{}
	}
	g.dirty[k] = struct{}{}
}

// Register sets timer t in domain d. It returns false if t was already set.
func (s *Timers) Register(d Domain, t Timer) bool {
	q := s.queue(d)
	g := s.group(q, t.KeyGroup)
	k := timerKey{t.Timestamp, t.Key, t.Namespace}
	if _, ok := g.set[k]; ok {
		return false
	}
	if s.capture != nil {
		s.capture.copyTimer(d, t.KeyGroup, k, false)
	}
	if g.set == nil {
		g.set = map[timerKey]*timerItem{}
	}
	it := &timerItem{Timer: t}
	g.set[k] = it
	g.markDirty(k)
	q.push(it)
	return true
}

// Delete removes timer t from domain d. It returns false if t was not set.
func (s *Timers) Delete(d Domain, t Timer) bool {
	q := s.queue(d)
	g := s.group(q, t.KeyGroup)
	k := timerKey{t.Timestamp, t.Key, t.Namespace}
	it, ok := g.set[k]
	if !ok {
		return false
	}
	if s.capture != nil {
		s.capture.copyTimer(d, t.KeyGroup, k, true)
	}
	delete(g.set, k)
	g.markDirty(k)
	q.remove(it.index)
	return true
}

// Contains reports whether timer t is set in domain d.
func (s *Timers) Contains(d Domain, t Timer) bool {
	q := s.queue(d)
	_, ok := s.group(q, t.KeyGroup).set[timerKey{t.Timestamp, t.Key, t.Namespace}]
	return ok
}

// Len returns the number of timers set in domain d.
func (s *Timers) Len(d Domain) int { return len(s.queue(d).heap) }

// pop removes and returns the earliest timer of d if its timestamp is at
// most upTo.
func (s *Timers) pop(d Domain, upTo int64) (Timer, bool) {
	q := s.queue(d)
	if d == EventTime && upTo > s.watermark {
		s.watermark = upTo
	}
	if len(q.heap) == 0 || q.heap[0].Timestamp > upTo {
		return Timer{}, false
	}
	it := q.heap[0]
	q.remove(0)
	g := s.group(q, it.KeyGroup)
	k := timerKey{it.Timestamp, it.Key, it.Namespace}
	if s.capture != nil {
		s.capture.copyTimer(d, it.KeyGroup, k, true)
	}
	delete(g.set, k)
	g.markDirty(k)
	return it.Timer, true
}

// PopEventTime removes and returns the earliest event-time timer if the
// watermark wm has reached it (timestamp <= wm). An operator fires timers
// one at a time with it, so a timer deleted or registered by an earlier
// firing is respected.
func (s *Timers) PopEventTime(wm int64) (Timer, bool) { return s.pop(EventTime, wm) }

// PopProcessing removes and returns the earliest processing-time timer if
// it is due at now (timestamp <= now, in milliseconds).
func (s *Timers) PopProcessing(now int64) (Timer, bool) { return s.pop(ProcessingTime, now) }

// AdvanceWatermark removes and returns every event-time timer with a
// timestamp at most wm, in timestamp order (ties by key group, key and
// namespace).
func (s *Timers) AdvanceWatermark(wm int64) []Timer { return s.popAll(EventTime, wm) }

// DueProcessing removes and returns every processing-time timer due at now
// (milliseconds), in timestamp order.
func (s *Timers) DueProcessing(now int64) []Timer { return s.popAll(ProcessingTime, now) }

func (s *Timers) popAll(d Domain, upTo int64) []Timer {
	var out []Timer
	for {
		t, ok := s.pop(d, upTo)
		if !ok {
			return out
		}
		out = append(out, t)
	}
}

// NextProcessing returns the timestamp of the earliest processing-time
// timer.
func (s *Timers) NextProcessing() (int64, bool) { return s.next(ProcessingTime) }

// NextEventTime returns the timestamp of the earliest event-time timer.
func (s *Timers) NextEventTime() (int64, bool) { return s.next(EventTime) }

func (s *Timers) next(d Domain) (int64, bool) {
	q := s.queue(d)
	if len(q.heap) == 0 {
		return 0, false
	}
	return q.heap[0].Timestamp, true
}

// Range calls fn for every timer of domain d in key group kg, in no
// particular order, until fn returns false. fn must not register or delete
// timers.
func (s *Timers) Range(d Domain, kg int, fn func(Timer) bool) {
	q := s.queue(d)
	for _, it := range s.group(q, kg).set {
		if !fn(it.Timer) {
			return
		}
	}
}

// DirtyTimer is a timer registered, deleted or fired since the last
// TakeDirty; Set says whether it is set now.
type DirtyTimer struct {
	Domain Domain
	Timer
	Set bool
}

// TakeDirty returns the timers that changed since the last call, sorted by
// domain, key group, timestamp, key and namespace, and clears the dirty
// sets.
func (s *Timers) TakeDirty() []DirtyTimer {
	var out []DirtyTimer
	for d := range s.domains {
		q := &s.domains[d]
		for i := range q.groups {
			g := &q.groups[i]
			if len(g.dirty) == 0 {
				continue
			}
			first := len(out)
			for k := range g.dirty {
				_, set := g.set[k]
				out = append(out, DirtyTimer{
					Domain: Domain(d),
					Timer:  Timer{Timestamp: k.ts, KeyGroup: s.start + i, Key: k.key, Namespace: k.ns},
					Set:    set,
				})
			}
			slices.SortFunc(out[first:], func(a, b DirtyTimer) int { return a.Timer.compare(b.Timer) })
			g.dirty = nil
		}
	}
	return out
}

// The heap: a binary min-heap on Timer.compare whose items know their index,
// so Delete is O(log n).

func (q *timerQueue) less(i, j int) bool { return q.heap[i].Timer.compare(q.heap[j].Timer) < 0 }

func (q *timerQueue) swap(i, j int) {
	q.heap[i], q.heap[j] = q.heap[j], q.heap[i]
	q.heap[i].index = i
	q.heap[j].index = j
}

func (q *timerQueue) push(it *timerItem) {
	it.index = len(q.heap)
	q.heap = append(q.heap, it)
	q.up(it.index)
}

func (q *timerQueue) remove(i int) {
	n := len(q.heap) - 1
	if i != n {
		q.swap(i, n)
	}
	q.heap[n] = nil
	q.heap = q.heap[:n]
	if i != n {
		if !q.down(i) {
			q.up(i)
		}
	}
}

func (q *timerQueue) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !q.less(j, i) {
			break
		}
		q.swap(i, j)
		j = i
	}
}

func (q *timerQueue) down(i0 int) bool {
	i, n := i0, len(q.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && q.less(r, l) {
			j = r
		}
		if !q.less(j, i) {
			break
		}
		q.swap(i, j)
		i = j
	}
	return i > i0
}
