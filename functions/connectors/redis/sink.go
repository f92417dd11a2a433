package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	goredis "github.com/redis/go-redis/v9"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/task"
)

// redisSink appends each row to a Redis stream as an entry with the field
// data=<JSON row>. The entries of one batch go in one pipeline, one round
// trip; they are in Redis when Write returns.
//
// After EnableTransactions, Write only buffers the entries; PreCommit puts
// them in a staging list next to the stream, and Commit moves them to the
// stream with one Lua script, at most once per transaction.
type redisSink struct {
	node   string
	addr   string
	stream string

	client   *goredis.Client
	counters *task.Counters
	buf      []byte
	ends     []int

	txn bool // EnableTransactions was called; buf and ends hold the transaction
}

// TxnMarkerTTL is how long a committed transaction's marker stays.
// A Commit replayed later than that finds neither the marker nor the
// staging list and fails rather than appending twice.
const TxnMarkerTTL = 7 * 24 * time.Hour

// redisStageChunk is how many entries one RPUSH carries, and how many the
// commit script reads at a time.
const redisStageChunk = 1000

// redisTxnHandle is a redis sink's transaction handle (version 1). Rows
// lets Commit tell an empty transaction from a lost staging list.
type redisTxnHandle struct {
	V      int    `json:"v"`
	Stream string `json:"stream"`
	Txn    string `json:"txn"`
	Rows   int64  `json:"rows"`
}

// The staging list and the committed marker of a transaction share the
// stream's hash tag, so that one script may touch all three keys in a
// Redis Cluster too. (A stream name with its own {tag} breaks this: the
// first {...} wins; a single Redis does not care.)
func redisStagingKey(stream, txn string) string { return "weir:txn:{" + stream + "}:" + txn }
func redisDoneKey(stream, txn string) string    { return "weir:txn:{" + stream + "}:done:" + txn }

// redisCommitScript appends a staged transaction to its stream once.
// KEYS: staging list, stream, done marker. ARGV: rows, marker TTL in
// seconds. It returns the number of entries appended, 0 if the transaction
// was committed before, and an error if the staging list does not hold
// rows entries.
//
// The payload passes through Lua, and the script blocks Redis while it
// runs: acceptable because it runs once per sink subtask and checkpoint,
// not per row. Entries are read in chunks to bound the script's memory.
var redisCommitScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[3]) == 1 then
	return 0
end
local want = tonumber(ARGV[1])
local n = redis.call('LLEN', KEYS[1])
if n ~= want then
	return redis.error_reply('weir: staging list ' .. KEYS[1] .. ' holds ' .. n .. ' entries, want ' .. want .. ' (aborted, cleaned or expired?)')
end
local chunk = ` + fmt.Sprint(redisStageChunk) + `
for i = 0, n - 1, chunk do
	local entries = redis.call('LRANGE', KEYS[1], i, i + chunk - 1)
	for _, e in ipairs(entries) do
		redis.call('XADD', KEYS[2], '*', 'data', e)
	end
end
redis.call('SET', KEYS[3], '1', 'EX', ARGV[2])
redis.call('DEL', KEYS[1])
return n
`)

var _ task.Sink = (*redisSink)(nil)

func newRedisSink(node string, cfg SinkConfig) *redisSink {
	return &redisSink{node: node, addr: cfg.Addr, stream: cfg.Stream}
}

func (s *redisSink) Open(ctx *task.SinkContext) error {
	if s.addr == "" {
		s.addr = ctx.RedisAddr
	}
	if s.addr == "" {
		return fmt.Errorf("open redis sink %s: no address: set addr, or run the job with a Redis", s.node)
	}
	s.client = newRedisClient(s.addr)
	s.counters = ctx.Counters
	return nil
}

// EnableTransactions makes Write buffer for PreCommit; see TwoPhaseSink.
func (s *redisSink) EnableTransactions() { s.txn = true }

func (s *redisSink) Write(ctx context.Context, b arrow.RecordBatch) error {
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	if s.txn {
		for row := range n {
			s.buf = arrowfmt.AppendJSONRow(s.buf, b, row)
			s.ends = append(s.ends, len(s.buf))
		}
		return nil
	}
	s.buf, s.ends = s.buf[:0], s.ends[:0]
	for row := range n {
		s.buf = arrowfmt.AppendJSONRow(s.buf, b, row)
		s.ends = append(s.ends, len(s.buf))
	}
	pipe := s.client.Pipeline()
	start := 0
	for _, end := range s.ends {
		pipe.XAdd(ctx, &goredis.XAddArgs{Stream: s.stream, Values: []any{"data", s.buf[start:end]}})
		start = end
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("append %d rows to redis stream %q at %s: %w", n, s.stream, s.addr, err)
	}
	if s.counters != nil {
		s.counters.SinkRows.Add(int64(n))
	}
	return nil
}

// Finish has nothing to do: every Write is in Redis when it returns. In
// transactional mode the buffer waits for the last PreCommit.
func (s *redisSink) Finish(context.Context) error { return nil }

// PreCommit replaces the staging list weir:txn:{<stream>}:<txnID> with the
// buffered entries in one MULTI/EXEC, so a retried PreCommit does not
// stage twice; see TwoPhaseSink. An empty transaction touches nothing.
func (s *redisSink) PreCommit(ctx context.Context, txnID string) (json.RawMessage, error) {
	if err := connector.ValidateTxnID(txnID); err != nil {
		return nil, fmt.Errorf("pre-commit redis sink %s: %w", s.node, err)
	}
	if !s.txn {
		return nil, fmt.Errorf("pre-commit redis sink %s: transactions are not enabled: call EnableTransactions before the first Write", s.node)
	}
	if s.client == nil {
		return nil, fmt.Errorf("pre-commit redis sink %s: not open", s.node)
	}
	h := redisTxnHandle{V: connector.TxnHandleVersion, Stream: s.stream, Txn: txnID, Rows: int64(len(s.ends))}
	if h.Rows > 0 {
		key := redisStagingKey(s.stream, txnID)
		pipe := s.client.TxPipeline()
		pipe.Del(ctx, key)
		args := make([]any, 0, redisStageChunk)
		start := 0
		for i, end := range s.ends {
			args = append(args, s.buf[start:end])
			start = end
			if len(args) == redisStageChunk || i == len(s.ends)-1 {
				pipe.RPush(ctx, key, args...)
				args = make([]any, 0, redisStageChunk)
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("pre-commit redis sink %s: stage %d rows in %q at %s: %w", s.node, h.Rows, key, s.addr, err)
		}
	}
	handle, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("pre-commit redis sink %s: %w", s.node, err)
	}
	if s.counters != nil {
		s.counters.SinkRows.Add(h.Rows)
	}
	s.buf, s.ends = s.buf[:0], s.ends[:0]
	return handle, nil
}

// decodeHandle decodes a handle and checks that it is for this sink's
// stream.
func (s *redisSink) decodeHandle(op string, handle json.RawMessage) (redisTxnHandle, error) {
	var h redisTxnHandle
	if s.client == nil {
		return h, fmt.Errorf("%s redis sink %s: not open", op, s.node)
	}
	if err := connector.DecodeHandle("redis", handle, &h, &h.V); err != nil {
		return h, fmt.Errorf("%s redis sink %s: %w", op, s.node, err)
	}
	if err := connector.ValidateTxnID(h.Txn); err != nil {
		return h, fmt.Errorf("%s redis sink %s: %w", op, s.node, err)
	}
	if h.Stream != s.stream || h.Rows < 0 {
		return h, fmt.Errorf("%s redis sink %s: transaction %s is for stream %q with %d rows, not for stream %q",
			op, s.node, h.Txn, h.Stream, h.Rows, s.stream)
	}
	return h, nil
}

// Commit appends the staged entries to the stream and marks the
// transaction committed, atomically, unless it is marked already.
func (s *redisSink) Commit(ctx context.Context, handle json.RawMessage) error {
	h, err := s.decodeHandle("commit", handle)
	if err != nil {
		return err
	}
	if h.Rows == 0 {
		return nil
	}
	keys := []string{redisStagingKey(h.Stream, h.Txn), h.Stream, redisDoneKey(h.Stream, h.Txn)}
	ttl := int64(TxnMarkerTTL / time.Second)
	if err := redisCommitScript.Run(ctx, s.client, keys, h.Rows, ttl).Err(); err != nil {
		return fmt.Errorf("commit redis sink %s: transaction %s to stream %q at %s: %w", s.node, h.Txn, h.Stream, s.addr, err)
	}
	return nil
}

// Abort deletes the staging list. Aborting a committed transaction does
// nothing (its list is gone).
func (s *redisSink) Abort(ctx context.Context, handle json.RawMessage) error {
	h, err := s.decodeHandle("abort", handle)
	if err != nil {
		return err
	}
	if err := s.client.Del(ctx, redisStagingKey(h.Stream, h.Txn)).Err(); err != nil {
		return fmt.Errorf("abort redis sink %s: transaction %s of stream %q at %s: %w", s.node, h.Txn, h.Stream, s.addr, err)
	}
	return nil
}

// Close drops what is buffered for a transaction; it is safe to call
// twice.
func (s *redisSink) Close() error {
	s.buf, s.ends = nil, nil
	if s.client == nil {
		return nil
	}
	err := s.client.Close()
	s.client = nil
	if err != nil {
		return fmt.Errorf("close redis sink %s: %w", s.node, err)
	}
	return nil
}
