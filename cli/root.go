// Package cli is the weir command. Main runs it; a user who adds Go
// functions builds their own binary with:
//
//	func main() {
//		functions.Register("my-func", functions.Definition{...})
//		cli.Main()
//	}
//
// Configuration comes from flags, then WEIR_* environment variables, then a
// config file (--config or WEIR_CONFIG, else the first of ./weir.yaml,
// ./weir.yml, ./weir.json, ~/.config/weir/config.yaml), then defaults. A
// config file sets only the keys in configKeys; any other is an error.
package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/weirstream/weir/exchange"

	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/offheap"
)

// Version is set at build time with -ldflags "-X github.com/weirstream/weir/cli.Version=...".
var Version = "dev"

// Commit and BuildDate are set by `make build` (-ldflags -X); without
// them weir version falls back to what the go command stamped, if any.
var Commit, BuildDate string

// exitError carries a process exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Main runs the weir command and exits.
func Main() {
	os.Exit(Execute(os.Args[1:], os.Stdout, os.Stderr))
}

// Execute runs the weir command with args and returns the exit status.
func Execute(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "weir:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "weir:", err)
	return 1
}

// app holds the configuration of one invocation.
type app struct {
	v      *viper.Viper
	stdout io.Writer
	stderr io.Writer
	// requests counts what every bucket this process opens sends to the
	// store; a coordinator's and a worker's /metrics export it.
	requests *blob.Requests
}

// blobOptions are the options of every bucket the command opens.
func (a *app) blobOptions() blob.Options {
	return blob.Options{S3Endpoint: a.v.GetString("s3-endpoint"), S3Region: a.v.GetString("s3-region"), Requests: a.requests}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	a := &app{v: viper.New(), stdout: stdout, stderr: stderr, requests: blob.NewRequests()}
	root := &cobra.Command{
		Use:           "weir",
		Short:         "weir is a stateful stream processor on Arrow, Redis and object storage",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if err := a.loadConfig(cmd); err != nil {
				return err
			}
			offheap.SetHugePages(a.v.GetBool("huge-pages"))
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// A bad flag is a usage error, exit 2 like an unknown command (set on
	// the root, cobra applies it to every subcommand).
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	pf := root.PersistentFlags()
	pf.String("config", "", "config file (default ./weir.yaml, ./weir.yml, ./weir.json or ~/.config/weir/config.yaml)")
	pf.String("store", "", "object store URL: s3://bucket/prefix or file:///path (default file://./weir-data)")
	pf.String("s3-endpoint", "", "S3 endpoint URL, e.g. http://127.0.0.1:9000 for MinIO (default: AWS_ENDPOINT_URL or AWS)")
	pf.String("s3-region", "", "S3 region (default: the AWS chain's, else us-east-1)")
	pf.String("redis-addr", "", "Redis address of the cluster, for up, coordinator and worker: host:port, or redis+cluster://host:port,host:port,... for a Redis Cluster (weir run and demo are always embedded)")
	pf.String("coordinator", "http://127.0.0.1:8081", "coordinator URL for client commands; several, comma-separated, are tried in turn")
	pf.StringP("output", "o", "text", "output format of read commands: text or json")
	pf.String("log-level", "info", "log level: debug, info, warn, error")
	pf.String("cluster", exchange.DefaultCluster, "cluster id: prefixes every Redis key, so clusters can share one Redis")
	pf.String("wasm-cache", "", "directory for compiled Wasm functions, of workers and coordinators (default <user cache dir>/weir/wasm)")
	pf.String("state-dir", "", "directory where workers keep the state of jobs with state: {backend: pebble} (default the system's temporary directory)")
	pf.Bool("huge-pages", false, "ask for transparent huge pages for the keyed state of windows, joins and process functions: cheaper lookups in a large state, but on some VMs its first writes cost more (docs/scaling.md)")
	for _, name := range configKeys {
		_ = a.v.BindPFlag(name, pf.Lookup(name))
	}
	root.AddCommand(
		a.demoCmd(), a.runCmd(), a.upCmd(), a.coordinatorCmd(), a.workerCmd(),
		a.deployCmd(), a.jobsCmd(), a.bucketCmd(), a.versionCmd(),
		a.savepointCmd(), a.stopCmd(),
		a.checkpointsCmd(), a.stateCmd(), a.txnCmd(), a.functionsCmd(), a.workersCmd(), a.savepointsCmd(),
	)
	root.CompletionOptions.HiddenDefaultCmd = false
	groupAll(root)
	return root
}

// groupAll makes every command below root that only holds subcommands a
// group (see group): an unknown subcommand is an error, not the help.
func groupAll(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
			group(c)
		}
		groupAll(c)
	}
}

// configKeys are the settings viper carries: the persistent flags bound to
// it, and so the only keys a config file may set. A command that binds
// another flag adds it here.
var configKeys = []string{"store", "s3-endpoint", "s3-region", "redis-addr", "cluster", "coordinator", "output", "log-level", "wasm-cache", "state-dir", "huge-pages"}

// configCandidates are the config files read when neither --config nor
// WEIR_CONFIG names one, first found wins. They are named in full: a bare
// "weir" in the working directory is usually the binary itself.
func configCandidates() []string {
	files := []string{"weir.yaml", "weir.yml", "weir.json"}
	if home, err := os.UserHomeDir(); err == nil {
		files = append(files, filepath.Join(home, ".config", "weir", "config.yaml"))
	}
	return files
}

func (a *app) loadConfig(cmd *cobra.Command) error {
	a.v.SetEnvPrefix("WEIR")
	a.v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	a.v.AutomaticEnv()
	file, _ := cmd.Flags().GetString("config")
	if file == "" {
		file = os.Getenv("WEIR_CONFIG")
	}
	if file == "" {
		for _, f := range configCandidates() {
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
				file = f
				break
			}
		}
	}
	if file != "" {
		if err := a.readConfigFile(file); err != nil {
			return err
		}
	}
	switch o := a.v.GetString("output"); o {
	case "text", "json":
	default:
		return fmt.Errorf("--output %q: want text or json", o)
	}
	return nil
}

// readConfigFile reads file (its format from its extension) into the
// config layer, refusing keys that no setting has.
func (a *app) readConfigFile(file string) error {
	fv := viper.New()
	fv.SetConfigFile(file)
	if err := fv.ReadInConfig(); err != nil {
		return fmt.Errorf("read config %s: %w", file, err)
	}
	accepted := slices.Sorted(slices.Values(configKeys))
	var unknown []string
	for _, k := range fv.AllKeys() { // nested keys come as "a.b", never accepted
		if slices.Contains(configKeys, k) {
			continue
		}
		msg := fmt.Sprintf("unknown key %q", k)
		if top, _, _ := strings.Cut(k, "."); slices.Contains(configKeys, top) {
			msg += fmt.Sprintf(" (%s takes a single value, not a mapping)", top)
		} else if s := spec.Suggest(k, configKeys); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		unknown = append(unknown, msg)
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("read config %s: %s; accepted: %s", file, strings.Join(unknown, ", "), strings.Join(accepted, ", "))
	}
	if err := a.v.MergeConfigMap(fv.AllSettings()); err != nil {
		return fmt.Errorf("read config %s: %w", file, err)
	}
	return nil
}

// wasmCache is where workers and coordinators keep compiled Wasm
// functions: --wasm-cache, else the user's cache directory, else none
// (memory only).
func (a *app) wasmCache() string {
	if d := a.v.GetString("wasm-cache"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "weir", "wasm")
	}
	return ""
}

func (a *app) logger() *slog.Logger { return a.loggerTo(a.stderr) }

// loggerTo is logger writing to w.
func (a *app) loggerTo(w io.Writer) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(a.v.GetString("log-level"))); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl}))
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the weir version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			commit, committed, modified := buildInfo()
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, map[string]any{"version": Version, "commit": commit, "built": committed, "modified": modified})
			}
			line := "weir " + Version
			if commit != "" {
				line += " (commit " + commit
				if modified {
					line += ", with local changes"
				}
				if committed != "" {
					line += ", built " + committed
				}
				line += ")"
			}
			fmt.Fprintln(a.stdout, line)
			return nil
		},
	}
}
