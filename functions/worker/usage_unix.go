//go:build unix

package worker

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processUsage returns the process's user and system CPU seconds and its
// resident memory: from /proc on Linux, else the peak from getrusage.
func processUsage() (cpuSeconds float64, rssBytes int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	cpuSeconds = tv(ru.Utime) + tv(ru.Stime)
	if data, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(data)); len(f) > 1 {
			if pages, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				return cpuSeconds, pages * int64(os.Getpagesize())
			}
		}
	}
	return cpuSeconds, int64(ru.Maxrss) * 1024 // kilobytes on Linux and the BSDs
}
