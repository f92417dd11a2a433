//go:build !unix

package worker

import "runtime"

// processUsage returns no CPU time where getrusage is missing, and the
// memory the Go runtime holds from the system.
func processUsage() (cpuSeconds float64, rssBytes int64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return 0, int64(ms.Sys)
}
