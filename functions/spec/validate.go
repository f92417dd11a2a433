package spec

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"
)

var nameRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]{0,62}$`)

// Validate checks the spec's structure: names, references, the shape of
// each source, operator and sink (a source's or sink's own fields as its
// registered type checks them, see Connectors), and that the graph has no
// cycle. It reports every problem at once as Problems. Types are checked
// by package plan, which knows schemas and operators.
func (j *Job) Validate() error {
	conns := currentConnectors()
	var ps Problems
	add := func(field, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if !nameRE.MatchString(j.Name) {
		add("job", "%q is not a valid job name: want a letter then letters, digits, '-' or '_' (at most 63)", j.Name)
	}
	maxP := j.MaxParallelism
	if maxP == 0 {
		maxP = DefaultMaxParallelism
	}
	if maxP < 1 || maxP > 32768 {
		add("maxParallelism", "%d is out of range: want 1..32768", j.MaxParallelism)
	}
	// Numbers JSON cannot carry (a spec is stored as JSON) are refused.
	finite := func(field string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			add(field, "%g is not a finite number", v)
		}
	}
	checkPar := func(field string, p int) {
		if p < 0 || p > maxP {
			add(field, "%d is out of range: want 1..maxParallelism (%d)", p, maxP)
		}
	}
	checkPar("parallelism", j.Parallelism)
	if len(j.Sources) == 0 {
		add("sources", "a job needs at least one source")
	}
	if len(j.Sinks) == 0 {
		add("sinks", "a job needs at least one sink")
	}

	// Every name (node or side output) is unique; record what produces it.
	produced := map[string]string{} // name -> what defines it, for messages
	seen := map[string]int{}        // "list/name" -> occurrences so far
	define := func(list, field, name, what string) {
		nth := seen[list+"/"+name]
		seen[list+"/"+name]++
		if !nameRE.MatchString(name) {
			add(field, "%q is not a valid name: want a letter then letters, digits, '-' or '_'", name)
			return
		}
		if prev, dup := produced[name]; dup {
			// The duplicate, not the first definition, is the problem:
			// point at its line.
			ps = append(ps, Problem{Field: field, nth: nth, Msg: fmt.Sprintf("name %q is already used by %s", name, prev)})
			return
		}
		produced[name] = what
	}
	for _, s := range j.Sources {
		define("sources", fmt.Sprintf("sources[%s].name", s.Name), s.Name, fmt.Sprintf("source %q", s.Name))
		if outs := conns.SourceOutputs(s.Type); outs != nil {
			// A source with outputs is read through them only.
			delete(produced, s.Name)
			for _, out := range outs {
				produced[s.Name+"."+out] = fmt.Sprintf("the %s output of %s source %q", out, s.Type, s.Name)
			}
		}
	}
	for _, o := range j.Operators {
		define("operators", fmt.Sprintf("operators[%s].name", o.Name), o.Name, fmt.Sprintf("operator %q", o.Name))
		if o.Window != nil && o.Window.LateOutput != "" {
			define("late", fmt.Sprintf("operators[%s].window.lateOutput", o.Name), o.Window.LateOutput,
				fmt.Sprintf("the late output of operator %q", o.Name))
		}
	}
	// Sinks share the namespace but produce nothing to read.
	readable := maps.Clone(produced)
	sinkNames := map[string]bool{}
	for _, s := range j.Sinks {
		define("sinks", fmt.Sprintf("sinks[%s].name", s.Name), s.Name, "another sink")
		if _, clash := readable[s.Name]; !clash {
			sinkNames[s.Name] = true
		}
	}
	produced = readable

	for _, s := range j.Sources {
		p := fmt.Sprintf("sources[%s]", s.Name)
		checkPar(p+".parallelism", s.Parallelism)
		finite(p+".rate", s.Rate)
		if s.Rate < 0 {
			add(p+".rate", "%g is negative", s.Rate)
		}
		if s.Gen != nil {
			finite(p+".datagen.eventsPerSecond", s.Gen.EventsPerSecond)
			for name, fg := range s.Gen.Fields {
				f := p + ".datagen.fields." + name
				finite(f+".nullRate", fg.NullRate)
				if fg.Min != nil {
					finite(f+".min", *fg.Min)
				}
				if fg.Max != nil {
					finite(f+".max", *fg.Max)
				}
			}
		}
		if s.Count < 0 {
			add(p+".count", "%d is negative", s.Count)
		}
		switch {
		case s.Splits < 0:
			add(p+".splits", "%d is negative: want the number of splits, at least the source's parallelism", s.Splits)
		case s.Splits > 0 && s.Type != SourceDatagen && s.Type != SourceNexmark:
			add(p+".splits", "only datagen and nexmark sources are cut into splits (a %s source's splits are its own)", s.Type)
		}
		if conns.SourceOutputs(s.Type) != nil {
			// A source with outputs has fixed schemas: its type checks
			// what the spec may say of them.
			ps = append(ps, conns.CheckSource(&s)...)
			continue
		}
		if s.Nexmark != nil {
			add(p+".nexmark", "only a nexmark source takes nexmark options")
		}
		if s.Schema.Len() == 0 {
			add(p+".schema", "a source needs a schema: {column: type, ...}")
		}
		if s.Event != nil {
			if s.Event.Column == "" {
				add(p+".eventTime.column", "missing: name the timestamp_ms column that holds event time")
			} else if _, ok := s.Schema.Get(s.Event.Column); !ok && s.Schema.Len() > 0 {
				add(p+".eventTime.column", "%q is not a column of the schema (%s)", s.Event.Column, strings.Join(s.Schema.Keys, ", "))
			}
			if s.Event.MaxOutOfOrderness < 0 {
				add(p+".eventTime.maxOutOfOrderness", "%s is negative", s.Event.MaxOutOfOrderness)
			}
			if s.Event.IdleTimeout < 0 {
				add(p+".eventTime.idleTimeout", "%s is negative", s.Event.IdleTimeout)
			}
		}
		ps = append(ps, conns.CheckSource(&s)...)
	}

	for _, o := range j.Operators {
		p := fmt.Sprintf("operators[%s]", o.Name)
		checkPar(p+".parallelism", o.Parallelism)
		if o.Join != nil {
			if o.Input != "" {
				add(p+".input", "a join reads join.left.input and join.right.input, not input")
			}
			checkInput(p+".join.left.input", o.Join.Left.Input, produced, sinkNames, add)
			checkInput(p+".join.right.input", o.Join.Right.Input, produced, sinkNames, add)
		} else {
			checkInput(p+".input", o.Input, produced, sinkNames, add)
		}
		switch o.Kind() {
		case "":
			add(p, "an operator needs exactly one of filter, select, window (with aggregate), function or join")
		case "join":
			validateJoin(p+".join", o, add)
		case "window":
			if o.Window == nil {
				add(p+".window", "aggregate needs a window: {type: tumbling|sliding|session, ...}")
				break
			}
			if o.Aggregate.Len() == 0 {
				add(p+".aggregate", "a window needs aggregates, e.g. {requests: count(), avg_fare: avg(fare)}")
			}
			w := o.Window
			wp := p + ".window"
			switch w.Type {
			case WindowTumbling:
				if w.Size <= 0 {
					add(wp+".size", "a tumbling window needs a positive size")
				}
				if w.Slide != 0 || w.Gap != 0 {
					add(wp, "a tumbling window takes size only")
				}
			case WindowSliding:
				if w.Size <= 0 || w.Slide <= 0 {
					add(wp, "a sliding window needs a positive size and slide")
				} else if w.Slide > w.Size {
					add(wp+".slide", "slide %s is longer than size %s", w.Slide, w.Size)
				}
				if w.Gap != 0 {
					add(wp+".gap", "a sliding window takes size and slide")
				}
			case WindowSession:
				if w.Gap <= 0 {
					add(wp+".gap", "a session window needs a positive gap")
				}
				if w.Size != 0 || w.Slide != 0 {
					add(wp, "a session window takes gap only")
				}
			default:
				add(wp+".type", "%q is not a window type: want tumbling, sliding or session", w.Type)
			}
			if w.AllowedLateness < 0 {
				add(wp+".allowedLateness", "%s is negative", w.AllowedLateness)
			}
		case "function":
			if len(o.KeyBy) == 0 {
				add(p+".keyBy", "a function operator needs keyBy columns (its state is per key)")
			}
		}
	}

	for _, s := range j.Sinks {
		p := fmt.Sprintf("sinks[%s]", s.Name)
		checkPar(p+".parallelism", s.Parallelism)
		checkInput(p+".input", s.Input, produced, sinkNames, add)
		finite(p+".rate", s.Rate)
		if s.Rate < 0 {
			add(p+".rate", "%g is negative", s.Rate)
		}
		ps = append(ps, conns.CheckSink(&s)...)
	}
	if e := j.Exchange; e != nil {
		if e.BatchRows < 0 || e.BatchBytes < 0 || e.Credits < 0 || e.BufferTimeout < 0 {
			add("exchange", "batchRows, batchBytes, credits and bufferTimeout must not be negative")
		}
		switch e.Compression {
		case "", "none", "lz4", "zstd":
		default:
			add("exchange.compression", "%q is not a compression: want none, lz4 or zstd", e.Compression)
		}
		switch e.Encoding {
		case "", EncodingCompact, EncodingPlain:
		default:
			add("exchange.encoding", "%q is not an encoding: want compact or plain", e.Encoding)
		}
	}
	if c := j.Checkpoint; c != nil {
		if c.Interval <= 0 {
			add("checkpoint.interval", "%s: want a positive duration such as 1s", time.Duration(c.Interval))
		}
		if c.Timeout < 0 {
			add("checkpoint.timeout", "%s is negative", time.Duration(c.Timeout))
		}
		if c.MinPause < 0 {
			add("checkpoint.minPause", "%s is negative", time.Duration(c.MinPause))
		}
		if c.Retain < 0 {
			add("checkpoint.retain", "%d is negative", c.Retain)
		}
		if c.PartSize != 0 && c.PartSize < MinPartSize {
			add("checkpoint.partSize", "%s is below the least, %s", FormatSize(int64(c.PartSize)), FormatSize(MinPartSize))
		}
		switch c.Compression {
		case "", "none", "lz4", "zstd":
		default:
			add("checkpoint.compression", "%q is not a compression: want lz4, zstd or none", c.Compression)
		}
	}
	if r := j.Restart; r != nil {
		if r.Attempts < UnlimitedAttempts {
			add("restart.attempts", "%d: want a number of restarts, 0 for the default or -1 for unlimited", r.Attempts)
		}
		if r.Backoff < 0 || r.MaxBackoff < 0 || r.ResetAfter < 0 {
			add("restart", "backoff, maxBackoff and resetAfter must not be negative")
		}
		if r.MaxBackoff > 0 && r.Backoff > r.MaxBackoff {
			add("restart.maxBackoff", "%s is less than backoff %s", time.Duration(r.MaxBackoff), time.Duration(r.Backoff))
		}
	}
	if a := j.Autoscale; a != nil {
		validateAutoscale(a, maxP, add)
	}
	if st := j.State; st != nil {
		switch st.Backend {
		case "", StateMemory:
			if st.Memory != 0 {
				add("state.memory", "applies to the pebble backend; the memory backend keeps everything in memory")
			}
		case StatePebble:
			if st.Memory != 0 && st.Memory < MinStateMemory {
				add("state.memory", "%s is below the least, %s", FormatSize(int64(st.Memory)), FormatSize(MinStateMemory))
			}
		default:
			add("state.backend", "%q is not a state backend: want memory or pebble", st.Backend)
		}
	}
	if cyc := j.cycle(); cyc != "" {
		add("operators", "the graph has a cycle: %s", cyc)
	}
	if len(ps) > 0 {
		return ps
	}
	return nil
}

func validateAutoscale(a *Autoscale, maxP int, add func(string, string, ...any)) {
	if a.MinParallelism < 0 || a.MinParallelism > maxP {
		add("autoscale.minParallelism", "%d is out of range: want 1..maxParallelism (%d), or 0 for the default (1)", a.MinParallelism, maxP)
	}
	if a.MaxParallelism < 0 || a.MaxParallelism > maxP {
		add("autoscale.maxParallelism", "%d is out of range: want 1..maxParallelism (%d, the key groups), or 0 for the default (8)", a.MaxParallelism, maxP)
	} else if a.MaxParallelism > 0 && a.MaxParallelism < max(a.MinParallelism, 1) {
		add("autoscale.maxParallelism", "%d is less than minParallelism %d", a.MaxParallelism, max(a.MinParallelism, 1))
	}
	if u := a.TargetUtilization; math.IsNaN(u) || u < 0 || u > 1 {
		add("autoscale.targetUtilization", "%g is out of range: want a share in (0, 1], e.g. 0.7", u)
	}
	for _, d := range []struct {
		field string
		v     Duration
	}{{"window", a.Window}, {"stabilization", a.Stabilization}, {"catchUp", a.CatchUp}, {"scaleToZero", a.ScaleToZero}} {
		if d.v < 0 {
			add("autoscale."+d.field, "%s is negative: want a duration such as 30s", time.Duration(d.v))
		}
	}
	w := a.Window
	if w == 0 {
		w = DefaultAutoscale.Window
	}
	if a.ScaleToZero > 0 && a.ScaleToZero < w {
		add("autoscale.scaleToZero", "%s is shorter than the window %s: want at least the window, or leave it out to never suspend", time.Duration(a.ScaleToZero), time.Duration(w))
	}
}

func checkInput(field, input string, produced map[string]string, sinks map[string]bool, add func(string, string, ...any)) {
	switch {
	case input == "":
		add(field, "missing: name a source, operator or side output")
	case sinks[input]:
		add(field, "%q is a sink; sinks produce nothing to read", input)
	case produced[input] == "":
		names := make([]string, 0, len(produced))
		for n := range produced {
			names = append(names, n)
		}
		sort.Strings(names)
		msg := fmt.Sprintf("%q is not a source, operator or side output", input)
		if s := suggest(input, names); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		add(field, "%s; known: %s", msg, strings.Join(names, ", "))
	}
}

// cycle returns a description of a cycle among operators, or "".
func (j *Job) cycle() string {
	owner := map[string]string{} // side output name -> operator
	inputs := map[string][]string{}
	for _, o := range j.Operators {
		inputs[o.Name] = o.Inputs()
		if o.Window != nil && o.Window.LateOutput != "" {
			owner[o.Window.LateOutput] = o.Name
		}
	}
	resolve := func(n string) string {
		if o, ok := owner[n]; ok {
			return o
		}
		return n
	}
	// Depth-first search over operators in spec order; path is the stack.
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(n string) string
	visit = func(n string) string {
		switch state[n] {
		case onPath:
			for i, m := range path {
				if m == n {
					cyc := append([]string(nil), path[i:]...)
					cyc = append(cyc, n)
					// Report in data-flow order.
					for l, r := 0, len(cyc)-1; l < r; l, r = l+1, r-1 {
						cyc[l], cyc[r] = cyc[r], cyc[l]
					}
					return strings.Join(cyc, " -> ")
				}
			}
		case done:
			return ""
		}
		state[n] = onPath
		path = append(path, n)
		for _, in := range inputs[n] {
			if src := resolve(in); inputs[src] != nil {
				if c := visit(src); c != "" {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return ""
	}
	for _, o := range j.Operators {
		if c := visit(o.Name); c != "" {
			return c
		}
	}
	return ""
}

// Effective returns a copy of the job with defaults filled in.
func (j *Job) Effective() *Job {
	c := *j
	if c.Parallelism == 0 {
		c.Parallelism = DefaultParallelism
	}
	if c.MaxParallelism == 0 {
		c.MaxParallelism = DefaultMaxParallelism
	}
	c.Sources = append([]Source(nil), j.Sources...)
	for i := range c.Sources {
		if c.Sources[i].Parallelism == 0 {
			c.Sources[i].Parallelism = c.Parallelism
		}
	}
	c.Operators = append([]Operator(nil), j.Operators...)
	for i := range c.Operators {
		if c.Operators[i].Parallelism == 0 {
			c.Operators[i].Parallelism = c.Parallelism
		}
	}
	c.Sinks = append([]Sink(nil), j.Sinks...)
	for i := range c.Sinks {
		if c.Sinks[i].Parallelism == 0 {
			c.Sinks[i].Parallelism = c.Parallelism
		}
	}
	ex := Exchange{}
	if j.Exchange != nil {
		ex = *j.Exchange
	}
	if ex.BatchRows == 0 {
		ex.BatchRows = 8192
	}
	if ex.BatchBytes == 0 {
		ex.BatchBytes = 1 << 20
	}
	if ex.BufferTimeout == 0 {
		ex.BufferTimeout = Duration(100e6)
	}
	if ex.Credits == 0 {
		ex.Credits = 4
	}

	c.Exchange = &ex
	return &c
}

func validateJoin(p string, o Operator, add func(string, string, ...any)) {
	jn := o.Join
	if len(o.KeyBy) > 0 {
		add(p, "a join keys each side with join.left.keyBy and join.right.keyBy, not keyBy")
	}
	if jn.Left.Input != "" && jn.Left.Input == jn.Right.Input {
		add(p+".right.input", "%q is also the left input: joining a stream with itself is not supported", jn.Right.Input)
	}
	if len(jn.Left.KeyBy) == 0 {
		add(p+".left.keyBy", "missing: the columns of the left key")
	}
	if len(jn.Right.KeyBy) == 0 {
		add(p+".right.keyBy", "missing: the columns of the right key")
	}
	if len(jn.Left.KeyBy) > 0 && len(jn.Right.KeyBy) > 0 && len(jn.Left.KeyBy) != len(jn.Right.KeyBy) {
		add(p, "left.keyBy has %d columns and right.keyBy %d: the keys must have the same columns", len(jn.Left.KeyBy), len(jn.Right.KeyBy))
	}
	switch jn.Type {
	case JoinRegular:
		if jn.TTL < 0 {
			add(p+".ttl", "%s is negative", jn.TTL)
		}
		if jn.Window != nil || jn.Lower != 0 || jn.Upper != 0 {
			add(p, "a regular join takes ttl only (lower/upper are for interval joins, window for window joins)")
		}
	case JoinInterval:
		if jn.Lower > jn.Upper {
			add(p+".lower", "%s is above upper %s", jn.Lower, jn.Upper)
		}
		if jn.Window != nil || jn.TTL != 0 {
			add(p, "an interval join takes lower and upper only")
		}
	case JoinWindow:
		switch {
		case jn.Window == nil:
			add(p+".window", "missing: a window join needs a window: {type: tumbling|sliding, ...}")
		case jn.Window.Type == WindowSession:
			add(p+".window.type", "session windows are not supported in joins: want tumbling or sliding")
		case jn.Window.Type != WindowTumbling && jn.Window.Type != WindowSliding:
			add(p+".window.type", "%q is not a window type: want tumbling or sliding", jn.Window.Type)
		}
		if jn.TTL != 0 || jn.Lower != 0 || jn.Upper != 0 {
			add(p, "a window join takes window only")
		}
	default:
		add(p+".type", "%q is not a join type: want regular, interval or window", jn.Type)
	}
}
