package control

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// local is the in-process Plane of the embedded mode.
type local struct {
	mu struct {
		sync.Mutex
		workers map[string]*localWorker
		events  []Event
		closed  bool
		// The lease (see Acquire).
		leader      *Leader
		leaderUntil time.Time
		epoch       int64
	}
	now     func() time.Time
	eventCh chan struct{} // signalled when events arrive
}

type localWorker struct {
	info    WorkerInfo
	expires time.Time
	inbox   chan Command
}

// NewLocal returns an in-process control plane.
func NewLocal() Plane {
	l := &local{now: time.Now, eventCh: make(chan struct{}, 1)}
	l.mu.workers = map[string]*localWorker{}
	return l
}

var _ Plane = (*local)(nil)

func (l *local) Register(_ context.Context, w WorkerInfo, ttl time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return fmt.Errorf("register worker %s: control plane closed", w.ID)
	}
	lw, ok := l.mu.workers[w.ID]
	if !ok {
		lw = &localWorker{inbox: make(chan Command, 1024)}
		l.mu.workers[w.ID] = lw
	}
	lw.info = w
	lw.expires = l.now().Add(ttl)
	return nil
}

func (l *local) Heartbeat(_ context.Context, id string, ttl time.Duration, u WorkerUsage) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	lw, ok := l.mu.workers[id]
	if !ok {
		return fmt.Errorf("heartbeat %s: %w", id, ErrUnknownWorker)
	}
	lw.expires = l.now().Add(ttl)
	lw.info.Usage = &u
	return nil
}

func (l *local) Deregister(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.mu.workers, id)
	return nil
}

func (l *local) Workers(context.Context) ([]WorkerInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var out []WorkerInfo
	for id, w := range l.mu.workers {
		if now.After(w.expires) {
			delete(l.mu.workers, id)
			continue
		}
		out = append(out, w.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (l *local) Send(ctx context.Context, id string, c Command) error {
	l.mu.Lock()
	w, ok := l.mu.workers[id]
	ok = ok && !l.now().After(w.expires) // a lapsed heartbeat is gone, as on Redis
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("send to %s: %w", id, ErrUnknownWorker)
	}
	select {
	case w.inbox <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *local) Receive(ctx context.Context, id string, wait time.Duration) (Command, bool, error) {
	l.mu.Lock()
	w, ok := l.mu.workers[id]
	l.mu.Unlock()
	if !ok {
		return Command{}, false, fmt.Errorf("receive for %s: %w", id, ErrUnknownWorker)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case c := <-w.inbox:
		return c, true, nil
	case <-t.C:
		return Command{}, false, nil
	case <-ctx.Done():
		return Command{}, false, ctx.Err()
	}
}

func (l *local) Report(_ context.Context, e Event) error {
	l.mu.Lock()
	l.mu.events = append(l.mu.events, e)
	l.mu.Unlock()
	select {
	case l.eventCh <- struct{}{}:
	default:
	}
	return nil
}

func (l *local) Events(ctx context.Context, wait time.Duration) ([]Event, error) {
	take := func() []Event {
		l.mu.Lock()
		defer l.mu.Unlock()
		ev := l.mu.events
		l.mu.events = nil
		return ev
	}
	if ev := take(); len(ev) > 0 {
		return ev, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-l.eventCh:
		return take(), nil
	case <-t.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *local) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.closed = true
	return nil
}

// The embedded plane's lease: one process, so the lease is a value kept
// here, with the same rules as Redis's (ttl, epochs that only grow).

func (l *local) Acquire(_ context.Context, me Leader, ttl time.Duration, floor int64) (Leader, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if cur := l.mu.leader; cur != nil && now.Before(l.mu.leaderUntil) && cur.ID != me.ID {
		return *cur, false, nil
	}
	l.mu.epoch = max(l.mu.epoch, floor) + 1
	me.Epoch = l.mu.epoch
	l.mu.leader, l.mu.leaderUntil = &me, now.Add(ttl)
	return me, true, nil
}

func (l *local) Renew(_ context.Context, me Leader, ttl time.Duration) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	cur := l.mu.leader
	if cur == nil || !now.Before(l.mu.leaderUntil) || cur.ID != me.ID || cur.Epoch != me.Epoch {
		return false, nil
	}
	l.mu.leaderUntil = now.Add(ttl)
	return true, nil
}

func (l *local) Release(_ context.Context, me Leader) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.mu.leader; cur != nil && cur.ID == me.ID && cur.Epoch == me.Epoch {
		l.mu.leader = nil
	}
	return nil
}

func (l *local) Current(context.Context) (Leader, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.mu.leader; cur != nil && l.now().Before(l.mu.leaderUntil) {
		return *cur, true, nil
	}
	return Leader{}, false, nil
}

func (l *local) Epoch(context.Context) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.epoch, nil
}
