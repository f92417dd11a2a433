package coordinator

import (
	"time"

	"github.com/weirstream/weir/exchange/control"
)

// TaskRates are a subtask's per-second rates over the interval between
// its two latest metric reports, with Flink's meaning: of each second,
// how many milliseconds it was busy, idle, or waiting for credit
// (busyTimeMsPerSecond, idleTimeMsPerSecond, backPressuredTimeMsPerSecond),
// and how many records it read and wrote.
type TaskRates struct {
	RecordsInPerSecond       float64 `json:"recordsInPerSecond"`
	RecordsOutPerSecond      float64 `json:"recordsOutPerSecond"`
	SinkRowsPerSecond        float64 `json:"sinkRowsPerSecond"` // rows into the task's sinks
	BusyMsPerSecond          float64 `json:"busyTimeMsPerSecond"`
	IdleMsPerSecond          float64 `json:"idleTimeMsPerSecond"`
	BackPressuredMsPerSecond float64 `json:"backPressuredTimeMsPerSecond"`
	// BytesOutPerSecond are the payload bytes the task sent through the
	// exchange each second, by consumer vertex (the edges it feeds).
	BytesOutPerSecond map[string]float64 `json:"bytesOutPerSecond,omitempty"`
}

// minRateInterval is the shortest interval rates are computed over:
// workers report every second; a state change may come in between.
const minRateInterval = 500 * time.Millisecond

// ratesBetween computes the rates from two cumulative reports elapsed
// apart; ok is false when the interval is too short or the counters went
// back (a restarted task).
func ratesBetween(prev, cur control.Stats, elapsed time.Duration) (TaskRates, bool) {
	if elapsed < minRateInterval || cur.RecordsIn < prev.RecordsIn || cur.BusySeconds < prev.BusySeconds {
		return TaskRates{}, false
	}
	s := elapsed.Seconds()
	ms := func(a, b float64) float64 { return min(max((b-a)*1000/s, 0), 1000) }
	var edges map[string]float64
	if len(cur.Channels) > 0 {
		edges = map[string]float64{}
		for _, c := range cur.Channels {
			edges[c.ToVertex] += float64(c.Bytes)
		}
		for _, c := range prev.Channels {
			if _, ok := edges[c.ToVertex]; ok {
				edges[c.ToVertex] -= float64(c.Bytes)
			}
		}
		for v, b := range edges {
			edges[v] = max(b, 0) / s
		}
	}
	return TaskRates{
		BytesOutPerSecond:        edges,
		RecordsInPerSecond:       float64(cur.RecordsIn-prev.RecordsIn) / s,
		RecordsOutPerSecond:      float64(cur.RecordsOut-prev.RecordsOut) / s,
		SinkRowsPerSecond:        float64(cur.SinkIn-prev.SinkIn) / s,
		BusyMsPerSecond:          ms(prev.BusySeconds, cur.BusySeconds),
		IdleMsPerSecond:          ms(prev.IdleSeconds, cur.IdleSeconds),
		BackPressuredMsPerSecond: ms(prev.BackpressureSec, cur.BackpressureSec),
	}, true
}

// observe records a new cumulative report of the task taken at t.
func (ti *taskInfo) observe(st control.Stats, t time.Time) {
	if !ti.sampledAt.IsZero() {
		r, ok := ratesBetween(ti.sampled, st, t.Sub(ti.sampledAt))
		if !ok && t.Sub(ti.sampledAt) < minRateInterval {
			ti.stats = st
			return // keep the older sample: the interval is too short
		}
		ti.rates, ti.hasRates = r, ok
	}
	ti.stats, ti.sampled, ti.sampledAt = st, st, t
}
