package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
)

// TwoPhaseSink is task.TwoPhaseSink; the files and redis sinks are ones.
type TwoPhaseSink = task.TwoPhaseSink

var (
	_ TwoPhaseSink = (*fileSink)(nil)
	_ TwoPhaseSink = (*redisSink)(nil)
)

// AsTwoPhase is task.AsTwoPhase.
func AsTwoPhase(s task.Sink) (TwoPhaseSink, bool) { return task.AsTwoPhase(s) }

// txnHandleVersion is the version of the handles sinks put into manifests;
// a handle of another version is refused.
const txnHandleVersion = 1

// maxTxnIDLen keeps staged keys well inside S3's 1024-byte limit.
const maxTxnIDLen = 200

// validateTxnID accepts letters, digits, '-', '_' and '.', not first: a
// transaction id becomes a key segment and part of a Redis key.
func validateTxnID(id string) error {
	switch {
	case id == "":
		return errors.New("transaction id is empty")
	case len(id) > maxTxnIDLen:
		return fmt.Errorf("transaction id %q is longer than %d bytes", id, maxTxnIDLen)
	case id[0] == '.' || id[0] == '_':
		return fmt.Errorf("transaction id %q starts with %q: want a letter, digit or '-' first", id, id[0])
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return fmt.Errorf("transaction id %q contains %q: want letters, digits, '-', '_' and '.'", id, c)
		}
	}
	return nil
}

// decodeHandle decodes a handle strictly: unknown fields or another
// version are errors, not guesses. *version is the handle's version field
// inside v.
func decodeHandle(kind string, handle json.RawMessage, v any, version *int) error {
	dec := json.NewDecoder(bytes.NewReader(handle))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); !errors.Is(extra, io.EOF) {
			err = errors.New("more data after the handle object")
		}
	}
	if err != nil {
		return fmt.Errorf("decode %s transaction handle %.200q: %w", kind, handle, err)
	}
	if *version != txnHandleVersion {
		return fmt.Errorf("decode %s transaction handle %.200q: version %d, want %d", kind, handle, *version, txnHandleVersion)
	}
	return nil
}

// stagingDir is where a files sink writing under path stages its
// transactions: <path>/_staging/<txnID>/. The files source skips it.
func stagingDir(path string) string { return strings.TrimRight(path, "/") + "/_staging/" }

// CleanStaging deletes the staged objects under <path>/_staging/ of every
// transaction keep does not keep, and returns how many it deleted. It is
// the janitor run on recovery: keep the transactions of the latest
// completed checkpoint (commit them first or after, either order is safe),
// drop the rest. It must not run while a sink may still pre-commit a
// transaction it does not keep. It goes on past a failed delete and
// reports all failures.
func CleanStaging(ctx context.Context, bucket blob.Bucket, path string, keep func(txnID string) bool) (removed int, err error) {
	dir := stagingDir(path)
	infos, err := bucket.List(ctx, dir)
	if err != nil {
		return 0, fmt.Errorf("clean staging %s: %w", dir, err)
	}
	var errs []error
	for _, info := range infos {
		txn, _, ok := strings.Cut(info.Key[len(dir):], "/")
		if !ok || keep(txn) {
			continue
		}
		if err := bucket.Delete(ctx, info.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("clean staging %s: %w", dir, errors.Join(errs...))
	}
	return removed, nil
}

// CleanStaging is the janitor of a files sink: see the package function.
func (s *fileSink) CleanStaging(ctx context.Context, keep func(txnID string) bool) (int, error) {
	if s.bucket == nil {
		return 0, fmt.Errorf("clean staging of files sink %s: not open", s.node)
	}
	return CleanStaging(ctx, s.bucket, s.path, keep)
}

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
