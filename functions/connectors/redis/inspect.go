package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
)

// txnType reads a redis sink's transactions back from Redis, when the
// inspection has one: a transaction is committed once its marker is set,
// and pending while its staging list exists.
func txnType() *connector.TxnType {
	return &connector.TxnType{
		Owns: connector.HandleWith("stream"),
		Inspect: func(env connector.InspectEnv) connector.TxnInspector {
			return &inspector{addr: env.RedisAddr, password: env.RedisPassword, clients: map[string]*goredis.Client{}}
		},
	}
}

type inspector struct {
	addr     string // "" leaves what only Redis knows unknown
	password string
	clients  map[string]*goredis.Client // by address
}

var _ connector.TxnInspector = (*inspector)(nil)

// client returns a client for snk's Redis (its own addr, else the
// inspection's), nil without one.
func (i *inspector) client(snk *spec.Sink) *goredis.Client {
	if i.addr == "" {
		return nil
	}
	addr := i.addr
	if snk != nil && snk.Addr != "" {
		addr = snk.Addr
	}
	c := i.clients[addr]
	if c == nil {
		c = goredis.NewClient(&goredis.Options{Addr: addr, Password: i.password, ContextTimeoutEnabled: true})
		i.clients[addr] = c
	}
	return c
}

// State tells committed from pending by the transaction's marker and
// staging list. An empty transaction stages nothing: it is committed.
func (i *inspector) State(ctx context.Context, snk *spec.Sink, handle json.RawMessage) (connector.TxnState, error) {
	// Only the fields read: inspection is lenient where Commit is strict.
	var h struct {
		Stream string `json:"stream"`
		Txn    string `json:"txn"`
		Rows   int64  `json:"rows"`
	}
	if json.Unmarshal(handle, &h) != nil || h.Stream == "" || h.Txn == "" {
		return connector.TxnUnknown, nil
	}
	if h.Rows == 0 {
		return connector.TxnCommitted, nil
	}
	c := i.client(snk)
	if c == nil {
		return connector.TxnUnknown, nil
	}
	if n, err := c.Exists(ctx, redisDoneKey(h.Stream, h.Txn)).Result(); err != nil {
		return "", err
	} else if n > 0 {
		return connector.TxnCommitted, nil
	}
	if n, err := c.Exists(ctx, redisStagingKey(h.Stream, h.Txn)).Result(); err != nil {
		return "", err
	} else if n > 0 {
		return connector.TxnPending, nil
	}
	return connector.TxnUnknown, nil
}

// Staged lists the transactions with a staging list next to the sink's
// stream; none without a Redis.
func (i *inspector) Staged(ctx context.Context, snk *spec.Sink) ([]string, error) {
	c := i.client(snk)
	if c == nil || snk.Stream == "" {
		return nil, nil
	}
	prefix := redisStagingKey(snk.Stream, "")
	var ids []string
	iter := c.Scan(ctx, 0, globEscape(prefix)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if id := strings.TrimPrefix(iter.Val(), prefix); !strings.HasPrefix(id, "done:") {
			ids = append(ids, id)
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("sink %s: scan %s*: %w", snk.Name, prefix, err)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// Close closes the clients; it is safe to call twice.
func (i *inspector) Close() error {
	var errs []error
	for addr, c := range i.clients {
		errs = append(errs, c.Close())
		delete(i.clients, addr)
	}
	return errors.Join(errs...)
}
