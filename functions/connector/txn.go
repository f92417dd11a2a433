package connector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/blob"
)

// StagingCleaner is a two-phase sink that stages output outside its
// transaction handles and can find it again: the coordinator's janitor
// runs CleanStaging on recovery.
type StagingCleaner interface {
	// CleanStaging deletes what the sink staged for every transaction keep
	// does not keep and returns how many objects or keys it deleted. It
	// must not run while the sink may still pre-commit a transaction keep
	// does not keep. It goes on past a failed delete and reports every
	// failure.
	CleanStaging(ctx context.Context, keep func(txnID string) bool) (int, error)
}

// TxnState is what inspecting a sink transaction found.
type TxnState string

// Transaction states.
const (
	TxnCommitted TxnState = "committed" // its output is visible (or it had none)
	TxnPending   TxnState = "pending"   // its output still waits in the sink's staging area
	TxnUnknown   TxnState = "unknown"   // cannot tell
)

// TxnType is how the inspection commands (weir txn list, weir checkpoints
// inspect) read a sink type's transactions back. Both fields are
// required.
type TxnType struct {
	// Owns reports whether a transaction handle has this type's shape, to
	// tell the type of a sink the job spec does not name.
	Owns func(handle json.RawMessage) bool
	// Inspect returns an inspector that reads what env reaches. The
	// caller closes it.
	Inspect func(env InspectEnv) TxnInspector
}

// HandleWith returns an Owns that tells this type's handles by a
// top-level field only they have.
func HandleWith(field string) func(handle json.RawMessage) bool {
	return func(handle json.RawMessage) bool {
		var h map[string]json.RawMessage
		if json.Unmarshal(handle, &h) != nil {
			return false
		}
		_, ok := h[field]
		return ok
	}
}

// InspectEnv is what an inspector may read: the job's store, and Redis
// only when RedisAddr is set.
type InspectEnv struct {
	Bucket blob.BucketReader
	// RedisAddr is the Redis to look in for sinks without an address of
	// their own; "" leaves what only Redis knows unknown.
	RedisAddr     string
	RedisPassword string
}

// TxnInspector reads the transactions of the sinks of one type. It only
// reads, and it may keep connections open until Close.
type TxnInspector interface {
	// State tells whether the transaction with handle, of sink snk (nil
	// when the job spec is not known), is committed, pending or unknown.
	// An error is a failure to read, not a bad handle (that is
	// TxnUnknown).
	State(ctx context.Context, snk *spec.Sink, handle json.RawMessage) (TxnState, error)
	// Staged returns the ids of the transactions with output in snk's
	// staging area, sorted, whether or not a checkpoint lists them.
	Staged(ctx context.Context, snk *spec.Sink) ([]string, error)
	// Close releases what the inspector opened; it is safe to call twice.
	Close() error
}

// SinkTypeOfHandle returns the name of the first registered sink type with
// transactions whose handles look like handle, or "".
func SinkTypeOfHandle(handle json.RawMessage) string {
	for _, t := range sinkTypes() {
		if t.Txn != nil && t.Txn.Owns(handle) {
			return t.Name
		}
	}
	return ""
}

// TxnHandleVersion is the version of the handles the built-in sinks put
// into manifests; a handle of another version is refused.
const TxnHandleVersion = 1

// maxTxnIDLen keeps staged keys well inside S3's 1024-byte limit.
const maxTxnIDLen = 200

// ValidateTxnID accepts letters, digits, '-', '_' and '.', not first: a
// transaction id becomes a key segment and part of a Redis key.
func ValidateTxnID(id string) error {
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

// DecodeHandle decodes a transaction handle of a kind of sink ("files")
// strictly: unknown fields or another version than TxnHandleVersion are
// errors, not guesses. *version is the handle's version field inside v.
func DecodeHandle(kind string, handle json.RawMessage, v any, version *int) error {
	if err := decodeStrict(handle, v, "handle"); err != nil {
		return fmt.Errorf("decode %s transaction handle %.200q: %w", kind, handle, err)
	}
	if *version != TxnHandleVersion {
		return fmt.Errorf("decode %s transaction handle %.200q: version %d, want %d", kind, handle, *version, TxnHandleVersion)
	}
	return nil
}
