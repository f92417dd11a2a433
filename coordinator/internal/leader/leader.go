// Package leader is the state machine of coordinator leader election: a
// coordinator is a standby that tries to take the lease in Redis, or the
// leader that renews it. It is pure: the driver (coordinator.Node) does
// the Redis calls, feeds their results and the clock in, and carries out
// the decisions it gets back.
//
// The rule that keeps two leaders from acting at once is local: a leader
// acts only until validUntil = (the time it sent its last successful
// acquire or renew) + TTL - Margin, measured on its own clock. Redis lets
// the key expire TTL after it received that request, which is no earlier,
// so by the time a standby can take the lease the old leader has stopped
// acting even if it cannot reach Redis, was paused, or its renewals
// fail. (Epochs fence what a leader that was paused mid-write still
// sends; see the coordinator.)
package leader

import (
	"fmt"
	"time"
)

// Config times the lease.
type Config struct {
	// TTL is the lease's time to live in Redis.
	TTL time.Duration
	// RenewEvery is how often the leader renews (default TTL/3).
	RenewEvery time.Duration
	// RetryEvery is how often a standby tries to take the lease, and a
	// leader retries a renewal that failed (default min(TTL/10, 250ms)).
	RetryEvery time.Duration
	// Margin is how much earlier than Redis the leader stops trusting its
	// lease: room for clock-rate differences (default TTL/10).
	Margin time.Duration
}

func (c Config) withDefaults() Config {
	if c.RenewEvery <= 0 {
		c.RenewEvery = c.TTL / 3
	}
	if c.RetryEvery <= 0 {
		c.RetryEvery = min(c.TTL/10, 250*time.Millisecond)
	}
	if c.Margin <= 0 {
		c.Margin = c.TTL / 10
	}
	return c
}

// Action is what the driver is asked to do.
type Action string

// Actions.
const (
	// Acquire: try to take the lease (a standby).
	Acquire Action = "acquire"
	// Renew: extend the lease of Epoch (the leader).
	Renew Action = "renew"
	// Lead: this coordinator leads with Epoch from now on.
	Lead Action = "lead"
	// StepDown: stop acting as leader at once (Reason says why); the
	// lease of Epoch is no longer trusted.
	StepDown Action = "step-down"
	// Release: give up the lease of Epoch in Redis (best effort).
	Release Action = "release"
)

// Decision is one action with its epoch and reason.
type Decision struct {
	Action Action
	Epoch  int64
	Reason string
}

func (d Decision) String() string {
	s := string(d.Action)
	if d.Epoch != 0 {
		s += fmt.Sprintf(" epoch=%d", d.Epoch)
	}
	if d.Reason != "" {
		s += " (" + d.Reason + ")"
	}
	return s
}

// Elector is the machine. It is not safe for concurrent use.
type Elector struct {
	cfg        Config
	leading    bool
	epoch      int64
	validUntil time.Time
	nextAt     time.Time
	inflight   bool // an acquire or renew was asked for and has not been answered
	stopped    bool
	// ended counts the leaderships in a row that ended from within
	// before a renewal succeeded (Ended): each doubles how long this
	// coordinator holds off before it tries to lead again.
	ended int
}

// New returns a standby that tries to take the lease at its first tick.
func New(cfg Config, now time.Time) *Elector {
	return &Elector{cfg: cfg.withDefaults(), nextAt: now}
}

// Leading reports whether this coordinator may act as leader at now.
func (e *Elector) Leading(now time.Time) bool { return e.leading && now.Before(e.validUntil) }

// Epoch is the epoch this coordinator leads with (0 while a standby).
func (e *Elector) Epoch() int64 {
	if !e.leading {
		return 0
	}
	return e.epoch
}

// ValidUntil is when a leader stops trusting its lease.
func (e *Elector) ValidUntil() time.Time { return e.validUntil }

// Tick advances the clock: a leader whose lease lapsed steps down, and
// an acquire or renew is asked for when one is due.
func (e *Elector) Tick(now time.Time) []Decision {
	if e.stopped {
		return nil
	}
	var ds []Decision
	if e.leading && !now.Before(e.validUntil) {
		ds = append(ds, e.stepDown(now, "the lease lapsed: no renewal succeeded since "+e.validUntil.Add(e.cfg.Margin-e.cfg.TTL).Format("15:04:05.000")))
	}
	if e.inflight || now.Before(e.nextAt) {
		return ds
	}
	e.inflight = true
	if e.leading {
		return append(ds, Decision{Action: Renew, Epoch: e.epoch})
	}
	return append(ds, Decision{Action: Acquire})
}

func (e *Elector) stepDown(now time.Time, reason string) Decision {
	d := Decision{Action: StepDown, Epoch: e.epoch, Reason: reason}
	e.leading, e.epoch, e.validUntil = false, 0, time.Time{}
	e.nextAt = now.Add(e.cfg.RetryEvery)
	return d
}

// Acquired reports that the acquire sent at sentAt took the lease with
// epoch. A reply that comes after the lease would already have lapsed is
// given back.
func (e *Elector) Acquired(now, sentAt time.Time, epoch int64) []Decision {
	e.inflight = false
	validUntil := sentAt.Add(e.cfg.TTL - e.cfg.Margin)
	if e.stopped || !now.Before(validUntil) {
		e.nextAt = now
		return []Decision{{Action: Release, Epoch: epoch, Reason: "the reply came too late to trust the lease"}}
	}
	e.leading, e.epoch, e.validUntil = true, epoch, validUntil
	e.nextAt = sentAt.Add(e.cfg.RenewEvery)
	return []Decision{{Action: Lead, Epoch: epoch}}
}

// NotAcquired reports that another coordinator holds the lease, or that
// the acquire failed: the standby tries again RetryEvery later.
func (e *Elector) NotAcquired(now time.Time) []Decision {
	e.inflight = false
	e.nextAt = now.Add(e.cfg.RetryEvery)
	return nil
}

// Renewed reports that the renewal sent at sentAt extended the lease.
func (e *Elector) Renewed(now, sentAt time.Time) []Decision {
	e.inflight = false
	if !e.leading {
		return nil
	}
	if v := sentAt.Add(e.cfg.TTL - e.cfg.Margin); v.After(e.validUntil) {
		e.validUntil = v
	}
	e.nextAt = sentAt.Add(e.cfg.RenewEvery)
	e.ended = 0 // the leadership lasted past its first renewal
	return e.Tick(now)
}

// RenewFailed reports a renewal that did not reach Redis: the leader
// keeps acting until its lease lapses and retries RetryEvery later.
func (e *Elector) RenewFailed(now time.Time) []Decision {
	e.inflight = false
	e.nextAt = now.Add(e.cfg.RetryEvery)
	return e.Tick(now)
}

// Lost reports that Redis holds the lease for another coordinator (or for
// none): the leader steps down at once.
func (e *Elector) Lost(now time.Time) []Decision {
	e.inflight = false
	if !e.leading {
		return nil
	}
	return []Decision{e.stepDown(now, "another coordinator holds the lease")}
}

// Ended reports that the leadership ended from within (reason says how:
// its coordinator failed, or found a newer leader's status): the leader
// steps down and releases its lease, so that a standby takes over at
// once, and holds off before it tries to lead again, RetryEvery×2 for the
// first leadership in a row that ends so, doubling up to TTL: a
// coordinator that keeps failing (a bucket it cannot read) must not keep
// taking the lease from standbys that could lead, nor spend an epoch
// every RetryEvery.
func (e *Elector) Ended(now time.Time, reason string) []Decision {
	e.inflight = false
	if !e.leading {
		return nil
	}
	epoch := e.epoch
	d := e.stepDown(now, "the leadership ended: "+reason)
	e.ended++
	hold := e.cfg.TTL
	if e.ended < 16 {
		hold = min(e.cfg.RetryEvery<<e.ended, e.cfg.TTL)
	}
	e.nextAt = now.Add(hold)
	return []Decision{d, {Action: Release, Epoch: epoch}}
}

// Stop ends the machine: a leader steps down and releases its lease so a
// standby takes over at once.
func (e *Elector) Stop(now time.Time) []Decision {
	if e.stopped {
		return nil
	}
	e.stopped = true
	if !e.leading {
		return nil
	}
	epoch := e.epoch
	return []Decision{e.stepDown(now, "stopping"), {Action: Release, Epoch: epoch}}
}
