package connector

import (
	"context"
	"encoding/json"

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
