package pebblestate

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// gate is a store's compaction scheduler: pebble's default policy (as many
// compactions at once as the database allows, granted when one asks, when
// one ends, and by a granter that a flush or a tick of 100 ms wakes) with
// a gate in front that grants none until it is opened.
//
// A store opened on a capture's files starts with the gate shut. The
// capture's memtable flush left files in L0, and pebble.Open flushes an
// empty memtable whose end schedules the compaction they call for; Open
// then waits for that compaction to end (0.6 s for a 60 MiB store here).
// With the gate shut nothing is scheduled: Open returns at once, a
// rescale excises and ingests first (so the compaction does not rewrite
// key groups it is about to drop), and the store compacts once the task
// is already processing.
type gate struct {
	db       pebble.DBForCompaction
	poke     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	mu           sync.Mutex
	cond         *sync.Cond // signalled when granting ends
	open         bool
	unregistered bool
	granting     bool // one grants at a time: the granter or an ending compaction
	running      int
}

var _ pebble.CompactionScheduler = (*gate)(nil)

func newGate() *gate {
	g := &gate{poke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Open lets compactions run from now on, starting with those waiting.
func (g *gate) Open() {
	g.mu.Lock()
	g.open = true
	g.mu.Unlock()
	g.wake()
}

// Register starts the granter; pebble.Open calls it once.
func (g *gate) Register(_ int, db pebble.DBForCompaction) {
	g.db = db
	go g.granter()
}

// Unregister stops the granter and waits for any grant in progress;
// DB.Close calls it, and nothing is granted after. open calls it too
// when pebble.Open fails, which does not (it would leak the granter);
// a second call does nothing.
func (g *gate) Unregister() {
	if g.db == nil {
		return // never registered
	}
	g.stopOnce.Do(func() { close(g.stop) })
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unregistered = true
	for g.granting {
		g.cond.Wait()
	}
}

// TrySchedule grants a compaction the database asks to run, if the gate
// is open and fewer than it allows are running. pebble calls it holding
// its own mutex: it must not call back into the database but for
// GetAllowedWithoutPermission, which takes no lock.
func (g *gate) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open || g.unregistered || g.db.GetAllowedWithoutPermission() <= g.running {
		return false, nil
	}
	g.running++
	return true, g
}

// UpdateGetAllowedWithoutPermission wakes the granter: a flush may have
// raised what the database allows. pebble may hold its mutex here.
func (g *gate) UpdateGetAllowedWithoutPermission() { g.wake() }

func (g *gate) wake() {
	select {
	case g.poke <- struct{}{}:
	default:
	}
}

// The grant handle: a compaction reports its start, CPU and end.
func (g *gate) Started()                                          {}
func (g *gate) MeasureCPU(pebble.CompactionGoroutineKind)         {}
func (g *gate) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done ends a granted compaction and grants the waiting ones its place
// allows (pebble calls it without its mutex).
func (g *gate) Done() {
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
	g.grant()
}

func (g *gate) granter() {
	defer close(g.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-g.poke:
		case <-g.stop:
			return
		}
		g.grant()
	}
}

// grant schedules the database's waiting compactions, as many as it allows
// beyond those running, if the gate is open.
func (g *gate) grant() {
	g.mu.Lock()
	for g.granting {
		g.cond.Wait()
	}
	n := 0
	if g.open && !g.unregistered {
		n = g.db.GetAllowedWithoutPermission() - g.running
	}
	if n <= 0 {
		g.mu.Unlock()
		return
	}
	g.granting = true
	g.mu.Unlock()
	for ; n > 0; n-- {
		// Asked only when one can be granted: asking picks a compaction.
		if waiting, _ := g.db.GetWaitingCompaction(); !waiting || !g.db.Schedule(g) {
			break
		}
		g.mu.Lock()
		g.running++
		g.mu.Unlock()
	}
	g.mu.Lock()
	g.granting = false
	g.cond.Broadcast()
	g.mu.Unlock()
}
