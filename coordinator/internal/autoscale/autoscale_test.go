package autoscale

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/integration/tracetest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestTraces runs the scripted traces in testdata/ (go test -rewrite
// rewrites their expected output). Times are durations after t0:
//
//	new VERTEX[<IN,IN...] ... [keyed=V:N,...] [min=N] [max=N] [target=F] [band=F]
//	    [window=D] [stab=D] [catchup=D] [zero=D] [restart=D] [restore=MiB/s]
//	sample @T[..T2/STEP] V [p=N] [busy=MS|(MS,...)] [bp=MS] [in=R] [out=R] [rate=R] [backlog=N] [state=BYTES] [| V ...]
//	decide @T
//	restarted D | restored BYTES D
//	woken @T
//
// A vertex without inputs is a source. sample gives each listed vertex's
// sample at T (at every STEP from T to T2): busy and bp are ms/s per
// subtask (one value for all, or one each), idle the rest; in and out
// are the vertex's records/s split evenly over its subtasks (out defaults
// to in, a source's rate to in); p and state stay until changed. decide
// prints the decisions, each with its inputs on a second line.
func TestTraces(t *testing.T) {
	tracetest.Run(t, "testdata", func(t *testing.T) tracetest.Func {
		var h harness
		return func(t *testing.T, d *datadriven.TestData) (string, error) {
			words := tracetest.Words(d)
			switch d.Cmd {
			case "new":
				h = newHarness(t, words)
				return "", nil
			case "sample":
				return "", h.sample(t, words)
			case "decide":
				now := at(t, words[0])
				var out []string
				for _, dec := range h.p.Decide(now) {
					out = append(out, dec.String())
				}
				return strings.Join(out, "\n"), nil
			case "woken":
				h.p.Woken(at(t, words[0]))
				return "", nil
			case "restarted":
				h.p.ObserveRestart(dur(t, words[0]))
				return "", nil
			case "restored":
				h.p.ObserveRestore(int64(bytes(t, words[0])), dur(t, words[1]))
				return "", nil
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return "", nil
		}
	})
}

type harness struct {
	p     *Policy
	keyed map[string]int
	src   map[string]bool
	par   map[string]int
	state map[string]int64
}

func newHarness(t *testing.T, words []string) harness {
	h := harness{keyed: map[string]int{}, src: map[string]bool{}, par: map[string]int{}, state: map[string]int64{}}
	var cfg Config
	var graph []Vertex
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			name, ins, _ := strings.Cut(w, "<")
			vx := Vertex{Name: name}
			if ins != "" {
				vx.Inputs = strings.Split(ins, ",")
			} else {
				h.src[name] = true
			}
			graph = append(graph, vx)
			h.par[name] = 1
			continue
		}
		switch k {
		case "keyed":
			for _, kv := range strings.Split(v, ",") {
				n, m, _ := strings.Cut(kv, ":")
				h.keyed[n] = atoi(t, m)
			}
		case "min":
			cfg.MinParallelism = atoi(t, v)
		case "max":
			cfg.MaxParallelism = atoi(t, v)
		case "target":
			cfg.TargetUtilization = atof(t, v)
		case "band":
			cfg.Band = atof(t, v)
		case "window":
			cfg.Window = dur(t, v)
		case "stab":
			cfg.Stabilization = dur(t, v)
		case "catchup":
			cfg.CatchUp = dur(t, v)
		case "zero":
			cfg.ScaleToZero = dur(t, v)
		case "restart":
			cfg.RestartTime = dur(t, v)
		case "restore":
			cfg.RestoreBytesPerSecond = atof(t, v) * (1 << 20)
		default:
			t.Fatalf("new: unknown argument %q", w)
		}
	}
	h.p = New(cfg, graph)
	return h
}

func (h *harness) sample(t *testing.T, words []string) error {
	if len(words) < 2 || !strings.HasPrefix(words[0], "@") {
		t.Fatalf("sample: want @T VERTEX ..., got %q", words)
	}
	from, to, step := words[0], words[0], "1s"
	if a, b, ok := strings.Cut(words[0], ".."); ok {
		from, to = a, b
		if b, s, ok := strings.Cut(b, "/"); ok {
			to, step = "@"+b, s
		} else {
			to = "@" + b
		}
	}
	var samples []VertexSample
	var cur *VertexSample
	var busy, bp []float64
	var in, out float64
	var outSet, rateSet bool
	flush := func() {
		if cur == nil {
			return
		}
		p := cur.Parallelism
		for i := range p {
			st := SubtaskSample{BusyMs: pick(busy, i), BackpressuredMs: pick(bp, i), RecordsIn: in / float64(p), RecordsOut: in / float64(p)}
			if outSet {
				st.RecordsOut = out / float64(p)
			}
			st.IdleMs = max(0, 1000-st.BusyMs-st.BackpressuredMs)
			cur.Subtasks = append(cur.Subtasks, st)
		}
		if cur.Source && !rateSet {
			cur.InputRate = in
		}
		h.state[cur.Vertex] = cur.StateBytes
		samples = append(samples, *cur)
		cur = nil
	}
	for _, w := range words[1:] {
		if w == "|" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			flush()
			if _, known := h.par[w]; !known {
				t.Fatalf("sample: unknown vertex %q", w)
			}
			cur = &VertexSample{Vertex: w, Parallelism: h.par[w], Source: h.src[w], MaxParallelism: h.keyed[w], StateBytes: h.state[w]}
			busy, bp, in, out, outSet, rateSet = nil, nil, 0, 0, false, false
			continue
		}
		if cur == nil {
			t.Fatalf("sample: %q before a vertex", w)
		}
		switch k {
		case "p":
			cur.Parallelism = atoi(t, v)
			h.par[cur.Vertex] = cur.Parallelism
		case "busy":
			busy = floats(t, v)
		case "bp":
			bp = floats(t, v)
		case "in":
			in = atof(t, v)
		case "out":
			out, outSet = atof(t, v), true
		case "rate":
			cur.InputRate, rateSet = atof(t, v), true
		case "backlog":
			cur.Backlog = atof(t, v)
		case "state":
			cur.StateBytes = int64(bytes(t, v))
		default:
			t.Fatalf("sample: unknown argument %q", w)
		}
	}
	flush()
	for now, end, s := at(t, from), at(t, to), dur(t, step); !now.After(end); now = now.Add(s) {
		h.p.Observe(now, samples)
	}
	return nil
}

func pick(vs []float64, i int) float64 {
	switch {
	case len(vs) == 0:
		return 0
	case i < len(vs):
		return vs[i]
	}
	return vs[len(vs)-1]
}

func floats(t *testing.T, s string) []float64 {
	s = strings.Trim(s, "()")
	var out []float64
	for _, f := range strings.Split(s, ",") {
		out = append(out, atof(t, strings.TrimSpace(f)))
	}
	return out
}

func at(t *testing.T, w string) time.Time {
	if !strings.HasPrefix(w, "@") {
		t.Fatalf("time %q: want @DURATION", w)
	}
	return t0.Add(dur(t, w[1:]))
}

func dur(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q is not an integer", s)
	}
	return n
}

func atof(t *testing.T, s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return f
}

func bytes(t *testing.T, s string) float64 {
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			return atof(t, n) * u.mult
		}
	}
	return atof(t, s)
}
