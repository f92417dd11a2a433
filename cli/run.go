package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/worker"
)

func (a *app) runCmd() *cobra.Command {
	var duration time.Duration
	var progressMode string
	cmd := &cobra.Command{
		Use:   "run SPEC.yaml",
		Short: "Run one job in this process until it finishes (exit 0), fails (exit 1) or is interrupted",
		Long: `Run one job in this process: a coordinator and a worker share it, with the
in-process exchange and control plane, and the local store unless --store
says otherwise. It never joins a cluster: WEIR_REDIS_ADDR and redis-addr in a
config file are ignored, and --redis-addr is refused (weir deploy runs a job
on a cluster). Ctrl-C or --duration drains the job (sources end early, the last
windows fire, sinks flush); a second Ctrl-C, or a drain that takes over 30s,
cancels it. The exit status tells FINISHED (0) from FAILED (1); a cancelled
job exits 130. While it runs, a line on stderr (redrawn in place four times
a second, when stderr is a terminal or with --progress=always) shows the
records read, of how many when the sources know (a datagen or nexmark
count, the bytes of a files source's objects), rows to sinks, the rate and
the time so far.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := refuseCluster(cmd); err != nil {
				return err
			}
			show, err := wantProgress(progressMode, a.stderr)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			js, err := checkSpec(data, args[0])
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			var pr *progress
			if show {
				pr = newProgress(a.stderr)
			}
			return a.runEmbedded(cmd.Context(), js, specSource{data: data, file: args[0]}, duration, nil, pr)
		},
	}
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop the job after this long (0: run until it ends)")
	cmd.Flags().StringVar(&progressMode, "progress", progressAuto, progressUsage)
	return cmd
}

// parseSpec parses and fully validates a spec file, with file:line in
// every problem.
func parseSpec(data []byte, file string) (*spec.Job, error) {
	js, err := spec.Parse(data, file)
	if err != nil {
		return nil, err
	}
	if _, err := plan.Build(js); err != nil {
		if ps, ok := spec.AsProblems(err); ok {
			return nil, spec.WithLines(ps, data, file)
		}
		return nil, err
	}
	return js, nil
}

// specSource is the text a spec was parsed from, for file:line in
// problems found later.
type specSource struct {
	data []byte
	file string
}

// planSpec plans a (pinned) spec, with file:line in every problem.
func planSpec(js *spec.Job, src specSource) (*plan.Plan, error) {
	p, err := plan.Build(js)
	if ps, ok := spec.AsProblems(err); ok {
		return nil, spec.WithLines(ps, src.data, src.file)
	}
	return p, err
}

// view observes an embedded run: it is called once a second with the
// job's status, and gets the batches written to sinks.
type view interface {
	tap(sink string, b arrow.RecordBatch)
	update(st coordinator.JobStatus, final bool)
}

// runEmbedded runs one job on an in-process coordinator and worker, with
// the in-process exchange and control plane whatever redis-addr says. The

// embeddedHeartbeat is the embedded worker's heartbeat timeout.
const embeddedHeartbeat = 24 * time.Hour

// deployed functions the spec names are pinned against the store first.
// With pr the job's progress is drawn on it, and the log and messages
// that go to stderr go above it.
func (a *app) runEmbedded(parent context.Context, js *spec.Job, src specSource, duration time.Duration, v view, pr *progress) error {
	if parent == nil {
		parent = context.Background()
	}
	sigCtx, stopSignals := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	errOut := a.stderr
	if pr != nil {
		errOut = pr
	}
	log := a.loggerTo(errOut)
	e, err := a.openEnv(sigCtx, embedded)
	if err != nil {
		return err
	}
	defer e.close()

	if err := pinSpec(sigCtx, e.bucket, js, src); err != nil {
		return &exitError{code: 2, err: err}
	}
	p, err := planSpec(js, src)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	slots := 0 // slot sharing: the largest parallelism
	for _, vx := range p.Vertices {
		slots = max(slots, vx.Parallelism)
	}
	svcCtx, stopSvcs := context.WithCancel(context.Background())
	defer stopSvcs()
	coord := coordinator.New(coordinator.Config{Plane: e.plane, Bucket: e.bucket, Transport: e.transport, RedisAddr: e.connectorRedis, Logger: log, WasmCache: a.wasmCache()})
	// The embedded worker lives exactly as long as this process and its
	// coordinator: it cannot be lost, however starved of CPU the machine
	// is, so its heartbeat never lapses in practice.
	wcfg := worker.Config{ID: "embedded", Slots: slots, Plane: e.plane, Transport: e.transport,
		Bucket: e.bucket, RedisAddr: e.connectorRedis, Logger: log, WasmCache: a.wasmCache(), StateDir: a.v.GetString("state-dir"),
		HeartbeatTTL: embeddedHeartbeat}
	if v != nil {
		wcfg.Tap = v.tap
	}
	if pr != nil {
		wcfg.StatsInterval = progressEvery // counts as fresh as the line
	}
	w := worker.New(wcfg)
	g, gctx := errgroup.WithContext(svcCtx)
	g.Go(func() error { return coord.Run(gctx) })
	g.Go(func() error { return w.Run(gctx) })
	defer func() {
		stopSvcs()
		_ = g.Wait()
		if err := coord.Close(); err != nil {
			log.Warn("close coordinator", "err", err)
		}
	}()
	if err := waitForWorker(sigCtx, e, w.ID()); err != nil {
		return err
	}
	id, err := coord.Submit(sigCtx, js)
	if err != nil {
		return &exitError{code: 2, err: err}
	}

	stopProgress := func() {}
	if pr != nil {
		stopProgress = pr.follow(func(context.Context) (coordinator.JobStatus, bool) {
			st, err := coord.Status(id)
			return st, err == nil
		}, progressLine)
		defer stopProgress()
	}

	runCtx := sigCtx
	if duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(sigCtx, duration)
		defer cancel()
	}
	var st coordinator.JobStatus
	for {
		wctx, cancel := context.WithTimeout(runCtx, time.Second)
		st, err = coord.Wait(wctx, id)
		cancel()
		if err == nil {
			break
		}
		if runCtx.Err() != nil {
			break
		}
		if v != nil {
			v.update(st, false)
		}
	}
	if runCtx.Err() != nil && !isTerminal(st.State) {
		st = a.drain(coord, id, v, errOut)
	}
	if pr != nil {
		stopProgress()
		pr.end(progressLine(st, time.Now()))
	}
	if v != nil {
		v.update(st, true)
	} else {
		a.printSummary(st)
	}
	switch {
	case st.State == coordinator.JobFinished:
		return nil
	case st.State == coordinator.JobFailed:
		return &exitError{code: 1, err: fmt.Errorf("job %s failed: %s", id, st.Error)}
	case st.State == coordinator.JobCanceled:
		return &exitError{code: 130, err: fmt.Errorf("job %s cancelled", id)}
	}
	return &exitError{code: 1, err: fmt.Errorf("job %s ended in state %s", id, st.State)}
}

// drain stops a running job gracefully, and cancels it if the drain takes
// over 30s or a second interrupt comes.
func (a *app) drain(coord *coordinator.Coordinator, id string, v view, errOut io.Writer) coordinator.JobStatus {
	fmt.Fprintln(errOut, "weir: draining the job (Ctrl-C again to cancel)")
	hard, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(hard, 30*time.Second)
	defer cancel()
	if err := coord.Stop(ctx, id); err == nil {
		for ctx.Err() == nil {
			wctx, wcancel := context.WithTimeout(ctx, time.Second)
			st, err := coord.Wait(wctx, id)
			wcancel()
			if err == nil {
				return st
			}
			if v != nil {
				v.update(st, false)
			}
		}
	}
	_ = coord.Cancel(context.Background(), id)
	wctx, wcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer wcancel()
	st, _ := coord.Wait(wctx, id)
	return st
}

func isTerminal(s string) bool {
	return s == coordinator.JobFinished || s == coordinator.JobFailed || s == coordinator.JobCanceled
}

func waitForWorker(ctx context.Context, e *env, id string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ws, err := e.plane.Workers(ctx)
		if err == nil {
			for _, w := range ws {
				if w.ID == id {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("worker %s did not register: %v", id, err)
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (a *app) printSummary(st coordinator.JobStatus) {
	if a.v.GetString("output") == "json" {
		_ = writeJSON(a.stdout, st)
		return
	}
	d := st.Ended.Sub(st.Created).Round(time.Millisecond)
	fmt.Fprintf(a.stdout, "job %s %s in %s: %d events in, %d rows to sinks",
		st.ID, st.State, d, st.Totals.RecordsIn, st.Totals.SinkIn)
	if st.Totals.DeadLetters > 0 {
		fmt.Fprintf(a.stdout, ", %d dead letters", st.Totals.DeadLetters)
	}
	if st.Totals.LateDropped > 0 || st.Totals.LateSide > 0 {
		fmt.Fprintf(a.stdout, ", %d late (%d dropped)", st.Totals.LateSide+st.Totals.LateDropped, st.Totals.LateDropped)
	}
	fmt.Fprintln(a.stdout)
	if st.Error != "" {
		fmt.Fprintln(a.stdout, "error:", st.Error)
	}
}
