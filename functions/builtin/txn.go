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

// TwoPhaseSink is a Sink whose output becomes visible only when a checkpoint
// completes (DESIGN.md, Checkpoints, steps 4-5).
//
// TODO: move to functions/task/api.go, next to Sink, where the runtime uses
// it.
type TwoPhaseSink interface {
	task.Sink
	// EnableTransactions switches the sink to transactional writing; call
	// it before the first Write. Afterwards Write only buffers (a full
	// buffer may be encoded, but nothing is written out), Finish keeps what
	// is buffered for the last PreCommit, and only Commit makes output
	// visible. Without it the sink writes as a plain Sink does, and Finish
	// makes everything visible; Commit and Abort work either way.
	EnableTransactions()
	// PreCommit makes everything written since the last PreCommit durable but
	// invisible, as transaction txnID (unique per sink subtask and checkpoint,
	// e.g. "<job>-a<attempt>-s<subtask>-c<checkpoint>"), and returns a handle
	// (JSON) that goes into the checkpoint's manifest. If it fails, what
	// was buffered stays buffered and goes into the next PreCommit; the
	// partly staged transaction is left for Abort or CleanStaging.
	PreCommit(ctx context.Context, txnID string) (json.RawMessage, error)
	// Commit makes a pre-committed transaction visible. It is idempotent: a
	// second Commit of the same handle (after a crash, on recovery) is a
	// no-op. It may be called on a different process than PreCommit, with
	// only the handle and the sink's spec: the sink must be Open (for its
	// store or Redis), nothing else.
	Commit(ctx context.Context, handle json.RawMessage) error
	// Abort discards a pre-committed transaction; idempotent.
	Abort(ctx context.Context, handle json.RawMessage) error
}

var (
	_ TwoPhaseSink = (*fileSink)(nil)
	_ TwoPhaseSink = (*redisSink)(nil)
)

// AsTwoPhase returns the two-phase sink inside s (seeing through the rate
// limiter NewSink may wrap it in), or ok=false if s has none. The runtime
// keeps writing through s; PreCommit, Commit and Abort go to the result.
func AsTwoPhase(s task.Sink) (tp TwoPhaseSink, ok bool) {
	for {
		switch v := s.(type) {
		case TwoPhaseSink:
			return v, true
		case *rateLimitedSink:
			s = v.Sink
		default:
			return nil, false
		}
	}
}

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
