package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/statestore/blob"
)

// defaultStore is where the embedded mode keeps specs and output when no
// store is configured.
const defaultStore = "./weir-data"

// env is the set of services a command talks to.
type env struct {
	bucket    blob.Bucket
	transport exchange.Transport
	plane     control.Plane
	redisAddr string
	// connectorRedis is the Redis that redis sources and sinks without an
	// address of their own use: the cluster's one server, or none when the
	// cluster runs on a Redis Cluster (the redis connector speaks to one
	// server; such a job names its addr).
	connectorRedis string
	storeDesc      string
}

// connectorRedisAddr is the default address of the redis connector for a
// cluster whose Redis is at addr (see env.connectorRedis).
func connectorRedisAddr(addr string) string {
	if a, err := exchange.ParseRedisAddr(addr); err != nil || a.Cluster {
		return ""
	}
	return addr
}

// envMode says which exchange and control plane a command gets.
type envMode int

const (
	// embedded is the in-process exchange and control plane, whatever
	// --redis-addr, WEIR_REDIS_ADDR or a config file say: weir run and
	// weir demo must not join a cluster because of the environment.
	embedded envMode = iota
	// cluster is Redis at --redis-addr; without one it is an error.
	cluster
)

// openEnv opens the store, and the exchange and control plane of mode.
func (a *app) openEnv(ctx context.Context, mode envMode) (*env, error) {
	e := &env{}
	if mode == cluster {
		e.redisAddr = a.v.GetString("redis-addr")
	}
	storeURL := a.v.GetString("store")
	if storeURL == "" {
		abs, err := filepath.Abs(defaultStore)
		if err != nil {
			return nil, err
		}
		storeURL = "file://" + abs
	}
	b, err := blob.Open(ctx, storeURL, a.blobOptions())
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	e.bucket = b
	e.storeDesc = b.Describe()
	if mode == embedded {
		e.transport = exchange.NewLocal()
		e.plane = control.NewLocal()
		return e, nil
	}
	if e.redisAddr == "" {
		e.close()
		return nil, errors.New("this command needs Redis: set --redis-addr or WEIR_REDIS_ADDR (make dev-up starts one on 127.0.0.1:6379)")
	}
	if _, err := exchange.ParseRedisAddr(e.redisAddr); err != nil {
		e.close()
		return nil, fmt.Errorf("--redis-addr (or WEIR_REDIS_ADDR, redis-addr in a config file): %w", err)
	}
	e.connectorRedis = connectorRedisAddr(e.redisAddr)
	password := os.Getenv("WEIR_REDIS_PASSWORD")
	e.transport, err = exchange.NewRedis(exchange.RedisOptions{Addr: e.redisAddr, Password: password, Cluster: a.v.GetString("cluster")})
	if err != nil {
		e.close()
		return nil, fmt.Errorf("open exchange: %w", err)
	}
	e.plane, err = control.NewRedis(ctx, control.RedisOptions{Addr: e.redisAddr, Password: password, Cluster: a.v.GetString("cluster")})
	if err != nil {
		e.close()
		return nil, fmt.Errorf("open control plane: %w", err)
	}
	return e, nil
}

// refuseCluster fails an embedded command (weir run, weir demo) given
// --redis-addr on its command line: it would otherwise run alone in this
// process while the user meant a cluster.
func refuseCluster(cmd *cobra.Command) error {
	if f := cmd.Flags().Lookup("redis-addr"); f != nil && f.Changed {
		return &exitError{code: 2, err: fmt.Errorf("weir %s runs embedded (in-process exchange and control plane) and takes no --redis-addr %s; weir deploy runs a job on a cluster", cmd.Name(), f.Value)}
	}
	return nil
}

func (e *env) close() error {
	var errs []error
	if e.plane != nil {
		errs = append(errs, e.plane.Close())
	}
	if e.transport != nil {
		errs = append(errs, e.transport.Close())
	}
	if e.bucket != nil {
		errs = append(errs, e.bucket.Close())
	}
	return errors.Join(errs...)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
