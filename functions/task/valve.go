package task

import "fmt"

// Valve combines the watermarks of a task's input channels into the task's
// watermark, like Flink's StatusWatermarkValve. It is a plain state machine:
// the task loop feeds it every watermark, idle marker and end of input it
// reads, and forwards what it returns. It holds no lock and no clock; one
// goroutine owns it.
//
// The output is the minimum over the inputs that are neither idle nor ended.
// It never goes backwards: a watermark lower than what an input already
// sent is ignored, and an input that comes back from idleness behind the
// output holds the output where it is until it catches up, instead of
// pulling it back. An input that has sent nothing yet counts as
// MinWatermark, so no window fires before every input has spoken (or been
// declared idle).
//
// When every input that has not ended is idle, nothing bounds event time
// any more: the output stays where it is and Idle reports true, so the task
// tells its consumers it is idle rather than inventing progress. (Flink
// additionally flushes the highest input watermark at that moment; weir
// does not, so an idle period never makes on-time records late.) Once every
// input has ended the output is MaxWatermark.
//
// The caller compares Idle before and after each call: when it turns true
// the task marks its outputs idle; when it turns false the output may not
// have moved (the input that woke up may be behind), so the task sends
// Current again to mark its outputs active.
type Valve struct {
	inputs []valveInput
	out    int64
	ended  int // inputs that have ended
}

type valveInput struct {
	wm    int64 // highest watermark received; MinWatermark before the first
	idle  bool
	ended bool
}

// NewValve returns a valve for a task with the given number of input
// channels (at least one). Its output starts at MinWatermark.
func NewValve(inputs int) *Valve {
	if inputs < 1 {
		panic(fmt.Sprintf("task: new valve with %d inputs: want at least 1", inputs))
	}
	v := &Valve{inputs: make([]valveInput, inputs), out: MinWatermark}
	for i := range v.inputs {
		v.inputs[i].wm = MinWatermark
	}
	return v
}

// Update records watermark wm from input; IdleWatermark marks the input
// idle, and any other value marks it active again. It returns the output
// watermark and whether it advanced, in which case the caller forwards it.
// An input that has ended ignores further watermarks. It panics if input
// is not in [0, inputs).
func (v *Valve) Update(input int, wm int64) (out int64, advanced bool) {
	in := &v.inputs[input]
	if in.ended {
		return v.out, false
	}
	if wm == IdleWatermark {
		in.idle = true
	} else {
		in.idle = false
		in.wm = max(in.wm, wm)
	}
	return v.advance()
}

// End records that input has finished: from now on it is at MaxWatermark
// and never holds the output back. It returns the output watermark and
// whether it advanced.
func (v *Valve) End(input int) (out int64, advanced bool) {
	in := &v.inputs[input]
	if !in.ended {
		in.ended = true
		in.wm = MaxWatermark
		v.ended++
	}
	return v.advance()
}

// Current returns the output watermark.
func (v *Valve) Current() int64 { return v.out }

// Idle reports whether every input that has not ended is idle (and at least
// one has not ended): the task should mark its outputs idle.
func (v *Valve) Idle() bool {
	if v.ended == len(v.inputs) {
		return false
	}
	for _, in := range v.inputs {
		if !in.ended && !in.idle {
			return false
		}
	}
	return true
}

// advance recomputes the output after a change of one input.
func (v *Valve) advance() (int64, bool) {
	// Ended inputs sit at MaxWatermark and drop out of the minimum by
	// themselves; idle ones are skipped. If nothing is left but idle
	// inputs, which may resume anywhere above the output, stay put.
	lowest, bounded := MaxWatermark, v.ended == len(v.inputs)
	for _, in := range v.inputs {
		if in.ended || in.idle {
			continue
		}
		bounded = true
		lowest = min(lowest, in.wm)
	}
	if !bounded || lowest <= v.out {
		return v.out, false
	}
	v.out = lowest
	return v.out, true
}
