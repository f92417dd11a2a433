package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/internal/redisconn"
)

// Redis keys of the control plane, after the control base (ctlBase). They
// carry no job attempt: workers and the event stream outlive jobs.
const (
	keyWorkers = "workers" // hash: worker id -> WorkerInfo JSON
	keyAlive   = "alive:"  // + id: expires with the heartbeat; holds its WorkerUsage JSON
	keyInbox   = "inbox:"  // + id: list of commands
	keyEvents  = "events"  // stream of task events
	maxEvents  = 100000    // approximate cap of the event stream
	fieldEvent = "e"
	// presenceName + id names the connection a worker holds open while it
	// lives (CLIENT SETNAME): when the worker's process dies, Redis drops
	// the connection at once, and the coordinator sees the worker gone
	// without waiting for its heartbeat to lapse.
	presenceName = "weir-worker:"
)

// ctlBase is what every control key of cluster id starts with. On one
// server it is the cluster's prefix and "ctl:" (weir:ctl:, weir:<id>:ctl:),
// as before Redis Cluster support. On a Redis Cluster the part after
// "weir:" is a hash tag (weir:{ctl}:, weir:{<id>:ctl}:), so that all
// control keys of one weir cluster sit in one slot: registering a worker
// (a transaction over the registry and its heartbeat key), listing the
// workers (MGET of every heartbeat key) and the lease (a script over the
// lease and the epoch counter) each touch several of them.
func ctlBase(id string, cluster bool) string {
	prefix := exchange.KeyPrefix(id)
	if !cluster {
		return prefix + "ctl:"
	}
	return "weir:{" + strings.TrimPrefix(prefix, "weir:") + "ctl}:"
}

// RedisOptions locate the Redis server of the control plane.
type RedisOptions struct {
	// Addr is host:port, or redis+cluster://host:port,... for a Redis
	// Cluster (see exchange.ParseRedisAddr).
	Addr     string
	Password string
	DB       int
	// Cluster is the cluster id (exchange.KeyPrefix); "" is the default
	// cluster. Planes of different clusters on one Redis see nothing of
	// each other.
	Cluster string
}

type redisPlane struct {
	rdb redis.UniversalClient // *redis.Client or *redis.ClusterClient
	// nodes reach each node of a cluster for CLIENT LIST (nil on one
	// server).
	nodes *redisconn.NodeClients

	// Keys of this cluster.
	workers, alive, inbox, events, presence string
	lease                                   leaseState

	mu struct {
		sync.Mutex
		lastEvent string
		// presence holds, per worker registered through this plane, the
		// named connection that says it lives.
		presence map[string]namedConn
		// noClientList is set once CLIENT LIST was refused (a managed
		// Redis may disable it): liveness is the heartbeat alone then.
		noClientList bool
	}
	closeOnce sync.Once
}

// NewRedis returns a control plane on Redis. The event cursor starts at the
// end of the stream: a coordinator reads the events reported after it
// started.
func NewRedis(ctx context.Context, opts RedisOptions) (Plane, error) {
	if err := exchange.ValidateCluster(opts.Cluster); err != nil {
		return nil, err
	}
	addr, err := redisconn.Parse(opts.Addr)
	if err != nil {
		return nil, err
	}
	ropts := redis.Options{Password: opts.Password, DB: opts.DB, ContextTimeoutEnabled: true}
	rdb, err := redisconn.New(addr, ropts)
	if err != nil {
		return nil, err
	}
	if err := redisconn.ForEachPrimary(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		return node.Ping(ctx).Err()
	}); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("connect to redis at %s: %w", opts.Addr, err)
	}
	prefix := exchange.KeyPrefix(opts.Cluster)
	base := ctlBase(opts.Cluster, addr.Cluster)
	p := &redisPlane{rdb: rdb,
		workers: base + keyWorkers, alive: base + keyAlive, inbox: base + keyInbox, events: base + keyEvents,
		presence: presenceName + prefix,
		lease:    leaseState{leader: base + keyLeader, epoch: base + keyEpoch, name: leaderName + prefix}}
	if addr.Cluster {
		// CLIENT LIST only, a few times a second: a small pool per node.
		ropts.PoolSize = 2
		p.nodes = redisconn.NewNodeClients(ropts)
	}
	p.mu.lastEvent = "$"
	p.mu.presence = map[string]namedConn{}
	return p, nil
}

// namedConn is a connection held open under a name (CLIENT SETNAME) on
// the server at addr, and the one it replaced (see openNamed).
type namedConn struct {
	conn *redis.Conn
	addr string
	prev *redis.Conn
}

// close releases both connections.
func (n namedConn) close() {
	for _, c := range []*redis.Conn{n.conn, n.prev} {
		if c != nil {
			_ = c.Close()
		}
	}
}

// unname releases c, nameless: Close hands a connection back to its
// node's pool, open and still named.
func unname(ctx context.Context, c *redis.Conn) {
	_ = c.ClientSetName(ctx, "").Err()
	_ = c.Close()
}

// openNamed opens a connection named name on the server that holds the
// control keys (on a cluster, the master of their slot), unless old is
// open there and answers; then it returns old. A connection on a server
// that no longer holds the keys (a failover moved them) is replaced: the
// new one is opened first, and the old one keeps its name until the next
// call (a heartbeat later), so that a CLIENT LIST of every node made
// while it moves (namesListed, not atomic across nodes) finds the name on
// one of them.
func (p *redisPlane) openNamed(ctx context.Context, old namedConn, name string) (namedConn, error) {
	node, err := redisconn.PrimaryFor(ctx, p.rdb, p.workers)
	if err != nil {
		return old, err
	}
	addr := redisconn.NodeAddr(node)
	if old.conn != nil && old.addr == addr && old.conn.Ping(ctx).Err() == nil {
		if old.prev != nil {
			unname(ctx, old.prev)
			old.prev = nil
		}
		return old, nil
	}
	c := node.Conn()
	if err := c.ClientSetName(ctx, name).Err(); err != nil {
		_ = c.Close()
		return old, err
	}
	if old.prev != nil {
		unname(ctx, old.prev)
	}
	return namedConn{conn: c, addr: addr, prev: old.conn}, nil
}

// namesListed returns the names, with prefix, of the connections open on
// the servers (CLIENT LIST), and false when it cannot tell: CLIENT LIST
// refused, a server that did not answer, or on a cluster a node that
// failed in the last seconds. On a cluster it lists every node
// (redisconn.Nodes), masters and replicas: a named connection stays where
// it was opened when a failover turns that master into a replica, until
// its holder moves it (openNamed), and a holder that died is missing
// everywhere.
func (p *redisPlane) namesListed(ctx context.Context, prefix string) (map[string]bool, bool, error) {
	nodes := []*redis.Client{}
	if p.nodes == nil {
		nodes = append(nodes, p.rdb.(*redis.Client))
	} else {
		addrs, recentFailure, err := redisconn.Nodes(ctx, p.rdb, p.workers)
		if err != nil {
			return nil, false, err
		}
		if recentFailure {
			// A node failed lately, maybe the master the named
			// connections were on: their holders move them at their next
			// heartbeat once their client learns the new master. Until
			// then absence says nothing.
			return nil, false, nil
		}
		for _, a := range addrs {
			nodes = append(nodes, p.nodes.Get(a))
		}
	}
	lists := make([]string, len(nodes))
	g, gctx := errgroup.WithContext(ctx)
	for i, node := range nodes {
		g.Go(func() error {
			var err error
			lists[i], err = node.ClientList(gctx).Result()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, false, err
	}
	out := map[string]bool{}
	for _, list := range lists {
		for line := range strings.Lines(list) {
			for _, f := range strings.Fields(line) {
				if name, ok := strings.CutPrefix(f, "name="+prefix); ok && name != "" {
					out[name] = true
				}
			}
		}
	}
	return out, true, nil
}

// holdPresence opens worker id's named connection, unless one is open and
// answers. It is opened before the worker's keys are written, so that no
// one sees a registered worker without it.
func (p *redisPlane) holdPresence(ctx context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, err := p.openNamed(ctx, p.mu.presence[id], p.presence+id)
	if c.conn != nil {
		p.mu.presence[id] = c
	}
	if err != nil {
		return fmt.Errorf("name the presence connection of worker %s: %w", id, err)
	}
	return nil
}

func (p *redisPlane) dropPresence(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.mu.presence[id]; c.conn != nil {
		c.close()
		delete(p.mu.presence, id)
	}
}

// present returns the workers whose named connection Redis has open, and
// false when it cannot tell (CLIENT LIST refused, or a server of a cluster
// not answering: the heartbeat alone tells then).
func (p *redisPlane) present(ctx context.Context) (map[string]bool, bool) {
	p.mu.Lock()
	off := p.mu.noClientList
	p.mu.Unlock()
	if off {
		return nil, false
	}
	out, ok, err := p.namesListed(ctx, p.presence)
	if err != nil && ctx.Err() == nil && strings.Contains(strings.ToLower(err.Error()), "unknown command") {
		p.mu.Lock()
		p.mu.noClientList = true
		p.mu.Unlock()
	}
	return out, ok
}

var _ Plane = (*redisPlane)(nil)

func (p *redisPlane) Register(ctx context.Context, w WorkerInfo, ttl time.Duration) error {
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	if err := p.holdPresence(ctx, w.ID); err != nil {
		return fmt.Errorf("register worker %s: %w", w.ID, err)
	}
	_, err = p.rdb.TxPipelined(ctx, func(pp redis.Pipeliner) error {
		pp.HSet(ctx, p.workers, w.ID, b)
		pp.Set(ctx, p.alive+w.ID, 1, ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("register worker %s: %w", w.ID, err)
	}
	return nil
}

func (p *redisPlane) Heartbeat(ctx context.Context, id string, ttl time.Duration, u WorkerUsage) error {
	usage, err := json.Marshal(u)
	if err != nil {
		return err
	}
	ok, err := p.rdb.HExists(ctx, p.workers, id).Result()
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("heartbeat %s: %w", id, ErrUnknownWorker)
	}
	if err := p.holdPresence(ctx, id); err != nil {
		return fmt.Errorf("heartbeat %s: %w", id, err)
	}
	if err := p.rdb.Set(ctx, p.alive+id, usage, ttl).Err(); err != nil {
		return fmt.Errorf("heartbeat %s: %w", id, err)
	}
	return nil
}

func (p *redisPlane) Deregister(ctx context.Context, id string) error {
	defer p.dropPresence(id)
	_, err := p.rdb.TxPipelined(ctx, func(pp redis.Pipeliner) error {
		pp.HDel(ctx, p.workers, id)
		pp.Del(ctx, p.alive+id, p.inbox+id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("deregister worker %s: %w", id, err)
	}
	return nil
}

func (p *redisPlane) Workers(ctx context.Context) ([]WorkerInfo, error) {
	all, err := p.rdb.HGetAll(ctx, p.workers).Result()
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	if len(all) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(all))
	for id := range all {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = p.alive + id
	}
	alive, err := p.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	present, known := p.present(ctx)
	var out []WorkerInfo
	for i, id := range ids {
		if alive[i] == nil || known && !present[id] {
			// Heartbeat lapsed, or the worker's process is gone (its
			// named connection closed): the worker is gone. If it lives
			// after all, its next heartbeat finds it unknown and it
			// registers again, fenced from its old tasks.
			p.rdb.HDel(ctx, p.workers, id)
			p.rdb.Del(ctx, p.alive+id, p.inbox+id)
			continue
		}
		var w WorkerInfo
		if err := json.Unmarshal([]byte(all[id]), &w); err != nil {
			return nil, fmt.Errorf("decode worker %s: %w", id, err)
		}
		// Before its first heartbeat the key holds 1 (Register).
		if v, ok := alive[i].(string); ok && strings.HasPrefix(v, "{") {
			var u WorkerUsage
			if json.Unmarshal([]byte(v), &u) == nil {
				w.Usage = &u
			}
		}
		out = append(out, w)
	}
	return out, nil
}

func (p *redisPlane) Send(ctx context.Context, id string, c Command) error {
	ok, err := p.rdb.Exists(ctx, p.alive+id).Result()
	if err != nil {
		return fmt.Errorf("send to %s: %w", id, err)
	}
	if ok == 0 {
		return fmt.Errorf("send to %s: %w", id, ErrUnknownWorker)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := p.rdb.RPush(ctx, p.inbox+id, b).Err(); err != nil {
		return fmt.Errorf("send to %s: %w", id, err)
	}
	return nil
}

func (p *redisPlane) Receive(ctx context.Context, id string, wait time.Duration) (Command, bool, error) {
	// BLPOP takes fractional seconds; go-redis's BLPop rounds a wait under
	// a second up to one, so send the command as is.
	secs := strconv.FormatFloat(max(wait, 10*time.Millisecond).Seconds(), 'f', 3, 64)
	res, err := p.rdb.Do(ctx, "BLPOP", p.inbox+id, secs).StringSlice()
	if errors.Is(err, redis.Nil) {
		return Command{}, false, ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			return Command{}, false, ctx.Err()
		}
		return Command{}, false, fmt.Errorf("receive for %s: %w", id, err)
	}
	var c Command
	if err := json.Unmarshal([]byte(res[1]), &c); err != nil {
		return Command{}, false, fmt.Errorf("decode command for %s: %w", id, err)
	}
	return c, true, nil
}

func (p *redisPlane) Report(ctx context.Context, e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	err = p.rdb.XAdd(ctx, &redis.XAddArgs{Stream: p.events, MaxLen: maxEvents, Approx: true, Values: []any{fieldEvent, b}}).Err()
	if err != nil {
		return fmt.Errorf("report %s/%d %s[%d]: %w", e.Task.Job, e.Task.Attempt, e.Task.Vertex, e.Task.Subtask, err)
	}
	return nil
}

func (p *redisPlane) Events(ctx context.Context, wait time.Duration) ([]Event, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.lastEvent == "$" {
		// Pin the cursor to the current end so nothing reported between
		// two calls is missed.
		last, err := p.rdb.XRevRangeN(ctx, p.events, "+", "-", 1).Result()
		if err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		p.mu.lastEvent = "0-0"
		if len(last) > 0 {
			p.mu.lastEvent = last[0].ID
		}
	}
	res, err := p.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{p.events, p.mu.lastEvent}, Count: 1000, Block: max(wait, time.Millisecond)}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("read events: %w", err)
	}
	var out []Event
	for _, s := range res {
		for _, m := range s.Messages {
			p.mu.lastEvent = m.ID
			raw, _ := m.Values[fieldEvent].(string)
			var e Event
			if err := json.Unmarshal([]byte(raw), &e); err != nil {
				return out, fmt.Errorf("decode event %s: %w", m.ID, err)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

func (p *redisPlane) Close() error {
	var err error
	p.closeOnce.Do(func() {
		p.mu.Lock()
		for id, c := range p.mu.presence {
			c.close()
			delete(p.mu.presence, id)
		}
		p.mu.Unlock()
		p.closeLease()
		err = p.rdb.Close()
		if p.nodes != nil {
			err = errors.Join(err, p.nodes.Close())
		}
	})
	return err
}
