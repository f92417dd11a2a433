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
parallelism, restored from its latest checkpoint with its keyed state
redistributed by key group, exactly-once. NAME is a vertex of the job
(weir jobs status lists them; every operator and sink of its chain takes
N) or one operator or sink (its chain splits if N differs from its
neighbours'). Sources keep their parallelism. N is at most the job's
maxParallelism (its key groups). It prints each vertex that changed; with
--wait it returns once the job runs again at the new parallelism.`,
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
			if err := a.client().do(cmd.Context(), http.MethodPost, "/api/v1/jobs/"+url.PathEscape(args[0])+"/scale", body, &resp); err != nil {
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
	cmd.Flags().BoolVar(&wait, "wait", false, "return once the job runs again at the new parallelism (exit 1 if it ended meanwhile)")
	return cmd
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
