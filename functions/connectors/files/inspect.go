package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// txnType reads a files sink's transactions back from the store: a
// transaction is pending while one of its objects is staged.
func txnType() *connector.TxnType {
	return &connector.TxnType{
		Owns:    connector.HandleWith("objects"),
		Inspect: func(env connector.InspectEnv) connector.TxnInspector { return inspector{b: env.Bucket} },
	}
}

type inspector struct{ b blob.BucketReader }

var _ connector.TxnInspector = inspector{}

// State is TxnPending while an object of the handle is staged, and
// TxnCommitted once none is.
func (i inspector) State(ctx context.Context, _ *spec.Sink, handle json.RawMessage) (connector.TxnState, error) {
	// Only the fields read: inspection is lenient where Commit is strict.
	var h struct {
		Objects []struct {
			Staged string `json:"staged"`
		} `json:"objects"`
	}
	if json.Unmarshal(handle, &h) != nil {
		return connector.TxnUnknown, nil
	}
	for _, o := range h.Objects {
		_, err := i.b.Stat(ctx, o.Staged)
		if err == nil {
			return connector.TxnPending, nil
		}
		if !errors.Is(err, blob.ErrNotFound) {
			return "", fmt.Errorf("staged object %s: %w", o.Staged, err)
		}
	}
	return connector.TxnCommitted, nil
}

// Staged lists the transactions with objects under the sink's staging
// directory.
func (i inspector) Staged(ctx context.Context, snk *spec.Sink) ([]string, error) {
	dir := layout.StagingPrefix(snk.Path)
	objs, err := i.b.List(ctx, dir)
	if err != nil {
		return nil, err // it names the directory and the store
	}
	var ids []string
	for _, o := range objs {
		id, _, ok := layout.ParseStagedKey(snk.Path, o.Key)
		if ok && (len(ids) == 0 || ids[len(ids)-1] != id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func (inspector) Close() error { return nil }
