package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	goredis "github.com/redis/go-redis/v9"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
)

// redisSource reads external Redis streams from their beginning: each
// entry's field "data" holds one JSON record. It never ends.
//
// Its streams are its splits (connector.SourceType.Splits), sorted by
// name: a list from the spec, or the streams a pattern matches when the
// source opens (SCAN MATCH TYPE stream; a stream created later is read
// from the next restart on). Subtask s of p reads the i-th when
// connector.OwnsSplit(i, s, p). Each subtask expands a pattern itself, so
// a matching stream created while the subtasks open may be seen by some
// and not others, and then read twice or not at all in that attempt:
// create the streams before the job starts. A subtask that owns none is
// idle: its Poll waits and returns nothing, never io.EOF, since a finished
// source subtask takes no part in later checkpoints.
//
// Its position is {"splits": {"<stream>": {"id": "<ms>-<seq>", "read": n}}}
// with the streams it owns: the id of the last entry returned, "0-0"
// before the first, and how many entries of the stream come up to it
// (entries trimmed before the source began count as read). Restoring it
// reads the entries after each id; a restored position may hold other
// subtasks' streams (after a rescale), which are ignored, and an owned
// stream it lacks starts at "0-0". "read" is for the backlog
// (entries-added minus read); a position without it, from an older weir,
// restores, and the backlog is unknown from then on. The position of a
// source of one stream from before splits, {"id": ..., "read": n},
// restores too.
type redisSource struct {
	node string
	cfg  SourceConfig
	out  stream.Stream

	// restored holds the streams of a restored position, until Open
	// keeps those the subtask owns.
	restored map[string]*streamState
	opened   bool
	streams  []*streamState // the streams the subtask owns, sorted
	byName   map[string]*streamState
	waited   time.Duration // in blocking XREADs (task.Waiter)

	client *goredis.Client
	addr   string
	dec    *arrowfmt.JSONDecoder
	dead   func(raw []byte, origin, reason string)
}

// streamState is where the source is in one stream.
type streamState struct {
	name   string
	lastID string // the id of the last entry read; "0-0" before the first
	// read counts the entries up to lastID; -1 when unknown (restored
	// from a position without it). fromStart: the source began at the
	// start of the stream, and the entries trimmed before it are not
	// counted in read yet (the first XINFO STREAM does).
	read      int64
	fromStart bool
}

func newStreamState(name string) *streamState {
	return &streamState{name: name, lastID: "0-0", fromStart: true}
}

var _ task.Backlogged = (*redisSource)(nil)

var (
	_ task.Resumable = (*redisSource)(nil)
	_ task.Waiter    = (*redisSource)(nil)
)

// Waited is the time the source's Polls spent blocked in XREAD waiting
// for entries (task.Waiter): idle time, though the Poll returned rows.
func (s *redisSource) Waited() time.Duration { return s.waited }

func newRedisSource(node string, cfg SourceConfig, out stream.Stream) *redisSource {
	return &redisSource{node: node, cfg: cfg, out: out}
}

// newRedisClient returns a client whose blocking calls end when their
// context does.
func newRedisClient(addr string) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
}

func (s *redisSource) Open(ctx *task.SourceContext) error {
	s.opened = true
	s.addr = s.cfg.Addr
	if s.addr == "" {
		s.addr = ctx.RedisAddr
	}
	if s.addr == "" {
		return fmt.Errorf("open redis source %s: no address: set addr, or run the job with a Redis", s.node)
	}
	s.client = newRedisClient(s.addr)
	splits := s.cfg.Streams
	if s.cfg.Pattern != "" {
		var err error
		if splits, err = s.match(); err != nil {
			return err
		}
	}
	s.byName = map[string]*streamState{}
	for i, name := range splits {
		if !connector.OwnsSplit(i, ctx.Subtask, max(ctx.Parallelism, 1)) {
			continue
		}
		st := s.restored[name]
		if st == nil {
			st = newStreamState(name)
		}
		s.streams = append(s.streams, st)
		s.byName[name] = st
	}
	s.restored = nil
	if ctx.Logger != nil {
		owned := make([]string, len(s.streams))
		for i, st := range s.streams {
			owned[i] = st.name
		}
		ctx.Logger.Info("redis source streams", "source", s.node, "subtask", ctx.Subtask, "streams", len(splits), "owned", owned)
	}
	s.dead = ctx.DeadLetter
	mem := ctx.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	s.dec = arrowfmt.NewJSONDecoder(s.out.Schema, mem)
	return nil
}

// redisScanTimeout bounds the SCAN that expands a pattern at Open.
const redisScanTimeout = 30 * time.Second

// match returns the streams the pattern matches, sorted.
func (s *redisSource) match() ([]string, error) {
	c, cancel := context.WithTimeout(context.Background(), redisScanTimeout)
	defer cancel()
	var names []string
	iter := s.client.ScanType(c, 0, s.cfg.Pattern, 1000, "stream").Iterator()
	for iter.Next(c) {
		names = append(names, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("open redis source %s: scan streams %q at %s: %w", s.node, s.cfg.Pattern, s.addr, err)
	}
	slices.Sort(names)
	return slices.Compact(names), nil // SCAN may return a key twice
}

// redisPosition is a redis source's position, as JSON: Splits, or ID and
// Read for a source of one stream from before splits.
type redisPosition struct {
	Splits map[string]streamPosition `json:"splits,omitempty"`
	ID     *string                   `json:"id,omitempty"`
	Read   *int64                    `json:"read,omitempty"`
}

// streamPosition is the position of one stream.
type streamPosition struct {
	ID   *string `json:"id"`
	Read *int64  `json:"read,omitempty"`
}

// Position returns {"splits": {"<stream>": {"id": id, "read": n}}} for
// the streams the subtask owns: the id of the last entry returned ("0-0"
// before the first) and the entries up to it. Reading resumes after it.
func (s *redisSource) Position() (json.RawMessage, error) {
	p := redisPosition{Splits: make(map[string]streamPosition, len(s.streams))}
	for _, st := range s.streams {
		sp := streamPosition{ID: &st.lastID}
		if st.read >= 0 && !st.fromStart {
			sp.Read = &st.read
		}
		p.Splits[st.name] = sp
	}
	if len(p.Splits) == 0 {
		return json.RawMessage(`{"splits":{}}`), nil // omitempty would drop it
	}
	return json.Marshal(p)
}

// Backlog returns the entries of the owned streams after the last ones
// read: the sum of XINFO STREAM's entries-added minus those read, with one
// round trip. Entries deleted or trimmed before the source read them count
// as backlog. It is unknown while any stream's count of entries read is.
func (s *redisSource) Backlog(ctx context.Context) (int64, string, bool) {
	if s.client == nil {
		return 0, "", false
	}
	for _, st := range s.streams {
		if st.read < 0 {
			return 0, "", false
		}
	}
	if len(s.streams) == 0 {
		return 0, "records", true
	}
	pipe := s.client.Pipeline()
	cmds := make([]*goredis.XInfoStreamCmd, len(s.streams))
	for i, st := range s.streams {
		cmds[i] = pipe.XInfoStream(ctx, st.name)
	}
	_, _ = pipe.Exec(ctx) // each command holds its own error
	var total int64
	ok := true
	for i, st := range s.streams {
		info, err := cmds[i].Result()
		if err != nil {
			if !strings.Contains(err.Error(), "no such key") {
				ok = false // no stream yet: nothing to read
			}
			continue
		}
		if st.fromStart {
			// What was trimmed before the source began was never there to read.
			st.read += info.EntriesAdded - info.Length
			st.fromStart = false
		}
		total += max(info.EntriesAdded-st.read, 0)
	}
	if !ok {
		return 0, "", false
	}
	return total, "records", true
}

// Restore makes the source read the entries after the ids in pos, for
// the streams it will own once open.
func (s *redisSource) Restore(pos json.RawMessage) error {
	what := "redis source " + s.node
	if s.opened {
		return fmt.Errorf("restore %s: the source is already open", what)
	}
	var p redisPosition
	if err := connector.DecodePosition(what, pos, &p); err != nil {
		return err
	}
	const example = `{"splits": {"<stream>": {"id": "1767225600000-0", "read": 1}}}`
	restored := map[string]*streamState{}
	switch {
	case p.Splits != nil && (p.ID != nil || p.Read != nil):
		return fmt.Errorf("restore %s: position: splits and id: want one of them, e.g. %s", what, example)
	case p.Splits != nil:
		for name, sp := range p.Splits {
			f := fmt.Sprintf("position.splits[%q]", name)
			if name == "" {
				return fmt.Errorf("restore %s: %s: an empty stream name: want %s", what, f, example)
			}
			st, err := restoredStream(name, sp.ID, sp.Read)
			if err != nil {
				return fmt.Errorf("restore %s: %s.%w", what, f, err)
			}
			restored[name] = st
		}
	case p.ID == nil && p.Read == nil:
		return fmt.Errorf("restore %s: position.splits: missing: want the position of each stream, e.g. %s", what, example)
	case len(s.cfg.Streams) != 1:
		// Before splits, a redis source read one stream.
		what := s.cfg.Pattern
		if what == "" {
			what = strings.Join(s.cfg.Streams, ", ")
		}
		return fmt.Errorf("restore redis source %s: position.splits: missing: a position without splits is of a source of one stream, and this one reads %s: want %s", s.node, what, example)
	default:
		st, err := restoredStream(s.cfg.Streams[0], p.ID, p.Read)
		if err != nil {
			return fmt.Errorf("restore %s: position.%w", what, err)
		}
		restored[st.name] = st
	}
	s.restored = restored
	return nil
}

// restoredStream checks the position of one stream; its error names the
// field without the "position." before it.
func restoredStream(name string, id *string, read *int64) (*streamState, error) {
	if id == nil {
		return nil, errors.New(`id: missing: want the id of the last entry read, e.g. "1767225600000-0"`)
	}
	if !validStreamID(*id) {
		return nil, fmt.Errorf(`id: %q is not a stream entry id: want "<ms>-<seq>", e.g. "1767225600000-0"`, *id)
	}
	st := &streamState{name: name, lastID: *id, read: -1}
	if read != nil {
		if *read < 0 {
			return nil, fmt.Errorf("read: %d is negative: want the number of entries read", *read)
		}
		st.read = *read
	}
	return st, nil
}

// validStreamID reports whether id is a complete Redis stream entry id.
func validStreamID(id string) bool {
	ms, seq, ok := strings.Cut(id, "-")
	if !ok {
		return false
	}
	_, err1 := strconv.ParseUint(ms, 10, 64) // no sign, no spaces
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return err1 == nil && err2 == nil
}

// redisMaxBlock bounds one blocking XREAD of a redis source.
const redisMaxBlock = 250 * time.Millisecond

// Poll reads up to maxRows entries after the last ones read, from all the
// streams the subtask owns, waiting up to wait for the first. An entry
// without a "data" field or whose data is not a record of the schema goes
// to the dead-letter output with origin "<stream>:<entry id>".
//
// XREAD's COUNT is per stream, so it asks each stream for an equal share
// of maxRows and, if some streams filled their share, asks those again for
// what is left: a busy stream does not starve the others, and a poll does
// not read many times what it returns.
func (s *redisSource) Poll(ctx context.Context, maxRows int, wait time.Duration) (arrow.RecordBatch, error) {
	if maxRows < 1 {
		return nil, fmt.Errorf("poll redis source: maxRows %d is not positive", maxRows)
	}
	if len(s.streams) == 0 {
		return nil, idle(ctx, wait)
	}
	deadline := time.Now().Add(wait)
	active := s.streams
	budget := maxRows
	for first := true; budget > 0 && len(active) > 0; first = false {
		count := (budget + len(active) - 1) / len(active)
		res, err := s.xread(ctx, active, count, deadline, first)
		if err != nil && first {
			return nil, err
		}
		if err != nil {
			break // return the rows read; the next poll meets the error again
		}
		var full []*streamState
		for _, xs := range res {
			st := s.byName[xs.Stream]
			if st == nil {
				return nil, fmt.Errorf("read redis streams at %s: the reply names stream %q, not asked for", s.addr, xs.Stream)
			}
			msgs := xs.Messages[:min(len(xs.Messages), budget)]
			for _, m := range msgs {
				st.lastID = m.ID
				if st.read >= 0 {
					st.read++
				}
				s.append(st.name, m)
			}
			budget -= len(msgs)
			if len(xs.Messages) >= count {
				full = append(full, st) // it may have more
			}
		}
		active = full
	}
	if s.dec.Len() == 0 {
		return nil, nil
	}
	return s.dec.NewBatch(), nil
}

// xread reads up to count entries of each of streams after its last id.
// With block it waits until deadline for the first entry; nil, nil when
// none came.
func (s *redisSource) xread(ctx context.Context, streams []*streamState, count int, deadline time.Time, block bool) ([]goredis.XStream, error) {
	keys := make([]string, 2*len(streams))
	for i, st := range streams {
		keys[i], keys[len(streams)+i] = st.name, st.lastID
	}
	// go-redis passes a context's deadline to the socket but not its
	// cancellation, so one XREAD blocks at most redisMaxBlock and the
	// context is checked between reads.
	for {
		args := &goredis.XReadArgs{Streams: keys, Count: int64(count), Block: -1}
		if left := time.Until(deadline); block && left > 0 {
			// BLOCK 0 would wait forever: never round a short wait down to it.
			args.Block = max(min(left, redisMaxBlock), time.Millisecond)
		}
		t0 := time.Now()
		res, err := s.client.XRead(ctx, args).Result()
		if args.Block > 0 {
			s.waited += time.Since(t0) // waiting for entries, not working
		}
		if errors.Is(err, goredis.Nil) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if block && time.Until(deadline) > 0 {
				continue
			}
			return nil, nil
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			return nil, fmt.Errorf("read redis %s at %s: %w", describeStreams(streams), s.addr, err)
		}
		return res, nil
	}
}

// describeStreams names streams for an error: `stream "a"`, or
// `streams "a", "b" and 3 more`.
func describeStreams(streams []*streamState) string {
	if len(streams) == 1 {
		return fmt.Sprintf("stream %q", streams[0].name)
	}
	var b strings.Builder
	b.WriteString("streams ")
	for i, st := range streams[:min(len(streams), 3)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", st.name)
	}
	if len(streams) > 3 {
		fmt.Fprintf(&b, " and %d more", len(streams)-3)
	}
	return b.String()
}

// idle waits out a poll of a subtask that owns no stream: wait, or until
// ctx is done.
func idle(ctx context.Context, wait time.Duration) error {
	if wait <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *redisSource) append(stream string, m goredis.XMessage) {
	data, ok := m.Values["data"].(string)
	if !ok {
		raw, _ := json.Marshal(m.Values)
		s.deadLetter(raw, stream, m.ID, `entry has no "data" field holding a JSON record`)
		return
	}
	if err := s.dec.Append([]byte(data)); err != nil {
		s.deadLetter([]byte(data), stream, m.ID, connector.DeadLetterReason(err))
	}
}

func (s *redisSource) deadLetter(raw []byte, stream, id, reason string) {
	if s.dead != nil {
		s.dead(raw, stream+":"+id, reason)
	}
}

func (s *redisSource) Close() error {
	var err error
	if s.client != nil {
		err = s.client.Close()
		s.client = nil
	}
	if s.dec != nil {
		s.dec.Release()
		s.dec = nil
	}
	if err != nil {
		return fmt.Errorf("close redis source %s: %w", s.node, err)
	}
	return nil
}

// describePosition renders a position for weir checkpoints inspect: each
// stream with the id after which it resumes, "rides-0 1767225600000-3
// (4 read), rides-1 0-0". A position it cannot read is shown as stored.
func describePosition(pos json.RawMessage) string {
	var p redisPosition
	if json.Unmarshal(pos, &p) != nil || (p.Splits == nil && p.ID == nil) {
		return string(pos)
	}
	if p.Splits == nil {
		p.Splits = map[string]streamPosition{"": {ID: p.ID, Read: p.Read}}
	}
	if len(p.Splits) == 0 {
		return "no streams"
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(p.Splits)) {
		sp := p.Splits[name]
		part := name
		if sp.ID != nil {
			part = strings.TrimSpace(part + " " + *sp.ID)
		}
		if sp.Read != nil {
			part += fmt.Sprintf(" (%d read)", *sp.Read)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}
