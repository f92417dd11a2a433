package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/deploy/local"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/worker"
)

// nodeOptions are the flags of a coordinator of a cluster with standbys.
type nodeOptions struct {
	id, advertise string
	leaseTTL      time.Duration
}

func (a *app) coordinatorCmd() *cobra.Command {
	var listen string
	var opts nodeOptions
	cmd := &cobra.Command{
		Use:   "coordinator",
		Short: "Run a coordinator: job API on --listen, workers through Redis; any number per cluster, one leads",
		Long: `Run a coordinator of the cluster. Any number may run against the same Redis
and store: one leads (it holds a lease in Redis, renewed every third of
--lease-ttl), the others are standbys that forward API requests to the
leader and take over when its lease lapses, or at once when its process
dies. Each leadership has an epoch; a deposed leader's commands, manifests
and status writes are fenced by it (docs/architecture.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return a.serveCoordinator(ctx, listen, opts, nil)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8081", "address of the HTTP API")
	cmd.Flags().StringVar(&opts.id, "id", "", "coordinator id (default <host>-<pid>)")
	cmd.Flags().StringVar(&opts.advertise, "advertise", "", "URL standbys forward API requests to while this coordinator leads (default http://<the --listen address>)")
	cmd.Flags().DurationVar(&opts.leaseTTL, "lease-ttl", coordinator.DefaultLeaseTTL,
		"how long a leader that stopped renewing its lease (paused, cut off from Redis) keeps it before a standby takes over")
	return cmd
}

// serveCoordinator runs a coordinator node (a standby until it leads) and
// its HTTP API until ctx is done. ready, if set, gets the address it
// listens on.
func (a *app) serveCoordinator(ctx context.Context, listen string, opts nodeOptions, ready chan<- string) error {
	log := a.logger()
	e, err := a.openEnv(ctx, cluster)
	if err != nil {
		return err
	}
	defer e.close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	if opts.id == "" {
		host, _ := os.Hostname()
		opts.id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if opts.advertise == "" {
		opts.advertise = "http://" + ln.Addr().String()
	}
	node := coordinator.NewNode(coordinator.NodeConfig{
		Coordinator: coordinator.Config{Plane: e.plane, Bucket: e.bucket, Transport: e.transport, RedisAddr: e.connectorRedis, Logger: log, WasmCache: a.wasmCache()},
		Leases:      e.plane, ID: opts.id, API: opts.advertise, LeaseTTL: opts.leaseTTL,
		NewRegistry: func() *prometheus.Registry {
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), a.requests)
			return reg
		},
	})
	srv := &http.Server{Handler: node.Handler(), ReadHeaderTimeout: 10 * time.Second}
	log.Info("coordinator listening", "addr", ln.Addr().String(), "id", opts.id, "store", e.storeDesc, "redis", e.redisAddr)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return node.Run(gctx) })
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return g.Wait()
}

func (a *app) workerCmd() *cobra.Command {
	var slots int
	var id string
	var heartbeat time.Duration
	var metricsAddr string
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker that offers --slots task slots to the coordinator (through Redis)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			e, err := a.openEnv(ctx, cluster)
			if err != nil {
				return err
			}
			defer e.close()
			w := worker.New(worker.Config{ID: id, Slots: slots, Plane: e.plane, Transport: e.transport,
				Bucket: e.bucket, RedisAddr: e.connectorRedis, Logger: a.logger(), WasmCache: a.wasmCache(), StateDir: a.v.GetString("state-dir"),
				HeartbeatTTL: heartbeat})
			if metricsAddr == "" {
				return w.Run(ctx)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), w.Collector(), a.requests)
			return serveWith(ctx, metricsAddr, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), a.logger(), w.Run)
		},
	}
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics (the running tasks' weir_task_* families) on this address at /metrics, and GET /healthz")
	cmd.Flags().IntVar(&slots, "slots", 4, "subtasks this worker runs at once")
	cmd.Flags().StringVar(&id, "id", "", "worker id (default <host>-<pid>)")
	cmd.Flags().DurationVar(&heartbeat, "heartbeat-timeout", worker.DefaultHeartbeatTimeout,
		"how long a slow or paused worker stays live without a heartbeat (a worker whose process dies is noticed within a second)")
	return cmd
}

// serveWith runs run and an HTTP server of h (at /metrics) on addr until
// ctx is done or run returns. GET /healthz answers ok while the process
// serves, for a liveness probe.
func serveWith(ctx context.Context, addr string, h http.Handler, log *slog.Logger, run func(context.Context) error) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("metrics listening", "addr", ln.Addr().String())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		return run(gctx)
	})
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	return g.Wait()
}

func (a *app) upCmd() *cobra.Command {
	var workers, minWorkers, maxWorkers, slots int
	var heartbeat, leaseTTL, scaleDownDelay time.Duration
	var listen string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a coordinator and worker processes on this machine, as many as the jobs need (needs Redis)",
		Long: `Run a coordinator in this process and worker child processes, restarting a
worker that exits. Workers follow the jobs: once a second weir up reads the
slots the coordinator's jobs want (GET /api/v1/cluster) and runs as many
workers of --slots slots as they need, at least --min-workers and at most
--max-workers; it starts them all at once, and stops an idle one (no tasks)
at a time once a surplus has lasted --scale-down-delay. --workers N alone
runs N workers, as min and max. Redis (--redis-addr) carries data and
control between them; the store (--store) is shared. Stop with Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if a.v.GetString("redis-addr") == "" {
				return errors.New("weir up needs Redis: set --redis-addr or WEIR_REDIS_ADDR (make dev-up starts one on 127.0.0.1:6379)")
			}
			fl := cmd.Flags()
			if !fl.Changed("min-workers") {
				minWorkers = workers
				if fl.Changed("max-workers") {
					minWorkers = min(workers, maxWorkers)
				}
			}
			if !fl.Changed("max-workers") {
				maxWorkers = max(workers, minWorkers)
			}
			fc := local.FollowConfig{Min: minWorkers, Max: maxWorkers, SlotsPerWorker: slots, ScaleDownDelay: scaleDownDelay, Logger: a.logger()}
			if err := fc.Validate(); err != nil {
				return fmt.Errorf("weir up --min-workers %d --max-workers %d --slots %d --scale-down-delay %s: %w", minWorkers, maxWorkers, slots, scaleDownDelay, err)
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			host, _ := os.Hostname()
			sup := local.NewSupervisor(local.Config{
				Binary:   self,
				Args:     []string{"worker", "--slots", fmt.Sprint(slots), "--heartbeat-timeout", heartbeat.String()},
				Env:      a.childEnv(),
				IDPrefix: fmt.Sprintf("%s-up%d", host, os.Getpid()),
				Logger:   a.logger(),
				Stdout:   a.stderr, Stderr: a.stderr,
			})
			ready := make(chan string, 1)
			g, gctx := errgroup.WithContext(ctx)
			g.Go(func() error { return sup.Run(gctx) })
			g.Go(func() error { return a.serveCoordinator(gctx, listen, nodeOptions{leaseTTL: leaseTTL}, ready) })
			g.Go(func() error {
				select {
				case <-gctx.Done():
					return nil
				case addr := <-ready:
					c := &client{bases: []string{"http://" + addr}, http: &http.Client{Timeout: 5 * time.Second}}
					return local.Follow(gctx, sup, apiCluster{c}, fc)
				}
			})
			return g.Wait()
		},
	}
	cmd.Flags().DurationVar(&heartbeat, "heartbeat-timeout", worker.DefaultHeartbeatTimeout, "the workers' --heartbeat-timeout")
	cmd.Flags().DurationVar(&leaseTTL, "lease-ttl", coordinator.DefaultLeaseTTL, "the coordinator's --lease-ttl (another weir coordinator started beside it is a standby)")
	cmd.Flags().IntVar(&workers, "workers", 2, "worker processes to run: the default of --min-workers and --max-workers")
	cmd.Flags().IntVar(&minWorkers, "min-workers", 0, "run at least this many workers, jobs or not; 0: none while no job runs (default --workers)")
	cmd.Flags().IntVar(&maxWorkers, "max-workers", 0, "run at most this many workers, however many slots the jobs want (default the larger of --workers and --min-workers)")
	cmd.Flags().DurationVar(&scaleDownDelay, "scale-down-delay", local.DefaultScaleDownDelay, "how long more workers run than the jobs need before an idle one is stopped")
	cmd.Flags().IntVar(&slots, "slots", 4, "slots per worker")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8081", "address of the coordinator's HTTP API")
	return cmd
}

// apiCluster reads what workers follow from the coordinator's API.
type apiCluster struct{ c *client }

func (ac apiCluster) Status(ctx context.Context) (int, []control.WorkerInfo, error) {
	var cs coordinator.ClusterStatus
	if err := ac.c.do(ctx, "GET", "/api/v1/cluster", nil, &cs); err != nil {
		return 0, nil, err
	}
	var ws []control.WorkerInfo
	if err := ac.c.do(ctx, "GET", "/api/v1/workers", nil, &ws); err != nil {
		return 0, nil, err
	}
	return cs.SlotsWanted, ws, nil
}

// childEnv passes this process's effective configuration to child workers.
func (a *app) childEnv() []string {
	env := os.Environ()
	for _, k := range []string{"store", "s3-endpoint", "s3-region", "redis-addr", "cluster", "log-level", "wasm-cache", "state-dir", "huge-pages"} {
		if v := a.v.GetString(k); v != "" {
			env = append(env, "WEIR_"+strings.ToUpper(strings.ReplaceAll(k, "-", "_"))+"="+v)
		}
	}
	return env
}
