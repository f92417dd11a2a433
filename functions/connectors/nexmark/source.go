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
		Check: check,
		New:   NewSource,
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
// outputs: person, auction and bid. It is Resumable: its position is the
// next event number and the event time of event 0.
type nexmarkSource struct {
	src   *spec.Source
	count int64 // 0: unbounded
	cfg   Config
	// restored position, if any
	restored *nexmarkPosition

	subtask, parallelism int
	next                 int64
	bb                   *BatchBuilder
	mem                  memory.Allocator
}

type nexmarkPosition struct {
	Next     *int64 `json:"next"`
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
	return &nexmarkSource{src: src, count: src.Count, cfg: cfg}, nil
}

func (s *nexmarkSource) Outputs() []string {
	return []string{spec.NexmarkPerson, spec.NexmarkAuction, spec.NexmarkBid}
}

func (s *nexmarkSource) Open(ctx *task.SourceContext) error {
	s.subtask, s.parallelism, s.mem = ctx.Subtask, ctx.Parallelism, ctx.Mem
	if s.mem == nil {
		s.mem = memory.DefaultAllocator
	}
	s.next = nexmarkFirst(s.subtask)
	if s.src.Nexmark != nil && s.src.Nexmark.Start == "now" {
		s.cfg.BaseTime = ctx.Now().UnixMilli()
	}
	if r := s.restored; r != nil {
		n := *r.Next
		if (n/nexmarkBlock)%int64(s.parallelism) != int64(s.subtask) {
			return fmt.Errorf("nexmark source %s: restored position next=%d is not an event of subtask %d of %d", s.src.Name, n, s.subtask, s.parallelism)
		}
		s.next = n
		s.cfg.BaseTime = *r.BaseTime
	}
	s.bb = NewBatchBuilder(s.cfg, s.mem)
	return nil
}

func (s *nexmarkSource) Poll(context.Context, int, time.Duration) (arrow.RecordBatch, error) {
	return nil, errors.New("nexmark source: has three outputs; the runtime calls PollOutputs")
}

func (s *nexmarkSource) PollOutputs(_ context.Context, maxRows int, _ time.Duration) ([]arrow.RecordBatch, error) {
	if s.count > 0 && s.next >= s.count {
		return nil, io.EOF
	}
	par := s.parallelism
	n := s.next
	for i := 0; i < maxRows && (s.count == 0 || n < s.count); i++ {
		s.bb.Append(n)
		n = nexmarkNext(n, par)
	}
	s.next = n
	p, a, b := s.bb.Flush()
	return []arrow.RecordBatch{p, a, b}, nil
}

// Progress counts this subtask's events: generated, and in all below
// count (unbounded without one).
func (s *nexmarkSource) Progress() (read, total int64, unit string, ok bool) {
	if s.count == 0 || s.parallelism == 0 {
		return 0, 0, "", false
	}
	total = subtaskEvents(s.subtask, s.parallelism, s.count)
	return min(subtaskEvents(s.subtask, s.parallelism, s.next), total), total, "records", true
}

// subtaskEvents counts the events below limit that subtask of parallelism
// generates: Events(subtask, parallelism, limit, ...) calls its f that
// many times.
func subtaskEvents(subtask, parallelism int, limit int64) int64 {
	blocks, rest := limit/nexmarkBlock, limit%nexmarkBlock
	p, k := int64(parallelism), int64(subtask)
	n := blocks / p * nexmarkBlock
	if blocks%p > k {
		n += nexmarkBlock
	}
	if blocks%p == k {
		n += rest
	}
	return n
}

func (s *nexmarkSource) Position() (json.RawMessage, error) {
	next, base := s.next, s.cfg.BaseTime
	return json.Marshal(nexmarkPosition{Next: &next, BaseTime: &base})
}

func (s *nexmarkSource) Restore(pos json.RawMessage) error {
	var p nexmarkPosition
	what := fmt.Sprintf("nexmark source %s", s.src.Name)
	if err := connector.DecodePosition(what, pos, &p); err != nil {
		return err
	}
	switch {
	case p.Next == nil:
		return fmt.Errorf("restore %s: position lacks next", what)
	case p.BaseTime == nil:
		return fmt.Errorf("restore %s: position lacks baseTime", what)
	case *p.Next < 0:
		return fmt.Errorf("restore %s: position next=%d is negative", what, *p.Next)
	}
	s.restored = &p
	return nil
}

func (s *nexmarkSource) Close() error {
	if s.bb != nil {
		s.bb.Release()
	}
	return nil
}
