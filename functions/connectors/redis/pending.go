package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
)

// pending reports whether any stream of src has an entry after the
// positions (connector.SourceType.Pending: waking a suspended job). The
// positions are every subtask's, so together they name every stream the
// source had read; a stream of the source that none names has input if
// it has entries at all.
func pending(ctx context.Context, src *spec.Source, positions []json.RawMessage, env connector.PendingEnv) (bool, error) {
	cfg, ps := sourceConfig(src)
	if len(ps) > 0 {
		return false, ps
	}
	addr := cfg.Addr
	if addr == "" {
		addr = env.RedisAddr
	}
	if addr == "" {
		return false, fmt.Errorf("redis source %s: no address: set addr, or run the job with a Redis", src.Name)
	}
	last := map[string]string{} // stream -> the id read up to
	for i, raw := range positions {
		var p redisPosition
		if err := json.Unmarshal(raw, &p); err != nil {
			return false, fmt.Errorf("redis source %s: position %d: %w", src.Name, i, err)
		}
		for name, sp := range p.Splits {
			if sp.ID != nil {
				last[name] = *sp.ID
			}
		}
		if p.ID != nil && len(cfg.Streams) == 1 { // a position from before splits
			last[cfg.Streams[0]] = *p.ID
		}
	}
	client := newRedisClient(addr)
	defer client.Close()
	streams := cfg.Streams
	if cfg.Pattern != "" {
		iter := client.ScanType(ctx, 0, cfg.Pattern, 1000, "stream").Iterator()
		for iter.Next(ctx) {
			streams = append(streams, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return false, fmt.Errorf("redis source %s: scan streams %q at %s: %w", src.Name, cfg.Pattern, addr, err)
		}
		slices.Sort(streams)
		streams = slices.Compact(streams)
	}
	for _, name := range streams {
		// The newest entry: XREVRANGE + - COUNT 1 (a stream may not exist).
		msgs, err := client.XRevRangeN(ctx, name, "+", "-", 1).Result()
		if err != nil && err != goredis.Nil {
			return false, fmt.Errorf("redis source %s: stream %q at %s: %w", src.Name, name, addr, err)
		}
		if len(msgs) == 0 {
			continue
		}
		read, ok := last[name]
		if !ok || idAfter(msgs[0].ID, read) {
			return true, nil
		}
	}
	return false, nil
}

// idAfter reports whether stream entry id a comes after b ("<ms>-<seq>").
func idAfter(a, b string) bool {
	am, as := splitID(a)
	bm, bs := splitID(b)
	return am > bm || am == bm && as > bs
}

func splitID(id string) (ms, seq uint64) {
	m, s, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(m, 10, 64)
	seq, _ = strconv.ParseUint(s, 10, 64)
	return ms, seq
}
