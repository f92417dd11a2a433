package task

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Aligner is the barrier alignment of a task with several input channels,
// for aligned checkpoints (DESIGN.md, "Checkpoints", step 3; Flink's
// SingleCheckpointBarrierHandler). Like Valve it is a plain state machine:
// the task loop feeds it every barrier and end of input it reads, and every
// abort the coordinator sends, and carries out the AlignDecision it gets
// back. It holds no lock and reads no clock (the time comes in with each
// event); one goroutine owns it.
//
// The first barrier of checkpoint n starts the alignment of n, and every
// input that delivers barrier n is blocked: the task stops reading it, so
// that nothing after the barrier reaches the state before the snapshot. Its
// entries wait in the channel, holding their credits, so alignment costs no
// memory, only backpressure. When every input that has not ended has
// delivered barrier n, n is aligned: the task snapshots, forwards barrier n
// and resumes every blocked input. An input whose barrier completes the
// alignment is never blocked, so a single-input task aligns at once.
//
// One checkpoint is aligned at a time. A barrier of a newer checkpoint m
// while n is aligning means the coordinator has given up on n (it triggers
// checkpoints one at a time, in increasing order), so n is aborted and m
// starts with that barrier, as in Flink: waiting on n would only hold the
// blocked inputs for a checkpoint that cannot complete. Downstream tasks
// learn of it the same way, from barrier m overtaking n. Barriers of
// checkpoints older than the one aligning, or already completed or aborted
// here, are stragglers from inputs that had not delivered them yet; they
// are ignored. Abort does the same for a coordinator timeout.
//
// Barriers on a channel are strictly increasing: sources emit them in
// trigger order and every task forwards them in snapshot order, which the
// aligner makes increasing. So a barrier no newer than one its input
// already delivered, a barrier after the input's end, and a barrier read
// from an input the task was told to block all mean the task loop or a
// channel is broken; OnBarrier reports them as a *BarrierError and changes
// nothing, and the task should fail rather than snapshot an inconsistent
// cut.
//
// A task's loop drives it like this:
//
//	case exchange.KindBarrier:
//		d, err := aligner.OnBarrier(in, e.Value, now)
//		if err != nil {
//			return fmt.Errorf("input %s: %w", name, err)
//		}
//		apply(d) // abort, snapshot and forward, resume, pause: in that order
//	case exchange.KindEnd:
//		apply(aligner.OnEnd(in, now))
type Aligner struct {
	inputs []alignerInput

	// aligning is the checkpoint being aligned, 0 when none: checkpoint
	// ids start at 1.
	aligning int64
	start    time.Time // the first barrier of aligning
	// floor is the highest checkpoint started, completed or aborted here.
	// A barrier at or below it never starts an alignment, so a checkpoint
	// is aligned at most once and snapshots come in increasing order.
	floor int64
}

type alignerInput struct {
	last    int64 // highest barrier delivered; 0 before the first
	blocked bool
	ended   bool
}

// AlignDecision is what the task does after an aligner event. The caller
// carries it out in field order: forget Aborted, snapshot Snapshot and
// forward its barrier, resume Unblock, pause Block. Resuming before the
// snapshot is taken would let entries after the barrier into the state.
// The zero value means nothing to do.
type AlignDecision struct {
	// Aborted is the checkpoint whose alignment was abandoned, 0 for none:
	// overtaken by a newer barrier or aborted by the coordinator. The task
	// does not snapshot or acknowledge it.
	Aborted int64
	// Snapshot is the checkpoint that is now aligned, 0 for none: snapshot
	// the state, forward barrier Snapshot on every output, acknowledge.
	Snapshot int64
	// Duration is how long the alignment of Snapshot took, from its first
	// barrier to the event that completed it.
	Duration time.Duration
	// Last is the input whose barrier (or end) completed the alignment of
	// Snapshot: the one the task waited for longest. Meaningful only with
	// Snapshot.
	Last int
	// Unblock lists the inputs to resume, in increasing order: every input
	// that was blocked, whenever an alignment completes or is abandoned.
	Unblock []int
	// Block lists the inputs to pause: at most the one whose barrier
	// joined an alignment still waiting for others.
	Block []int
	// Ignored is the checkpoint of a barrier that changed nothing, 0 for
	// none: older than the alignment in progress, or completed or aborted
	// already. It is there for traces.
	Ignored int64
}

// String renders d compactly for traces, e.g.
// "abort 1, snapshot 2 (aligned in 50ns, last input 1), unblock 0 2"; "-"
// for nothing.
func (d AlignDecision) String() string {
	var parts []string
	if d.Aborted != 0 {
		parts = append(parts, fmt.Sprintf("abort %d", d.Aborted))
	}
	if d.Snapshot != 0 {
		parts = append(parts, fmt.Sprintf("snapshot %d (aligned in %s, last input %d)", d.Snapshot, d.Duration, d.Last))
	}
	if len(d.Unblock) > 0 {
		parts = append(parts, "unblock "+formatInputs(d.Unblock))
	}
	if len(d.Block) > 0 {
		parts = append(parts, "block "+formatInputs(d.Block))
	}
	if d.Ignored != 0 {
		parts = append(parts, fmt.Sprintf("ignore %d", d.Ignored))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func formatInputs(inputs []int) string {
	s := make([]string, len(inputs))
	for i, in := range inputs {
		s[i] = strconv.Itoa(in)
	}
	return strings.Join(s, " ")
}

// BarrierError reports a barrier that breaks the channel protocol (see
// Aligner). The aligner's state is unchanged; the task should fail.
type BarrierError struct {
	Input      int
	Checkpoint int64
	Reason     string
}

func (e *BarrierError) Error() string {
	return fmt.Sprintf("task: barrier %d on input %d: %s", e.Checkpoint, e.Input, e.Reason)
}

// NewAligner returns an aligner for a task with the given number of input
// channels (at least one), with no alignment in progress.
func NewAligner(inputs int) *Aligner {
	if inputs < 1 {
		panic(fmt.Sprintf("task: new aligner with %d inputs: want at least 1", inputs))
	}
	return &Aligner{inputs: make([]alignerInput, inputs)}
}

// OnBarrier records that barrier checkpoint came on input at now and
// returns what to do: block the input while others are missing, snapshot
// once none is, abort an older alignment it overtakes, or nothing for a
// straggler (Ignored). It returns a *BarrierError, and changes nothing, if
// checkpoint is below 1, the input has ended, is blocked, or already
// delivered this or a newer barrier. It panics if input is not in
// [0, inputs).
func (a *Aligner) OnBarrier(input int, checkpoint int64, now time.Time) (AlignDecision, error) {
	in := &a.inputs[input]
	fail := func(format string, args ...any) (AlignDecision, error) {
		return AlignDecision{}, &BarrierError{Input: input, Checkpoint: checkpoint, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case checkpoint < 1:
		return fail("checkpoint ids start at 1")
	case in.ended:
		return fail("the input has ended")
	case checkpoint == in.last:
		return fail("the input already delivered it")
	case checkpoint < in.last:
		return fail("the input already delivered barrier %d, and barriers on a channel only increase", in.last)
	case in.blocked:
		// The task read an input it was told to pause: entries after
		// barrier a.aligning may have reached the state already.
		return fail("the input is blocked for the alignment of checkpoint %d and must not be read", a.aligning)
	}
	in.last = checkpoint

	var d AlignDecision
	switch {
	case checkpoint == a.aligning:
		// Joins the alignment in progress.
	case a.aligning != 0 && checkpoint > a.aligning:
		d.Aborted = a.aligning
		a.release(&d)
		a.begin(checkpoint, now)
	case checkpoint <= a.floor:
		// Older than the alignment in progress (aligning > checkpoint), or
		// completed or aborted here: the input had not delivered it yet.
		d.Ignored = checkpoint
		return d, nil
	default:
		a.begin(checkpoint, now)
	}
	if a.complete(&d, input, now) {
		return d, nil
	}
	in.blocked = true
	d.Block = []int{input}
	return d, nil
}

// OnEnd records that input ended at now: it will deliver no more barriers,
// so alignments stop waiting for it, and if it was the last one missing,
// the checkpoint being aligned is snapshot now. Ending twice changes
// nothing. Once every input has ended no alignment can start: a barrier
// on an ended input is an error.
//
// The task loop cannot read the end of a blocked input, but if one ends
// anyway it keeps counting as delivered and stays blocked until the
// alignment completes or is abandoned, so that every Block is matched by
// an Unblock.
func (a *Aligner) OnEnd(input int, now time.Time) AlignDecision {
	in := &a.inputs[input]
	var d AlignDecision
	if in.ended {
		return d
	}
	in.ended = true
	if a.aligning != 0 {
		a.complete(&d, input, now)
	}
	return d
}

// Abort records that the coordinator aborted checkpoint (a timeout): if it
// is being aligned, or is newer than the one being aligned (which the
// coordinator then abandoned earlier), the alignment is abandoned and every
// blocked input resumed. Either way, barriers of checkpoint and older ones
// that are still on their way start nothing. The returned decision says
// which inputs to resume.
func (a *Aligner) Abort(checkpoint int64) AlignDecision {
	var d AlignDecision
	if a.aligning != 0 && checkpoint >= a.aligning {
		d.Aborted = a.aligning
		a.release(&d)
		a.aligning = 0
	}
	a.floor = max(a.floor, checkpoint)
	return d
}

// Blocked reports whether input is blocked: it delivered the barrier of the
// checkpoint being aligned, which still waits for other inputs.
func (a *Aligner) Blocked(input int) bool { return a.inputs[input].blocked }

// Aligning returns the checkpoint being aligned, if any.
func (a *Aligner) Aligning() (checkpoint int64, ok bool) {
	return a.aligning, a.aligning != 0
}

// Pending returns the inputs, in increasing order, that have neither ended
// nor delivered the barrier of the checkpoint being aligned; nil when none
// is.
func (a *Aligner) Pending() []int {
	if a.aligning == 0 {
		return nil
	}
	var out []int
	for i, in := range a.inputs {
		if !in.ended && in.last < a.aligning {
			out = append(out, i)
		}
	}
	return out
}

// begin starts aligning checkpoint, whose first barrier came at now.
func (a *Aligner) begin(checkpoint int64, now time.Time) {
	a.aligning, a.start, a.floor = checkpoint, now, checkpoint
}

// complete ends the alignment in progress with a snapshot if no input is
// missing after input's event, and reports whether it did.
func (a *Aligner) complete(d *AlignDecision, input int, now time.Time) bool {
	for _, in := range a.inputs {
		// An input with a newer barrier than aligning cannot exist: that
		// barrier would have overtaken the alignment.
		if !in.ended && in.last < a.aligning {
			return false
		}
	}
	d.Snapshot, d.Duration, d.Last = a.aligning, now.Sub(a.start), input
	a.release(d)
	a.aligning = 0
	return true
}

// release unblocks every blocked input into d.
func (a *Aligner) release(d *AlignDecision) {
	for i := range a.inputs {
		if a.inputs[i].blocked {
			a.inputs[i].blocked = false
			d.Unblock = append(d.Unblock, i)
		}
	}
}
