package nexmark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connector/splitseq"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

// nexmarkBlock is how many consecutive events one subtask generates before
// the next subtask's turn: subtask k of p generates events n with
// (n / nexmarkBlock) % p == k, so every subtask's event time advances at
// the same pace and the events are those of one generator whatever the
// parallelism.
const nexmarkBlock = 100

// DefaultStart is the event time of event 0 when the spec gives no start,
// as a datagen source's.
const DefaultStart = "2026-01-01T00:00:00Z"

// SourceType is the nexmark source, for connector.RegisterSource. It is
// read through its outputs only: <name>.person, <name>.auction and
// <name>.bid, of fixed schemas.
func SourceType() connector.SourceType {
	return connector.SourceType{
		Name: spec.SourceNexmark,
		Outputs: []connector.Output{
			{Name: spec.NexmarkPerson, Stream: stream.Stream{Schema: PersonSchema, TimeColumn: PersonDateTime}},
			{Name: spec.NexmarkAuction, Stream: stream.Stream{Schema: AuctionSchema, TimeColumn: AuctionDateTime}},
			{Name: spec.NexmarkBid, Stream: stream.Stream{Schema: BidSchema, TimeColumn: BidDateTime}},
		},
		Check:  check,
		Plan:   splitseq.Plan,
		New:    NewSource,
		Splits: true,
		Share:  splitseq.Share,
	}
}

// check reports the problems of a nexmark source's fields: it has fixed
// schemas and event time, and options of its own only.
func check(s *spec.Source) spec.Problems {
	var ps spec.Problems
	p := fmt.Sprintf("sources[%s]", s.Name)
	if s.Schema.Len() != 0 {
		ps.Add(p+".schema", "a nexmark source has fixed schemas (docs/nexmark.md): leave schema out")
	}
	if s.Event != nil && s.Event.Column != "" && s.Event.Column != "dateTime" {
		ps.Add(p+".eventTime.column", "%q: a nexmark source's event time is dateTime", s.Event.Column)
	}
	if s.Event != nil && s.Event.MaxOutOfOrderness < 0 {
		ps.Add(p+".eventTime.maxOutOfOrderness", "%s is negative", s.Event.MaxOutOfOrderness)
	}
	ps = append(ps, splitseq.Check(s)...)
	if s.Gen != nil {
		ps.Add(p+".datagen", "only a datagen source takes datagen options; use nexmark: {...}")
	}
	if s.Path != "" || s.Stream != "" || len(s.Streams) > 0 || s.Format != "" {
		ps.Add(p, "a nexmark source takes no path, stream or format")
	}
	n := s.Nexmark
	if n == nil {
		return ps
	}
	np := p + ".nexmark"
	if v := n.EventsPerSecond; math.IsNaN(v) || math.IsInf(v, 0) {
		ps.Add(np+".eventsPerSecond", "%g is not a finite number", v)
	}
	if n.EventsPerSecond < 0 {
		ps.Add(np+".eventsPerSecond", "%g is negative", n.EventsPerSecond)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"avgPersonBytes", n.AvgPersonBytes}, {"avgAuctionBytes", n.AvgAuctionBytes}, {"avgBidBytes", n.AvgBidBytes},
		{"hotAuctionRatio", n.HotAuctionRatio}, {"hotSellersRatio", n.HotSellersRatio}, {"hotBiddersRatio", n.HotBiddersRatio},
		{"activePeople", n.ActivePeople}, {"inFlightAuctions", n.InFlightAuctions},
	} {
		if f.v < 0 {
			ps.Add(np+"."+f.name, "%d is negative", f.v)
		}
	}
	if n.Start != "" && n.Start != "now" {
		if _, err := time.Parse(time.RFC3339, n.Start); err != nil {
			ps.Add(np+".start", "%q: want RFC 3339 (2026-01-01T00:00:00Z) or \"now\"", n.Start)
		}
	}
	return ps
}

// ConfigOf returns the generator configuration of a nexmark source: its
// typed config, decoded from the spec's nexmark options and rate; now is
// the wall clock for start: now. Tests use it to generate the same events
// as the source.
func ConfigOf(src *spec.Source, now time.Time) (Config, error) {
	p := fmt.Sprintf("sources[%s].nexmark", src.Name)
	opt := spec.NexmarkOpt{}
	if src.Nexmark != nil {
		opt = *src.Nexmark
	}
	cfg := Config{
		Seed: opt.Seed, EventsPerSecond: opt.EventsPerSecond,
		AvgPersonByteSize: opt.AvgPersonBytes, AvgAuctionByteSize: opt.AvgAuctionBytes, AvgBidByteSize: opt.AvgBidBytes,
		HotAuctionRatio: opt.HotAuctionRatio, HotSellersRatio: opt.HotSellersRatio, HotBiddersRatio: opt.HotBiddersRatio,
		NumActivePeople: opt.ActivePeople, NumInFlightAuctions: opt.InFlightAuctions,
	}
	if cfg.EventsPerSecond == 0 && src.Rate > 0 {
		cfg.EventsPerSecond = src.Rate
	}
	switch opt.Start {
	case "":
		t, _ := time.Parse(time.RFC3339, DefaultStart)
		cfg.BaseTime = t.UnixMilli()
	case "now":
		cfg.BaseTime = now.UnixMilli()
	default:
		t, err := time.Parse(time.RFC3339, opt.Start)
		if err != nil {
			return cfg, spec.Errorf(p+".start", "%q is not an RFC 3339 time or \"now\"", opt.Start)
		}
		cfg.BaseTime = t.UnixMilli()
	}
	if err := cfg.Validate(); err != nil {
		return cfg, spec.Errorf(p, "%w", err)
	}
	return cfg, nil
}

// Events calls f with the number of every event subtask of
// parallelism generates, in order, below count.
func Events(subtask, parallelism int, count int64, f func(n int64)) {
	for n := nexmarkFirst(subtask); n < count; n = nexmarkNext(n, parallelism) {
		f(n)
	}
}

func nexmarkFirst(subtask int) int64 { return int64(subtask) * nexmarkBlock }

// nexmarkNext returns the event after n of the subtask that generates n.
func nexmarkNext(n int64, parallelism int) int64 {
	if (n+1)%nexmarkBlock != 0 {
		return n + 1
	}
	return n + 1 + int64(parallelism-1)*nexmarkBlock
}

// nexmarkSource generates Nexmark events (package nexmark) into three
// outputs: person, auction and bid. It is a source of splits
// (connector.SourceType.Splits): the events are cut into blocks of
// nexmarkBlock, block b in split b % K (sources[].splits, default
// splitseq.DefaultSplits), and a subtask generates the splits it owns
// (connector.OwnsSplit) in increasing event number. Every block holds the
// Nexmark proportions of persons, auctions and bids, and when K is a
// multiple of the parallelism a subtask generates the same events as one
// of blocks b % p.
//
// Its position is {"splits": {"<j>": {"next": n, "of": K, "baseTime": t}}}
// with the splits it owns: the next event number of each and the event
// time of event 0. A restored position may hold other subtasks' splits
// (after a rescale), which are ignored but for the base time, the
// smallest of all (with start: now the subtasks' differ by their opening
// times); an owned split it lacks starts at its first event. A position
// from before splits, {"next": n, "baseTime": t}, restores at the
// parallelism it was taken at: as splits when p divides K, else going on
// with the old blocks and position.
type nexmarkSource struct {
	src   *spec.Source
	count int64 // 0: unbounded
	k     int   // splits
	cfg   Config
	// restored position, if any
	restored map[int]int64 // split -> next event
	oldNext  *int64        // a position from before splits
	baseTime *int64

	subtask, parallelism int
	seq                  *splitseq.Seq
	legacy               bool
	idx                  []int64
	bb                   *BatchBuilder
	mem                  memory.Allocator
}

// nexmarkPosition is the source's position, as JSON: Splits, or Next and
// BaseTime from before splits.
type nexmarkPosition struct {
	Splits   map[string]*nexmarkSplit `json:"splits,omitempty"`
	Next     *int64                   `json:"next,omitempty"`
	BaseTime *int64                   `json:"baseTime,omitempty"`
}

// nexmarkSplit is the position of one split.
type nexmarkSplit struct {
	Next     *int64 `json:"next"`
	Of       *int   `json:"of"`
	BaseTime *int64 `json:"baseTime"`
}

var _ task.MultiOutputSource = (*nexmarkSource)(nil)
var _ task.Resumable = (*nexmarkSource)(nil)
var _ task.Bounded = (*nexmarkSource)(nil)

// NewSource returns the nexmark source src describes; it has no stream of
// its own (out is ignored), only outputs.
func NewSource(src *spec.Source, _ stream.Stream) (task.Source, error) {
	s, err := newNexmarkSource(src)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func newNexmarkSource(src *spec.Source) (*nexmarkSource, error) {
	cfg, err := ConfigOf(src, time.Now())
	if err != nil {
		return nil, err
	}
	if ps := splitseq.Check(src); len(ps) > 0 {
		return nil, ps[0]
	}
	return &nexmarkSource{src: src, count: src.Count, k: splitseq.Splits(src), cfg: cfg}, nil
}

func (s *nexmarkSource) Outputs() []string {
	return []string{spec.NexmarkPerson, spec.NexmarkAuction, spec.NexmarkBid}
}

func (s *nexmarkSource) layout() splitseq.Layout {
	return splitseq.Layout{K: int64(s.k), Block: nexmarkBlock, Count: s.count}
}

func (s *nexmarkSource) Open(ctx *task.SourceContext) error {
	s.subtask, s.parallelism, s.mem = ctx.Subtask, ctx.Parallelism, ctx.Mem
	if s.mem == nil {
		s.mem = memory.DefaultAllocator
	}
	p := s.parallelism
	if p < 1 || s.subtask < 0 || s.subtask >= p {
		return fmt.Errorf("open nexmark source %s: subtask %d of parallelism %d", s.src.Name, s.subtask, p)
	}
	if p > s.k {
		return fmt.Errorf("open nexmark source %s: parallelism %d is above its %d splits (sources[%s].splits)", s.src.Name, p, s.k, s.src.Name)
	}
	if s.src.Nexmark != nil && s.src.Nexmark.Start == "now" {
		s.cfg.BaseTime = ctx.Now().UnixMilli()
	}
	if s.baseTime != nil {
		s.cfg.BaseTime = *s.baseTime
	}
	l := s.layout()
	owned := l.Owned(s.subtask, p)
	switch r := s.oldNext; {
	case r != nil:
		n := *r
		if (n/nexmarkBlock)%int64(p) != int64(s.subtask) {
			return fmt.Errorf("nexmark source %s: restored position next=%d is not an event of subtask %d of %d", s.src.Name, n, s.subtask, p)
		}
		if s.k%p != 0 {
			// The subtask's events are not a union of splits.
			s.legacy = true
			s.seq = splitseq.New(splitseq.Layout{K: int64(p), Block: nexmarkBlock, Count: s.count}, []splitseq.Split{{ID: s.subtask, Next: n}})
			break
		}
		for i := range owned {
			owned[i].Next = l.AtOrAfter(owned[i].ID, n)
		}
		s.seq = splitseq.New(l, owned)
	default:
		for i := range owned {
			if next, ok := s.restored[owned[i].ID]; ok {
				owned[i].Next = next
			}
		}
		s.seq = splitseq.New(l, owned)
	}
	s.restored, s.oldNext = nil, nil
	s.bb = NewBatchBuilder(s.cfg, s.mem)
	return nil
}

func (s *nexmarkSource) Poll(context.Context, int, time.Duration) (arrow.RecordBatch, error) {
	return nil, errors.New("nexmark source: has three outputs; the runtime calls PollOutputs")
}

func (s *nexmarkSource) PollOutputs(_ context.Context, maxRows int, _ time.Duration) ([]arrow.RecordBatch, error) {
	if s.seq.Done() {
		return nil, io.EOF
	}
	s.idx = s.seq.Next(s.idx[:0], maxRows)
	for _, n := range s.idx {
		s.bb.Append(n)
	}
	p, a, b := s.bb.Flush()
	return []arrow.RecordBatch{p, a, b}, nil
}

// Progress counts this subtask's events: generated, and in all below
// count (unbounded without one).
func (s *nexmarkSource) Progress() (read, total int64, unit string, ok bool) {
	if s.count == 0 || s.seq == nil {
		return 0, 0, "", false
	}
	read, total = s.seq.Progress()
	return read, total, "records", true
}

// subtaskEvents counts the events below limit that subtask of parallelism
// generates with blocks b on subtask b % parallelism: Events(subtask,
// parallelism, limit, ...) calls its f that many times.
func subtaskEvents(subtask, parallelism int, limit int64) int64 {
	return splitseq.Layout{K: int64(parallelism), Block: nexmarkBlock}.Below(subtask, limit)
}

func (s *nexmarkSource) Position() (json.RawMessage, error) {
	if s.seq == nil {
		return nil, fmt.Errorf("position of nexmark source %s: not open", s.src.Name)
	}
	base := s.cfg.BaseTime
	splits := s.seq.Splits()
	if s.legacy {
		return json.Marshal(nexmarkPosition{Next: &splits[0].Next, BaseTime: &base})
	}
	p := nexmarkPosition{Splits: make(map[string]*nexmarkSplit, len(splits))}
	for _, sp := range splits {
		p.Splits[splitseq.ID(sp.ID, s.k)] = &nexmarkSplit{Next: &sp.Next, Of: &s.k, BaseTime: &base}
	}
	return json.Marshal(p)
}

func (s *nexmarkSource) Restore(pos json.RawMessage) error {
	var p nexmarkPosition
	what := fmt.Sprintf("nexmark source %s", s.src.Name)
	if err := connector.DecodePosition(what, pos, &p); err != nil {
		return err
	}
	if p.Splits == nil {
		switch {
		case p.Next == nil && p.BaseTime != nil:
			return fmt.Errorf("restore %s: position lacks next (a position from before splits has next and baseTime)", what)
		case p.Next == nil:
			return fmt.Errorf("restore %s: position lacks splits: want {\"splits\": {\"<split>\": {\"next\": n, \"of\": %d, \"baseTime\": t}}}", what, s.k)
		case p.BaseTime == nil:
			return fmt.Errorf("restore %s: position lacks baseTime", what)
		case *p.Next < 0:
			return fmt.Errorf("restore %s: position next=%d is negative", what, *p.Next)
		}
		s.oldNext, s.baseTime = p.Next, p.BaseTime
		return nil
	}
	if p.Next != nil || p.BaseTime != nil {
		return fmt.Errorf("restore %s: position: splits and next: want one of them", what)
	}
	l := s.layout()
	restored := make(map[int]int64, len(p.Splits))
	for id, sp := range p.Splits {
		f := fmt.Sprintf("position.splits[%q]", id)
		j, err := splitseq.ParseID(id, s.k)
		if err != nil {
			return fmt.Errorf("restore %s: %s: %w", what, f, err)
		}
		switch {
		case sp == nil || sp.Next == nil:
			return fmt.Errorf("restore %s: %s.next: missing: want the split's next event number", what, f)
		case sp.BaseTime == nil:
			return fmt.Errorf("restore %s: %s.baseTime: missing: want the event time of event 0, Unix ms", what, f)
		case sp.Of == nil:
			return fmt.Errorf("restore %s: %s.of: missing: want the number of splits, %d", what, f, s.k)
		case *sp.Of != s.k:
			return fmt.Errorf("restore %s: %s.of: the position is of %d splits, and the source has %d (sources[%s].splits changed?): restore with splits: %d", what, f, *sp.Of, s.k, s.src.Name, *sp.Of)
		}
		if err := l.Check(j, *sp.Next); err != nil {
			return fmt.Errorf("restore %s: %s.next: %w", what, f, err)
		}
		restored[j] = *sp.Next
		if s.baseTime == nil || *sp.BaseTime < *s.baseTime {
			s.baseTime = sp.BaseTime
		}
	}
	s.restored = restored
	return nil
}

func (s *nexmarkSource) Close() error {
	if s.bb != nil {
		s.bb.Release()
	}
	return nil
}
