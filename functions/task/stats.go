package task

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/statestore"
)

// Stats are one subtask's cumulative counters. The task goroutine writes
// them; the reporter reads them concurrently.
type Stats struct {
	RecordsIn  atomic.Int64
	RecordsOut atomic.Int64 // rows written to network outputs and sinks
	SinkIn     atomic.Int64 // rows handed to chained sinks
	BytesOut   atomic.Int64 // encoded bytes written to channels

	idleNanos atomic.Int64
	bpNanos   atomic.Int64
	started   atomic.Int64 // unix nanos

	Watermark   atomic.Int64
	Checkpoints atomic.Int64 // snapshots taken
	Counters    Counters

	stateBytes  atomic.Int64 // state files of the latest acknowledged checkpoint
	backlog     atomic.Int64
	backlogUnit atomic.Pointer[string] // nil: no backlog known

	sourceRead, sourceTotal   atomic.Int64
	sourceUnit                atomic.Pointer[string]
	restoreRead, restoreTotal atomic.Int64
	restoreTook               atomic.Int64 // nanoseconds, once restored
	copiedRows, copiedEncoded atomic.Int64 // see noteCopies

	mu       sync.Mutex
	channels []outChannel // the task's output channels, as opened
}

// outChannel is an output channel and its writer, whose Stats may be read
// from any goroutine.
type outChannel struct {
	ch exchange.Channel
	w  exchange.Writer
}

func (s *Stats) addChannel(ch exchange.Channel, w exchange.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels = append(s.channels, outChannel{ch, w})
}

// setBacklog records a source's backlog of n in unit ("records",
// "bytes").
func (s *Stats) setBacklog(n int64, unit string) {
	s.backlog.Store(n)
	if u := s.backlogUnit.Load(); u == nil || *u != unit {
		s.backlogUnit.Store(&unit)
	}
}

func (s *Stats) channelStats() []control.ChannelStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.channels) == 0 {
		return nil
	}
	out := make([]control.ChannelStats, len(s.channels))
	for i, c := range s.channels {
		ws := c.w.Stats()
		out[i] = control.ChannelStats{ToVertex: c.ch.ConsumerVertex, ToSubtask: c.ch.Consumer, Edge: c.ch.Edge, Entries: ws.Entries, Bytes: ws.Bytes,
			CreditWaits: ws.CreditWaits, CreditWaitSeconds: ws.CreditWait.Seconds()}
	}
	return out
}

// StatsSnapshot is a point-in-time copy of Stats, as the cluster protocol
// reports it.
type StatsSnapshot = control.Stats

func (s *Stats) addIdle(d time.Duration)         { s.idleNanos.Add(int64(d)) }
func (s *Stats) addBackpressure(d time.Duration) { s.bpNanos.Add(int64(d)) }

// Snapshot reads the counters. Busy time is wall time since start minus
// idle and backpressured time.
func (s *Stats) Snapshot() StatsSnapshot {
	idle := time.Duration(s.idleNanos.Load())
	bp := time.Duration(s.bpNanos.Load())
	var wall time.Duration
	if st := s.started.Load(); st != 0 {
		wall = time.Since(time.Unix(0, st))
	}
	busy := max(wall-idle-bp, 0)
	var backlog int64
	var unit, srcUnit string
	if u := s.backlogUnit.Load(); u != nil {
		backlog, unit = s.backlog.Load(), *u
	}
	if u := s.sourceUnit.Load(); u != nil {
		srcUnit = *u
	}
	return StatsSnapshot{
		RecordsIn:       s.RecordsIn.Load(),
		RecordsOut:      s.RecordsOut.Load(),
		SinkIn:          s.SinkIn.Load(),
		BytesOut:        s.BytesOut.Load(),
		BusySeconds:     busy.Seconds(),
		IdleSeconds:     idle.Seconds(),
		BackpressureSec: bp.Seconds(),
		Watermark:       s.Watermark.Load(),
		LateDropped:     s.Counters.LateDropped.Load(),
		LateSide:        s.Counters.LateSide.Load(),
		DeadLetters:     s.Counters.DeadLetters.Load(),
		SinkRows:        s.Counters.SinkRows.Load(),
		WindowsFired:    s.Counters.WindowsFired.Load(),
		Checkpoints:     s.Checkpoints.Load(),
		StateBytes:      s.stateBytes.Load(),
		Backlog:         backlog,
		BacklogUnit:     unit,
		Channels:        s.channelStats(),
		Functions:       s.Counters.FunctionStats(),
		SourceRead:      s.sourceRead.Load(),
		SourceTotal:     s.sourceTotal.Load(),
		SourceUnit:      srcUnit,
		RestoreRead:     s.restoreRead.Load(),
		RestoreTotal:    s.restoreTotal.Load(),
		RestoreSeconds:  time.Duration(s.restoreTook.Load()).Seconds(),
		CopiedRows:      s.copiedRows.Load(),
		CopiedEncoded:   s.copiedEncoded.Load(),
	}
}

// noteCopies counts the rows a complete capture copied on write.
func (s *Stats) noteCopies(c statestore.CopyCounts) {
	s.copiedRows.Add(c.Rows)
	s.copiedEncoded.Add(c.EncodedRows)
}

// noteProgress records a bounded source's progress.
func (s *Stats) noteProgress(src Source) {
	b, ok := src.(Bounded)
	if !ok {
		return
	}
	read, total, unit, ok := b.Progress()
	if !ok {
		return
	}
	if u := s.sourceUnit.Load(); u == nil || *u != unit {
		s.sourceUnit.Store(&unit)
	}
	s.sourceRead.Store(read)
	s.sourceTotal.Store(total)
}
