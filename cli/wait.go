package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange/control"
)

// Exit statuses of the commands that wait for a job (--wait): 0 when the
// job ended as the command meant (FINISHED for deploy and stop, CANCELED
// for cancel), 1 when it FAILED or the coordinator could not be asked, 3
// when it ended otherwise (canceled while a deploy waited, say).
const (
	exitEndedOtherwise = 3
)

// waitPoll is how often a waiting command asks for the job's status.
const waitPoll = 250 * time.Millisecond

// waitEnd polls job id until it reaches a final state (through any of the
// --coordinator URLs, so a failover while waiting is only a pause) and
// returns its status.
func (a *app) waitEnd(ctx context.Context, id string) (coordinator.JobStatus, error) {
	c := a.client()
	var lastErr error
	for {
		var st coordinator.JobStatus
		err := c.do(ctx, http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id), nil, &st)
		switch {
		case err == nil:
			if isFinal(st.State) {
				return st, nil
			}
		case strings.Contains(err.Error(), "not found"):
			return st, err
		default:
			lastErr = err // a coordinator restarting or failing over: ask again
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return st, fmt.Errorf("wait for job %s: %w (last: %v)", id, ctx.Err(), lastErr)
			}
			return st, fmt.Errorf("wait for job %s: %w", id, ctx.Err())
		case <-time.After(waitPoll):
		}
	}
}

func isFinal(state string) bool {
	return state == coordinator.JobFinished || state == coordinator.JobFailed || state == coordinator.JobCanceled
}

// reportEnd prints a job's end and returns the exit status for it: nil
// when it ended in want.
func (a *app) reportEnd(st coordinator.JobStatus, want string) error {
	if a.v.GetString("output") == "json" {
		if err := writeJSON(a.stdout, st); err != nil {
			return err
		}
	} else {
		line := fmt.Sprintf("job %s %s: %d events in, %d rows to sinks", st.ID, st.State, st.Totals.RecordsIn, st.Totals.SinkIn)
		if !st.Started.IsZero() && !st.Ended.IsZero() {
			line += fmt.Sprintf(", %s", st.Ended.Sub(st.Started).Round(time.Millisecond))
		}
		if st.Restarts > 0 {
			line += fmt.Sprintf(", %d restarts", st.Restarts)
		}
		fmt.Fprintln(a.stdout, line)
	}
	switch {
	case st.State == want:
		return nil
	case st.State == coordinator.JobFailed:
		return &exitError{code: 1, err: fmt.Errorf("job %s FAILED: %s", st.ID, st.Error)}
	default:
		msg := st.Message
		if msg == "" {
			msg = "no reason given"
		}
		return &exitError{code: exitEndedOtherwise, err: fmt.Errorf("job %s ended %s, not %s: %s", st.ID, st.State, want, msg)}
	}
}

// workersCmd lists the cluster's live workers.
func (a *app) workersCmd() *cobra.Command {
	w := &cobra.Command{Use: "workers", Short: "The cluster's workers"}
	w.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the live workers: id, slots, and from the latest heartbeat tasks, CPU (cores), resident memory and its age; host, pid, start",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var ws []control.WorkerInfo
			if err := a.client().do(cmd.Context(), http.MethodGet, "/api/v1/workers", nil, &ws); err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				if ws == nil {
					ws = []control.WorkerInfo{}
				}
				return writeJSON(a.stdout, ws)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSLOTS\tTASKS\tCPU\tMEMORY\tHEARTBEAT\tHOST\tPID\tSTARTED")
			for _, w := range ws {
				usage := "-\t-\t-\t-"
				if u := w.Usage; u != nil {
					usage = fmt.Sprintf("%d\t%.2f\t%s\t%s ago", u.Tasks, u.CPUCores, humanBytes(u.RSSBytes), time.Since(u.At).Round(100*time.Millisecond))
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\n", w.ID, w.Slots, usage, w.Host, w.PID, w.Started.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	})
	return w
}

// group makes cmd a command that only holds subcommands: run alone it
// prints its help; with an argument that is no subcommand it fails,
// naming the argument and suggesting the nearest subcommands (cobra would
// print the help and exit 0, so a script would believe it worked).
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		err := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			err += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		return &exitError{code: 2, err: errors.New(err + "\n\nIts commands: " + strings.Join(names, ", "))}
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	return cmd
}

// buildInfo is the commit and build date set by `make build`, or else the
// commit and commit time the go command stamped (empty when built without
// version control information, e.g. with -buildvcs=false).
func buildInfo() (commit, built string, modified bool) {
	if Commit != "" {
		return Commit, BuildDate, false
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.time":
			built = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return commit, built, modified
}
