package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

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
	storeDesc string
}

// openEnv opens the store, and either Redis (exchange and control plane)
// when --redis-addr is set, or the in-process ones when requireRedis is
// false.
func (a *app) openEnv(ctx context.Context, requireRedis bool) (*env, error) {
	e := &env{redisAddr: a.v.GetString("redis-addr")}
	storeURL := a.v.GetString("store")
	if storeURL == "" {
		abs, err := filepath.Abs(defaultStore)
		if err != nil {
			return nil, err
		}
		storeURL = "file://" + abs
	}
	b, err := blob.Open(ctx, storeURL, blob.Options{S3Endpoint: a.v.GetString("s3-endpoint"), S3Region: a.v.GetString("s3-region")})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	e.bucket = b
	e.storeDesc = b.Describe()
	if e.redisAddr == "" {
		if requireRedis {
			e.close()
			return nil, errors.New("this command needs Redis: set --redis-addr or WEIR_REDIS_ADDR (make dev-up starts one on 127.0.0.1:6379)")
		}
		e.transport = exchange.NewLocal()
		e.plane = control.NewLocal()
		return e, nil
	}
	password := os.Getenv("WEIR_REDIS_PASSWORD")
	e.transport, err = exchange.NewRedis(exchange.RedisOptions{Addr: e.redisAddr, Password: password})
	if err != nil {
		e.close()
		return nil, fmt.Errorf("open exchange: %w", err)
	}
	e.plane, err = control.NewRedis(ctx, control.RedisOptions{Addr: e.redisAddr, Password: password})
	if err != nil {
		e.close()
		return nil, fmt.Errorf("open control plane: %w", err)
	}
	return e, nil
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
