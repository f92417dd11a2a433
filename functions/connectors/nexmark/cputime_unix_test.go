//go:build unix

package nexmark

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used, user and system,
// so that benchmarks can report throughput per core even on a busy
// machine, where wall time also counts other processes' turns.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
