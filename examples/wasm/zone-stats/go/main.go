//go:build wasip1

// Command zone-stats is a weir function for WebAssembly, in Go: per zone
// (the key) and 10-second event-time window it counts rides and sums their
// fares, and emits
//
//	window_start timestamp_ms, window_end timestamp_ms, zone string, n int64, total float64
//
// once the watermark passes the window, exactly what the built-in
// `window: {type: tumbling, size: 10s}` with
// `aggregate: {n: count(), total: sum(fare)}` emits (total is null when no
// ride of the window has a fare). Config: size, the window length, as
// milliseconds or a Go duration ("10s"; default 10s).
//
// Build it with examples/wasm/build-go.sh, or
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o zone-stats-go.wasm ./examples/wasm/zone-stats/go
//
// Windows are [start, start+size) with start = floor(ts/size)*size, also
// for negative times. Each window's count and sum live in keyed state with
// the window start as namespace; an event-time timer at the window's last
// millisecond emits it and clears its state. A row whose window has already
// fired (end-1 <= watermark) is late and dropped, as is a row without event
// time.
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/weirstream/weir/functions/wasm/guest"
)

// Output columns.
const (
	outStart = iota
	outEnd
	outZone
	outN
	outTotal
)

// DefaultSize is the window length without config.
const DefaultSize = 10 * time.Second

type zoneStats struct {
	size int64 // ms
	acc  *guest.ValueState[acc]
	// ns caches the namespace of the window the last row fell in: rows
	// mostly arrive in the same few windows.
	nsStart int64
	ns      string
}

func (z *zoneStats) Describe() guest.Description {
	return guest.Description{
		Input: []guest.Column{
			{Name: "zone", Type: guest.String},
			{Name: "fare", Type: guest.Float64},
			{Name: "ts", Type: guest.TimestampMs},
		},
		Output: []guest.Column{
			{Name: "window_start", Type: guest.TimestampMs},
			{Name: "window_end", Type: guest.TimestampMs},
			{Name: "zone", Type: guest.String},
			{Name: "n", Type: guest.Int64},
			{Name: "total", Type: guest.Float64},
		},
		TimeColumn: "window_end",
		TimeOffset: -1, // a window's event time is its last millisecond, as for the built-in window
		Doc:        "count and sum of fare per zone and tumbling event-time window (config size: ms or a duration, default 10s)",
	}
}

func (z *zoneStats) Open(oc *guest.OpenContext) error {
	size, err := parseConfig(oc.Config())
	if err != nil {
		return err
	}
	if keys := oc.KeyColumns(); !slices.Equal(keys, []string{"zone"}) {
		return fmt.Errorf("keyBy: %v: zone-stats is keyed by [zone]", keys)
	}
	z.size = size
	z.acc = guest.ValueWith(oc, "acc", accCodec{})
	return nil
}

// parseConfig returns the window size in milliseconds.
func parseConfig(cfg map[string]any) (int64, error) {
	size := DefaultSize.Milliseconds()
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		v := cfg[k]
		if k != "size" {
			errs = append(errs, fmt.Errorf("unknown key %q: accepted: size", k))
			continue
		}
		ms, ok := int64(0), false
		switch v := v.(type) {
		case float64:
			ms, ok = int64(v), v == math.Trunc(v) && v >= 1 && v <= math.MaxInt32
		case string:
			d, err := time.ParseDuration(v)
			ms, ok = d.Milliseconds(), err == nil && d > 0 && d%time.Millisecond == 0
		}
		if !ok {
			errs = append(errs, fmt.Errorf("size: %v: want a window length in whole milliseconds, as a number (10000) or a duration (\"10s\")", v))
			continue
		}
		size = ms
	}
	return size, errors.Join(errs...)
}

// namespace returns the state namespace of the window starting at start.
func (z *zoneStats) namespace(start int64) string {
	if z.ns == "" || z.nsStart != start {
		z.nsStart, z.ns = start, strconv.FormatInt(start, 10)
	}
	return z.ns
}

func (z *zoneStats) ProcessElement(ctx *guest.Context, row guest.Row, out *guest.Collector) error {
	ts, ok := ctx.Timestamp()
	if !ok {
		return nil // no event time: in no window
	}
	start := ts - floorMod(ts, z.size)
	last := int64(math.MaxInt64) // saturating, as the built-in window
	if start <= math.MaxInt64-(z.size-1) {
		last = start + z.size - 1
	}
	if last <= ctx.Watermark() {
		return nil // late: the window has fired
	}
	ns := z.namespace(start)
	a, _ := z.acc.ValueNS(ns)
	a.n++
	if !row.IsNull("fare") {
		a.sum += row.Float64("fare")
		a.fares++
	}
	z.acc.UpdateNS(ns, a)
	ctx.Timers().RegisterEventTime(last)
	return nil
}

func (z *zoneStats) OnTimer(ctx *guest.Context, t guest.Timer, out *guest.Collector) error {
	start := t.Timestamp + 1 - z.size
	ns := z.namespace(start)
	a, ok := z.acc.ValueNS(ns)
	if !ok {
		return nil
	}
	z.acc.ClearNS(ns)
	out.SetTimestampMs(outStart, start)
	out.SetTimestampMs(outEnd, start+z.size)
	if zone, ok := ctx.Key()[0].(string); ok {
		out.SetString(outZone, zone)
	}
	out.SetInt64(outN, a.n)
	if a.fares > 0 {
		out.SetFloat64(outTotal, a.sum)
	}
	return out.EndRow()
}

// floorMod is a mod b with the sign of b, so that windows of negative
// times start at or before them.
func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// acc is one window's accumulator: rows, the sum of their fares and how
// many had one (sum is null without any, like the built-in sum).
type acc struct {
	n     int64
	sum   float64
	fares int64
}

// accCodec stores an acc in 24 bytes.
type accCodec struct{}

var le = binary.LittleEndian

func (accCodec) Append(dst []byte, a acc) []byte {
	dst = le.AppendUint64(dst, uint64(a.n))
	dst = le.AppendUint64(dst, math.Float64bits(a.sum))
	return le.AppendUint64(dst, uint64(a.fares))
}

func (accCodec) Decode(b []byte) (acc, error) {
	if len(b) != 24 {
		return acc{}, fmt.Errorf("decode window accumulator: %d bytes, want 24", len(b))
	}
	return acc{n: int64(le.Uint64(b)), sum: math.Float64frombits(le.Uint64(b[8:])), fares: int64(le.Uint64(b[16:]))}, nil
}

func init() { guest.Register(&zoneStats{}) }

func main() {}
