package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/manifest"
)

// States of a sink transaction as the inspection commands report them.
const (
	txnCommitted = string(connector.TxnCommitted) // its output is visible (or it had none)
	txnPending   = string(connector.TxnPending)   // its output still waits in the sink's staging area
	txnOrphan    = "orphan"                       // staged, and in no retained manifest
	txnUnknown   = string(connector.TxnUnknown)   // cannot tell: a redis sink without --redis-addr, an unknown sink or handle
)

// txnRow is one line of weir txn list.
type txnRow struct {
	Sink string `json:"sink"`
	Type string `json:"type,omitempty"` // the sink's type: files, redis
	ID   string `json:"id"`
	// Checkpoints are the retained checkpoints whose manifests list the
	// transaction (a transaction of a checkpoint that did not complete is
	// carried into the next manifest); none for an orphan.
	Checkpoints []int64 `json:"checkpoints,omitempty"`
	State       string  `json:"state"`
}

func (a *app) txnCmd() *cobra.Command {
	t := &cobra.Command{Use: "txn", Short: "Inspect the sink transactions of a job's checkpoints"}
	t.AddCommand(&cobra.Command{
		Use:   "list JOB",
		Short: "List the sink transactions of a job's retained checkpoints, and staged ones no manifest lists",
		Long: `List the sink transactions of a job, read from the store: every transaction
the retained manifests (jobs/<job>/checkpoints/<n>/manifest.json) list, with
the checkpoints that list it and its state:

  committed  its output is visible: a files sink's staged objects are gone
             from <path>/_staging/<txn>/; a redis sink's committed marker
             weir:txn:{<stream>}:done:<txn> is set (or it had no rows)
  pending    its output still waits: staged objects, or the staging list
             weir:txn:{<stream>}:<txn>
  orphan     staged, but in no retained manifest: a checkpoint that did not
             complete, to be aborted when the job recovers or is cleaned
  unknown    cannot tell: a redis sink without --redis-addr, or neither a
             staging list nor a marker (aborted, or the marker expired)

The sinks' paths and streams come from the job spec, jobs/<job>/spec.json.
Redis is checked only when --redis-addr (WEIR_REDIS_ADDR) is set, at the
sink's own addr when the spec gives one.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			job := args[0]
			b, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			js, specErr := loadJobSpec(ctx, b, job)
			keys, err := manifestKeys(ctx, b, job)
			if err != nil {
				return err
			}
			if specErr != nil {
				if len(keys) == 0 && errors.Is(specErr, blob.ErrNotFound) {
					return fmt.Errorf("no job %s in %s: neither its spec nor any checkpoint", job, b.Describe())
				}
				fmt.Fprintf(a.stderr, "weir: %v: staged transactions that no manifest lists are not shown\n", specErr)
			}
			tc := a.newTxnChecker(b, js)
			defer tc.close()
			rows, err := a.listTxns(ctx, b, js, keys, tc)
			if err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				if rows == nil {
					rows = []txnRow{}
				}
				return writeJSON(a.stdout, rows)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SINK\tTXN ID\tCHECKPOINT\tSTATE")
			for _, r := range rows {
				cps := "-"
				if len(r.Checkpoints) > 0 {
					ids := make([]string, len(r.Checkpoints))
					for i, id := range r.Checkpoints {
						ids[i] = strconv.FormatInt(id, 10)
					}
					cps = strings.Join(ids, ",")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Sink, r.ID, cps, r.State)
			}
			return tw.Flush()
		},
	})
	return t
}

// listTxns gathers the transactions of the manifests at keys (newest
// first) and the staged ones no manifest lists.
func (a *app) listTxns(ctx context.Context, b blob.BucketReader, js *spec.Job, keys []manifestKey, tc *txnChecker) ([]txnRow, error) {
	type sinkTxn struct{ sink, id string }
	byID := map[sinkTxn]*txnRow{}
	var rows []*txnRow
	for i := len(keys) - 1; i >= 0; i-- { // oldest first: checkpoint lists ascend
		m, err := readManifestKey(ctx, b, keys[i].key)
		if err != nil {
			fmt.Fprintf(a.stderr, "weir: skipping checkpoint %d: %v\n", keys[i].id, err)
			continue
		}
		for _, v := range m.Vertices {
			for _, s := range v.Subtasks {
				for _, t := range s.SinkTransactions {
					k := sinkTxn{t.Sink, t.ID}
					if r := byID[k]; r != nil {
						if !slices.Contains(r.Checkpoints, m.Checkpoint) {
							r.Checkpoints = append(r.Checkpoints, m.Checkpoint)
						}
						continue
					}
					state, err := tc.state(ctx, t)
					if err != nil {
						return nil, err
					}
					r := &txnRow{Sink: t.Sink, Type: tc.sinkType(t), ID: t.ID, Checkpoints: []int64{m.Checkpoint}, State: state}
					byID[k] = r
					rows = append(rows, r)
				}
			}
		}
	}
	if js != nil {
		for _, s := range js.Effective().Sinks {
			staged, err := tc.staged(ctx, &s)
			if err != nil {
				return nil, err
			}
			for _, id := range staged {
				k := sinkTxn{s.Name, id}
				if byID[k] == nil {
					r := &txnRow{Sink: s.Name, Type: s.Type, ID: id, State: txnOrphan}
					byID[k] = r
					rows = append(rows, r)
				}
			}
		}
	}
	out := make([]txnRow, len(rows))
	for i, r := range rows {
		out[i] = *r
	}
	slices.SortStableFunc(out, func(x, y txnRow) int {
		if c := cmp.Compare(x.Sink, y.Sink); c != 0 {
			return c
		}
		if (len(x.Checkpoints) == 0) != (len(y.Checkpoints) == 0) {
			return cmp.Compare(len(y.Checkpoints), len(x.Checkpoints)) // orphans last
		}
		if len(x.Checkpoints) > 0 {
			if c := cmp.Compare(x.Checkpoints[0], y.Checkpoints[0]); c != 0 {
				return c
			}
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return out, nil
}

// txnChecker reads a job's source positions and sink transactions back
// through the connector registry: each sink type with transactions
// inspects its own (files sinks through the store, redis sinks through
// Redis when --redis-addr is set).
type txnChecker struct {
	env        connector.InspectEnv
	sources    map[string]spec.Source            // from the job spec; empty without one
	sinks      map[string]spec.Sink              // from the job spec; empty without one
	inspectors map[string]connector.TxnInspector // by sink type, opened when first needed
}

func (a *app) newTxnChecker(b blob.BucketReader, js *spec.Job) *txnChecker {
	tc := &txnChecker{
		env:     connector.InspectEnv{Bucket: b, RedisAddr: connectorRedisAddr(a.v.GetString("redis-addr")), RedisPassword: os.Getenv("WEIR_REDIS_PASSWORD")},
		sources: map[string]spec.Source{}, sinks: map[string]spec.Sink{}, inspectors: map[string]connector.TxnInspector{},
	}
	if js != nil {
		for _, s := range js.Sources {
			tc.sources[s.Name] = s
		}
		for _, s := range js.Sinks {
			tc.sinks[s.Name] = s
		}
	}
	return tc
}

func (tc *txnChecker) close() {
	for _, ins := range tc.inspectors {
		if ins != nil {
			_ = ins.Close()
		}
	}
}

// sinkType is the type of the sink a transaction belongs to: from the job
// spec, else from the shape of its handle.
func (tc *txnChecker) sinkType(t manifest.Txn) string {
	if s, ok := tc.sinks[t.Sink]; ok {
		return s.Type
	}
	return connector.SinkTypeOfHandle(t.Handle)
}

// inspector returns the inspector of a sink type, nil for a type without
// transactions or unknown.
func (tc *txnChecker) inspector(typ string) connector.TxnInspector {
	if ins, ok := tc.inspectors[typ]; ok {
		return ins
	}
	var ins connector.TxnInspector
	if t, ok := connector.LookupSink(typ); ok && t.Txn != nil {
		ins = t.Txn.Inspect(tc.env)
	}
	tc.inspectors[typ] = ins
	return ins
}

// state tells a transaction's state: txnCommitted, txnPending or
// txnUnknown.
func (tc *txnChecker) state(ctx context.Context, t manifest.Txn) (string, error) {
	ins := tc.inspector(tc.sinkType(t))
	if ins == nil {
		return txnUnknown, nil
	}
	var snk *spec.Sink
	if s, ok := tc.sinks[t.Sink]; ok {
		snk = &s
	}
	st, err := ins.State(ctx, snk, t.Handle)
	if err != nil {
		return "", fmt.Errorf("sink %s: transaction %s: %w", t.Sink, t.ID, err)
	}
	return string(st), nil
}

// staged lists the transactions with output in a sink's staging area; none
// for a sink without transactions.
func (tc *txnChecker) staged(ctx context.Context, s *spec.Sink) ([]string, error) {
	ins := tc.inspector(s.Type)
	if ins == nil {
		return nil, nil
	}
	return ins.Staged(ctx, s)
}

// describePosition renders a source's position as its type describes it.
func (tc *txnChecker) describePosition(source string, pos json.RawMessage) string {
	return connector.DescribePosition(tc.sources[source].Type, pos)
}
