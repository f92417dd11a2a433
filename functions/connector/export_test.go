package connector

import "github.com/weirstream/weir/functions/task"

// Throttled returns where a sink NewSink wrapped for its rate keeps the
// sink it wraps, and whether s is such a wrapper.
func Throttled(s task.Sink) (*task.Sink, bool) {
	rl, ok := s.(*rateLimitedSink)
	if !ok {
		return nil, false
	}
	return &rl.Sink, true
}
