// Package surge is the example user function of the surge-pricing job
// (examples/surge-pricing.yaml): it turns per-zone ride statistics from a
// sliding window into a price multiplier. Importing the package registers
// the function as "surge-multiplier".
//
// Per zone (the key) it keeps the request counts of the most recent windows
// in a ValueState and, for each window result, emits
//
//	zone string, window_end timestamp_ms, requests int64, avg_fare float64, multiplier float64
//
// where
//
//	baseline   = mean requests of up to `history` earlier windows of the zone
//	multiplier = clamp(1 + sensitivity × (requests/baseline − 1), 1, maxMultiplier)
//
// rounded to two decimals; a zone's first window (no baseline) gets 1. A
// window that fires again (allowed lateness) replaces its earlier count in
// the history rather than adding one. Output rows carry event time in
// window_end.
package surge

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions"
)

// Name is the name the function is registered under.
const Name = "surge-multiplier"

func init() {
	functions.Register(Name, functions.Definition{
		New: func(cfg map[string]any) (functions.ProcessFunction, error) {
			c, err := ParseConfig(cfg)
			if err != nil {
				return nil, err
			}
			return &surge{cfg: c}, nil
		},
		Output:     output,
		TimeColumn: "window_end",
		Doc: "Price multiplier per zone from windowed ride counts: " +
			"clamp(1 + sensitivity*(requests/mean of the last `history` windows - 1), 1, maxMultiplier). " +
			"Input: zone, window_end, requests, avg_fare. Config: history (5), sensitivity (0.5), maxMultiplier (3).",
	})
}

// Config is the function's config in the job spec.
type Config struct {
	// History is how many earlier windows form the baseline (default 5).
	History int
	// Sensitivity scales how far demand above the baseline raises the
	// multiplier (default 0.5: twice the usual demand gives 1.5).
	Sensitivity float64
	// MaxMultiplier caps the multiplier (default 3).
	MaxMultiplier float64
}

// Defaults.
const (
	DefaultHistory       = 5
	DefaultSensitivity   = 0.5
	DefaultMaxMultiplier = 3.0
)

// ParseConfig reads the config map of the job spec (keys history,
// sensitivity, maxMultiplier), reporting every problem at once.
func ParseConfig(m map[string]any) (Config, error) {
	c := Config{History: DefaultHistory, Sensitivity: DefaultSensitivity, MaxMultiplier: DefaultMaxMultiplier}
	var errs []error
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		f, isNum := number(v)
		switch k {
		case "history":
			if !isNum || f != math.Trunc(f) || f < 1 || f > 1000 {
				errs = append(errs, fmt.Errorf("history: %v: want a whole number of windows in 1..1000", v))
				continue
			}
			c.History = int(f)
		case "sensitivity":
			if !isNum || f <= 0 {
				errs = append(errs, fmt.Errorf("sensitivity: %v: want a positive number", v))
				continue
			}
			c.Sensitivity = f
		case "maxMultiplier":
			if !isNum || f < 1 {
				errs = append(errs, fmt.Errorf("maxMultiplier: %v: want a number at least 1", v))
				continue
			}
			c.MaxMultiplier = f
		default:
			errs = append(errs, fmt.Errorf("unknown key %q: accepted: history, maxMultiplier, sensitivity", k))
		}
	}
	return c, errors.Join(errs...)
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case float64:
		return v, !math.IsNaN(v) && !math.IsInf(v, 0)
	}
	return 0, false
}

// Multiplier is the price multiplier for a window with requests rides given
// the request counts of earlier windows: 1 with no history, else
// clamp(1 + sensitivity*(requests/mean(history) - 1), 1, maxMultiplier),
// rounded to two decimals.
func Multiplier(requests int64, history []int64, sensitivity, maxMultiplier float64) float64 {
	if len(history) == 0 {
		return 1
	}
	var sum float64
	for _, h := range history {
		sum += float64(h)
	}
	mean := sum / float64(len(history))
	if mean <= 0 {
		return 1
	}
	m := 1 + sensitivity*(float64(requests)/mean-1)
	m = min(max(m, 1), maxMultiplier)
	return math.Round(m*100) / 100
}

// input columns the function reads, with their types.
var inputs = []arrowfmt.Field{
	{Name: "zone", Type: arrowfmt.String},
	{Name: "window_end", Type: arrowfmt.TimestampMs},
	{Name: "requests", Type: arrowfmt.Int64},
	{Name: "avg_fare", Type: arrowfmt.Float64},
}

func output(in *arrow.Schema) ([]arrowfmt.Field, error) {
	var errs []error
	for _, want := range inputs {
		idx := in.FieldIndices(want.Name)
		if len(idx) == 0 {
			errs = append(errs, fmt.Errorf("input has no column %q (want %s; input columns: %s)", want.Name, want.Type, columns(in)))
			continue
		}
		if got, err := arrowfmt.TypeOf(in.Field(idx[0]).Type); err != nil || got != want.Type {
			errs = append(errs, fmt.Errorf("input column %q is %v, want %s", want.Name, in.Field(idx[0]).Type, want.Type))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return append(slices.Clone(inputs), arrowfmt.Field{Name: "multiplier", Type: arrowfmt.Float64}), nil
}

func columns(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// Window is one window's count in a zone's history.
type Window struct {
	End      int64 `json:"end"` // window_end, ms
	Requests int64 `json:"requests"`
}

type surge struct {
	cfg Config
	// history holds, per zone, up to History+1 windows sorted by End: the
	// baseline of the newest window, and the newest itself.
	history *functions.ValueState[[]Window]
}

func (s *surge) Open(oc *functions.OpenContext) error {
	s.history = functions.Value[[]Window](oc, "history")
	return nil
}

func (s *surge) ProcessElement(ctx *functions.Context, row functions.Row, out *functions.Collector) error {
	end, requests := row.TimestampMs("window_end"), row.Int64("requests")
	hist, _ := s.history.Value()
	hist = Record(hist, Window{End: end, Requests: requests}, s.cfg.History+1)
	s.history.Update(hist)

	// The baseline: up to History windows that ended before this one.
	i, _ := slices.BinarySearchFunc(hist, end, func(w Window, end int64) int { return cmp.Compare(w.End, end) })
	base := make([]int64, 0, s.cfg.History)
	for _, w := range hist[max(0, i-s.cfg.History):i] {
		base = append(base, w.Requests)
	}
	mult := Multiplier(requests, base, s.cfg.Sensitivity, s.cfg.MaxMultiplier)

	var avgFare any // null stays null
	if !row.IsNull("avg_fare") {
		avgFare = row.Float64("avg_fare")
	}
	return out.Emit(row.String("zone"), end, requests, avgFare, mult)
}

// Record puts w into hist (sorted by End), replacing a window with the same
// End, and keeps the newest keep windows. It may reuse hist's array.
func Record(hist []Window, w Window, keep int) []Window {
	i, found := slices.BinarySearchFunc(hist, w.End, func(h Window, end int64) int { return cmp.Compare(h.End, end) })
	if found {
		hist[i] = w
	} else {
		hist = slices.Insert(hist, i, w)
	}
	if len(hist) > keep {
		hist = append(hist[:0], hist[len(hist)-keep:]...)
	}
	return hist
}
