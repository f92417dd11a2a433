package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/coordinator"
)

// jobsScaleCmd changes the parallelism of a running job in place.
func (a *app) jobsScaleCmd() *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "scale JOB NAME=N [NAME=N...]",
		Short: "Change the parallelism of a running job in place: a vertex (its operators and sinks) or one operator or sink to N subtasks",
		Long: `Change the parallelism of a running, checkpointing job without a savepoint
or a stop: the job restarts at once as a new attempt at the new
parallelism, restored from a checkpoint taken first, with its keyed state
redistributed by key group, exactly-once. NAME is a vertex of the job
(weir jobs status lists them; every operator and sink of its chain takes
N) or one operator or sink (its chain splits if N differs from its
neighbours'). Sources rescale too (each is a set of splits: redis
streams, files objects, datagen and nexmark blocks of events), up to
their splits. N is at most the job's
maxParallelism (its key groups). It prints each vertex that changed; with
--wait it returns once the job runs again at the new parallelism. A job
that is starting or restarting refuses a rescale (exit 1); with --wait the
command asks again until the job runs.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			to := map[string]int{}
			for _, arg := range args[1:] {
				name, val, ok := strings.Cut(arg, "=")
				n, err := strconv.Atoi(val)
				if !ok || name == "" || err != nil {
					return &exitError{code: 2, err: fmt.Errorf("%q: want NAME=N, a vertex, operator or sink and its new parallelism, as in window=4", arg)}
				}
				to[name] = n
			}
			body, _ := json.Marshal(to)
			var resp coordinator.ScaleResponse
			post := func() error {
				return a.client().do(cmd.Context(), http.MethodPost, "/api/v1/jobs/"+url.PathEscape(args[0])+"/scale", body, &resp)
			}
			if wait {
				post = a.untilRunning(cmd.Context(), args[0], "rescale", post)
			}
			if err := post(); err != nil {
				return err
			}
			if wait {
				if err := a.waitRunning(cmd.Context(), args[0], resp.Attempt); err != nil {
					return err
				}
			}
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, resp)
			}
			changed := false
			for _, v := range slices.Sorted(maps.Keys(resp.After)) {
				if b, ok := resp.Before[v]; !ok || b != resp.After[v] {
					from := "new"
					if ok {
						from = strconv.Itoa(b)
					}
					fmt.Fprintf(a.stdout, "%s %s -> %d\n", v, from, resp.After[v])
					changed = true
				}
			}
			if !changed {
				fmt.Fprintf(a.stdout, "%s: nothing to change\n", args[0])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "ask again while the job restarts, and return once it runs again at the new parallelism (exit 1 if it ended meanwhile)")
	return cmd
}

// untilRunning returns do made to ask again while job id refuses it for
// its state now (starting or restarting), every waitPoll until ctx ends;
// it says so on stderr once.
func (a *app) untilRunning(ctx context.Context, id, what string, do func() error) func() error {
	return func() error {
		said := false
		for {
			err := do()
			if !retryLater(err) {
				return err
			}
			if !said {
				fmt.Fprintf(a.stderr, "weir: %s; the %s waits for the job to run\n", err, what)
				said = true
			}
			select {
			case <-ctx.Done():
				return &exitError{code: 1, err: fmt.Errorf("%s of job %s: %w (last: %v)", what, id, ctx.Err(), err)}
			case <-time.After(waitPoll):
			}
		}
	}
}

// waitRunning polls job id until its attempt attempt (or a later one) is
// RUNNING; an ended job is an error.
func (a *app) waitRunning(ctx context.Context, id string, attempt int) error {
	c := a.client()
	for {
		var st coordinator.JobStatus
		err := c.do(ctx, http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id), nil, &st)
		switch {
		case err != nil && strings.Contains(err.Error(), "not found"):
			return &exitError{code: 1, err: err}
		case err == nil && isFinal(st.State):
			return &exitError{code: 1, err: fmt.Errorf("job %s ended %s while it rescaled: %s", id, st.State, st.Error+st.Message)}
		case err == nil && st.State == coordinator.JobRunning && st.Attempt >= attempt:
			return nil
		}
		select {
		case <-ctx.Done():
			return &exitError{code: 1, err: fmt.Errorf("wait for job %s to run again: %w", id, ctx.Err())}
		case <-time.After(waitPoll):
		}
	}
}

// jobsScalingCmd prints a job's autoscaling history.
func (a *app) jobsScalingCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "scaling JOB",
		Short: "The autoscaler's decisions for a job, oldest first: time, vertex, old -> new, busy, rates, backlog, predicted restart cost, reason",
		Long: `The autoscaler's decisions for a job whose spec turns autoscale on, oldest
first, each with what it was based on: the busiest subtask's busy share,
the records per busy second of one subtask (TRUE RATE), the rate the
vertex receives and must sustain (the sources' input plus their backlog
over catchUp), the backlog carried to it, and the predicted cost of a
restart. A decision not to act is listed when it first differs from the
one before it, and again every 30s. -o json has every field.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var st coordinator.JobStatus
			if err := a.client().do(cmd.Context(), http.MethodGet, "/api/v1/jobs/"+url.PathEscape(args[0]), nil, &st); err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				if st.Scaling == nil {
					st.Scaling = []coordinator.ScalingDecision{}
				}
				return writeJSON(a.stdout, st.Scaling)
			}
			if len(st.Scaling) == 0 {
				fmt.Fprintf(a.stdout, "%s: no autoscaling decisions (autoscale is off in its spec, or it has not run yet)\n", args[0])
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tVERTEX\tACTION\tBUSY\tTRUE RATE/s\tIN/s\tREQUIRED/s\tBACKLOG\tRESTART\tREASON")
			for _, d := range st.Scaling {
				action := fmt.Sprintf("%d -> %d", d.From, d.To)
				if d.Kind == "none" {
					action = fmt.Sprintf("stay %d", d.From)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.1fs\t%s\n", d.Time.Local().Format(time.TimeOnly), d.Vertex, action,
					d.Busy, d.TrueRate, d.InputRate, d.RequiredRate, d.Backlog, d.RestartSeconds, oneLine(d.Reason))
			}
			return tw.Flush()
		},
	}
}
