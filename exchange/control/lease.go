package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Leader is the coordinator holding the cluster's lease.
type Leader struct {
	// ID names the coordinator process.
	ID string `json:"id"`
	// API is the URL of its HTTP API, where standbys forward requests.
	API string `json:"api"`
	// Epoch is the number of its leadership: every leadership of the
	// cluster has a higher one than all before it.
	Epoch int64 `json:"epoch"`
}

// Leases is the coordinators' leadership lease. One coordinator holds it
// at a time; it renews it within its ttl or loses it.
type Leases interface {
	// Acquire takes the lease for me (its Epoch is ignored) unless another
	// coordinator holds it and lives. The new epoch is above every one
	// issued before and above floor (the highest recorded elsewhere, so
	// that a Redis that lost its keys does not issue an epoch again). When
	// another holds the lease, it returns that leader and false.
	Acquire(ctx context.Context, me Leader, ttl time.Duration, floor int64) (Leader, bool, error)
	// Renew extends l's lease by ttl; false when the lease is no longer
	// l's (it lapsed, or another took it).
	Renew(ctx context.Context, l Leader, ttl time.Duration) (bool, error)
	// Release gives l's lease up, if it is still l's.
	Release(ctx context.Context, l Leader) error
	// Current returns the leader holding the lease (false: none).
	Current(ctx context.Context) (Leader, bool, error)
	// Epoch returns the highest epoch issued (0 if none): a worker drops
	// the commands of a coordinator whose epoch is older.
	Epoch(ctx context.Context) (int64, error)
}

// ErrNotLeader is returned by a coordinator that does not (or no longer)
// hold the lease.
var ErrNotLeader = errors.New("not the leader")

// Redis keys of the lease, after the control base (ctlBase).
const (
	keyLeader = "leader" // the lease: Leader JSON, expires with its ttl
	keyEpoch  = "epoch"  // counter: the highest epoch issued
	// leaderName + id names the connection a leading coordinator holds
	// open: when its process dies Redis drops it at once, and a standby
	// takes the lease without waiting for the ttl.
	leaderName = "weir-coordinator:"
)

// acquireScript takes the lease if it is free, or held by ARGV[1] itself,
// or held by exactly the value ARGV[5] (a leader seen dead). It returns
// {1, new value} or {0, the holder's value}.
var acquireScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[5] then
  local ok, h = pcall(cjson.decode, cur)
  if not ok or type(h) ~= 'table' or h.id ~= ARGV[1] then return {0, cur} end
end
local e = redis.call('INCR', KEYS[2])
local floor = tonumber(ARGV[4])
if e <= floor then
  e = floor + 1
  redis.call('SET', KEYS[2], e)
end
local v = cjson.encode({id = ARGV[1], api = ARGV[2], epoch = e})
redis.call('SET', KEYS[1], v, 'PX', ARGV[3])
return {1, v}
`)

// renewScript extends the lease if it holds ARGV[1] with epoch ARGV[2].
var renewScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local ok, h = pcall(cjson.decode, cur)
if not ok or type(h) ~= 'table' or h.id ~= ARGV[1] or tonumber(h.epoch) ~= tonumber(ARGV[2]) then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// releaseScript deletes the lease if it holds ARGV[1] with epoch ARGV[2].
var releaseScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local ok, h = pcall(cjson.decode, cur)
if not ok or type(h) ~= 'table' or h.id ~= ARGV[1] or tonumber(h.epoch) ~= tonumber(ARGV[2]) then return 0 end
redis.call('DEL', KEYS[1])
return 1
`)

// leaseState is the redisPlane's part for the lease.
type leaseState struct {
	leader, epoch, name string
	mu                  sync.Mutex
	conn                namedConn // named leaderName+prefix+id while leading
}

func (p *redisPlane) Acquire(ctx context.Context, me Leader, ttl time.Duration, floor int64) (Leader, bool, error) {
	if err := p.holdLeaderName(ctx, me.ID); err != nil {
		return Leader{}, false, err
	}
	dead := ""
	cur, err := p.rdb.Get(ctx, p.lease.leader).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return Leader{}, false, fmt.Errorf("acquire the lease: %w", err)
	default:
		var h Leader
		if json.Unmarshal([]byte(cur), &h) == nil && h.ID != me.ID {
			if live, known := p.leaderConnected(ctx, h.ID); known && !live {
				dead = cur // its process died: take over now
			}
		}
	}
	res, err := acquireScript.Run(ctx, p.rdb, []string{p.lease.leader, p.lease.epoch},
		me.ID, me.API, ttl.Milliseconds(), floor, dead).Slice()
	if err != nil {
		return Leader{}, false, fmt.Errorf("acquire the lease: %w", err)
	}
	if len(res) != 2 {
		return Leader{}, false, fmt.Errorf("acquire the lease: unexpected reply %v", res)
	}
	won, _ := res[0].(int64)
	raw, _ := res[1].(string)
	var l Leader
	if err := json.Unmarshal([]byte(raw), &l); err != nil {
		return Leader{}, false, fmt.Errorf("acquire the lease: the lease holds %q: %w", raw, err)
	}
	return l, won == 1, nil
}

func (p *redisPlane) Renew(ctx context.Context, l Leader, ttl time.Duration) (bool, error) {
	if err := p.holdLeaderName(ctx, l.ID); err != nil {
		return false, err
	}
	n, err := renewScript.Run(ctx, p.rdb, []string{p.lease.leader}, l.ID, l.Epoch, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("renew the lease of epoch %d: %w", l.Epoch, err)
	}
	return n == 1, nil
}

func (p *redisPlane) Release(ctx context.Context, l Leader) error {
	err := releaseScript.Run(ctx, p.rdb, []string{p.lease.leader}, l.ID, l.Epoch).Err()
	p.closeLease()
	if err != nil {
		return fmt.Errorf("release the lease of epoch %d: %w", l.Epoch, err)
	}
	return nil
}

func (p *redisPlane) Current(ctx context.Context) (Leader, bool, error) {
	raw, err := p.rdb.Get(ctx, p.lease.leader).Result()
	if errors.Is(err, redis.Nil) {
		return Leader{}, false, nil
	}
	if err != nil {
		return Leader{}, false, fmt.Errorf("read the lease: %w", err)
	}
	var l Leader
	if err := json.Unmarshal([]byte(raw), &l); err != nil {
		return Leader{}, false, fmt.Errorf("read the lease: it holds %q: %w", raw, err)
	}
	return l, true, nil
}

func (p *redisPlane) Epoch(ctx context.Context) (int64, error) {
	n, err := p.rdb.Get(ctx, p.lease.epoch).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the leader epoch: %w", err)
	}
	return n, nil
}

// holdLeaderName opens the named connection of coordinator id, unless one
// is open and answers.
func (p *redisPlane) holdLeaderName(ctx context.Context, id string) error {
	p.lease.mu.Lock()
	defer p.lease.mu.Unlock()
	c, err := p.openNamed(ctx, p.lease.conn, p.lease.name+id)
	p.lease.conn = c
	if err != nil {
		return fmt.Errorf("name the connection of coordinator %s: %w", id, err)
	}
	return nil
}

// leaderConnected reports whether coordinator id's named connection is
// open; known is false when Redis cannot tell (CLIENT LIST refused, or a
// server of a cluster not answering).
func (p *redisPlane) leaderConnected(ctx context.Context, id string) (live, known bool) {
	names, known, _ := p.namesListed(ctx, p.lease.name)
	return names[id], known
}

func (p *redisPlane) closeLease() {
	p.lease.mu.Lock()
	defer p.lease.mu.Unlock()
	if p.lease.conn.conn != nil {
		p.lease.conn.close()
		p.lease.conn = namedConn{}
	}
}
