package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/coordinator"
)

// client talks to the coordinator's HTTP API.
type client struct {
	bases []string // every coordinator of --coordinator (comma-separated)
	http  *http.Client
}

func (a *app) client() *client {
	c := &client{http: &http.Client{}} // do bounds each request
	for _, b := range strings.Split(a.v.GetString("coordinator"), ",") {
		if b = strings.TrimRight(strings.TrimSpace(b), "/"); b != "" {
			c.bases = append(c.bases, b)
		}
	}
	if len(c.bases) == 0 {
		c.bases = []string{"http://127.0.0.1:8081"}
	}
	return c
}

// requestTimeout bounds one request: a read answers at once, but a
// deploy opens (and so compiles) the job's Wasm functions on the
// coordinator and a rescale or savepoint takes a checkpoint first, which
// under load take longer than 30 s.
func requestTimeout(method string) time.Duration {
	if method == http.MethodGet {
		return 30 * time.Second
	}
	return 2 * time.Minute
}

// apiError is an error the coordinator answered, with its message.
type apiError struct {
	msg        string
	retryLater bool // refused for the job's state now (coordinator.APIError)
}

func (e *apiError) Error() string { return e.msg }

// retryLater reports whether err is a refusal for the job's state now:
// the same request may succeed once the job runs again.
func retryLater(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.retryLater
}

// do sends a request and decodes a JSON response into out; an API error
// comes back as an *apiError carrying its message. With several coordinators
// it tries the next when one cannot be reached or answers 503 (a standby
// that knows no leader yet): the request was not carried out there.
func (c *client) do(ctx context.Context, method, path string, body []byte, out any) error {
	var resp *http.Response
	var errs []string
	for _, base := range c.bases {
		// Each coordinator gets the whole time (a paused one must not
		// eat the next one's); the response is read before do returns.
		rctx, cancel := context.WithTimeout(ctx, requestTimeout(method))
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, method, base+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		r, err := c.http.Do(req)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", base, err))
			continue
		}
		if r.StatusCode == http.StatusServiceUnavailable && len(c.bases) > 1 {
			msg, _ := io.ReadAll(r.Body)
			r.Body.Close()
			errs = append(errs, fmt.Sprintf("%s: %s", base, bytes.TrimSpace(msg)))
			continue
		}
		resp = r
		break
	}
	if resp == nil {
		return fmt.Errorf("reach coordinator at %s (is `weir coordinator` or `weir up` running? set --coordinator or WEIR_COORDINATOR)", strings.Join(errs, "; "))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var ae coordinator.APIError
		if json.Unmarshal(raw, &ae) == nil && ae.Error != "" {
			return &apiError{msg: ae.Error, retryLater: ae.RetryLater}
		}
		return fmt.Errorf("coordinator answered %s: %s", resp.Status, bytes.TrimSpace(raw))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("decode coordinator response: %w", err)
		}
	}
	return nil
}

func (a *app) deployCmd() *cobra.Command {
	var fromSavepoint string
	var parallelism int
	var wait bool
	cmd := &cobra.Command{
		Use:   "deploy SPEC.yaml",
		Short: "Validate a job spec and deploy it to the coordinator; prints the job id",
		Long: `Validate a job spec and deploy it to the coordinator; prints the job id.

With --from-savepoint the job starts from a savepoint's (or a checkpoint's)
state and source positions: jobs/<job>/savepoints/<name>/manifest.json as
weir savepoint printed it. --parallelism restores at another parallelism:
key groups are redistributed over the new subtasks (sources keep theirs).

With --wait it waits for the job to end and exits 0 if it FINISHED, 1 if
it FAILED, 3 if it was canceled.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			// Validate here first, so problems name this file and its
			// lines; the coordinator validates again (and plans the
			// deployed functions it pins) before it stores.
			if _, err := checkSpec(data, args[0]); err != nil {
				return &exitError{code: 2, err: err}
			}
			q := url.Values{"file": {args[0]}}
			if fromSavepoint != "" {
				q.Set("fromSavepoint", fromSavepoint)
			}
			if parallelism != 0 {
				q.Set("parallelism", fmt.Sprint(parallelism))
			}
			var resp coordinator.SubmitResponse
			if err := a.client().do(cmd.Context(), http.MethodPost, "/api/v1/jobs?"+q.Encode(), data, &resp); err != nil {
				return &exitError{code: 1, err: err}
			}
			if wait {
				fmt.Fprintln(a.stderr, resp.ID)
				st, err := a.waitEnd(cmd.Context(), resp.ID)
				if err != nil {
					return &exitError{code: 1, err: err}
				}
				return a.reportEnd(st, coordinator.JobFinished)
			}
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, resp)
			}
			fmt.Fprintln(a.stdout, resp.ID)
			return nil
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the job to end; the exit status says how it ended")
	cmd.Flags().StringVar(&fromSavepoint, "from-savepoint", "", "start from this savepoint manifest (bucket key)")
	cmd.Flags().IntVar(&parallelism, "parallelism", 0, "default parallelism of the job's operators (restoring rescales)")
	return cmd
}

// savepointCmd takes a savepoint of a running job.
func (a *app) savepointCmd() *cobra.Command {
	var progressMode string
	cmd := &cobra.Command{
		Use:   "savepoint JOB",
		Short: "Take a savepoint: a self-contained snapshot under jobs/<job>/savepoints/ that no retention deletes; prints its manifest key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp coordinator.SavepointResponse
			if err := a.whileSavepoint(progressMode, args[0], func() error {
				return a.client().do(cmd.Context(), http.MethodPost, "/api/v1/jobs/"+url.PathEscape(args[0])+"/savepoint", nil, &resp)
			}); err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, resp)
			}
			fmt.Fprintln(a.stdout, resp.Savepoint)
			return nil
		},
	}
	cmd.Flags().StringVar(&progressMode, "progress", progressAuto, progressUsage)
	return cmd
}

// stopCmd drains a job, or stops it with a savepoint.
func (a *app) stopCmd() *cobra.Command {
	var withSavepoint, wait bool
	var progressMode string
	cmd := &cobra.Command{
		Use:   "stop JOB",
		Short: "Drain a job (sources end early, the last windows fire, sinks flush, the job FINISHES), or with --savepoint take a savepoint and stop it there (FINISHED too)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/api/v1/jobs/" + url.PathEscape(args[0]) + "/stop"
			// A job that is restarting refuses a stop for now; --wait
			// asks again until it runs.
			retry := func(do func() error) func() error {
				if !wait {
					return do
				}
				return a.untilRunning(cmd.Context(), args[0], "stop", do)
			}
			if !withSavepoint {
				var st coordinator.JobStatus
				if err := retry(func() error { return a.client().do(cmd.Context(), http.MethodPost, path, nil, &st) })(); err != nil {
					return err
				}
				if wait {
					return a.waitFor(cmd.Context(), st.ID, coordinator.JobFinished)
				}
				fmt.Fprintf(a.stdout, "%s %s\n", st.ID, st.State)
				return nil
			}
			var resp coordinator.SavepointResponse
			if err := a.whileSavepoint(progressMode, args[0], retry(func() error {
				return a.client().do(cmd.Context(), http.MethodPost, path+"?savepoint=true", nil, &resp)
			})); err != nil {
				return err
			}
			if a.v.GetString("output") == "json" && !wait {
				return writeJSON(a.stdout, resp)
			}
			fmt.Fprintln(a.stdout, resp.Savepoint)
			if wait {
				return a.waitFor(cmd.Context(), args[0], coordinator.JobFinished)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&withSavepoint, "savepoint", false, "take a savepoint, then stop there (the job ends FINISHED, like Flink's stop-with-savepoint); deploy the spec again with --from-savepoint to continue")
	cmd.Flags().BoolVar(&wait, "wait", false, "ask again while the job restarts, then wait until it FINISHED (exit 0; 1 if it FAILED, 3 if it ended otherwise)")
	cmd.Flags().StringVar(&progressMode, "progress", progressAuto, progressUsage)
	return cmd
}

// waitFor waits for job id to end and reports it; nil if it ended want.
func (a *app) waitFor(ctx context.Context, id, want string) error {
	st, err := a.waitEnd(ctx, id)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	return a.reportEnd(st, want)
}

func (a *app) jobsCmd() *cobra.Command {
	jobs := &cobra.Command{Use: "jobs", Short: "List, inspect and cancel jobs"}
	jobs.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var list []coordinator.JobStatus
			if err := a.client().do(cmd.Context(), http.MethodGet, "/api/v1/jobs", nil, &list); err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tCREATED\tEVENTS IN\tROWS OUT")
			for _, j := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", j.ID, j.State, j.Created.Local().Format(time.DateTime), j.Totals.RecordsIn, j.Totals.SinkIn)
			}
			return tw.Flush()
		},
	})
	jobs.AddCommand(a.jobsStatusCmd())
	jobs.AddCommand(a.jobActionCmd("cancel", "Cancel a job at once: tasks stop, buffered output is dropped", coordinator.JobCanceled))
	jobs.AddCommand(&cobra.Command{
		Use:   "delete ID",
		Short: "Delete an ended job's spec, status, checkpoints and state from the store (its savepoints and sink output stay)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client().do(cmd.Context(), http.MethodDelete, "/api/v1/jobs/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s deleted\n", args[0])
			return nil
		},
	})
	jobs.AddCommand(a.stopCmd())
	jobs.AddCommand(a.jobsUpgradeCmd())
	jobs.AddCommand(a.jobsScaleCmd(), a.jobsScalingCmd())
	return jobs
}

// jobActionCmd posts /api/v1/jobs/ID/<action> and prints the job's
// state; with --wait it waits for the job to end (in want: exit 0).
func (a *app) jobActionCmd(action, short, want string) *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   action + " ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var st coordinator.JobStatus
			if err := a.client().do(cmd.Context(), http.MethodPost, "/api/v1/jobs/"+url.PathEscape(args[0])+"/"+action, nil, &st); err != nil {
				return err
			}
			if wait {
				return a.waitFor(cmd.Context(), args[0], want)
			}
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, st)
			}
			fmt.Fprintf(a.stdout, "%s %s\n", st.ID, st.State)
			return nil
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, fmt.Sprintf("wait for the job to end: exit 0 if %s, 1 if FAILED, 3 otherwise", want))
	return cmd
}

func (a *app) printStatus(st coordinator.JobStatus) { printStatusTo(a.stdout, st) }

func printStatusTo(w io.Writer, st coordinator.JobStatus) {
	fmt.Fprintf(w, "job %s (%s): %s, attempt %d, restarts %d\n", st.ID, st.Name, st.State, st.Attempt, st.Restarts)
	if st.Error != "" {
		fmt.Fprintf(w, "error: %s\n", st.Error)
	}
	if st.Message != "" {
		fmt.Fprintf(w, "ended: %s\n", st.Message)
	}
	// The newest few failures, newest first; -o json has them all.
	if n := len(st.Exceptions); n > 0 {
		const shown = 3
		fmt.Fprintf(w, "exceptions (newest %d of %d):\n", min(n, shown), n)
		for i := n - 1; i >= max(n-shown, 0); i-- {
			e := st.Exceptions[i] // its error names the task, if one failed
			fmt.Fprintf(w, "  %s attempt %d: %s\n", e.Time.UTC().Format(time.RFC3339), e.Attempt, e.Error)
		}
	}
	fmt.Fprintf(w, "events in %d, rows to sinks %d, dead letters %d, late %d (dropped %d)\n",
		st.Totals.RecordsIn, st.Totals.SinkIn, st.Totals.DeadLetters, st.Totals.LateSide+st.Totals.LateDropped, st.Totals.LateDropped)
	if sp := st.Savepoint; sp != nil {
		fmt.Fprintln(w, savepointProgress(*sp))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// Per second like Flink's busyTimeMsPerSecond (of each second, ms
	// busy / waiting for credit / idle); -o json has the cumulative
	// seconds too.
	fmt.Fprintln(tw, "VERTEX\tSUBTASK\tWORKER\tSTATE\tIN\tOUT\tIN/s\tOUT/s\tBUSY ms/s\tBACKPRESSURED ms/s\tIDLE ms/s")
	for _, v := range st.Vertices {
		for _, t := range v.Tasks {
			rates := "-\t-\t-\t-\t-"
			if r := t.Rates; r != nil {
				rates = fmt.Sprintf("%.0f\t%.0f\t%.0f\t%.0f\t%.0f", r.RecordsInPerSecond, r.RecordsOutPerSecond, r.BusyMsPerSecond, r.BackPressuredMsPerSecond, r.IdleMsPerSecond)
			}
			fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\t%d\t%d\t%s\n", strings.Join(v.Nodes, "->"), t.Subtask, v.Parallelism,
				t.Worker, taskState(t), t.Stats.RecordsIn, t.Stats.RecordsOut, rates)
		}
	}
	tw.Flush()
	first := true
	for _, v := range st.Vertices {
		for _, f := range v.Totals.Functions {
			if first {
				tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "FUNCTION\tOPERATOR\tCALLS\tROWS IN\tROWS OUT\tGUEST s\tHOST CALLS\tMEMORY")
				first = false
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.2f\t%d\t%s\n", f.Function, f.Operator, f.Calls, f.RowsIn, f.RowsOut, f.GuestSeconds, f.HostCalls, humanBytes(f.MemoryBytes))
		}
	}
	if !first {
		tw.Flush()
	}
}

func (a *app) jobsStatusCmd() *cobra.Command {
	var watch bool
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a job's state, vertices and tasks (--watch: redraw every second until it ends)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/api/v1/jobs/" + url.PathEscape(args[0])
			if watch {
				return a.watchStatus(cmd.Context(), path)
			}
			var st coordinator.JobStatus
			if err := a.client().do(cmd.Context(), http.MethodGet, path, nil, &st); err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, st)
			}
			a.printStatus(st)
			return nil
		},
	}
	cmd.Flags().BoolVar(&watch, "watch", false, "redraw the status every second (a live table) until the job ends or Ctrl-C")
	return cmd
}

// watchStatus redraws a job's status every second, in place (clear and
// home, so a terminal shows one live table), until the job ends; the last
// frame stays. A coordinator that does not answer for a moment (a
// failover) is shown and retried.
func (a *app) watchStatus(ctx context.Context, path string) error {
	c := a.client()
	for {
		var st coordinator.JobStatus
		err := c.do(ctx, http.MethodGet, path, nil, &st)
		var frame bytes.Buffer
		frame.WriteString("\x1b[H\x1b[2J")
		if err != nil {
			if strings.Contains(err.Error(), "not found") {
				return err
			}
			fmt.Fprintf(&frame, "%v\n", err)
		} else {
			printStatusTo(&frame, st)
		}
		fmt.Fprintf(&frame, "\n%s, every second; Ctrl-C to stop\n", time.Now().Format("15:04:05"))
		if _, werr := a.stdout.Write(frame.Bytes()); werr != nil {
			return werr
		}
		if err == nil && isFinal(st.State) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}
