package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// redisSource reads an external Redis stream from its beginning: each
// entry's field "data" holds one JSON record. It never ends.
//
// A stream is one sequence, so only subtask 0 reads it; the other subtasks
// of a redis source end at once (their Poll returns io.EOF). Parallelism is
// not known when the source is constructed, so this is not an error: give
// a redis source parallelism 1 to avoid idle subtasks.
//
// Its position is {"id": "<ms>-<seq>", "read": n}: the id of the last
// entry returned, "0-0" before the first, and how many entries of the
// stream come up to it (entries trimmed before the source began count as
// read). Restoring it reads the entries after that id. "read" is for the
// backlog (entries-added minus read); a position without it, from an
// older weir, restores, and the backlog is unknown from then on.
type redisSource struct {
	node   string
	addr   string
	stream string
	out    stream.Stream

	client *goredis.Client
	dec    *arrowfmt.JSONDecoder
	dead   func(raw []byte, origin, reason string)
	lastID string // the id of the last entry read; "0-0" before the first
	// read counts the entries up to lastID; -1 when unknown (restored
	// from a position without it). fromStart: the source began at the
	// start of the stream, and the entries trimmed before it are not
	// counted in read yet (the first XINFO STREAM does).
	read      int64
	fromStart bool
	idle      bool // a subtask other than 0
}

var _ task.Backlogged = (*redisSource)(nil)

var _ task.Resumable = (*redisSource)(nil)

func newRedisSource(node string, cfg SourceConfig, out stream.Stream) *redisSource {
	return &redisSource{node: node, addr: cfg.Addr, stream: cfg.Stream, out: out, lastID: "0-0", fromStart: true}
}

// newRedisClient returns a client whose blocking calls end when their
// context does.
func newRedisClient(addr string) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
}

func (s *redisSource) Open(ctx *task.SourceContext) error {
	if ctx.Subtask != 0 {
		s.idle = true
		return nil
	}
	if s.addr == "" {
		s.addr = ctx.RedisAddr
	}
	if s.addr == "" {
		return fmt.Errorf("open redis source %s: no address: set addr, or run the job with a Redis", s.node)
	}
	s.client = newRedisClient(s.addr)
	s.dead = ctx.DeadLetter
	mem := ctx.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	s.dec = arrowfmt.NewJSONDecoder(s.out.Schema, mem)
	return nil
}

// redisPosition is a redis source's position, as JSON.
type redisPosition struct {
	ID   *string `json:"id"`
	Read *int64  `json:"read,omitempty"`
}

// Position returns {"id": id, "read": n}, the id of the last entry
// returned ("0-0" before the first) and the entries up to it. Reading
// resumes after it.
func (s *redisSource) Position() (json.RawMessage, error) {
	p := redisPosition{ID: &s.lastID}
	if s.read >= 0 && !s.fromStart {
		p.Read = &s.read
	}
	return json.Marshal(p)
}

// Backlog returns the entries of the stream after the last one read:
// XINFO STREAM's entries-added minus those read. Entries deleted or
// trimmed before the source read them count as backlog.
func (s *redisSource) Backlog(ctx context.Context) (int64, string, bool) {
	if s.client == nil || s.read < 0 {
		return 0, "", false
	}
	info, err := s.client.XInfoStream(ctx, s.stream).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return 0, "records", true // no stream yet: nothing to read
		}
		return 0, "", false
	}
	if s.fromStart {
		// What was trimmed before the source began was never there to read.
		s.read += info.EntriesAdded - info.Length
		s.fromStart = false
	}
	return max(info.EntriesAdded-s.read, 0), "records", true
}

// Restore makes the source read the entries after the id in pos.
func (s *redisSource) Restore(pos json.RawMessage) error {
	what := "redis source " + s.node
	if s.client != nil || s.idle {
		return fmt.Errorf("restore %s: the source is already open", what)
	}
	var p redisPosition
	if err := connector.DecodePosition(what, pos, &p); err != nil {
		return err
	}
	if p.ID == nil {
		return fmt.Errorf(`restore %s: position.id: missing: want the id of the last entry read, e.g. "1767225600000-0"`, what)
	}
	if !validStreamID(*p.ID) {
		return fmt.Errorf(`restore %s: position.id: %q is not a stream entry id: want "<ms>-<seq>", e.g. "1767225600000-0"`, what, *p.ID)
	}
	s.lastID = *p.ID
	s.read, s.fromStart = -1, false
	if p.Read != nil {
		s.read = *p.Read
	}
	return nil
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

// Poll reads up to maxRows entries after the last one read, waiting up to
// wait for the first. An entry without a "data" field or whose data is not
// a record of the schema goes to the dead-letter output with origin
// "<stream>:<entry id>".
// redisMaxBlock bounds one blocking XREAD of a redis source.
const redisMaxBlock = 250 * time.Millisecond

func (s *redisSource) Poll(ctx context.Context, maxRows int, wait time.Duration) (arrow.RecordBatch, error) {
	if s.idle {
		return nil, io.EOF
	}
	if maxRows < 1 {
		return nil, fmt.Errorf("poll redis source: maxRows %d is not positive", maxRows)
	}
	// go-redis passes a context's deadline to the socket but not its
	// cancellation, so one XREAD blocks at most redisMaxBlock and the
	// context is checked between reads.
	deadline := time.Now().Add(wait)
	var streams []goredis.XStream
	for {
		args := &goredis.XReadArgs{Streams: []string{s.stream, s.lastID}, Count: int64(maxRows), Block: -1}
		if left := time.Until(deadline); left > 0 {
			// BLOCK 0 would wait forever: never round a short wait down to it.
			args.Block = max(min(left, redisMaxBlock), time.Millisecond)
		}
		var err error
		streams, err = s.client.XRead(ctx, args).Result()
		if errors.Is(err, goredis.Nil) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if time.Until(deadline) > 0 {
				continue
			}
			return nil, nil
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			return nil, fmt.Errorf("read redis stream %q at %s: %w", s.stream, s.addr, err)
		}
		break
	}
	for _, st := range streams {
		for _, m := range st.Messages {
			s.lastID = m.ID
			if s.read >= 0 {
				s.read++
			}
			s.append(m)
		}
	}
	if s.dec.Len() == 0 {
		return nil, nil
	}
	return s.dec.NewBatch(), nil
}

func (s *redisSource) append(m goredis.XMessage) {
	data, ok := m.Values["data"].(string)
	if !ok {
		raw, _ := json.Marshal(m.Values)
		s.deadLetter(raw, m.ID, `entry has no "data" field holding a JSON record`)
		return
	}
	if err := s.dec.Append([]byte(data)); err != nil {
		s.deadLetter([]byte(data), m.ID, connector.DeadLetterReason(err))
	}
}

func (s *redisSource) deadLetter(raw []byte, id, reason string) {
	if s.dead != nil {
		s.dead(raw, s.stream+":"+id, reason)
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
