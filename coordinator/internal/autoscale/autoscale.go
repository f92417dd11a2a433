package autoscale

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/weirstream/weir/functions/spec"
)

// Config is the policy's settings; zero fields take the defaults named.
type Config struct {
	// MinParallelism and MaxParallelism bound every vertex (defaults 1
	// and 8); a keyed vertex is also held at its key groups.
	MinParallelism, MaxParallelism int
	// TargetUtilization is the busy share a vertex is sized for (0.7).
	TargetUtilization float64
	// Band is the hysteresis: no action while the utilization a vertex
	// needs stays within TargetUtilization ± Band (0.15).
	Band float64
	// Window is how long samples are averaged over (20s); Stabilization
	// the least time between two rescales (30s); CatchUp how soon a
	// backlog should be gone (60s); ScaleToZero how long every source
	// must receive nothing before the job is suspended (0: never).
	Window, Stabilization, CatchUp, ScaleToZero time.Duration
	// RestartTime and RestoreBytesPerSecond are the guesses of a rescale's
	// cost until ObserveRestart and ObserveRestore measure them (5s and
	// 50 MiB/s).
	RestartTime           time.Duration
	RestoreBytesPerSecond float64
}

// Defaults of Config.
const (
	DefaultBand                  = 0.15
	DefaultRestartTime           = 5 * time.Second
	DefaultRestoreBytesPerSecond = 50 << 20
)

// FromSpec returns the Config of a job's autoscale section (with its
// defaults filled in, see spec.Job.EffectiveAutoscale).
func FromSpec(a spec.Autoscale) Config {
	return Config{MinParallelism: a.MinParallelism, MaxParallelism: a.MaxParallelism,
		TargetUtilization: a.TargetUtilization, Window: a.Window.D(), Stabilization: a.Stabilization.D(),
		CatchUp: a.CatchUp.D(), ScaleToZero: a.ScaleToZero.D()}
}

func (c Config) withDefaults() Config {
	d := spec.DefaultAutoscale
	if c.MinParallelism <= 0 {
		c.MinParallelism = d.MinParallelism
	}
	if c.MaxParallelism <= 0 {
		c.MaxParallelism = d.MaxParallelism
	}
	c.MaxParallelism = max(c.MaxParallelism, c.MinParallelism)
	if c.TargetUtilization <= 0 || c.TargetUtilization > 1 {
		c.TargetUtilization = d.TargetUtilization
	}
	if c.Band <= 0 {
		c.Band = DefaultBand
	}
	if c.Window <= 0 {
		c.Window = d.Window.D()
	}
	if c.Stabilization <= 0 {
		c.Stabilization = d.Stabilization.D()
	}
	if c.CatchUp <= 0 {
		c.CatchUp = d.CatchUp.D()
	}
	if c.RestartTime <= 0 {
		c.RestartTime = DefaultRestartTime
	}
	if c.RestoreBytesPerSecond <= 0 {
		c.RestoreBytesPerSecond = DefaultRestoreBytesPerSecond
	}
	return c
}

// Vertex is a vertex of the job's graph and the vertices it reads.
type Vertex struct {
	Name   string
	Inputs []string
}

// SubtaskSample is what one subtask reported, as rates per second.
type SubtaskSample struct {
	// BusyMs, BackpressuredMs and IdleMs are milliseconds per second.
	BusyMs, BackpressuredMs, IdleMs float64
	// RecordsIn and RecordsOut are records per second; a source's
	// RecordsIn are the records it read.
	RecordsIn, RecordsOut float64
}

// VertexSample is one vertex's metrics at one time.
type VertexSample struct {
	Vertex      string
	Parallelism int
	Source      bool
	// MaxParallelism is a keyed vertex's key groups (0: not keyed).
	MaxParallelism int
	Subtasks       []SubtaskSample
	// InputRate (records/s arriving) and Backlog (records not yet read)
	// are a source's; a backlog measured in bytes is the driver's to
	// convert.
	InputRate, Backlog float64
	// StateBytes is the vertex's state, all subtasks.
	StateBytes int64
}

// Kind is what a decision asks of the driver.
type Kind string

// Kinds.
const (
	// None: leave the vertex as it is (Reason says why).
	None Kind = "none"
	// Scale: rescale the vertex From → To; all Scale decisions of one
	// Decide are one rescale.
	Scale Kind = "scale"
	// Suspend: every source was idle for ScaleToZero; suspend the job
	// (To is 0).
	Suspend Kind = "suspend"
)

// Never is a catch-up time that never comes: the vertex falls behind.
const Never = time.Duration(math.MaxInt64)

// Decision is the policy's word on one vertex, with what it was based on.
type Decision struct {
	Kind     Kind
	Vertex   string
	From, To int // To == From for no action
	Reason   string
	// Busy is the busiest subtask's busy share over the window, and
	// Backpressured the vertex's mean backpressured share (0..1).
	Busy, Backpressured float64
	// TrueRate is records per busy second per subtask (0: not measured);
	// InputRate the records/s the vertex receives, carried down from the
	// sources; RequiredRate what it must sustain: InputRate plus Backlog
	// over CatchUp; Backlog the sources' backlog carried to it (records).
	TrueRate, InputRate, RequiredRate, Backlog float64
	// Utilization is RequiredRate over what From subtasks do when fully
	// busy.
	Utilization float64
	// RestartCost is the predicted time a rescale stops the job.
	RestartCost time.Duration
	// ClearNow and ClearAfter are how long until the vertex has no
	// backlog at From, and at To counting the restart and what piles up
	// during it (Never: it falls behind); Gain is ClearNow - ClearAfter.
	ClearNow, ClearAfter, Gain time.Duration
}

func (d Decision) String() string {
	var b strings.Builder
	if d.Kind == None {
		fmt.Fprintf(&b, "%s %s %d: %s", d.Kind, d.Vertex, d.From, d.Reason)
	} else {
		fmt.Fprintf(&b, "%s %s %d→%d: %s", d.Kind, d.Vertex, d.From, d.To, d.Reason)
	}
	if d.TrueRate > 0 || d.InputRate > 0 || d.Busy > 0 {
		fmt.Fprintf(&b, "\n  busy %.2f bp %.2f true %s/s in %s/s required %s/s backlog %s util %.2f cost %s clear %s→%s gain %s",
			d.Busy, d.Backpressured, num(d.TrueRate), num(d.InputRate), num(d.RequiredRate), num(d.Backlog),
			d.Utilization, secs(d.RestartCost), secs(d.ClearNow), secs(d.ClearAfter), secs(d.Gain))
	}
	return b.String()
}

func num(v float64) string { return fmt.Sprintf("%.0f", v) }

func secs(d time.Duration) string {
	switch d {
	case Never:
		return "never"
	case -Never:
		return "-never"
	}
	return d.Round(100 * time.Millisecond).String()
}

type timed struct {
	at time.Time
	s  VertexSample
}

// Policy is the machine. It is not safe for concurrent use.
type Policy struct {
	cfg   Config
	order []Vertex // the graph, inputs before the vertices that read them
	hist  map[string][]timed
	// since is when the samples of this parallelism began (zero: none
	// yet); lastAction the last rescale or suspension (zero: none).
	since, lastAction time.Time
	par               map[string]int
	lastActive        time.Time // the last sample in which a source received anything
	suspended         bool
	restart           time.Duration
	restore           float64
	restartSeen       bool
	restoreSeen       bool
}

// New returns a policy for a job with graph (every vertex and its inputs).
func New(cfg Config, graph []Vertex) *Policy {
	cfg = cfg.withDefaults()
	return &Policy{cfg: cfg, order: topo(graph), hist: map[string][]timed{}, par: map[string]int{},
		restart: cfg.RestartTime, restore: cfg.RestoreBytesPerSecond}
}

// topo orders the graph so that inputs come first; a cycle (the spec
// refuses them) keeps its vertices in the order given.
func topo(graph []Vertex) []Vertex {
	byName := map[string]Vertex{}
	for _, v := range graph {
		byName[v.Name] = v
	}
	var out []Vertex
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(v Vertex)
	visit = func(v Vertex) {
		if state[v.Name] != 0 {
			return
		}
		state[v.Name] = 1
		for _, in := range v.Inputs {
			if u, ok := byName[in]; ok {
				visit(u)
			}
		}
		state[v.Name] = 2
		out = append(out, v)
	}
	for _, v := range graph {
		visit(v)
	}
	return out
}

// ObserveRestart records the fixed time a recovery of this job took
// (deploying and starting tasks, not restoring state); the prediction is
// a moving average of what was observed.
func (p *Policy) ObserveRestart(d time.Duration) {
	if d <= 0 {
		return
	}
	if !p.restartSeen {
		p.restart, p.restartSeen = d, true
		return
	}
	p.restart = (p.restart + d) / 2
}

// ObserveRestore records that a recovery restored bytes of state in d.
func (p *Policy) ObserveRestore(bytes int64, d time.Duration) {
	if bytes <= 0 || d <= 0 {
		return
	}
	tp := float64(bytes) / d.Seconds()
	if !p.restoreSeen {
		p.restore, p.restoreSeen = tp, true
		return
	}
	p.restore = (p.restore + tp) / 2
}

// Observe takes the samples of some or all vertices at now. A vertex
// whose parallelism changed (a rescale, the policy's or a user's) starts
// the history over for the whole job and counts as the last action.
func (p *Policy) Observe(now time.Time, samples []VertexSample) {
	for _, s := range samples {
		if old, ok := p.par[s.Vertex]; ok && old != s.Parallelism {
			p.reset(now)
			p.lastAction = now
		}
		p.par[s.Vertex] = s.Parallelism
	}
	if p.since.IsZero() {
		p.since = now
	}
	if p.lastActive.IsZero() {
		p.lastActive = now
	}
	for _, s := range samples {
		if s.Source && active(s) {
			p.lastActive, p.suspended = now, false
		}
		h := append(p.hist[s.Vertex], timed{now, s})
		for len(h) > 0 && h[0].at.Before(now.Add(-p.cfg.Window)) {
			h = h[1:]
		}
		p.hist[s.Vertex] = h
	}
}

func active(s VertexSample) bool {
	if s.InputRate > 0 || s.Backlog > 0 {
		return true
	}
	for _, st := range s.Subtasks {
		if st.RecordsIn > 0 {
			return true
		}
	}
	return false
}

// Woken tells the policy that its suspended job was woken at now (input
// arrived; the coordinator saw it, the samples may not: a burst read
// before the new tasks reported a rate). It decides again, counting the
// sources active from now, so a job that receives nothing more is
// suspended again after ScaleToZero.
func (p *Policy) Woken(now time.Time) {
	p.suspended, p.lastActive = false, now
	p.reset(now)
}

func (p *Policy) reset(now time.Time) {
	p.hist = map[string][]timed{}
	p.since = now
}

// Decide returns a decision for every vertex with samples in the window.
// Scale decisions set the stabilization clock and start the history over
// (the samples before a rescale say nothing about after it).
func (p *Policy) Decide(now time.Time) []Decision {
	if p.suspended || p.since.IsZero() {
		return nil
	}
	var ds []Decision
	if z := p.cfg.ScaleToZero; z > 0 && now.Sub(p.lastActive) >= z {
		for _, v := range p.order {
			if par, ok := p.par[v.Name]; ok {
				ds = append(ds, Decision{Kind: Suspend, Vertex: v.Name, From: par, To: 0,
					Reason: fmt.Sprintf("every source received nothing for %s (scaleToZero %s)", now.Sub(p.lastActive), z)})
			}
		}
		p.suspended, p.lastAction = true, now
		p.reset(now)
		return ds
	}
	if have := now.Sub(p.since); have < p.cfg.Window {
		for _, v := range p.order {
			if par, ok := p.par[v.Name]; ok {
				ds = append(ds, Decision{Kind: None, Vertex: v.Name, From: par, To: par,
					Reason: fmt.Sprintf("collecting metrics: %s of the %s window", have, p.cfg.Window)})
			}
		}
		return ds
	}
	stats := p.stats(now)
	cost := p.restartCost(stats)
	acted := false
	for _, v := range p.order {
		st := stats[v.Name]
		if st == nil || st.missing == v.Name {
			continue // no samples in the window
		}
		var d Decision
		switch {
		case st.partial:
			d = Decision{Kind: None, Vertex: v.Name, From: st.par, To: st.par,
				Reason: fmt.Sprintf("collecting metrics: its samples cover %s of the %s window", now.Sub(st.first), p.cfg.Window)}
		case st.missing != "":
			d = Decision{Kind: None, Vertex: v.Name, From: st.par, To: st.par,
				Reason: fmt.Sprintf("waiting for metrics: its input %s has not been measured over the window", st.missing)}
		default:
			d = p.decide(v.Name, st, cost)
		}
		if d.Kind == Scale && !p.lastAction.IsZero() && now.Sub(p.lastAction) < p.cfg.Stabilization {
			d.Kind, d.To = None, d.From
			d.Reason = fmt.Sprintf("stabilizing: the last rescale was %s ago (stabilization %s); would have scaled: %s",
				now.Sub(p.lastAction), p.cfg.Stabilization, d.Reason)
		}
		acted = acted || d.Kind == Scale
		ds = append(ds, d)
	}
	if acted {
		p.lastAction = now
		p.reset(now)
	}
	return ds
}

// stat is a vertex's window: measured means and what is carried to it.
type stat struct {
	par, maxP     int
	source        bool
	busyMax, bp   float64
	trueRate      float64
	in, out       float64 // measured records/s, all subtasks
	rate, backlog float64 // carried down from the sources
	// recent is rate over the window's last quarter: after a step up the
	// window's mean still holds the lower load. A vertex that falls
	// behind on the recent rate is sized for it, so a step is taken in
	// one rescale; one whose recent rate is above the mean is not scaled
	// down. Otherwise (a load moving within the band) the mean decides.
	recent     float64
	stateBytes int64
	// first is the vertex's oldest sample in the window; partial says
	// they start more than a quarter of the window after another vertex's
	// (a subtask of it reported no rates yet), and missing names an input
	// with no samples or partial ones: either leaves the vertex unmeasured.
	first   time.Time
	partial bool
	missing string
}

// busyFloor is the busy share under which a subtask's rate is not
// measured: records over almost no busy time say little.
const busyFloor = 0.005

func (p *Policy) stats(now time.Time) map[string]*stat {
	out := map[string]*stat{}
	from := now.Add(-p.cfg.Window)
	// The oldest sample of any vertex in the window: one whose own
	// samples start more than a quarter window after it is partial.
	var began time.Time
	for _, h := range p.hist {
		for _, t := range h {
			if !t.at.Before(from) && !t.at.After(now) {
				if began.IsZero() || t.at.Before(began) {
					began = t.at
				}
				break
			}
		}
	}
	for _, v := range p.order {
		var win []timed
		for _, t := range p.hist[v.Name] {
			if !t.at.Before(from) && !t.at.After(now) {
				win = append(win, t)
			}
		}
		if len(win) == 0 {
			out[v.Name] = &stat{missing: v.Name}
			continue
		}
		last := win[len(win)-1].s
		st := &stat{par: last.Parallelism, maxP: last.MaxParallelism, source: last.Source,
			stateBytes: last.StateBytes, first: win[0].at}
		st.partial = st.first.After(began.Add(p.cfg.Window / 4))
		recentFrom := now.Add(-p.cfg.Window / 4)
		var recentSum, recentN float64
		n := float64(len(win))
		busy := make([]float64, len(last.Subtasks))
		var busyIn, busySum, bpSum float64
		for _, t := range win {
			for i, s := range t.s.Subtasks {
				if i < len(busy) {
					busy[i] += s.BusyMs / 1000 / n
				}
				st.in += s.RecordsIn / n
				st.out += s.RecordsOut / n
				bpSum += s.BackpressuredMs / 1000
				if s.BusyMs/1000 >= busyFloor {
					busyIn += s.RecordsIn
					busySum += s.BusyMs / 1000
				}
			}
			st.rate += t.s.InputRate / n
			if !t.at.Before(recentFrom) {
				recentSum += t.s.InputRate
				recentN++
			}
		}
		if recentN > 0 {
			st.recent = recentSum / recentN
		}
		for _, b := range busy {
			st.busyMax = max(st.busyMax, b)
		}
		if k := n * float64(len(last.Subtasks)); k > 0 {
			st.bp = bpSum / k
		}
		if busySum > 0 {
			st.trueRate = busyIn / busySum
		}
		if st.source {
			if st.rate == 0 {
				// A source that does not know its arrival rate.
				st.rate, st.recent = st.in, 0
			}
			st.backlog = last.Backlog
		} else {
			st.rate, st.recent = 0, 0
			for _, in := range v.Inputs {
				u, ok := out[in]
				if !ok || u.missing != "" || u.partial {
					st.missing = in
					continue
				}
				r := u.ratio()
				st.rate += u.rate * r
				st.recent += max(u.recent, u.rate) * r
				st.backlog += u.backlog * r
			}
		}
		out[v.Name] = st
	}
	return out
}

// ratio is how many records a vertex emits per record it takes in.
func (s *stat) ratio() float64 {
	if s.in <= 0 {
		return 1
	}
	return s.out / s.in
}

func (p *Policy) restartCost(stats map[string]*stat) time.Duration {
	var state int64
	for _, s := range stats {
		state += s.stateBytes // 0 for a vertex without samples
	}
	return p.restart + time.Duration(float64(state)/p.restore*float64(time.Second))
}

// clear is how long a vertex with capacity (records/s) takes to have no
// backlog, after a pause of pause during which rate keeps arriving.
func clearTime(backlog, rate, capacity float64, pause time.Duration) time.Duration {
	lag := backlog + rate*pause.Seconds()
	switch {
	case capacity < rate, capacity == rate && lag > 0:
		return Never
	case lag <= 0:
		return pause
	}
	return pause + time.Duration(lag/(capacity-rate)*float64(time.Second))
}

func (p *Policy) decide(name string, st *stat, cost time.Duration) Decision {
	c := p.cfg
	rate := st.rate
	if st.trueRate > 0 && st.recent > float64(st.par)*st.trueRate {
		rate = st.recent // it falls behind now: size it for now
	}
	required := rate + st.backlog/c.CatchUp.Seconds()
	d := Decision{Kind: None, Vertex: name, From: st.par, To: st.par, Busy: st.busyMax, Backpressured: st.bp,
		TrueRate: st.trueRate, InputRate: rate, RequiredRate: required, Backlog: st.backlog, RestartCost: cost}
	hi := c.MaxParallelism
	if st.maxP > 0 {
		hi = min(hi, st.maxP)
	}
	lo := min(c.MinParallelism, hi)
	var want int
	var why string
	if st.trueRate == 0 {
		// Nothing measurable: the vertex is (almost) never busy.
		want = lo
		why = fmt.Sprintf("idle: busy under %.1f%%", busyFloor*100)
	} else {
		capNow := float64(st.par) * st.trueRate
		d.Utilization = required / capNow
		d.ClearNow = clearTime(st.backlog, rate, capNow, 0)
		d.ClearAfter = d.ClearNow
		if math.Abs(d.Utilization-c.TargetUtilization) <= c.Band {
			d.Reason = fmt.Sprintf("utilization %.2f is within the target %.2f ± %.2f", d.Utilization, c.TargetUtilization, c.Band)
			return d
		}
		dir := "below"
		if d.Utilization > c.TargetUtilization {
			dir = "above"
		}
		want = int(math.Ceil(required/(st.trueRate*c.TargetUtilization) - 1e-9))
		why = fmt.Sprintf("utilization %.2f is %s the target %.2f ± %.2f", d.Utilization, dir, c.TargetUtilization, c.Band)
	}
	if clamped := min(max(want, lo), hi); clamped != want {
		bound := "minParallelism"
		switch {
		case clamped == st.maxP && clamped < c.MaxParallelism:
			bound = "its key groups"
		case clamped == c.MaxParallelism:
			bound = "maxParallelism"
		}
		why += fmt.Sprintf("; it wants %d, held at %s %d", want, bound, clamped)
		want = clamped
	}
	if want == st.par {
		if st.trueRate > 0 && !strings.Contains(why, "held at") {
			why += fmt.Sprintf("; %d is the parallelism that brings it nearest", want)
		}
		d.Reason = why + ": no change"
		return d
	}
	if st.trueRate > 0 {
		why += fmt.Sprintf("; at %d it is %.2f", want, required/(float64(want)*st.trueRate))
	}
	d.To = want
	d.ClearAfter = cost // an idle vertex: no lag to measure
	if st.trueRate > 0 {
		d.ClearAfter = clearTime(st.backlog, rate, float64(want)*st.trueRate, cost)
	}
	d.Gain = gain(d.ClearNow, d.ClearAfter)
	act := func(reason string) Decision {
		d.Kind, d.Reason = Scale, reason
		return d
	}
	hold := func(reason string) Decision {
		d.To, d.Reason = d.From, reason
		return d
	}
	if want > st.par {
		capNow := float64(st.par) * st.trueRate
		switch {
		case d.ClearNow == Never:
			return act(fmt.Sprintf("falls behind: must sustain %s/s, %d subtasks do %s/s; %s", num(required), st.par, num(capNow), why))
		case rate/capNow > c.TargetUtilization+c.Band:
			if d.ClearAfter > c.CatchUp {
				return hold(fmt.Sprintf("a rescale costs more than it gains: it keeps up at %d (utilization %.2f), and a %s restart would leave it behind for %s, more than catchUp %s",
					st.par, rate/capNow, secs(cost), secs(d.ClearAfter), c.CatchUp))
			}
			return act(why)
		case d.ClearNow <= c.CatchUp:
			return hold(fmt.Sprintf("the backlog of %s records clears in %s at %d anyway, within catchUp %s", num(st.backlog), secs(d.ClearNow), st.par, c.CatchUp))
		case d.Gain <= 0:
			return hold(fmt.Sprintf("a rescale costs more than it gains: the backlog clears in %s at %d, in %s at %d with a %s restart",
				secs(d.ClearNow), st.par, secs(d.ClearAfter), want, secs(cost)))
		}
		return act(fmt.Sprintf("backlog of %s records: clears in %s at %d, in %s at %d; %s", num(st.backlog), secs(d.ClearNow), st.par, secs(d.ClearAfter), want, why))
	}
	switch {
	case st.recent > rate && st.trueRate > 0 && int(math.Ceil((st.recent+st.backlog/c.CatchUp.Seconds())/(st.trueRate*c.TargetUtilization)-1e-9)) > want:
		return hold(fmt.Sprintf("not scaled down while the load rises: the window's last quarter receives %s/s, more than its mean %s/s", num(st.recent), num(rate)))
	case st.busyMax > c.TargetUtilization || st.bp > c.TargetUtilization:
		return hold(fmt.Sprintf("not scaled down while busy: busiest subtask %.2f, backpressured %.2f, target %.2f", st.busyMax, st.bp, c.TargetUtilization))
	case cost >= c.Stabilization:
		return hold(fmt.Sprintf("a rescale costs more than it gains: a restart takes %s, not less than stabilization %s, to save %d subtasks", secs(cost), c.Stabilization, st.par-want))
	case d.ClearAfter > c.CatchUp:
		return hold(fmt.Sprintf("not stable: at %d the backlog and the restart's lag would take %s to clear, more than catchUp %s", want, secs(d.ClearAfter), c.CatchUp))
	}
	return act(why)
}

func gain(now, after time.Duration) time.Duration {
	switch {
	case now == Never && after == Never:
		return 0
	case now == Never:
		return Never
	case after == Never:
		return -Never
	}
	return now - after
}
