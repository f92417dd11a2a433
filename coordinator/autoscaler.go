package coordinator

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/coordinator/internal/autoscale"
	"github.com/weirstream/weir/coordinator/internal/lifecycle"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/plan"
)

// The autoscaler's driver: for a job whose spec turns `autoscale` on, the
// loop feeds the policy (coordinator/internal/autoscale) the rates and
// backlogs its tasks report, once a second while it runs, and carries out
// what it decides with Scale. Every decision that differs from the one
// before it for the same vertex is kept in the job's scaling history
// (JobStatus.Scaling, weir jobs scaling).

// ScalingDecision is one entry of a job's scaling history.
type ScalingDecision struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"` // none, scale, suspend
	Vertex string    `json:"vertex"`
	From   int       `json:"from"`
	To     int       `json:"to"`
	Reason string    `json:"reason"`
	// The inputs: the busiest subtask's busy share and the vertex's
	// backpressured share (0..1), records per busy second per subtask,
	// the rate it receives and must sustain, the backlog carried to it,
	// the predicted restart cost and the time to clear the backlog now
	// and after the rescale (seconds; -1: never).
	Busy            float64 `json:"busy"`
	Backpressured   float64 `json:"backpressured"`
	TrueRate        float64 `json:"trueRate"`
	InputRate       float64 `json:"inputRate"`
	RequiredRate    float64 `json:"requiredRate"`
	Backlog         float64 `json:"backlog"`
	Utilization     float64 `json:"utilization"`
	RestartSeconds  float64 `json:"restartSeconds"`
	ClearNowSeconds float64 `json:"clearNowSeconds"`
	ClearAfter      float64 `json:"clearAfterSeconds"`
}

// maxScalingHistory is how many decisions a job keeps, and repeatEvery
// how often one that says the same again is kept.
const (
	maxScalingHistory = 200
	repeatEvery       = 30 * time.Second
)

// autoscaler is one job's policy and what the driver remembers.
type autoscaler struct {
	policy   *autoscale.Policy
	cfg      autoscale.Config
	vertices []string // the policy's graph, to see a plan change
	sampled  time.Time
	// backlog is each source vertex's backlog at the last sample, to
	// measure the rate records arrive at (read + backlog growth).
	backlog map[string]float64
	// scaling: a rescale it asked for is under way.
	scaling bool
	// seen counts the job's recoveries already fed to the policy.
	seen    int
	last    map[string]ScalingDecision // per vertex, the newest kept
	history []ScalingDecision
	// Suspended (suspend.go): when its sources were last asked, and
	// whether they are being asked.
	wakeCheck time.Time
	waking    bool
}

// newAutoscaler returns the driver of j's policy, or nil when its spec
// leaves autoscaling off.
func newAutoscaler(j *job) *autoscaler {
	a, ok := j.spec.EffectiveAutoscale()
	if !ok || !a.Enabled {
		return nil
	}
	as := &autoscaler{cfg: autoscale.FromSpec(a), backlog: map[string]float64{}, last: map[string]ScalingDecision{}}
	as.replan(j.plan)
	return as
}

// replan starts a fresh policy over p's graph when its vertices differ
// from the policy's (a rescale that split or merged chains).
func (as *autoscaler) replan(p *plan.Plan) {
	names := make([]string, len(p.Vertices))
	graph := make([]autoscale.Vertex, len(p.Vertices))
	for i, v := range p.Vertices {
		names[i] = v.Name
		graph[i] = autoscale.Vertex{Name: v.Name}
		for _, e := range v.Inputs {
			if from := vertexOf(p, e.From.Name); from != "" && !slices.Contains(graph[i].Inputs, from) {
				graph[i].Inputs = append(graph[i].Inputs, from)
			}
		}
	}
	if as.policy != nil && slices.Equal(names, as.vertices) {
		return
	}
	as.policy, as.vertices = autoscale.New(as.cfg, graph), names
}

// vertexOf names the vertex whose chain holds node.
func vertexOf(p *plan.Plan, node string) string {
	for _, v := range p.Vertices {
		for _, n := range v.Nodes {
			if n.Name == node {
				return v.Name
			}
		}
	}
	return ""
}

// autoscaleLocked samples j and acts on the policy's decisions, at most
// once a second while the job runs.
func (c *Coordinator) autoscaleLocked(ctx context.Context, j *job, now time.Time) {
	as := j.scaler
	if as == nil || j.lc.State() != JobRunning || now.Sub(as.sampled) < time.Second {
		return
	}
	if as.scaling {
		return
	}
	first := as.sampled.IsZero()
	elapsed := now.Sub(as.sampled).Seconds()
	as.sampled = now
	as.replan(j.plan)
	as.learn(j.lc.Recoveries(), j)
	samples := make([]autoscale.VertexSample, 0, len(j.plan.Vertices))
	for _, v := range j.plan.Vertices {
		s := autoscale.VertexSample{Vertex: v.Name, Parallelism: v.Parallelism, Source: v.Nodes[0].Kind == plan.KindSource}
		for _, n := range v.Nodes {
			if n.Op != nil && len(n.Op.KeyBy) > 0 {
				s.MaxParallelism = j.plan.Job.MaxParallelism
			}
		}
		var read float64
		complete := true
		for sub := range v.Parallelism {
			info := j.tasks[lifecycle.Task{Vertex: v.Name, Subtask: sub}]
			if info == nil || !info.hasRates {
				complete = false
				continue
			}
			r := info.rates
			s.Subtasks = append(s.Subtasks, autoscale.SubtaskSample{BusyMs: r.BusyMsPerSecond, BackpressuredMs: r.BackPressuredMsPerSecond,
				IdleMs: r.IdleMsPerSecond, RecordsIn: r.RecordsInPerSecond, RecordsOut: r.RecordsOutPerSecond})
			s.StateBytes += info.stats.StateBytes
			read += r.RecordsInPerSecond
			switch st := info.stats; {
			case st.BacklogUnit == "records":
				s.Backlog += float64(st.Backlog)
			case st.BacklogUnit == "bytes" && st.SourceUnit == "bytes" && st.SourceRead > 0 && st.RecordsIn > 0:
				// A files source: its bytes at the bytes per record read so far.
				s.Backlog += float64(st.Backlog) * float64(st.RecordsIn) / float64(st.SourceRead)
			}
		}
		if !complete {
			continue // a subtask without rates yet (just started)
		}
		if s.Source {
			// Records arrive at what the source read plus what piled
			// up since the last sample.
			s.InputRate = read
			if prev, ok := as.backlog[v.Name]; ok && !first && elapsed > 0 {
				s.InputRate = max(read+(s.Backlog-prev)/elapsed, 0)
			}
			as.backlog[v.Name] = s.Backlog
		}
		samples = append(samples, s)
	}
	if len(samples) == 0 {
		return
	}
	as.policy.Observe(now, samples)
	to := map[string]int{}
	for _, d := range as.policy.Decide(now) {
		if d.Kind == autoscale.Suspend {
			if j.lc.State() != JobRunning {
				continue // suspended by the decision on another vertex
			}
			if ok, why := c.suspendLocked(ctx, j, now, d); !ok {
				d.Kind, d.Reason = autoscale.None, "would suspend ("+d.Reason+"), but "+why
				as.policy = nil // the policy suspended itself: start it over
			}
			as.record(now, d)
			continue
		}
		if d.Kind == autoscale.Scale {
			names := scalable(j.plan.Vertex(d.Vertex))
			if len(names) == 0 {
				d.Kind, d.To = autoscale.None, d.From
				d.Reason = "this source keeps its parallelism (its position is per subtask; sources of splits rescale), so no rescale; would have scaled: " + d.Reason
			}
			for _, n := range names {
				to[n] = d.To
			}
		}
		as.record(now, d)
	}
	if as.policy == nil {
		as.replan(j.plan)
	}
	if len(to) == 0 || j.lc.State() != JobRunning {
		return
	}
	as.scaling = true
	id := j.id
	c.goAsync(time.Minute, func(ctx context.Context) func(context.Context) {
		_, err := c.Scale(ctx, id, to)
		return func(context.Context) {
			as.scaling = false
			if err != nil {
				c.cfg.Logger.Warn("autoscaler: rescale failed", "job", id, "err", err)
				as.record(c.now(), autoscale.Decision{Kind: autoscale.None, Reason: "the rescale it decided failed: " + err.Error()})
			}
		}
	})
}

// scalable names what a rescale of v sets: v itself, or for a chain that
// starts at a source not made of splits, the operators and sinks after it
// (the chain splits; such a source keeps its parallelism). Nil for such a
// source alone.
func scalable(v *plan.Vertex) []string {
	if v == nil {
		return nil
	}
	if h := v.Nodes[0]; h.Kind != plan.KindSource || connector.SplitSource(h.Source.Type) {
		return []string{v.Name}
	}
	var names []string
	for _, n := range v.Nodes[1:] {
		if n.Kind != plan.KindSource {
			names = append(names, n.Name)
		}
	}
	return names
}

// learn feeds the policy the restarts it has not seen: how long each
// took, and the state it restored.
func (as *autoscaler) learn(rs []lifecycle.Recovery, j *job) {
	for ; as.seen < len(rs); as.seen++ {
		r := rs[as.seen]
		if r.Running.IsZero() {
			break // still under way
		}
		d := r.Running.Sub(r.Detected)
		as.policy.ObserveRestart(d)
		var state int64
		for _, info := range j.tasks {
			state += info.stats.RestoreTotal
		}
		as.policy.ObserveRestore(state, d)
	}
}

// record keeps d in the history if it says something new about its
// vertex (another kind, target or kind of reason), or if the same was
// last kept repeatEvery ago: a steady job's history is one line per
// vertex every half minute, not one a second.
func (as *autoscaler) record(now time.Time, d autoscale.Decision) {
	secs := func(t time.Duration) float64 {
		if t == autoscale.Never {
			return -1
		}
		return t.Seconds()
	}
	e := ScalingDecision{Time: now, Kind: string(d.Kind), Vertex: d.Vertex, From: d.From, To: d.To, Reason: d.Reason,
		Busy: d.Busy, Backpressured: d.Backpressured, TrueRate: d.TrueRate, InputRate: d.InputRate, RequiredRate: d.RequiredRate,
		Backlog: d.Backlog, Utilization: d.Utilization, RestartSeconds: secs(d.RestartCost), ClearNowSeconds: secs(d.ClearNow), ClearAfter: secs(d.ClearAfter)}
	if prev, ok := as.last[d.Vertex]; ok && prev.Kind == e.Kind && prev.To == e.To && gist(prev.Reason) == gist(e.Reason) && now.Sub(prev.Time) < repeatEvery {
		return
	}
	as.last[d.Vertex] = e
	as.history = append(as.history, e)
	if n := len(as.history); n > maxScalingHistory {
		as.history = slices.Delete(as.history, 0, n-maxScalingHistory)
	}
}

// gist is what kind of reason r is: its first two words ("collecting
// metrics", "utilization 0.42" is "utilization" and a number, so the
// words before the first digit).
func gist(r string) string {
	if i := strings.IndexAny(r, "0123456789"); i >= 0 {
		r = r[:i]
	}
	f := strings.Fields(r)
	return strings.Join(f[:min(2, len(f))], " ")
}
