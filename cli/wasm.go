package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm"
	"github.com/weirstream/weir/functions/wasm/registry"
	"github.com/weirstream/weir/statestore/blob"
)

// The weir functions commands: Wasm functions deployed into the bucket
// (docs/wasm-abi.md). They ask the coordinator, or, when --store is given
// on the command line, work on that bucket themselves (the embedded mode:
// weir run --store ...).

func (a *app) functionsCmd() *cobra.Command {
	f := &cobra.Command{
		Use:   "functions",
		Short: "Deploy, list, describe and delete WebAssembly functions",
		Long: `Deploy, list, describe and delete user functions compiled to WebAssembly
(docs/wasm-abi.md). A job spec names a deployed function like a Go one,
function: NAME (the latest version when the job is deployed) or
function: NAME@VERSION; the job then runs that module on every restart.

The commands talk to the coordinator (--coordinator, WEIR_COORDINATOR).
With --store URL on the command line they work on that bucket directly
instead, for the embedded mode: a function deployed with
weir functions deploy --store file://DIR runs under weir run --store file://DIR.`,
	}
	f.AddCommand(a.functionsDeployCmd(), a.functionsListCmd(), a.functionsDescribeCmd(), a.functionsDeleteCmd())
	return f
}

// direct reports whether the command works on the bucket itself: --store
// was given on its command line.
func direct(cmd *cobra.Command) bool { return cmd.Flags().Changed("store") }

// openStoreRW opens the --store bucket for writing, creating a directory
// store that does not exist yet (deploy before the first run).
func (a *app) openStoreRW(ctx context.Context) (blob.Bucket, error) {
	b, err := blob.Open(ctx, a.v.GetString("store"), a.blobOptions())
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return b, nil
}

func (a *app) functionsDeployCmd() *cobra.Command {
	var memory string
	var timeout time.Duration
	var trusted bool
	cmd := &cobra.Command{
		Use:   "deploy NAME FILE.wasm",
		Short: "Check a WebAssembly module and store it as the next version of function NAME; prints the version and SHA-256",
		Long: `Check a WebAssembly module against the ABI (docs/wasm-abi.md: exports,
imports, weir_describe) and store it as the next version of function NAME.
Nothing is stored when the check fails. Deploying the bytes and limits of
the latest version again keeps that version.

NAME is a lower-case letter, then up to 62 lower-case letters, digits, '_'
or '-', and not the name of a Go function of the binary. --memory bounds an
instance's linear memory (64MiB, 512KiB or bytes; up to 4GiB), --timeout
one call of an export. --trusted compiles the module without the checks
that let a call be stopped at its deadline: Go modules run about twice as
fast, but a call that never returns then stops only with its worker.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, file := args[0], args[1]
			module, err := os.ReadFile(file)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			mem, err := spec.ParseSize(memory)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--memory: %w", err)}
			}
			if timeout <= 0 {
				return &exitError{code: 2, err: fmt.Errorf("--timeout %s: want a positive duration such as 5s", timeout)}
			}
			lim := wasm.Limits{Memory: mem, Timeout: timeout, Trusted: trusted}
			v, err := a.deployFunction(cmd, name, module, lim)
			if err != nil {
				return fmt.Errorf("deploy %s from %s: %w", name, file, err)
			}
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, v)
			}
			fmt.Fprintf(a.stdout, "%s version %d sha256 %s\n", v.Name, v.Version, v.SHA256)
			return nil
		},
	}
	cmd.Flags().StringVar(&memory, "memory", spec.FormatSize(wasm.DefaultMemory), "most linear memory an instance may have: 64MiB, 512KiB or bytes")
	cmd.Flags().DurationVar(&timeout, "timeout", wasm.DefaultTimeout, "deadline of one call of the module's exports")
	cmd.Flags().BoolVar(&trusted, "trusted", false, "run without deadline checks: faster, but a runaway call cannot be stopped")
	return cmd
}

func (a *app) deployFunction(cmd *cobra.Command, name string, module []byte, lim wasm.Limits) (registry.Version, error) {
	ctx := cmd.Context()
	if direct(cmd) {
		b, err := a.openStoreRW(ctx)
		if err != nil {
			return registry.Version{}, err
		}
		defer b.Close()
		return registry.Deploy(ctx, b, name, module, lim, time.Now())
	}
	q := url.Values{"memory": {strconv.FormatInt(lim.Memory, 10)}, "timeout": {lim.Timeout.String()}, "trusted": {strconv.FormatBool(lim.Trusted)}}
	var v registry.Version
	c := a.client()
	c.http.Timeout = 5 * time.Minute // the coordinator compiles the module to check it
	err := c.do(ctx, http.MethodPost, "/api/v1/functions/"+url.PathEscape(name)+"?"+q.Encode(), module, &v)
	return v, err
}

func (a *app) functionsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the deployed WebAssembly functions with their latest version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var fs []registry.Function
			if direct(cmd) {
				b, err := a.openStore(ctx)
				if err != nil {
					return err
				}
				defer b.Close()
				if fs, err = registry.List(ctx, b); err != nil {
					return err
				}
			} else if err := a.client().do(ctx, http.MethodGet, "/api/v1/functions", nil, &fs); err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				if fs == nil {
					fs = []registry.Function{}
				}
				return writeJSON(a.stdout, fs)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tLATEST\tVERSIONS\tSIZE\tMEMORY\tTIMEOUT\tCREATED\tDOC")
			for _, f := range fs {
				v := f.Latest
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", f.Name, v.Version, f.Versions, humanBytes(v.Size),
					spec.FormatSize(v.Memory), v.Timeout, formatTime(v.Created), oneLine(v.Describe.Doc))
			}
			return tw.Flush()
		},
	}
}

// functionDetail returns a function's versions and the jobs that pin it,
// from the coordinator or from the --store bucket (the stored jobs that
// have not ended).
func (a *app) functionDetail(cmd *cobra.Command, name string) (coordinator.FunctionDetail, error) {
	ctx := cmd.Context()
	if !direct(cmd) {
		var d coordinator.FunctionDetail
		err := a.client().do(ctx, http.MethodGet, "/api/v1/functions/"+url.PathEscape(name), nil, &d)
		return d, err
	}
	b, err := a.openStore(ctx)
	if err != nil {
		return coordinator.FunctionDetail{}, err
	}
	defer b.Close()
	return storedFunctionDetail(ctx, b, name)
}

func storedFunctionDetail(ctx context.Context, b blob.BucketReader, name string) (coordinator.FunctionDetail, error) {
	vs, err := registry.Versions(ctx, b, name)
	if err != nil {
		return coordinator.FunctionDetail{}, err
	}
	jobs, err := coordinator.StoredFunctionJobs(ctx, b, name)
	if err != nil {
		return coordinator.FunctionDetail{}, err
	}
	return coordinator.FunctionDetail{Name: name, Versions: vs, Jobs: jobs}, nil
}

func (a *app) functionsDescribeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a deployed function: what it reads and emits, every version, and the jobs that pin it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := a.functionDetail(cmd, args[0])
			if err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, d)
			}
			a.printFunction(d)
			return nil
		},
	}
}

func (a *app) printFunction(d coordinator.FunctionDetail) {
	w := a.stdout
	latest := d.Versions[len(d.Versions)-1]
	fmt.Fprintf(w, "function %s: %d version(s), latest %d\n", d.Name, len(d.Versions), latest.Version)
	if doc := latest.Describe.Doc; doc != "" {
		fmt.Fprintf(w, "doc:     %s\n", oneLine(doc))
	}
	fmt.Fprintf(w, "input:   %s\n", columnsText(latest.Describe.Input))
	fmt.Fprintf(w, "output:  %s\n", columnsText(latest.Describe.Output))
	if tc := latest.Describe.TimeColumn; tc != "" {
		fmt.Fprintf(w, "event time: %s\n", tc)
	}
	usedBy := map[int][]string{}
	for _, j := range d.Jobs {
		for _, v := range j.Versions {
			usedBy[v] = append(usedBy[v], j.ID)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSHA256\tSIZE\tMEMORY\tTIMEOUT\tABI\tCREATED\tJOBS")
	for _, v := range d.Versions {
		jobs := strings.Join(usedBy[v.Version], ", ")
		if jobs == "" {
			jobs = "-"
		}
		timeout := v.Timeout.String()
		if v.Trusted {
			timeout = "none (trusted)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", v.Version, v.SHA256[:min(12, len(v.SHA256))], humanBytes(v.Size),
			spec.FormatSize(v.Memory), timeout, v.ABI, formatTime(v.Created), jobs)
	}
	tw.Flush()
}

func columnsText(cols []spec.ModuleColumn) string {
	if len(cols) == 0 {
		return "-"
	}
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.Name + " " + c.Type
	}
	return strings.Join(parts, ", ")
}

func (a *app) functionsDeleteCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a deployed function: every version and module (refused while a job that has not ended pins it, unless --force)",
		Long: `Delete a deployed function: every version record and module. While a job
that has not ended pins one of its versions the delete is refused, naming
the jobs; with --force it goes ahead, and such a job fails when it next
loads the module (a restart, a recovery, a rescale). Version numbers are
not reused: deploying NAME again continues after the last one.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			d, err := a.deleteFunction(cmd, name, force)
			if err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, d)
			}
			fmt.Fprintf(a.stdout, "%s deleted (%d version(s))\n", name, len(d.Versions))
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete even while jobs that have not ended pin the function")
	return cmd
}

func (a *app) deleteFunction(cmd *cobra.Command, name string, force bool) (coordinator.FunctionDetail, error) {
	ctx := cmd.Context()
	if !direct(cmd) {
		path := "/api/v1/functions/" + url.PathEscape(name)
		if force {
			path += "?force=true"
		}
		var d coordinator.FunctionDetail
		err := a.client().do(ctx, http.MethodDelete, path, nil, &d)
		return d, err
	}
	b, err := a.openStore(ctx)
	if err != nil {
		return coordinator.FunctionDetail{}, err
	}
	defer b.Close()
	d, err := storedFunctionDetail(ctx, b, name)
	if err != nil {
		return coordinator.FunctionDetail{}, err
	}
	if len(d.Jobs) > 0 && !force {
		return coordinator.FunctionDetail{}, coordinator.InUseError(name, d.Jobs)
	}
	if err := registry.Delete(ctx, b, name); err != nil {
		return coordinator.FunctionDetail{}, err
	}
	return d, nil
}

func (a *app) jobsUpgradeCmd() *cobra.Command {
	var ref string
	cmd := &cobra.Command{
		Use:   "upgrade JOB --function NAME@VERSION",
		Short: "Move a job's operators to another version of a deployed function, keeping their state: savepoint, stop, start again from it",
		Long: `Move the operators of a running job that run deployed function NAME to
version VERSION (NAME alone: the latest), keeping their state: the
coordinator takes a savepoint, stops the job there and submits its spec
again from the savepoint with the new pin; it prints the new job's id and
the savepoint. A version whose output columns differ from the running one's
is refused before anything stops (the operators downstream are planned
against them), and so is one the job does not plan with.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ref == "" {
				return &exitError{code: 2, err: fmt.Errorf("--function: missing: want the version to run, as in --function zone-stats@3")}
			}
			c := a.client()
			c.http.Timeout = 5 * time.Minute // a savepoint, a stop and a submit
			var resp coordinator.UpgradeResponse
			path := "/api/v1/jobs/" + url.PathEscape(args[0]) + "/upgrade?" + url.Values{"function": {ref}}.Encode()
			if err := c.do(cmd.Context(), http.MethodPost, path, nil, &resp); err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, resp)
			}
			fmt.Fprintf(a.stdout, "upgraded %s: %s runs %s@%d from savepoint %s\n", args[0], resp.Job, resp.Function, resp.Version, resp.Savepoint)
			return nil
		},
	}
	cmd.Flags().StringVar(&ref, "function", "", "the version to run: NAME@VERSION, or NAME for the latest")
	return cmd
}

// pinSpec pins the deployed functions js names against bucket b
// (registry.Pin), with file:line in every problem.
func pinSpec(ctx context.Context, b blob.BucketReader, js *spec.Job, src specSource) error {
	err := registry.Pin(ctx, b, js)
	if ps, ok := spec.AsProblems(err); ok {
		return spec.WithLines(ps, src.data, src.file)
	}
	if err != nil {
		return fmt.Errorf("pin functions: %w", err)
	}
	return nil
}

// namesDeployed reports whether an operator of js names a function that is
// not a Go function of this binary: a deployed one (or a mistake), which
// only the bucket can tell, and whose output only its pin gives.
func namesDeployed(js *spec.Job) bool {
	for _, op := range js.Operators {
		if _, ok := functions.Lookup(op.Function); op.Function != "" && op.Module == nil && !ok {
			return true
		}
	}
	return false
}

// checkSpec parses a spec file and validates it as far as it can without
// the bucket: fully (parseSpec) unless it names deployed functions
// (namesDeployed), which are planned once pinned.
func checkSpec(data []byte, file string) (*spec.Job, error) {
	js, err := spec.Parse(data, file)
	if err != nil || namesDeployed(js) {
		return js, err
	}
	return parseSpec(data, file)
}
