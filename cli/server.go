package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/deploy/local"
	"github.com/weirstream/weir/functions/worker"
)

func (a *app) coordinatorCmd() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "coordinator",
		Short: "Run the coordinator: job API on --listen, workers through Redis",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return a.serveCoordinator(ctx, listen, nil)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8081", "address of the HTTP API")
	return cmd
}

// serveCoordinator runs a coordinator and its HTTP API until ctx is done.
// ready, if set, gets the address it listens on.
func (a *app) serveCoordinator(ctx context.Context, listen string, ready chan<- string) error {
	log := a.logger()
	e, err := a.openEnv(ctx, cluster)
	if err != nil {
		return err
	}
	defer e.close()
	c := coordinator.New(coordinator.Config{Plane: e.plane, Bucket: e.bucket, Transport: e.transport, RedisAddr: e.redisAddr, Logger: log})
	defer func() {
		if err := c.Close(); err != nil {
			log.Warn("close coordinator", "err", err)
		}
	}()
	if err := c.Load(ctx); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	srv := &http.Server{Handler: c.Handler(reg), ReadHeaderTimeout: 10 * time.Second}
	log.Info("coordinator listening", "addr", ln.Addr().String(), "store", e.storeDesc, "redis", e.redisAddr)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.Run(gctx) })
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
				Bucket: e.bucket, RedisAddr: e.redisAddr, Logger: a.logger(), WasmCache: a.wasmCache(),
				HeartbeatTTL: heartbeat})
			return w.Run(ctx)
		},
	}
	cmd.Flags().IntVar(&slots, "slots", 4, "subtasks this worker runs at once")
	cmd.Flags().StringVar(&id, "id", "", "worker id (default <host>-<pid>)")
	cmd.Flags().DurationVar(&heartbeat, "heartbeat-timeout", worker.DefaultHeartbeatTimeout,
		"how long a slow or paused worker stays live without a heartbeat (a worker whose process dies is noticed within a second)")
	return cmd
}

func (a *app) upCmd() *cobra.Command {
	var workers, slots int
	var listen string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a coordinator and N worker processes on this machine (needs Redis)",
		Long: `Run a coordinator in this process and --workers worker child processes,
restarting a worker that exits. Redis (--redis-addr) carries data and control
between them; the store (--store) is shared. Stop with Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if a.v.GetString("redis-addr") == "" {
				return errors.New("weir up needs Redis: set --redis-addr or WEIR_REDIS_ADDR (make dev-up starts one on 127.0.0.1:6379)")
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			sup := local.NewSupervisor(local.Config{
				Binary: self,
				Args:   []string{"worker", "--slots", fmt.Sprint(slots)},
				Env:    a.childEnv(),
				Count:  workers,
				Logger: a.logger(),
				Stdout: a.stderr, Stderr: a.stderr,
			})
			g, gctx := errgroup.WithContext(ctx)
			g.Go(func() error { return sup.Run(gctx) })
			g.Go(func() error { return a.serveCoordinator(gctx, listen, nil) })
			return g.Wait()
		},
	}
	cmd.Flags().IntVar(&workers, "workers", 2, "worker processes to run")
	cmd.Flags().IntVar(&slots, "slots", 4, "slots per worker")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8081", "address of the coordinator's HTTP API")
	return cmd
}

// childEnv passes this process's effective configuration to child workers.
func (a *app) childEnv() []string {
	env := os.Environ()
	for _, k := range []string{"store", "s3-endpoint", "s3-region", "redis-addr", "cluster", "log-level", "wasm-cache"} {
		if v := a.v.GetString(k); v != "" {
			env = append(env, "WEIR_"+strings.ToUpper(strings.ReplaceAll(k, "-", "_"))+"="+v)
		}
	}
	return env
}
