package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// Checkpoint statuses that only the store fallback of checkpoints list
// shows: a manifest Decode refuses.
const (
	checkpointCorrupt     = "CORRUPT"     // manifest.ErrCorrupt, or the manifest cannot be read
	checkpointUnsupported = "UNSUPPORTED" // manifest.ErrUnsupportedVersion: written by a newer weir
)

func (a *app) checkpointsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "checkpoints",
		Short: "List and inspect a job's checkpoints",
		Long: `List and inspect a job's checkpoints: the manifests under
jobs/<job>/checkpoints/<n>/manifest.json of the --store bucket
(docs/checkpoint-format.md). See also weir state dump and weir txn list.
explain asks the coordinator, which saw the acknowledgements arrive.`,
	}
	c.AddCommand(a.checkpointsListCmd(), a.checkpointsInspectCmd(), a.checkpointsExplainCmd())
	return c
}

// checkpointsExplainCmd says why a checkpoint took as long as it did.
func (a *app) checkpointsExplainCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "explain JOB N",
		Short: "Say why checkpoint N took as long as it did: the subtask that acknowledged last and where its time went (asks the coordinator)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d coordinator.CheckpointDetail
			if err := a.client().do(cmd.Context(), http.MethodGet, "/api/v1/jobs/"+url.PathEscape(args[0])+"/checkpoints/"+url.PathEscape(args[1]), nil, &d); err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, d)
			}
			fmt.Fprintln(a.stdout, d.Explanation)
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SUBTASK\tWORKER\tACKED AFTER\tWAITING\tALIGN\tSYNC\tCAPTURE\tUPLOAD\tUPLOADED\tLAST BARRIER FROM")
			for _, s := range d.Subtasks {
				wait := max(s.AckedMs-s.AlignMs-s.SyncMs-s.Capture()-s.AsyncMs, 0)
				fmt.Fprintf(tw, "%s[%d]\t%s\t%dms\t%dms\t%dms\t%dms\t%dms\t%dms\t%s\t%s\n", s.Vertex, s.Subtask, s.Worker, s.AckedMs, wait, s.AlignMs, s.SyncMs, s.Capture(), s.AsyncMs,
					humanBytes(s.UploadedBytes), cmp.Or(s.LastInput, "-"))
			}
			for _, m := range d.Missing {
				fmt.Fprintf(tw, "%s\t\tnot acknowledged\t\t\t\t\t\t\n", m)
			}
			return tw.Flush()
		},
	}
}

func (a *app) checkpointsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list JOB",
		Short: "List a job's checkpoints, newest first, and which are retained",
		Long: `List a job's checkpoints, newest first: status, when it was triggered, how
long it took, the bytes of state it uploaded (SIZE), the bytes of every state
file it references (STATE), how many subtasks acknowledged it, and whether
it is RETAINED: yes while its manifest is in the store (retention has not
removed it; a savepoint always is), so a job can restore from it.

The coordinator (--coordinator, WEIR_COORDINATOR) is asked first: it knows
checkpoints in progress and failed ones. Which of them are retained is read
from the store of the config file (else ./weir-data); when that cannot be
read, stderr says why ("retention unknown: ...") and RETAINED is "?". When
the coordinator cannot be reached, does not know the job, or has no history
of it (a restarted coordinator), the manifests in the store are read
instead: each is COMPLETED, or CORRUPT (with Decode's error) when it does
not decode, or UNSUPPORTED when a newer weir wrote it.

With --store (or WEIR_STORE) the store is read directly, and the
coordinator is not asked.

With -o json each checkpoint has "retained": true or false, or no
"retained" when it is unknown.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			explicit := cmd.Flags().Changed("store") || os.Getenv("WEIR_STORE") != ""
			list, err := a.listCheckpoints(cmd.Context(), args[0], explicit)
			if err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				if list == nil {
					list = []checkpointRow{}
				}
				return writeJSON(a.stdout, list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tTRIGGERED\tDURATION\tSIZE\tSTATE\tACKS\tRETAINED\tREASON")
			for _, c := range list {
				id := strconv.FormatInt(c.ID, 10)
				switch {
				case c.Savepoint:
					id += " (savepoint)"
				case c.Final:
					id += " (final)"
				}
				retained := "?"
				if c.Retained != nil {
					retained = map[bool]string{true: "yes", false: "no"}[*c.Retained]
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", id, c.Status, formatTime(c.Triggered),
					formatSeconds(c.Duration, c.Status), humanBytes(c.Bytes), humanBytes(c.StateSize), c.Acks, c.Tasks, retained, oneLine(c.Reason))
			}
			return tw.Flush()
		},
	}
}

// checkpointRow is one checkpoint of weir checkpoints list and whether
// its manifest is still in the store (nil: unknown).
type checkpointRow struct {
	coordinator.CheckpointInfo
	Retained *bool `json:"retained,omitempty"`
}

// listCheckpoints returns a job's checkpoints from the coordinator, or
// from the store when the coordinator cannot answer, or has no history of
// the job (a restarted coordinator remembers none) while the store has
// manifests. With explicitStore (--store, WEIR_STORE) only the store is
// read.
func (a *app) listCheckpoints(ctx context.Context, job string, explicitStore bool) ([]checkpointRow, error) {
	if explicitStore {
		b, err := a.openStore(ctx)
		if err != nil {
			return nil, err
		}
		defer b.Close()
		fmt.Fprintf(a.stderr, "weir: --store given: reading the checkpoints of %s from %s, without the coordinator (which alone knows checkpoints in progress and failed ones)\n", job, b.Describe())
		return storedRows(storeCheckpoints(ctx, b, job))
	}
	list, cerr := a.coordinatorCheckpoints(ctx, job)
	if cerr == nil && len(list) > 0 {
		return a.markRetained(ctx, job, list), nil
	}
	b, err := a.openStore(ctx)
	if err != nil {
		if cerr == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("%w; and %w", cerr, err)
	}
	defer b.Close()
	stored, err := storeCheckpoints(ctx, b, job)
	if cerr == nil {
		if err != nil || len(stored) == 0 {
			return nil, nil
		}
		fmt.Fprintf(a.stderr, "weir: the coordinator has no checkpoint history of %s (restarted?): these are the manifests in %s\n", job, b.Describe())
		return storedRows(stored, nil)
	}
	fmt.Fprintf(a.stderr, "weir: %v\nweir: reading the checkpoints of %s from %s instead\n", cerr, job, b.Describe())
	return storedRows(stored, err)
}

// storedRows makes rows of checkpoints read from the store: each has its
// manifest there, so each is retained.
func storedRows(list []coordinator.CheckpointInfo, err error) ([]checkpointRow, error) {
	if err != nil {
		return nil, err
	}
	rows := make([]checkpointRow, len(list))
	for i, c := range list {
		rows[i] = checkpointRow{CheckpointInfo: c, Retained: new(true)}
	}
	return rows, nil
}

// markRetained tells which of the coordinator's checkpoints still have
// their manifest in the store; when the store cannot say, stderr says why
// and every row's Retained is unknown.
func (a *app) markRetained(ctx context.Context, job string, list []coordinator.CheckpointInfo) []checkpointRow {
	rows := make([]checkpointRow, len(list))
	for i, c := range list {
		rows[i].CheckpointInfo = c
	}
	ids, err := a.retainedIDs(ctx, job)
	if err != nil {
		fmt.Fprintf(a.stderr, "weir: retention unknown: %v\n", err)
		return rows
	}
	for i, c := range list {
		rows[i].Retained = new(c.Savepoint || ids[c.ID]) // retention never removes a savepoint
	}
	return rows
}

// retainedIDs returns the checkpoints of job whose manifests are in the
// store; a store without the job is an error, as it is likely not the
// coordinator's.
func (a *app) retainedIDs(ctx context.Context, job string) (map[int64]bool, error) {
	b, err := a.openStore(ctx)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	keys, err := manifestKeys(ctx, b, job)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		_, err := b.Stat(ctx, layout.SpecKey(job))
		switch {
		case errors.Is(err, blob.ErrNotFound):
			return nil, fmt.Errorf("no job %s in %s, neither %s nor any checkpoint: is it the coordinator's store? (set store in the config file)", job, b.Describe(), layout.SpecKey(job))
		case err != nil:
			return nil, fmt.Errorf("stat %s in %s: %w", layout.SpecKey(job), b.Describe(), err)
		}
	}
	ids := make(map[int64]bool, len(keys))
	for _, k := range keys {
		ids[k.id] = true
	}
	return ids, nil
}

// coordinatorCheckpoints asks the coordinator for a job's checkpoint
// history.
func (a *app) coordinatorCheckpoints(ctx context.Context, job string) ([]coordinator.CheckpointInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var list []coordinator.CheckpointInfo
	if err := a.client().do(ctx, http.MethodGet, "/api/v1/jobs/"+url.PathEscape(job)+"/checkpoints", nil, &list); err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	return list, nil
}

// storeCheckpoints builds the checkpoint list of a job from its manifests
// in the bucket, newest first, with the numbers the coordinator reports.
func storeCheckpoints(ctx context.Context, b blob.BucketReader, job string) ([]coordinator.CheckpointInfo, error) {
	keys, err := manifestKeys(ctx, b, job)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		if _, err := b.Stat(ctx, layout.SpecKey(job)); errors.Is(err, blob.ErrNotFound) {
			return nil, fmt.Errorf("no job %s in %s: neither %s nor any checkpoint", job, b.Describe(), layout.SpecKey(job))
		}
	}
	list := make([]coordinator.CheckpointInfo, 0, len(keys))
	for _, k := range keys {
		info := coordinator.CheckpointInfo{ID: k.id}
		m, err := readManifestKey(ctx, b, k.key)
		switch {
		case errors.Is(err, manifest.ErrUnsupportedVersion):
			info.Status, info.Reason = checkpointUnsupported, err.Error()
		case err != nil:
			info.Status, info.Reason = checkpointCorrupt, err.Error()
		default:
			info = manifestInfo(m)
		}
		list = append(list, info)
	}
	return list, nil
}

// manifestInfo summarizes a manifest as the coordinator's history does.
func manifestInfo(m *manifest.Manifest) coordinator.CheckpointInfo {
	info := coordinator.CheckpointInfo{ID: m.Checkpoint, Attempt: m.Attempt, Status: coordinator.CheckpointCompleted,
		Savepoint: m.Savepoint, Final: m.Final, Triggered: m.Triggered, Duration: m.Completed.Sub(m.Triggered).Seconds()}
	for _, v := range m.Vertices {
		for _, s := range v.Subtasks {
			info.Acks++
			info.Tasks++
			info.Bytes += s.Metrics.UploadedBytes
			info.AlignMs = max(info.AlignMs, s.Metrics.AlignMs)
			info.SyncMs = max(info.SyncMs, s.Metrics.SyncMs)
			info.StepMs = max(info.StepMs, s.Metrics.StepMs)
			info.AsyncMs = max(info.AsyncMs, s.Metrics.AsyncMs)
			for _, f := range s.State {
				info.StateSize += f.Size
			}
		}
	}
	return info
}

func (a *app) checkpointsInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect JOB N",
		Short: "Show what checkpoint N of a job holds, from its manifest in the store",
		Long: `Show what checkpoint N of a job holds, read from
jobs/<job>/checkpoints/<N>/manifest.json in the store (no coordinator
needed): per vertex and subtask the key groups, the watermark, the state
files (key, kind, operator, size), what the checkpoint cost (alignment,
synchronous and asynchronous snapshot time, bytes uploaded), the source
positions and the sink transactions.

A sink transaction is "staged" while its output waits in the sink's staging
area (files: objects under <path>/_staging/<txn>/; redis: the list
weir:txn:{<stream>}:<txn>) and "committed" once the output is visible. Redis
transactions are checked only with --redis-addr (else "unknown").

With -o json it prints the manifest itself.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			job := args[0]
			n, err := parseCheckpointID(args[1])
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			b, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			m, raw, err := readManifest(ctx, b, job, n)
			if err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				_, err := a.stdout.Write(raw)
				return err
			}
			js, _ := loadJobSpec(ctx, b, job) // only to tell source and sink types; the handles tell sink types too
			tc := a.newTxnChecker(b, js)
			defer tc.close()
			return a.printManifest(ctx, m, tc)
		},
	}
}

func (a *app) printManifest(ctx context.Context, m *manifest.Manifest, tc *txnChecker) error {
	w := a.stdout
	var kind []string
	if m.Savepoint {
		kind = append(kind, "savepoint")
	}
	if m.Final {
		kind = append(kind, "final: the job's input was complete; no state to restore")
	}
	fmt.Fprintf(w, "checkpoint %d of job %s, attempt %d", m.Checkpoint, m.Job, m.Attempt)
	if len(kind) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(kind, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "manifest:        %s (version %d)\n", layout.ManifestKey(m.Job, m.Checkpoint), m.Version)
	fmt.Fprintf(w, "triggered:       %s\n", m.Triggered.Format(time.RFC3339Nano))
	fmt.Fprintf(w, "completed:       %s (%s)\n", m.Completed.Format(time.RFC3339Nano), m.Completed.Sub(m.Triggered).Round(time.Millisecond))
	fmt.Fprintf(w, "maxParallelism:  %d\n", m.MaxParallelism)
	fmt.Fprintf(w, "spec SHA-256:    %s\n", m.SpecSHA256)
	info := manifestInfo(m)
	fmt.Fprintf(w, "state:           %s in %d files (%s uploaded by this checkpoint)\n", humanBytes(info.StateSize), len(m.Files()), humanBytes(info.Bytes))
	for _, v := range m.Vertices {
		fmt.Fprintf(w, "\nvertex %s: parallelism %d", v.Name, v.Parallelism)
		if v.Keyed {
			fmt.Fprint(w, ", keyed")
		}
		fmt.Fprintln(w)
		for _, s := range v.Subtasks {
			kg := "-"
			if v.Keyed {
				kg = fmt.Sprintf("[%d, %d)", s.KeyGroupStart, s.KeyGroupEnd)
			}
			wm := "none"
			if s.Watermark != nil {
				wm = formatWatermark(*s.Watermark)
			}
			fmt.Fprintf(w, "  subtask %d: key groups %s, watermark %s\n", s.Index, kg, wm)
			fmt.Fprintf(w, "    metrics: align %dms, sync %dms, capture %dms (longest step %dms), async %dms, uploaded %s\n",
				s.Metrics.AlignMs, s.Metrics.SyncMs, s.Metrics.CaptureMs, s.Metrics.StepMs, s.Metrics.AsyncMs, humanBytes(s.Metrics.UploadedBytes))
			if len(s.State) > 0 {
				fmt.Fprintln(w, "    state files:")
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "      KEY\tKIND\tOPERATOR\tKEY GROUPS\tSIZE")
				for _, f := range s.State {
					fkg := "-"
					if v.Keyed {
						fkg = fmt.Sprintf("[%d, %d)", f.KeyGroupStart, f.KeyGroupEnd)
					}
					fmt.Fprintf(tw, "      %s\t%s\t%s\t%s\t%s\n", f.Segment(), f.Kind, f.Operator, fkg, humanBytes(f.Size))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if len(s.SourcePositions) > 0 {
				fmt.Fprintln(w, "    source positions:")
				for _, src := range slices.Sorted(maps.Keys(s.SourcePositions)) {
					fmt.Fprintf(w, "      %s: %s\n", src, tc.describePosition(src, s.SourcePositions[src]))
				}
			}
			if len(s.SinkTransactions) > 0 {
				fmt.Fprintln(w, "    sink transactions:")
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "      SINK\tTXN ID\tSTATE")
				for _, t := range s.SinkTransactions {
					st, err := tc.state(ctx, t)
					if err != nil {
						return err
					}
					if st == txnPending {
						st = "staged"
					}
					fmt.Fprintf(tw, "      %s\t%s\t%s\n", t.Sink, t.ID, st)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// openStore opens the --store bucket (default ./weir-data), and nothing
// else: the inspection commands only read it.
func (a *app) openStore(ctx context.Context) (blob.Bucket, error) {
	storeURL := a.v.GetString("store")
	if storeURL == "" {
		abs, err := filepath.Abs(defaultStore)
		if err != nil {
			return nil, err
		}
		storeURL = "file://" + abs
	}
	// Opening a directory store creates it; a command that only reads
	// should not leave an empty one behind a mistyped path.
	if dir, ok := strings.CutPrefix(storeURL, "file://"); ok || !strings.Contains(storeURL, "://") {
		if !ok {
			dir = storeURL
		}
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("open store %s: %w", storeURL, err)
		}
	}
	b, err := blob.Open(ctx, storeURL, a.blobOptions())
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return b, nil
}

func parseCheckpointID(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("checkpoint %q: want a checkpoint id, a whole number > 0 (weir checkpoints list JOB shows them)", s)
	}
	return n, nil
}

// manifestKey is the manifest of one checkpoint in the bucket.
type manifestKey struct {
	id  int64
	key string
}

// manifestKeys lists the checkpoint manifests of a job, newest first.
func manifestKeys(ctx context.Context, b blob.BucketReader, job string) ([]manifestKey, error) {
	prefix := layout.CheckpointsPrefix(job)
	objs, err := b.List(ctx, prefix)
	if err != nil {
		return nil, err // it names the prefix and the store
	}
	var keys []manifestKey
	for _, o := range objs {
		if j, id, ok := layout.ParseManifestKey(o.Key); ok && j == job {
			keys = append(keys, manifestKey{id: id, key: o.Key})
		}
	}
	slices.SortFunc(keys, func(x, y manifestKey) int { return cmp.Compare(y.id, x.id) })
	return keys, nil
}

// readManifestKey reads and decodes one manifest; errors name the key.
func readManifestKey(ctx context.Context, b blob.BucketReader, key string) (*manifest.Manifest, error) {
	m, _, err := readManifestRaw(ctx, b, key)
	return m, err
}

func readManifestRaw(ctx context.Context, b blob.BucketReader, key string) (*manifest.Manifest, []byte, error) {
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("read manifest %s: %w", key, err)
	}
	m, err := manifest.Decode(data)
	if err != nil {
		return nil, nil, fmt.Errorf("manifest %s: %w", key, err)
	}
	return m, data, nil
}

// readManifest reads checkpoint n of job; when it is missing the error
// names the checkpoints there are.
func readManifest(ctx context.Context, b blob.BucketReader, job string, n int64) (*manifest.Manifest, []byte, error) {
	key := layout.ManifestKey(job, n)
	m, raw, err := readManifestRaw(ctx, b, key)
	if errors.Is(err, blob.ErrNotFound) {
		keys, lerr := manifestKeys(ctx, b, job)
		if lerr != nil {
			return nil, nil, fmt.Errorf("%w (and %w)", err, lerr)
		}
		if len(keys) == 0 {
			return nil, nil, fmt.Errorf("checkpoint %d of job %s: no manifest %s in %s, and the job has no checkpoints there", n, job, key, b.Describe())
		}
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = strconv.FormatInt(k.id, 10)
		}
		return nil, nil, fmt.Errorf("checkpoint %d of job %s: no manifest %s in %s (retained checkpoints: %s)", n, job, key, b.Describe(), strings.Join(ids, ", "))
	}
	return m, raw, err
}

// loadJobSpec reads jobs/<job>/spec.json, the spec the coordinator stored.
func loadJobSpec(ctx context.Context, b blob.BucketReader, job string) (*spec.Job, error) {
	key := layout.SpecKey(job)
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read job spec %s: %w", key, err)
	}
	js := new(spec.Job)
	if err := json.Unmarshal(data, js); err != nil {
		return nil, fmt.Errorf("decode job spec %s: %w", key, err)
	}
	return js, nil
}

// humanBytes renders a byte count in binary units: 512 B, 1.5 KiB, 3.0 MiB.
func humanBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f := float64(n)
	for _, unit := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= 1024
		if f < 1024 || unit == "TiB" {
			return strconv.FormatFloat(f, 'f', 1, 64) + " " + unit
		}
	}
	return "" // unreachable
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05.000")
}

func formatSeconds(s float64, status string) string {
	if s == 0 && status != coordinator.CheckpointCompleted {
		return "-"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// formatWatermark renders an event time in milliseconds, with its UTC time
// when it is one.
func formatWatermark(ms int64) string {
	t := time.UnixMilli(ms).UTC()
	if t.Year() < 1970 || t.Year() > 9999 {
		return strconv.FormatInt(ms, 10)
	}
	return fmt.Sprintf("%d (%s)", ms, t.Format("2006-01-02T15:04:05.000Z"))
}

// oneLine keeps a table row on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
