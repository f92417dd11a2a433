// Package autoscale is the autoscaler's policy: a pure state machine that
// reads the data plane's metrics and decides each vertex's parallelism
// (docs/autoscaling.md has the algorithm and its settings). It does no
// I/O, reads no clock and starts no goroutine: the coordinator feeds it
// samples and what it observed of recoveries, asks it for decisions, and
// carries them out (a rescale in place, or suspending an idle job).
//
// The driver's loop:
//
//	p := autoscale.New(autoscale.FromSpec(a), graph)
//	for each metrics report at now:
//		p.Observe(now, samples)
//		for _, d := range p.Decide(now) {
//			record d in the job's scaling history
//			collect d.To for every d.Kind == autoscale.Scale: one rescale
//			d.Kind == autoscale.Suspend: suspend the job
//		}
//	after each recovery: p.ObserveRestart(fixed time), p.ObserveRestore(bytes, time)
//
// Every decision, including "no action", carries its inputs and a Reason
// a person can read.
package autoscale
