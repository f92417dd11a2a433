package redis

import (
	"context"
	"fmt"
	"strings"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/task"
)

var (
	_ task.TwoPhaseSink        = (*redisSink)(nil)
	_ connector.StagingCleaner = (*redisSink)(nil)
)

// CleanStaging is the janitor of a redis sink: it deletes the staging
// lists weir:txn:{<stream>}:<txnID> of every transaction keep does not
// keep (committed markers stay until they expire).
func (s *redisSink) CleanStaging(ctx context.Context, keep func(txnID string) bool) (int, error) {
	if s.client == nil {
		return 0, fmt.Errorf("clean staging of redis sink %s: not open", s.node)
	}
	prefix := redisStagingKey(s.stream, "")
	var removed int
	iter := s.client.Scan(ctx, 0, globEscape(prefix)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		txn := strings.TrimPrefix(key, prefix)
		if strings.HasPrefix(txn, "done:") || keep(txn) {
			continue
		}
		n, err := s.client.Del(ctx, key).Result()
		if err != nil {
			return removed, fmt.Errorf("clean staging of redis sink %s: delete %s: %w", s.node, key, err)
		}
		removed += int(n)
	}
	if err := iter.Err(); err != nil {
		return removed, fmt.Errorf("clean staging of redis sink %s: scan %s*: %w", s.node, prefix, err)
	}
	return removed, nil
}

// globEscape escapes the characters Redis's glob patterns treat specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
