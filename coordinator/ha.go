package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/coordinator/internal/leader"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/statestore/layout"
)

// DefaultLeaseTTL is how long a leader's lease lives without a renewal:
// a leader paused or cut off from Redis is replaced this long after its
// last renewal. A leader whose process dies is replaced at once (Redis
// drops its named connection).
const DefaultLeaseTTL = 10 * time.Second

// NodeConfig configures a Node.
type NodeConfig struct {
	// Coordinator configures the coordinator of each leadership; the node
	// sets its Epoch and Leading.
	Coordinator Config
	// Leases is the cluster's lease (the control plane).
	Leases control.Leases
	// ID names this coordinator process (default: random).
	ID string
	// API is the URL of this coordinator's HTTP API, which standbys
	// forward requests to while it leads.
	API string
	// LeaseTTL is the lease's time to live (default DefaultLeaseTTL).
	LeaseTTL time.Duration
	// NewRegistry returns the metrics registry of a leadership's API
	// (nil: no /metrics).
	NewRegistry func() *prometheus.Registry
}

// Node is one `weir coordinator` process of a cluster: a standby until it
// takes the lease, then the leader, running a Coordinator with the
// lease's epoch until it loses the lease (it is a standby again then).
// Any number of nodes share a cluster. A standby forwards every API
// request to the leader (Handler), so clients may talk to any node.
type Node struct {
	cfg NodeConfig
	mu  struct {
		sync.Mutex
		term       *term
		leader     control.Leader // the last leader seen (zero: none)
		validUntil time.Time      // this node's lease is trusted until then
		proxies    map[string]*httputil.ReverseProxy
	}
}

// term is one leadership.
type term struct {
	epoch  int64
	c      *Coordinator
	h      http.Handler
	ready  bool // Load has returned: the API serves
	cancel context.CancelFunc
	done   chan error
}

// NewNode returns a node; Run runs it.
func NewNode(cfg NodeConfig) *Node {
	if cfg.ID == "" {
		cfg.ID = "coordinator-" + randomID()
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Coordinator.Logger == nil {
		cfg.Coordinator.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{cfg: cfg}
	n.mu.proxies = map[string]*httputil.ReverseProxy{}
	return n
}

// leading is the coordinators' Config.Leading.
func (n *Node) leading() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return time.Now().Before(n.mu.validUntil)
}

// LeaderInfo is the body of GET /api/v1/leader.
type LeaderInfo struct {
	// Self is this coordinator's id, Role "leader" or "standby".
	Self string `json:"self"`
	Role string `json:"role"`
	// Leader is the coordinator leading (nil: none known).
	Leader *control.Leader `json:"leader,omitempty"`
}

// Run runs the election until ctx is done; a leader then steps down and
// releases its lease so that a standby takes over at once. It returns
// once the coordinator it ran has closed.
func (n *Node) Run(ctx context.Context) error {
	log := n.cfg.Coordinator.Logger
	el := leader.New(leader.Config{TTL: n.cfg.LeaseTTL}, time.Now())
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var floor int64
	for {
		var ds []leader.Decision
		var termDone chan error
		n.mu.Lock()
		if t := n.mu.term; t != nil {
			termDone = t.done
		}
		n.mu.Unlock()
		select {
		case <-ctx.Done():
			ds = el.Stop(time.Now())
		case err := <-termDone:
			// The leadership ended from within: a newer leader's status
			// was found, or the coordinator failed. Its lease is
			// released and this node holds off, so that a standby leads.
			log.Warn("leadership ended", "err", err)
			n.endTerm(true, err)
			reason := "its coordinator returned"
			if err != nil {
				reason = err.Error()
			}
			ds = el.Ended(time.Now(), reason)
		case <-tick.C:
			ds = el.Tick(time.Now())
		}
		for len(ds) > 0 {
			d := ds[0]
			ds = append(ds[1:], n.carry(ctx, el, d, &floor)...)
		}
		n.mu.Lock()
		n.mu.validUntil = time.Time{}
		if el.Leading(time.Now()) {
			n.mu.validUntil = el.ValidUntil()
		}
		n.mu.Unlock()
		if ctx.Err() != nil {
			n.endTerm(false, nil)
			return nil
		}
	}
}

// carry carries out one decision of the elector and returns the
// decisions that follow from its result.
func (n *Node) carry(ctx context.Context, el *leader.Elector, d leader.Decision, floor *int64) []leader.Decision {
	log := n.cfg.Coordinator.Logger
	me := control.Leader{ID: n.cfg.ID, API: n.cfg.API}
	// Redis calls get a third of the lease: a hung call must not keep a
	// leader from noticing that its lease lapsed.
	callTimeout := n.cfg.LeaseTTL / 3
	switch d.Action {
	case leader.Acquire:
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		sent := time.Now()
		l, ok, err := n.cfg.Leases.Acquire(cctx, me, n.cfg.LeaseTTL, *floor)
		if err != nil {
			log.Warn("take the lease failed", "err", err)
			return el.NotAcquired(time.Now())
		}
		if !ok {
			n.setLeader(l)
			return el.NotAcquired(time.Now())
		}
		// The epoch must be above every recorded one (Redis may have lost
		// its counter), and recorded before it is used.
		recorded, err := n.maxRecordedEpoch(cctx)
		if err == nil && l.Epoch <= recorded {
			err = fmt.Errorf("redis issued epoch %d, but epoch %d is recorded in %s", l.Epoch, recorded, n.cfg.Coordinator.Bucket.Describe())
			*floor = recorded
		}
		if err == nil {
			rec, _ := json.Marshal(struct {
				control.Leader
				Started time.Time `json:"started"`
			}{l, time.Now().UTC()})
			err = n.cfg.Coordinator.Bucket.PutIfAbsent(cctx, layout.EpochKey(l.Epoch), rec)
		}
		if err != nil {
			log.Warn("took the lease but cannot lead with it", "epoch", l.Epoch, "err", err)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
			defer cancel()
			_ = n.cfg.Leases.Release(rctx, l)
			return el.NotAcquired(time.Now())
		}
		*floor = l.Epoch
		return el.Acquired(time.Now(), sent, l.Epoch)
	case leader.Renew:
		timeout := min(callTimeout, time.Until(el.ValidUntil()))
		cctx, cancel := context.WithTimeout(ctx, max(timeout, time.Millisecond))
		defer cancel()
		sent := time.Now()
		ok, err := n.cfg.Leases.Renew(cctx, control.Leader{ID: n.cfg.ID, API: n.cfg.API, Epoch: d.Epoch}, n.cfg.LeaseTTL)
		switch {
		case err != nil:
			log.Warn("renew the lease failed", "epoch", d.Epoch, "err", err)
			return el.RenewFailed(time.Now())
		case !ok:
			return el.Lost(time.Now())
		}
		return el.Renewed(time.Now(), sent)
	case leader.Lead:
		n.startTerm(ctx, d.Epoch, el.ValidUntil())
	case leader.StepDown:
		log.Warn("stepping down", "epoch", d.Epoch, "reason", d.Reason)
		n.mu.Lock()
		n.mu.validUntil = time.Time{} // before the coordinator stops: it must not act meanwhile
		n.mu.Unlock()
		n.endTerm(false, nil)
	case leader.Release:
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		if err := n.cfg.Leases.Release(rctx, control.Leader{ID: n.cfg.ID, API: n.cfg.API, Epoch: d.Epoch}); err != nil {
			log.Warn("release the lease failed", "epoch", d.Epoch, "err", err)
		}
	}
	return nil
}

func (n *Node) setLeader(l control.Leader) {
	n.mu.Lock()
	n.mu.leader = l
	n.mu.Unlock()
}

// maxRecordedEpoch is the highest epoch recorded in the bucket (0: none).
func (n *Node) maxRecordedEpoch(ctx context.Context) (int64, error) {
	objs, err := n.cfg.Coordinator.Bucket.List(ctx, layout.EpochsPrefix())
	if err != nil {
		return 0, fmt.Errorf("list the recorded epochs: %w", err)
	}
	var top int64
	for _, o := range objs {
		if e, ok := layout.ParseEpochKey(o.Key); ok {
			top = max(top, e)
		}
	}
	return top, nil
}

// startTerm starts the coordinator of a leadership: it loads the jobs
// (claiming those that run for this epoch) and runs them. The lease is
// trusted until validUntil from before the coordinator starts: its first
// step checks it (Config.Leading), and the election loop records it only
// once the decisions that led here are carried out.
func (n *Node) startTerm(ctx context.Context, epoch int64, validUntil time.Time) {
	log := n.cfg.Coordinator.Logger
	cfg := n.cfg.Coordinator
	cfg.Epoch, cfg.Leading = epoch, n.leading
	cfg.Logger = log.With("epoch", epoch)
	c := New(cfg)
	var reg *prometheus.Registry
	if n.cfg.NewRegistry != nil {
		reg = n.cfg.NewRegistry()
	}
	tctx, cancel := context.WithCancel(ctx)
	t := &term{epoch: epoch, c: c, h: c.Handler(reg), cancel: cancel, done: make(chan error, 1)}
	n.mu.Lock()
	n.mu.term = t
	n.mu.leader = control.Leader{ID: n.cfg.ID, API: n.cfg.API, Epoch: epoch}
	n.mu.validUntil = validUntil
	n.mu.Unlock()
	log.Info("leading", "epoch", epoch, "id", n.cfg.ID)
	go func() {
		if err := c.Load(tctx); err != nil {
			t.done <- fmt.Errorf("load the jobs: %w", err)
			return
		}
		n.mu.Lock()
		t.ready = true
		n.mu.Unlock()
		t.done <- c.Run(tctx)
	}()
}

// endTerm stops the running coordinator, if any, and waits until it has
// closed. ended says its Run (or Load) has returned already, with err.
func (n *Node) endTerm(ended bool, err error) {
	n.mu.Lock()
	t := n.mu.term
	n.mu.term = nil
	if t != nil && n.mu.leader.ID == n.cfg.ID {
		n.mu.leader = control.Leader{}
	}
	n.mu.Unlock()
	if t == nil {
		return
	}
	t.cancel()
	if !ended {
		err = <-t.done
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		n.cfg.Coordinator.Logger.Info("leadership over", "epoch", t.epoch, "err", err)
	}
	if cerr := t.c.Close(); cerr != nil {
		n.cfg.Coordinator.Logger.Warn("close coordinator", "err", cerr)
	}
}

// forwardedHeader marks a request a standby forwarded, so that two nodes
// with stale views of each other never forward it in a loop.
const forwardedHeader = "X-Weir-Forwarded-By"

// Handler serves the API: the leader's coordinator answers; a standby
// forwards the request to the leader, or answers 503 with Retry-After
// while no leader is known. GET /api/v1/leader is answered by every node.
func (n *Node) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		t, l := n.mu.term, n.mu.leader
		ready := t != nil && t.ready
		n.mu.Unlock()
		if r.Method == http.MethodGet && r.URL.Path == "/api/v1/leader" {
			info := LeaderInfo{Self: n.cfg.ID, Role: "standby"}
			if ready {
				info.Role = "leader"
			}
			if l.ID != "" {
				info.Leader = &l
			}
			writeJSON(w, http.StatusOK, info)
			return
		}
		if ready {
			t.h.ServeHTTP(w, r)
			return
		}
		if t == nil && l.ID != "" && l.ID != n.cfg.ID && l.API != "" && r.Header.Get(forwardedHeader) == "" {
			if p := n.proxy(l.API); p != nil {
				r.Header.Set(forwardedHeader, n.cfg.ID)
				p.ServeHTTP(w, r)
				return
			}
		}
		w.Header().Set("Retry-After", "1")
		msg := "coordinator " + n.cfg.ID + " is a standby and knows no leader yet; try again"
		if t != nil {
			msg = "coordinator " + n.cfg.ID + " is taking over as leader; try again"
		}
		writeJSON(w, http.StatusServiceUnavailable, APIError{Error: msg})
	})
}

// proxy returns the reverse proxy to the leader at api (nil if api is not
// a URL).
func (n *Node) proxy(api string) *httputil.ReverseProxy {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.mu.proxies[api]; p != nil {
		return p
	}
	u, err := url.Parse(api)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil
	}
	p := httputil.NewSingleHostReverseProxy(u)
	p.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, APIError{Error: fmt.Sprintf("coordinator %s is a standby; the leader at %s did not answer: %v", n.cfg.ID, api, err)})
	}
	n.mu.proxies[api] = p
	return p
}
