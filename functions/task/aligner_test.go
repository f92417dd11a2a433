package task

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/integration/tracetest"
)

// TestAligner runs the scripts in testdata/aligner. Commands:
//
//	new <inputs>                      start a new aligner
//	barrier <input> <checkpoint> @<t> a barrier arrives at t nanoseconds
//	end <input> @<t>                  the input ends at t nanoseconds
//	abort <checkpoint>                the coordinator aborts the checkpoint
//	state                             print the alignment in progress
//
// Each event prints its decision (AlignDecision.String). Besides comparing
// with the golden output, the test keeps the caller's view of the blocked
// inputs, applying each decision's Block and Unblock, and checks that it
// matches Blocked after every command.
func TestAligner(t *testing.T) {
	tracetest.Run(t, "testdata/aligner", func(t *testing.T) tracetest.Func {
		var (
			a      *Aligner
			paused []bool // as the caller sees it
		)
		return func(t *testing.T, td *datadriven.TestData) (string, error) {
			cmd, args := td.Cmd, tracetest.Words(td)
			if cmd != "new" && a == nil {
				return "", fmt.Errorf("run new first")
			}
			var d AlignDecision
			switch cmd {
			case "new":
				if len(args) != 1 {
					return "", fmt.Errorf("new takes the number of inputs")
				}
				n, err := strconv.Atoi(args[0])
				if err != nil {
					return "", err
				}
				a, paused = NewAligner(n), make([]bool, n)
				return alignerState(a), nil
			case "barrier":
				if len(args) != 3 {
					return "", fmt.Errorf("barrier takes an input, a checkpoint and @time")
				}
				i, err := scriptInput(a, args[0])
				if err != nil {
					return "", err
				}
				c, err := strconv.ParseInt(args[1], 10, 64)
				if err != nil {
					return "", err
				}
				now, err := scriptTime(args[2])
				if err != nil {
					return "", err
				}
				if d, err = a.OnBarrier(i, c, now); err != nil {
					return "", err
				}
			case "end":
				if len(args) != 2 {
					return "", fmt.Errorf("end takes an input and @time")
				}
				i, err := scriptInput(a, args[0])
				if err != nil {
					return "", err
				}
				now, err := scriptTime(args[1])
				if err != nil {
					return "", err
				}
				d = a.OnEnd(i, now)
			case "abort":
				if len(args) != 1 {
					return "", fmt.Errorf("abort takes a checkpoint")
				}
				c, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil {
					return "", err
				}
				d = a.Abort(c)
			case "state":
				return alignerState(a), nil
			default:
				return "", fmt.Errorf("unknown command %q", cmd)
			}
			for _, i := range d.Unblock {
				paused[i] = false
			}
			for _, i := range d.Block {
				paused[i] = true
			}
			for i := range paused {
				if a.Blocked(i) != paused[i] {
					t.Errorf("%s %v: Blocked(%d) = %v, but the decisions say %v", cmd, args, i, a.Blocked(i), paused[i])
				}
			}
			return d.String(), nil
		}
	})
}

func scriptInput(a *Aligner, s string) (int, error) {
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= len(a.inputs) {
		return 0, fmt.Errorf("bad input %q: want 0 to %d", s, len(a.inputs)-1)
	}
	return i, nil
}

// scriptTime parses "@<nanoseconds>".
func scriptTime(s string) (time.Time, error) {
	ns, ok := strings.CutPrefix(s, "@")
	if !ok {
		return time.Time{}, fmt.Errorf("bad time %q: want @<nanoseconds>", s)
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad time %q: %w", s, err)
	}
	return time.Unix(0, n), nil
}

func alignerState(a *Aligner) string {
	var blocked []int
	for i := range a.inputs {
		if a.Blocked(i) {
			blocked = append(blocked, i)
		}
	}
	list := func(l []int) string {
		if len(l) == 0 {
			return "-"
		}
		return formatInputs(l)
	}
	c, ok := a.Aligning()
	if !ok {
		return "aligning - blocked " + list(blocked)
	}
	return fmt.Sprintf("aligning %d pending %s blocked %s", c, list(a.Pending()), list(blocked))
}

// TestAlignerDecisionString covers renderings the scripts may not reach.
func TestAlignerDecisionString(t *testing.T) {
	for _, tc := range []struct {
		d    AlignDecision
		want string
	}{
		{AlignDecision{}, "-"},
		{AlignDecision{Block: []int{2}}, "block 2"},
		{AlignDecision{Snapshot: 3, Duration: 50, Last: 1, Unblock: []int{0, 1}}, "snapshot 3 (aligned in 50ns, last input 1), unblock 0 1"},
		{AlignDecision{Aborted: 1, Snapshot: 2, Unblock: []int{0}}, "abort 1, snapshot 2 (aligned in 0s, last input 0), unblock 0"},
		{AlignDecision{Aborted: 1, Unblock: []int{0, 2}, Block: []int{1}}, "abort 1, unblock 0 2, block 1"},
		{AlignDecision{Ignored: 4}, "ignore 4"},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("%#v: got %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestAlignerRandom drives aligners with random interleavings of barriers
// for increasing checkpoints, ends and coordinator aborts, plus protocol
// violations, and checks them against a model of the inputs and the
// caller, which applies every decision:
//
//   - an input is blocked exactly when the decisions say so, and only while
//     an alignment is in progress whose barrier it delivered;
//   - a checkpoint is snapshot at most once, in increasing order, only when
//     every input that has not ended has delivered its barrier, and with the
//     time since its first barrier as the alignment duration;
//   - an alignment in progress is waiting for exactly the inputs Pending
//     returns, and for at least one;
//   - a barrier newer than anything this task has seen starts an alignment,
//     and only a barrier it has reason to skip is ignored;
//   - a rejected barrier changes nothing;
//   - at the end, once every input that has not ended delivers the latest
//     checkpoint, that checkpoint is snapshot unless the coordinator
//     aborted it.
func TestAlignerRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 500 {
		n := 1 + rng.IntN(4)
		m := &alignerModel{
			t:        t,
			a:        NewAligner(n),
			last:     make([]int64, n),
			ended:    make([]bool, n),
			paused:   make([]bool, n),
			first:    map[int64]int64{},
			snapshot: map[int64]bool{},
		}
		for step := range 200 {
			m.now += 1 + int64(rng.IntN(10))
			m.where = fmt.Sprintf("iter %d step %d (%d inputs)", iter, step, n)
			i := rng.IntN(n)
			// Ends are rare, so that most steps have live inputs.
			switch k := rng.IntN(40); {
			case k < 6:
				m.trig++ // the coordinator triggers the next checkpoint
			case k < 30:
				if m.ended[i] || m.paused[i] || m.last[i] >= m.trig {
					continue // nothing this input could deliver
				}
				// Inputs skip checkpoints that upstream tasks abandoned.
				c := m.trig
				if rng.IntN(2) == 0 {
					c = m.last[i] + 1 + rng.Int64N(m.trig-m.last[i])
				}
				m.barrier(i, c)
			case k < 31:
				// The task loop cannot read the end of a blocked input;
				// the aligner tolerates it, so try it now and then.
				if m.paused[i] && rng.IntN(4) != 0 {
					continue
				}
				m.end(i)
			case k < 35:
				if m.trig > 0 {
					m.abort(1 + rng.Int64N(m.trig))
				}
			default:
				m.violation(rng, i)
			}
			m.check()
		}
		m.where = fmt.Sprintf("iter %d flush (%d inputs)", iter, n)
		m.flush()
	}
}

// alignerModel is the inputs and the caller of an aligner under test.
type alignerModel struct {
	t     *testing.T
	a     *Aligner
	where string
	now   int64

	trig         int64   // latest checkpoint triggered by the coordinator
	coordAborted int64   // latest checkpoint the coordinator aborted
	last         []int64 // latest barrier each input delivered
	ended        []bool
	paused       []bool // the caller's view: Block and Unblock applied

	first    map[int64]int64 // checkpoint -> time its alignment started
	snapshot map[int64]bool
	lastSnap int64 // latest checkpoint snapshot
	aborted  int64 // latest checkpoint whose alignment was abandoned
}

func (m *alignerModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("%s: %s", m.where, fmt.Sprintf(format, args...))
}

func (m *alignerModel) barrier(i int, c int64) {
	m.t.Helper()
	cur, aligning := m.a.Aligning()
	d, err := m.a.OnBarrier(i, c, time.Unix(0, m.now))
	what := fmt.Sprintf("barrier %d %d -> %s", i, c, d)
	if err != nil {
		m.fatalf("%s: %v", what, err)
	}
	m.last[i] = c
	switch {
	case d.Ignored != 0:
		// Only a straggler may be ignored: older than the alignment in
		// progress, or no newer than a checkpoint already done with.
		if d.Ignored != c || (aligning && c == cur) ||
			(!(aligning && c < cur) && c > max(m.lastSnap, m.aborted, m.coordAborted)) {
			m.fatalf("%s: ignored wrongly (aligning %d %v, last snapshot %d, aborted %d, coordinator aborted %d)",
				what, cur, aligning, m.lastSnap, m.aborted, m.coordAborted)
		}
		if d.Aborted != 0 || d.Snapshot != 0 || len(d.Block)+len(d.Unblock) > 0 {
			m.fatalf("%s: ignored but did something", what)
		}
	case !aligning || c > cur:
		// A new alignment, which the first barrier starts.
		if c <= max(m.lastSnap, m.aborted, m.coordAborted) {
			m.fatalf("%s: started an alignment of a checkpoint already done with", what)
		}
		if _, ok := m.first[c]; ok {
			m.fatalf("%s: started the alignment of %d twice", what, c)
		}
		m.first[c] = m.now
		if got, _ := m.a.Aligning(); got != c && d.Snapshot != c {
			m.fatalf("%s: did not start aligning %d", what, c)
		}
	}
	if aligning && c > cur && d.Aborted != cur {
		m.fatalf("%s: overtaking %d did not abort it", what, cur)
	}
	if len(d.Block) > 0 && (len(d.Block) != 1 || d.Block[0] != i) {
		m.fatalf("%s: blocks other inputs than %d", what, i)
	}
	m.apply(what, cur, aligning, d)
}

func (m *alignerModel) end(i int) {
	m.t.Helper()
	cur, aligning := m.a.Aligning()
	d := m.a.OnEnd(i, time.Unix(0, m.now))
	what := fmt.Sprintf("end %d -> %s", i, d)
	m.ended[i] = true
	if d.Aborted != 0 || len(d.Block) > 0 || d.Ignored != 0 {
		m.fatalf("%s: an end only completes alignments", what)
	}
	m.apply(what, cur, aligning, d)
}

func (m *alignerModel) abort(c int64) {
	m.t.Helper()
	cur, aligning := m.a.Aligning()
	d := m.a.Abort(c)
	what := fmt.Sprintf("abort %d -> %s", c, d)
	m.coordAborted = max(m.coordAborted, c)
	if aligning && c >= cur && d.Aborted != cur {
		m.fatalf("%s: did not abandon the alignment of %d", what, cur)
	}
	if d.Snapshot != 0 || len(d.Block) > 0 || d.Ignored != 0 {
		m.fatalf("%s: an abort only abandons", what)
	}
	m.apply(what, cur, aligning, d)
}

// apply checks d against the model and carries it out as the caller would.
// cur and aligning are the alignment before the event.
func (m *alignerModel) apply(what string, cur int64, aligning bool, d AlignDecision) {
	m.t.Helper()
	if d.Aborted != 0 {
		if !aligning || d.Aborted != cur {
			m.fatalf("%s: aborted %d while aligning %d %v", what, d.Aborted, cur, aligning)
		}
		m.aborted = d.Aborted
	}
	if !slices.IsSorted(d.Unblock) {
		m.fatalf("%s: unblock not sorted", what)
	}
	for _, j := range d.Unblock {
		if !m.paused[j] {
			m.fatalf("%s: unblocks %d, which is not blocked", what, j)
		}
		m.paused[j] = false
	}
	if d.Aborted != 0 || d.Snapshot != 0 {
		// Abandoning or completing an alignment resumes every input.
		for j, p := range m.paused {
			if p {
				m.fatalf("%s: input %d still blocked", what, j)
			}
		}
	}
	if c := d.Snapshot; c != 0 {
		if m.snapshot[c] {
			m.fatalf("%s: snapshot %d again", what, c)
		}
		if c <= m.lastSnap {
			m.fatalf("%s: snapshot %d after %d", what, c, m.lastSnap)
		}
		for j := range m.last {
			if !m.ended[j] && m.last[j] != c {
				m.fatalf("%s: snapshot %d but input %d delivered %d", what, c, j, m.last[j])
			}
		}
		start, ok := m.first[c]
		if !ok {
			m.fatalf("%s: snapshot %d, whose alignment never started", what, c)
		}
		if want := time.Duration(m.now - start); d.Duration != want {
			m.fatalf("%s: aligned in %s, want %s", what, d.Duration, want)
		}
		m.snapshot[c], m.lastSnap = true, c
	}
	for _, j := range d.Block {
		if m.paused[j] {
			m.fatalf("%s: blocks %d, which is blocked already", what, j)
		}
		m.paused[j] = true
	}
}

// violation feeds a barrier that breaks the protocol on input i, if one
// applies, and checks that it is rejected without effect.
func (m *alignerModel) violation(rng *rand.Rand, i int) {
	m.t.Helper()
	cases := []int64{0} // checkpoint ids start at 1
	switch {
	case m.ended[i]:
		cases = append(cases, m.last[i]+1)
	case m.paused[i]:
		cases = append(cases, m.last[i]+1)
	}
	if m.last[i] > 0 {
		cases = append(cases, m.last[i], 1+rng.Int64N(m.last[i]))
	}
	c := cases[rng.IntN(len(cases))]
	before := alignerState(m.a)
	d, err := m.a.OnBarrier(i, c, time.Unix(0, m.now))
	var be *BarrierError
	if !errors.As(err, &be) || be.Input != i || be.Checkpoint != c {
		m.fatalf("barrier %d %d (last %d, ended %v, blocked %v): got %v, want a BarrierError",
			i, c, m.last[i], m.ended[i], m.paused[i], err)
	}
	if after := alignerState(m.a); after != before || d.String() != "-" {
		m.fatalf("barrier %d %d: rejected but changed %q to %q, decision %s", i, c, before, after, d)
	}
}

// check compares the aligner's state with the model after an event.
func (m *alignerModel) check() {
	m.t.Helper()
	cur, aligning := m.a.Aligning()
	for j, p := range m.paused {
		if got := m.a.Blocked(j); got != p {
			m.fatalf("Blocked(%d) = %v, but the decisions say %v", j, got, p)
		}
		if p && (!aligning || m.last[j] != cur) {
			m.fatalf("input %d blocked, with barrier %d, while aligning %d %v", j, m.last[j], cur, aligning)
		}
	}
	if !aligning {
		if p := m.a.Pending(); p != nil {
			m.fatalf("not aligning, but Pending() = %v", p)
		}
		return
	}
	if cur <= m.lastSnap || m.snapshot[cur] {
		m.fatalf("aligning %d after snapshot %d", cur, m.lastSnap)
	}
	var want []int
	for j := range m.last {
		if !m.ended[j] && m.last[j] < cur {
			want = append(want, j)
		}
	}
	if got := m.a.Pending(); !slices.Equal(got, want) || len(want) == 0 {
		m.fatalf("aligning %d: Pending() = %v, want %v (not empty)", cur, got, want)
	}
}

// flush delivers the latest checkpoint's barrier on every input that has
// not ended, as its inputs eventually would, and checks that it is then
// snapshot, unless the coordinator aborted it or every input ended.
func (m *alignerModel) flush() {
	m.t.Helper()
	if m.trig == 0 {
		return
	}
	for progressed := true; progressed; {
		progressed = false
		for i := range m.last {
			if !m.ended[i] && !m.paused[i] && m.last[i] < m.trig {
				m.now++
				m.barrier(i, m.trig)
				m.check()
				progressed = true
			}
		}
	}
	live := slices.Contains(m.ended, false)
	if live && m.trig > m.coordAborted && !m.snapshot[m.trig] {
		m.fatalf("every live input delivered %d, but it was not snapshot", m.trig)
	}
	if c, aligning := m.a.Aligning(); aligning {
		m.fatalf("still aligning %d after every input delivered %d", c, m.trig)
	}
}
