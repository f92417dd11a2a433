//go:build wasip1

// Command surge-multiplier is the surge-pricing example function
// (examples/surge) built for WebAssembly with the Go guest SDK: the same
// config, the same output, the same rounding. Per zone (the key) it keeps
// the request counts of the most recent windows in a ValueState and, for
// each window result, emits
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
// window_end. Config: history (5), sensitivity (0.5), maxMultiplier (3).
//
// Build it with examples/wasm/build-go.sh, or
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o surge-multiplier.wasm ./examples/wasm/surge-multiplier
package main

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/weirstream/weir/functions/wasm/guest"
)

// Output columns.
const (
	outZone = iota
	outEnd
	outRequests
	outAvgFare
	outMultiplier
)

// config is the function's config in the job spec.
type config struct {
	history       int
	sensitivity   float64
	maxMultiplier float64
}

// Defaults.
const (
	defaultHistory       = 5
	defaultSensitivity   = 0.5
	defaultMaxMultiplier = 3.0
)

// parseConfig reads the config (keys history, sensitivity, maxMultiplier),
// reporting every problem at once.
func parseConfig(m map[string]any) (config, error) {
	c := config{history: defaultHistory, sensitivity: defaultSensitivity, maxMultiplier: defaultMaxMultiplier}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		f, isNum := v.(float64) // JSON numbers
		isNum = isNum && !math.IsNaN(f) && !math.IsInf(f, 0)
		switch k {
		case "history":
			if !isNum || f != math.Trunc(f) || f < 1 || f > 1000 {
				errs = append(errs, fmt.Errorf("history: %v: want a whole number of windows in 1..1000", v))
				continue
			}
			c.history = int(f)
		case "sensitivity":
			if !isNum || f <= 0 {
				errs = append(errs, fmt.Errorf("sensitivity: %v: want a positive number", v))
				continue
			}
			c.sensitivity = f
		case "maxMultiplier":
			if !isNum || f < 1 {
				errs = append(errs, fmt.Errorf("maxMultiplier: %v: want a number at least 1", v))
				continue
			}
			c.maxMultiplier = f
		default:
			errs = append(errs, fmt.Errorf("unknown key %q: accepted: history, maxMultiplier, sensitivity", k))
		}
	}
	return c, errors.Join(errs...)
}

// multiplier is the price multiplier for a window with requests rides
// given the request counts of earlier windows: 1 with no history, else
// clamp(1 + sensitivity*(requests/mean(history) - 1), 1, maxMultiplier),
// rounded to two decimals.
func multiplier(requests int64, history []int64, sensitivity, maxMultiplier float64) float64 {
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

// window is one window's count in a zone's history.
type window struct {
	end      int64 // window_end, ms
	requests int64
}

// record puts w into hist (sorted by end), replacing a window with the
// same end, and keeps the newest keep windows. It may reuse hist's array.
func record(hist []window, w window, keep int) []window {
	i, found := slices.BinarySearchFunc(hist, w.end, func(h window, end int64) int { return cmp.Compare(h.end, end) })
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

// historyCodec stores a history as 16 bytes per window. Decode returns a
// slice of its own buffer, valid until the next Decode: the function
// writes the history back before it reads another.
type historyCodec struct{ buf *[]window }

var le = binary.LittleEndian

func (historyCodec) Append(dst []byte, hist []window) []byte {
	for _, w := range hist {
		dst = le.AppendUint64(dst, uint64(w.end))
		dst = le.AppendUint64(dst, uint64(w.requests))
	}
	return dst
}

func (c historyCodec) Decode(b []byte) ([]window, error) {
	if len(b)%16 != 0 {
		return nil, fmt.Errorf("decode history: %d bytes is not a whole number of 16-byte windows", len(b))
	}
	hist := (*c.buf)[:0]
	for ; len(b) > 0; b = b[16:] {
		hist = append(hist, window{end: int64(le.Uint64(b)), requests: int64(le.Uint64(b[8:]))})
	}
	*c.buf = hist
	return hist, nil
}

var inputs = []guest.Column{
	{Name: "zone", Type: guest.String},
	{Name: "window_end", Type: guest.TimestampMs},
	{Name: "requests", Type: guest.Int64},
	{Name: "avg_fare", Type: guest.Float64},
}

type surge struct {
	cfg config
	// history holds, per zone, up to history+1 windows sorted by end: the
	// baseline of the newest window, and the newest itself.
	history *guest.ValueState[[]window]
	hist    []window // the codec's buffer
	base    []int64
}

func (s *surge) Describe() guest.Description {
	return guest.Description{
		Input:      inputs,
		Output:     append(slices.Clone(inputs), guest.Column{Name: "multiplier", Type: guest.Float64}),
		TimeColumn: "window_end",
		Doc: "Price multiplier per zone from windowed ride counts: " +
			"clamp(1 + sensitivity*(requests/mean of the last `history` windows - 1), 1, maxMultiplier). " +
			"Input: zone, window_end, requests, avg_fare. Config: history (5), sensitivity (0.5), maxMultiplier (3).",
	}
}

func (s *surge) Open(oc *guest.OpenContext) error {
	c, err := parseConfig(oc.Config())
	if err != nil {
		return err
	}
	s.cfg = c
	s.history = guest.ValueWith(oc, "history", historyCodec{buf: &s.hist})
	return nil
}

func (s *surge) ProcessElement(ctx *guest.Context, row guest.Row, out *guest.Collector) error {
	end, requests := row.TimestampMs("window_end"), row.Int64("requests")
	hist, _ := s.history.Value()
	hist = record(hist, window{end: end, requests: requests}, s.cfg.history+1)
	s.history.Update(hist)

	// The baseline: up to history windows that ended before this one.
	i, _ := slices.BinarySearchFunc(hist, end, func(w window, end int64) int { return cmp.Compare(w.end, end) })
	s.base = s.base[:0]
	for _, w := range hist[max(0, i-s.cfg.history):i] {
		s.base = append(s.base, w.requests)
	}
	mult := multiplier(requests, s.base, s.cfg.sensitivity, s.cfg.maxMultiplier)

	out.SetString(outZone, row.String("zone"))
	out.SetTimestampMs(outEnd, end)
	out.SetInt64(outRequests, requests)
	if !row.IsNull("avg_fare") { // null stays null
		out.SetFloat64(outAvgFare, row.Float64("avg_fare"))
	}
	out.SetFloat64(outMultiplier, mult)
	return out.EndRow()
}

func init() { guest.Register(&surge{}) }

func main() {}
