package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procPath is /proc/<pid>/<file>, or /proc/self/<file> for pid 0.
func procPath(pid int, file string) string {
	if pid == 0 {
		return "/proc/self/" + file
	}
	return fmt.Sprintf("/proc/%d/%s", pid, file)
}

// ProcessPeakRSS returns the peak resident set size of a process in bytes,
// VmHWM in /proc/<pid>/status (pid 0: this process): the most it held since
// it started or since ResetPeakRSS.
func ProcessPeakRSS(pid int) (int64, error) {
	path := procPath(pid, "status")
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		// "VmHWM:	  123456 kB"
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("parse %s: VmHWM %q", path, rest)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s: VmHWM %q", path, rest)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("parse %s: no VmHWM line", path)
}

// ResetPeakRSS sets a process's peak resident set size to its current one
// (pid 0: this process), so that ProcessPeakRSS then measures the peak of
// what follows. It writes 5 to /proc/<pid>/clear_refs, which needs the
// right to ptrace the process: one's own children qualify.
func ResetPeakRSS(pid int) error {
	path := procPath(pid, "clear_refs")
	if err := os.WriteFile(path, []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak rss: %w", err)
	}
	return nil
}
