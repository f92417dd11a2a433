package task

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/statestore/blob"
)

// Config is everything one task needs: which subtask of which vertex it is,
// its head (a source, or network inputs), the chain of operators and sinks
// it runs, and its outgoing edges.
type Config struct {
	Job            string
	Attempt        int
	Vertex         string
	Subtask        int
	Parallelism    int
	MaxParallelism int

	// Source is set when the chain starts with a source; otherwise Inputs
	// are the network channels that feed Nodes[0].
	Source  *SourceHead
	Inputs  []exchange.Channel
	Credits int
	// InputSide says, per channel of Inputs, which input of a two-input
	// head (TwoInputOperator) it feeds: 0 (left) or 1 (right). Nil for a
	// one-input head.
	InputSide []int

	// Nodes are the chained operators and sinks in topological order.
	Nodes []*Node
	// Edges are the outgoing network edges Targets refer to.
	Edges []EdgeOut

	Transport exchange.Transport
	Batching  Batching
	// Wire says how output entries are encoded when Transport crosses
	// processes; an in-process transport's entries are neither compressed
	// nor compact (the consumer reads the producer's memory).
	Wire      arrowfmt.WireOptions
	Bucket    blob.Bucket
	RedisAddr string

	Mem    memory.Allocator // default memory.DefaultAllocator
	Logger *slog.Logger     // default discards
	Now    func() time.Time // default time.Now

	// Tap, if set, sees every batch a chained sink receives, before the
	// sink writes it. It runs on the task goroutine and must not retain b.
	// The embedded mode's live views use it.
	Tap func(sink string, b arrow.RecordBatch)

	// Checkpoints, if set, makes the task take part in checkpoints: it
	// restores from Checkpoints.Restore, snapshots at barriers, and its
	// two-phase sinks write transactionally. Nil refuses barriers.
	Checkpoints *Checkpointing
}

// SourceHead is the source at the head of a chain and how the runtime
// drives it: rate limit, event-time watermarks and idleness.
type SourceHead struct {
	Name   string
	Source Source
	// Splits: the source is a set of splits with a position each
	// (connector.SourceType.Splits), so it restores at any parallelism.
	Splits bool
	// Rate is this subtask's share of the source's events per second; 0 is
	// unlimited.
	Rate float64
	// TimeColumn is the event-time column, or -1 for none (then the source
	// sends no watermarks until it ends).
	TimeColumn        int
	MaxOutOfOrderness time.Duration
	IdleTimeout       time.Duration
	// WatermarkInterval is how often watermarks are emitted (default 200ms).
	WatermarkInterval time.Duration
	Out               []Target
	// Outputs are the targets of each output of a MultiOutputSource, by
	// name; TimeColumns the event-time column of each (in the source's
	// Outputs order; -1 for none). Out and TimeColumn are then unused.
	Outputs     map[string][]Target
	TimeColumns []int
	// DeadLetters, if set, is the two-phase sink the source's malformed
	// records go to when the job checkpoints (plan.DeadLetterSink): they
	// are written at each barrier and commit with the checkpoint, so each
	// appears exactly once. It receives batches of DeadLetterSchema. Nil,
	// or a job without checkpoints, writes them directly (at least once).
	DeadLetters Sink
}

// Node is one chained operator or sink.
type Node struct {
	Name string
	Op   Operator // exactly one of Op and Sink
	Sink Sink
	Out  []Target            // main output
	Side map[string][]Target // side outputs by name
}

// Target is where an output goes: a chained node (by index in Nodes) or a
// network edge (by index in Edges).
type Target struct {
	Node int
	Edge int
}

// ChainTo and EdgeTo build Targets.
func ChainTo(node int) Target { return Target{Node: node, Edge: -1} }
func EdgeTo(edge int) Target  { return Target{Node: -1, Edge: edge} }

// Task runs one subtask.
type Task struct {
	cfg     Config
	stats   Stats
	stopped atomic.Bool
	trigger chan int64
}

// TriggerCheckpoint asks a source task to take checkpoint id: record its
// position, snapshot its chain and emit barrier id. Other tasks take
// checkpoints when barriers reach them. It does not block; a trigger that
// finds the queue full is dropped (the checkpoint times out). Safe to call
// from any goroutine.
func (t *Task) TriggerCheckpoint(id int64) {
	select {
	case t.trigger <- id:
	default:
	}
}

// Stop asks a source task to end its input early, as if the source were
// exhausted: event time goes to the end, every window fires, sinks flush,
// and the task finishes normally. Other tasks finish when their inputs
// end. Safe to call from any goroutine.
func (t *Task) Stop() { t.stopped.Store(true) }

// New returns a task for cfg; Run runs it.
func New(cfg Config) *Task {
	if cfg.Mem == nil {
		cfg.Mem = memory.DefaultAllocator
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Batching.Rows <= 0 {
		cfg.Batching.Rows = 8192
	}
	if cfg.Batching.Bytes <= 0 {
		cfg.Batching.Bytes = 1 << 20
	}
	if cfg.Batching.Timeout <= 0 {
		cfg.Batching.Timeout = 100 * time.Millisecond
	}
	if cfg.Source != nil && cfg.Source.WatermarkInterval <= 0 {
		cfg.Source.WatermarkInterval = 200 * time.Millisecond
	}
	t := &Task{cfg: cfg, trigger: make(chan int64, 16)}
	t.stats.Watermark.Store(MinWatermark)
	return t
}

// Stats returns the task's live counters.
func (t *Task) Stats() *Stats { return &t.stats }

// Run runs the task until its inputs end (nil: every output got its end
// entry and every sink finished), ctx is cancelled (ctx.Err()), or it fails.
func (t *Task) Run(ctx context.Context) (err error) {
	r := &runner{cfg: &t.cfg, stats: &t.stats, ctx: ctx, mem: t.cfg.Mem, now: t.cfg.Now, stopped: &t.stopped, maxTs: MinWatermark}
	if t.cfg.Checkpoints != nil {
		r.cp = newCheckpointer(r, t.trigger)
	}
	t.stats.started.Store(time.Now().UnixNano())
	defer func() {
		if cerr := r.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := r.open(); err != nil {
		return err
	}
	if t.cfg.Source != nil {
		return r.runSource()
	}
	return r.runInputs()
}

// runner is the state of one Run.
type runner struct {
	cfg   *Config
	stats *Stats
	ctx   context.Context
	mem   memory.Allocator
	now   func() time.Time

	nets      []*netOutput
	outs      []Output // per node: its main output
	headOut   Output   // a source's output
	multi     MultiOutputSource
	multiOut  []Output // a multi-output source's outputs, in its order
	timers    []ProcessingTimer
	opened    []int // nodes opened, to close
	wm        int64
	idle      bool
	dead      *deadLetters
	srcOpened bool
	stopped   *atomic.Bool
	maxTs     int64         // largest event time a source read
	cp        *checkpointer // nil without checkpoints
}

func (r *runner) open() error {
	cfg := r.cfg
	r.wm = MinWatermark
	for _, e := range cfg.Edges {
		n, err := newNetOutput(r, e)
		if err != nil {
			return err
		}
		r.nets = append(r.nets, n)
	}
	r.outs = make([]Output, len(cfg.Nodes))
	for i, n := range cfg.Nodes {
		r.outs[i] = r.targets(n.Out)
	}
	base := Context{
		Job: cfg.Job, Subtask: cfg.Subtask, Parallelism: cfg.Parallelism, MaxParallelism: cfg.MaxParallelism,
		Mem: r.mem, Logger: cfg.Logger, Now: r.now, Counters: &r.stats.Counters,
	}
	base.KeyGroupStart, base.KeyGroupEnd = arrowfmt.KeyGroupRange(cfg.Subtask, cfg.MaxParallelism, cfg.Parallelism)
	for i, n := range cfg.Nodes {
		c := base
		c.Node = n.Name
		c.Logger = cfg.Logger.With("node", n.Name, "subtask", cfg.Subtask)
		c.Out = r.outs[i]
		side := n.Side
		c.Side = func(name string) Output {
			if ts, ok := side[name]; ok {
				return r.targets(ts)
			}
			return discard{}
		}
		var err error
		if n.Sink != nil {
			sc := &SinkContext{Context: c, Bucket: cfg.Bucket, RedisAddr: cfg.RedisAddr, Attempt: cfg.Attempt}
			err = n.Sink.Open(sc)
		} else {
			err = n.Op.Open(&c)
			if pt, ok := n.Op.(ProcessingTimer); ok {
				r.timers = append(r.timers, pt)
			}
		}
		if err != nil {
			return fmt.Errorf("open %s[%d]: %w", n.Name, cfg.Subtask, err)
		}
		r.opened = append(r.opened, i)
		if tp, ok := AsTwoPhase(n.Sink); ok && cfg.Checkpoints != nil {
			tp.EnableTransactions()
		}
	}
	if r.cp != nil {
		if err := r.cp.restore(r.ctx); err != nil {
			return err
		}
		if err := r.cp.restoreSource(); err != nil {
			return err
		}
	}
	if s := cfg.Source; s != nil {
		r.headOut = r.targets(s.Out)
		if ms, ok := s.Source.(MultiOutputSource); ok {
			r.multi = ms
			names := ms.Outputs()
			if len(s.TimeColumns) != len(names) {
				return fmt.Errorf("source %s: %d outputs but %d time columns configured", s.Name, len(names), len(s.TimeColumns))
			}
			for _, name := range names {
				r.multiOut = append(r.multiOut, r.targets(s.Outputs[name]))
			}
		}
		r.dead = newDeadLetters(cfg, s.Name, &r.stats.Counters)
		if s.DeadLetters != nil && cfg.Checkpoints != nil {
			if err := r.dead.open(s.DeadLetters, base); err != nil {
				return err
			}
		}
		c := base
		c.Node = s.Name
		c.Logger = cfg.Logger.With("node", s.Name, "subtask", cfg.Subtask)
		c.Out = r.headOut
		c.Side = func(string) Output { return discard{} }
		sc := &SourceContext{Context: c, Bucket: cfg.Bucket, RedisAddr: cfg.RedisAddr, DeadLetter: r.dead.add}
		if err := s.Source.Open(sc); err != nil {
			return fmt.Errorf("open %s[%d]: %w", s.Name, cfg.Subtask, err)
		}
		r.srcOpened = true
		r.stats.noteProgress(s.Source)
	}
	return nil
}

// targets builds the Output for a list of targets.
func (r *runner) targets(ts []Target) Output {
	var f fanout
	for _, t := range ts {
		if t.Edge >= 0 {
			f = append(f, r.nets[t.Edge])
		} else {
			f = append(f, &nodeInput{r: r, n: r.cfg.Nodes[t.Node]})
		}
	}
	switch len(f) {
	case 0:
		return discard{}
	case 1:
		return f[0]
	}
	return f
}

// nodeInput feeds a chained node.
type nodeInput struct {
	r *runner
	n *Node
}

func (in *nodeInput) Emit(b arrow.RecordBatch) error {
	if in.n.Sink != nil {
		if in.r.cfg.Tap != nil {
			in.r.cfg.Tap(in.n.Name, b)
		}
		if err := in.n.Sink.Write(in.r.ctx, b); err != nil {
			return fmt.Errorf("sink %s: %w", in.n.Name, err)
		}
		in.r.stats.RecordsOut.Add(b.NumRows())
		in.r.stats.SinkIn.Add(b.NumRows())
		return nil
	}
	if err := in.n.Op.ProcessBatch(b); err != nil {
		return fmt.Errorf("operator %s: %w", in.n.Name, err)
	}
	return nil
}

func (r *runner) runInputs() error {
	cfg := r.cfg
	reader, err := cfg.Transport.NewReader(r.ctx, cfg.Inputs, exchange.ReaderOptions{Credits: cfg.Credits})
	if err != nil {
		return fmt.Errorf("open inputs: %w", err)
	}
	defer reader.Close()
	valve := NewValve(len(cfg.Inputs))
	decoders := make([]*arrowfmt.Decoder, len(cfg.Inputs))
	defer func() {
		for _, d := range decoders {
			if d != nil {
				d.Close()
			}
		}
	}()
	head := &nodeInput{r: r, n: cfg.Nodes[0]}
	var two TwoInputOperator
	if cfg.InputSide != nil {
		var ok bool
		if two, ok = cfg.Nodes[0].Op.(TwoInputOperator); !ok || len(cfg.InputSide) != len(cfg.Inputs) {
			return fmt.Errorf("vertex %s: input sides given for a head that is not a two-input operator", cfg.Vertex)
		}
	}
	var aligner *Aligner
	if r.cp != nil {
		aligner = NewAligner(len(cfg.Inputs))
	}
	align := func(d AlignDecision) error {
		if d.Snapshot != 0 {
			if err := r.cp.take(d.Snapshot, d.Duration, inputName(cfg.Inputs[d.Last])); err != nil {
				return err
			}
		}
		for _, in := range d.Unblock {
			reader.Resume(in)
		}
		for _, in := range d.Block {
			reader.Pause(in)
		}
		return nil
	}
	ended := 0
	for ended < len(cfg.Inputs) {
		wait := r.untilWake(r.now())
		t0 := time.Now()
		in, e, ok, err := reader.Read(r.ctx, wait)
		r.stats.addIdle(time.Since(t0))
		if err != nil {
			return fmt.Errorf("read input: %w", err)
		}
		if ok {
			switch e.Kind {
			case exchange.KindData:
				if decoders[in] == nil {
					decoders[in] = arrowfmt.NewDecoder(r.mem)
				}
				rec, err := decoders[in].Decode(e.Payload)
				if err != nil {
					return fmt.Errorf("decode entry of %s: %w", cfg.Inputs[in], err)
				}
				r.stats.RecordsIn.Add(rec.NumRows())
				if two != nil {
					err = two.ProcessBatchFrom(cfg.InputSide[in], rec)
					if err != nil {
						err = fmt.Errorf("operator %s: %w", cfg.Nodes[0].Name, err)
					}
				} else {
					err = head.Emit(rec)
				}
				rec.Release()
				if err != nil {
					return err
				}
			case exchange.KindWatermark:
				if wm, adv := valve.Update(in, e.Value); adv {
					if err := r.advance(wm); err != nil {
						return err
					}
				} else if valve.Idle() != r.idle {
					if err := r.setIdle(valve.Idle()); err != nil {
						return err
					}
				}
			case exchange.KindEnd:
				ended++
				if wm, adv := valve.End(in); adv {
					if err := r.advance(wm); err != nil {
						return err
					}
				}
				if aligner != nil {
					if err := align(aligner.OnEnd(in, time.Now())); err != nil {
						return err
					}
				}
			case exchange.KindBarrier:
				if aligner == nil {
					return fmt.Errorf("input %s: barrier %d: checkpoints are not enabled for this job", cfg.Inputs[in], e.Value)
				}
				d, err := aligner.OnBarrier(in, e.Value, time.Now())
				if err != nil {
					return fmt.Errorf("input %s: %w", cfg.Inputs[in], err)
				}
				if err := align(d); err != nil {
					return err
				}
			default:
				return fmt.Errorf("input %s: unknown entry kind %d", cfg.Inputs[in], e.Kind)
			}
		}
		if err := r.tick(r.now()); err != nil {
			return err
		}
	}
	return r.finish()
}

// sourceBacklog measures a source task's backlog about once a second: the
// source's own (Backlogged), else the events it is behind its rate; and
// the time its Polls waited for input (Waiter).
type sourceBacklog struct {
	r          *runner
	start      time.Time
	next       time.Time
	lastWaited time.Duration
}

// waited returns the time the source's Polls waited for input since the
// last call (0 for a source that is no Waiter).
func (b *sourceBacklog) waited() time.Duration {
	w, ok := b.r.cfg.Source.Source.(Waiter)
	if !ok {
		return 0
	}
	total := w.Waited()
	d := total - b.lastWaited
	b.lastWaited = total
	return max(d, 0)
}

func (b *sourceBacklog) update(now time.Time) {
	if now.Before(b.next) {
		return
	}
	b.next = now.Add(time.Second)
	s := b.r.cfg.Source
	if bl, ok := s.Source.(Backlogged); ok {
		if n, unit, ok := bl.Backlog(b.r.ctx); ok {
			b.r.stats.setBacklog(n, unit)
		}
		return
	}
	if s.Rate > 0 {
		due := int64(s.Rate * now.Sub(b.start).Seconds())
		b.r.stats.setBacklog(max(due-b.r.stats.RecordsIn.Load(), 0), "records")
	}
}

// sourceEnded finishes a source task at the end of its input: nothing is
// left to read, so its backlog is 0 (the last measurement, up to a second
// old, would otherwise stay in its final report).
func (r *runner) sourceEnded() error {
	r.stats.backlog.Store(0)
	return r.finish()
}

func (r *runner) runSource() error {
	s := r.cfg.Source
	var (
		lastWm   = r.now()
		lastData = r.now()
		tokens   float64
		lastFill = r.now()
	)
	burst := max(s.Rate/20, 1) // at most 50ms worth of events at once
	// Poll once ~10ms worth of events is allowed, not for every token:
	// batches of one row would cost more than the rows themselves.
	quantum := max(min(s.Rate/100, burst), 1)
	backlog := sourceBacklog{r: r, start: r.now()}
	for {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		backlog.update(r.now())
		if r.stopped.Load() {
			r.cfg.Logger.Info("source stopped early: draining")
			return r.finish()
		}
		if err := r.takeTriggered(); err != nil {
			return err
		}
		now := r.now()
		maxRows := r.cfg.Batching.Rows
		if s.Rate > 0 {
			tokens = min(tokens+now.Sub(lastFill).Seconds()*s.Rate, burst)
			lastFill = now
			if tokens < quantum {
				d := time.Duration((quantum - tokens) / s.Rate * float64(time.Second))
				if err := r.sleep(min(d, r.untilWake(now))); err != nil {
					return err
				}
				if err := r.tick(r.now()); err != nil {
					return err
				}
				continue
			}
			maxRows = min(maxRows, int(tokens))
		}
		t0 := time.Now()
		if r.multi != nil {
			got, err := r.pollMulti(maxRows, min(r.untilWake(now), 100*time.Millisecond))
			r.stats.noteProgress(s.Source)
			if errors.Is(err, io.EOF) {
				return r.sourceEnded()
			}
			if err != nil {
				return fmt.Errorf("source %s[%d]: %w", s.Name, r.cfg.Subtask, err)
			}
			now = r.now()
			if got == 0 {
				r.stats.addIdle(time.Since(t0))
			} else {
				tokens -= float64(got)
				lastData = now
				if r.idle {
					if err := r.setIdle(false); err != nil {
						return err
					}
				}
			}
			if err := r.sourceTime(now, &lastWm, lastData); err != nil {
				return err
			}
			continue
		}
		b, err := s.Source.Poll(r.ctx, maxRows, min(r.untilWake(now), 100*time.Millisecond))
		r.stats.noteProgress(s.Source)
		waited := backlog.waited()
		if errors.Is(err, io.EOF) {
			return r.sourceEnded()
		}
		if err != nil {
			return fmt.Errorf("source %s[%d]: %w", s.Name, r.cfg.Subtask, err)
		}
		now = r.now()
		if b == nil || b.NumRows() == 0 {
			r.stats.addIdle(time.Since(t0))
			if b != nil {
				b.Release()
			}
		} else {
			r.stats.addIdle(min(waited, time.Since(t0)))
			n := b.NumRows()
			tokens -= float64(n)
			lastData = now
			r.stats.RecordsIn.Add(n)
			if s.TimeColumn >= 0 {
				r.maxTs = max(r.maxTs, maxTimestamp(b.Column(s.TimeColumn)))
			}
			err := r.headOut.Emit(b)
			b.Release()
			if err != nil {
				return err
			}
			if r.idle {
				if err := r.setIdle(false); err != nil {
					return err
				}
			}
		}
		if err := r.sourceTime(now, &lastWm, lastData); err != nil {
			return err
		}
	}
}

// pollMulti polls a multi-output source and emits each output's batch; it
// returns how many rows it emitted.
func (r *runner) pollMulti(maxRows int, wait time.Duration) (int64, error) {
	bs, err := r.multi.PollOutputs(r.ctx, maxRows, wait)
	if err != nil {
		return 0, err
	}
	var n int64
	defer func() {
		for _, b := range bs {
			if b != nil {
				b.Release()
			}
		}
	}()
	if len(bs) != len(r.multiOut) {
		return 0, fmt.Errorf("PollOutputs returned %d batches for %d outputs", len(bs), len(r.multiOut))
	}
	for i, b := range bs {
		if b == nil || b.NumRows() == 0 {
			continue
		}
		n += b.NumRows()
		if tc := r.cfg.Source.TimeColumns[i]; tc >= 0 {
			r.maxTs = max(r.maxTs, maxTimestamp(b.Column(tc)))
		}
		if err := r.multiOut[i].Emit(b); err != nil {
			return n, err
		}
	}
	r.stats.RecordsIn.Add(n)
	return n, nil
}

// sourceTime does a source task's time-driven work after a poll:
// watermarks, idleness and tick.
func (r *runner) sourceTime(now time.Time, lastWm *time.Time, lastData time.Time) error {
	s := r.cfg.Source
	timed := s.TimeColumn >= 0 || len(s.TimeColumns) > 0
	if timed && now.Sub(*lastWm) >= s.WatermarkInterval {
		*lastWm = now
		if r.maxTs > MinWatermark {
			if wm := r.maxTs - s.MaxOutOfOrderness.Milliseconds() - 1; wm > r.wm {
				if err := r.advance(wm); err != nil {
					return err
				}
			}
		}
	}
	if s.IdleTimeout > 0 && !r.idle && now.Sub(lastData) >= s.IdleTimeout {
		if err := r.setIdle(true); err != nil {
			return err
		}
	}
	return r.tick(now)
}

// inputName names an input channel by its producer, "win[1]".
func inputName(ch exchange.Channel) string { return fmt.Sprintf("%s[%d]", ch.Edge, ch.Producer) }

// takeTriggered takes the checkpoints triggered since the last call (a
// source task's).
func (r *runner) takeTriggered() error {
	if r.cp == nil {
		return nil
	}
	for {
		select {
		case id := <-r.cp.trigger:
			if err := r.cp.take(id, 0, ""); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// sleep waits d, until ctx is done or until a checkpoint is triggered,
// counting the time as idle.
func (r *runner) sleep(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	t0 := time.Now()
	defer func() { r.stats.addIdle(time.Since(t0)) }()
	var trigger chan int64
	if r.cp != nil {
		trigger = r.cp.trigger
	}
	select {
	case <-r.ctx.Done():
		return r.ctx.Err()
	case <-t.C:
		return nil
	case id := <-trigger:
		return r.cp.take(id, 0, "")
	}
}

// maxTimestamp returns the largest non-null value of a timestamp column
// (MinWatermark if it has none, or is of another type).
func maxTimestamp(col arrow.Array) int64 {
	if col.DataType().ID() != arrow.TIMESTAMP {
		return MinWatermark
	}
	if _, hi, ok := arrowfmt.Bounds(col); ok {
		return max(hi, MinWatermark)
	}
	return MinWatermark
}

// advance moves event time to wm through the chain, then downstream.
func (r *runner) advance(wm int64) error {
	if wm <= r.wm {
		return nil
	}
	r.wm = wm
	r.idle = false
	r.stats.Watermark.Store(wm)
	for _, n := range r.cfg.Nodes {
		if n.Op != nil {
			if err := n.Op.ProcessWatermark(wm); err != nil {
				return fmt.Errorf("operator %s: watermark: %w", n.Name, err)
			}
		}
	}
	return r.control(exchange.Entry{Kind: exchange.KindWatermark, Value: wm})
}

// setIdle tells downstream that this task has become idle (or active).
func (r *runner) setIdle(idle bool) error {
	r.idle = idle
	if idle {
		return r.control(exchange.Entry{Kind: exchange.KindWatermark, Value: IdleWatermark})
	}
	if r.wm > MinWatermark {
		return r.control(exchange.Entry{Kind: exchange.KindWatermark, Value: r.wm})
	}
	return nil
}

func (r *runner) control(e exchange.Entry) error {
	for _, n := range r.nets {
		if err := n.control(r.ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// tick does the time-driven work: flushing output buffers that waited long
// enough, firing processing-time timers and letting idle writers look
// for a lost channel.
func (r *runner) tick(now time.Time) error {
	if r.cp != nil {
		if err := r.cp.failure(); err != nil {
			return err
		}
		if err := r.cp.step(); err != nil {
			return err
		}
	}
	for _, pt := range r.timers {
		if t, ok := pt.NextProcessingTime(); ok && !now.Before(t) {
			if err := pt.OnProcessingTime(now); err != nil {
				return fmt.Errorf("processing-time timer: %w", err)
			}
		}
	}
	for _, n := range r.nets {
		if _, err := n.flushDue(now); err != nil {
			return err
		}
		if err := n.idle(now); err != nil {
			return err
		}
	}
	if r.dead != nil {
		return r.dead.flushDue(r.ctx, now)
	}
	return nil
}

// untilWake is how long the task may block before time-driven work is due,
// at most 100ms.
func (r *runner) untilWake(now time.Time) time.Duration {
	if r.cp != nil && r.cp.pending != nil {
		return time.Millisecond // a capture goes on between reads
	}
	next := now.Add(100 * time.Millisecond)
	for _, pt := range r.timers {
		if t, ok := pt.NextProcessingTime(); ok && t.Before(next) {
			next = t
		}
	}
	for _, n := range r.nets {
		for i := range n.bufs {
			if !n.bufs[i].empty() {
				if due := n.bufs[i].since.Add(r.cfg.Batching.Timeout); due.Before(next) {
					next = due
				}
			}
		}
	}
	return max(next.Sub(now), time.Millisecond)
}

// finish ends a bounded run: event time goes to the end, every node
// finishes in order, and every output gets its end entry.
func (r *runner) finish() error {
	if err := r.advance(MaxWatermark); err != nil {
		return err
	}
	for _, n := range r.cfg.Nodes {
		var err error
		if n.Sink != nil {
			err = n.Sink.Finish(r.ctx)
		} else {
			err = n.Op.Finish()
		}
		if err != nil {
			return fmt.Errorf("finish %s[%d]: %w", n.Name, r.cfg.Subtask, err)
		}
	}
	if r.dead != nil {
		if err := r.dead.flush(r.ctx); err != nil {
			return err
		}
	}
	if err := r.control(exchange.Entry{Kind: exchange.KindEnd}); err != nil {
		return err
	}
	if r.cp != nil {
		return r.cp.final()
	}
	return nil
}

func (r *runner) close() error {
	var errs []error
	if r.cp != nil {
		r.cp.close()
	}
	if r.dead != nil {
		// Malformed records are never dropped silently, not even when the
		// task is cancelled.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, r.dead.flush(ctx), r.dead.close())
		cancel()
	}
	if r.srcOpened {
		errs = append(errs, r.cfg.Source.Source.Close())
	}
	for _, i := range r.opened {
		n := r.cfg.Nodes[i]
		if n.Sink != nil {
			errs = append(errs, n.Sink.Close())
		} else {
			errs = append(errs, n.Op.Close())
		}
	}
	for _, n := range r.nets {
		errs = append(errs, n.close())
	}
	return errors.Join(errs...)
}
