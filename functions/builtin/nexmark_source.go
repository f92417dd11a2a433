package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/functions/builtin/nexmark"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

// nexmarkBlock is how many consecutive events one subtask generates before
// the next subtask's turn: subtask k of p generates events n with
// (n / nexmarkBlock) % p == k, so every subtask's event time advances at
// the same pace and the events are those of one generator whatever the
// parallelism.
const nexmarkBlock = 100

func nexmarkOutputs() ([]string, []Stream) {
	return []string{spec.NexmarkPerson, spec.NexmarkAuction, spec.NexmarkBid}, []Stream{
		{Schema: nexmark.PersonSchema, TimeColumn: nexmark.PersonDateTime},
		{Schema: nexmark.AuctionSchema, TimeColumn: nexmark.AuctionDateTime},
		{Schema: nexmark.BidSchema, TimeColumn: nexmark.BidDateTime},
	}
}

// NexmarkConfig returns the generator configuration of a nexmark source;
// now is the wall clock for start: now. Tests use it to generate the same
// events as the source.
func NexmarkConfig(src *spec.Source, now time.Time) (nexmark.Config, error) {
	p := fmt.Sprintf("sources[%s].nexmark", src.Name)
	opt := spec.NexmarkOpt{}
	if src.Nexmark != nil {
		opt = *src.Nexmark
	}
	cfg := nexmark.Config{
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
		t, _ := time.Parse(time.RFC3339, DefaultDatagenStart)
		cfg.BaseTime = t.UnixMilli()
	case "now":
		cfg.BaseTime = now.UnixMilli()
	default:
		t, err := time.Parse(time.RFC3339, opt.Start)
		if err != nil {
			return cfg, fmt.Errorf("%s.start: %q is not an RFC 3339 time or \"now\"", p, opt.Start)
		}
		cfg.BaseTime = t.UnixMilli()
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%s: %w", p, err)
	}
	return cfg, nil
}

// NexmarkEvents calls f with the number of every event subtask of
// parallelism generates, in order, below count.
func NexmarkEvents(subtask, parallelism int, count int64, f func(n int64)) {
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
	cfg   nexmark.Config
	// restored position, if any
	restored *nexmarkPosition

	subtask, parallelism int
	next                 int64
	bb                   *nexmark.BatchBuilder
	mem                  memory.Allocator
}

type nexmarkPosition struct {
	Next     *int64 `json:"next"`
	BaseTime *int64 `json:"baseTime"`
}

var _ task.MultiOutputSource = (*nexmarkSource)(nil)
var _ task.Resumable = (*nexmarkSource)(nil)

func newNexmarkSource(src *spec.Source) (*nexmarkSource, error) {
	cfg, err := NexmarkConfig(src, time.Now())
	if err != nil {
		return nil, err
	}
	return &nexmarkSource{src: src, count: src.Count, cfg: cfg}, nil
}

func (s *nexmarkSource) Outputs() []string {
	names, _ := nexmarkOutputs()
	return names
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
	s.bb = nexmark.NewBatchBuilder(s.cfg, s.mem)
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

func (s *nexmarkSource) Position() (json.RawMessage, error) {
	next, base := s.next, s.cfg.BaseTime
	return json.Marshal(nexmarkPosition{Next: &next, BaseTime: &base})
}

func (s *nexmarkSource) Restore(pos json.RawMessage) error {
	var p nexmarkPosition
	what := fmt.Sprintf("nexmark source %s", s.src.Name)
	if err := decodePosition(what, pos, &p); err != nil {
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
