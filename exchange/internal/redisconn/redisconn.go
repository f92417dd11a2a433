// Package redisconn is the one place that reads a Redis address and builds
// the go-redis client for it: a single server (host:port) or a Redis
// Cluster (redis+cluster://host:port,host:port,...). The exchange and the
// control plane use it, so both speak to the same Redis the same way; the
// CLI checks addresses through exchange.ParseRedisAddr, which is Parse.
//
// It also runs what must reach every server of a cluster (SCAN, CLIENT
// LIST) or one chosen server (a named connection), the same way for both
// kinds of client.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterScheme starts an address that names the seed nodes of a Redis
// Cluster.
const ClusterScheme = "redis+cluster://"

// Addr is a parsed Redis address.
type Addr struct {
	// Cluster is set for a redis+cluster:// address.
	Cluster bool
	// Hosts are host:port: the one server, or the cluster's seed nodes
	// (any reachable one finds the rest).
	Hosts []string
}

// String returns the address as Parse reads it.
func (a Addr) String() string {
	if a.Cluster {
		return ClusterScheme + strings.Join(a.Hosts, ",")
	}
	if len(a.Hosts) == 0 {
		return ""
	}
	return a.Hosts[0]
}

// Parse reads host:port (one server) or
// redis+cluster://host:port[,host:port...] (a Redis Cluster, given by one
// or more of its nodes).
func Parse(s string) (Addr, error) {
	if s == "" {
		return Addr{}, errors.New("redis address is empty, want host:port or " + ClusterScheme + "host:port[,host:port...]")
	}
	rest, cluster := strings.CutPrefix(s, ClusterScheme)
	if !cluster && strings.Contains(s, "://") {
		return Addr{}, fmt.Errorf("redis address %q: want host:port, or %shost:port,host:port,... for a Redis Cluster", s, ClusterScheme)
	}
	var a Addr
	a.Cluster = cluster
	for h := range strings.SplitSeq(rest, ",") {
		h = strings.TrimSpace(h)
		if h == "" && cluster {
			continue
		}
		if err := checkHostPort(h); err != nil {
			return Addr{}, fmt.Errorf("redis address %q: %w", s, err)
		}
		a.Hosts = append(a.Hosts, h)
	}
	switch {
	case len(a.Hosts) == 0:
		return Addr{}, fmt.Errorf("redis address %q names no node, want %shost:port[,host:port...]", s, ClusterScheme)
	case !cluster && len(a.Hosts) > 1:
		return Addr{}, fmt.Errorf("redis address %q names several servers: for a Redis Cluster write %s%s", s, ClusterScheme, s)
	}
	return a, nil
}

func checkHostPort(h string) error {
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		return fmt.Errorf("node %q: want host:port", h)
	}
	if host == "" {
		return fmt.Errorf("node %q: host is empty", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("node %q: port %q, want 1-65535", h, port)
	}
	return nil
}

// New returns a client for a: a *redis.Client built from o for one
// server, or a *redis.ClusterClient with o's settings for a cluster (o.Addr
// and o.DB are ignored then: a cluster has database 0 only, and New
// refuses another).
func New(a Addr, o redis.Options) (redis.UniversalClient, error) {
	if !a.Cluster {
		o.Addr = a.Hosts[0]
		return redis.NewClient(&o), nil
	}
	if o.DB != 0 {
		return nil, fmt.Errorf("redis cluster %s: database %d, want 0 (a cluster has only database 0)", a, o.DB)
	}
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                    a.Hosts,
		Username:                 o.Username,
		Password:                 o.Password,
		PoolSize:                 o.PoolSize,
		DialTimeout:              o.DialTimeout,
		ReadTimeout:              o.ReadTimeout,
		WriteTimeout:             o.WriteTimeout,
		MaxRetries:               o.MaxRetries,
		ContextTimeoutEnabled:    o.ContextTimeoutEnabled,
		PipelinePoolSize:         o.PipelinePoolSize,
		Protocol:                 o.Protocol,
		DisableIdentity:          o.DisableIdentity,
		MaintNotificationsConfig: o.MaintNotificationsConfig,
		// Reads go to the primary: a replica may lag behind what a
		// writer was told was written, which would look like lost
		// entries.
		ReadOnly: false,
		// The client learns a new slot map from MOVED redirects, but a
		// master that crashed sends none: it refuses connections, and
		// without a reload the client would go on dialling it (the
		// default is every 60 s) long after its replica took over. A map
		// older than this is reloaded in the background on next use: one
		// CLUSTER SLOTS a second at most.
		ClusterStateReloadInterval: time.Second,
	}), nil
}

// ForEachPrimary calls fn with a client of every primary (concurrently in
// a cluster): the one server, or every master of a cluster. A SCAN must
// run on each to see every key.
func ForEachPrimary(ctx context.Context, c redis.UniversalClient, fn func(ctx context.Context, node *redis.Client) error) error {
	switch c := c.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("redisconn: unsupported client %T", c)
}

// failSettle is how long after a node last answered the cluster (its
// pong-recv) Nodes reports its failure as recent.
const failSettle = 15 * time.Second

// Nodes returns the host:port of every server: the one server, or every
// node of a cluster as the node holding key sees it (CLUSTER NODES, which,
// unlike the slot map the cluster client keeps, also lists a master left
// without slots for a moment during a failover), but those the cluster
// agrees have failed or that have no address yet. recentFailure is set
// while a failed node answered the cluster less than 15 s ago: what was
// open on it is gone, and its users may not have moved yet.
func Nodes(ctx context.Context, c redis.UniversalClient, key string) (addrs []string, recentFailure bool, err error) {
	node, err := PrimaryFor(ctx, c, key)
	if err != nil {
		return nil, false, err
	}
	if _, ok := c.(*redis.ClusterClient); !ok {
		return []string{NodeAddr(node)}, false, nil
	}
	text, err := node.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, false, fmt.Errorf("cluster nodes on %s: %w", NodeAddr(node), err)
	}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := strings.Split(f[2], ",")
		if slices.Contains(flags, "fail") {
			if pong, err := strconv.ParseInt(f[5], 10, 64); err == nil && time.Since(time.UnixMilli(pong)) < failSettle {
				recentFailure = true
			}
			continue
		}
		if slices.Contains(flags, "noaddr") || slices.Contains(flags, "handshake") || strings.HasPrefix(addr, ":") {
			continue
		}
		addrs = append(addrs, addr)
	}
	return addrs, recentFailure, nil
}

// NodeClients keeps a client per server address, for commands that must
// reach a node the cluster client may not know of (see Nodes).
type NodeClients struct {
	opts redis.Options
	mu   struct {
		sync.Mutex
		m map[string]*redis.Client
	}
}

// NewNodeClients returns clients built from o (its Addr set per node).
func NewNodeClients(o redis.Options) *NodeClients {
	n := &NodeClients{opts: o}
	n.mu.m = map[string]*redis.Client{}
	return n
}

// Get returns the client of the server at addr.
func (n *NodeClients) Get(addr string) *redis.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.mu.m[addr]
	if c == nil {
		o := n.opts
		o.Addr = addr
		c = redis.NewClient(&o)
		n.mu.m[addr] = c
	}
	return c
}

// Close closes every client.
func (n *NodeClients) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for addr, c := range n.mu.m {
		errs = append(errs, c.Close())
		delete(n.mu.m, addr)
	}
	return errors.Join(errs...)
}

// PrimaryFor returns a client of the server that holds key: the one
// server, or the master of key's slot as the cluster client last learned
// it.
func PrimaryFor(ctx context.Context, c redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := c.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("redisconn: unsupported client %T", c)
}

// NodeAddr names the server a node client speaks to.
func NodeAddr(node *redis.Client) string { return node.Options().Addr }
