package pebblestate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// processDirPrefix names the directory of one process's stores under a
// state directory: weir-state-<pid>.
const processDirPrefix = "weir-state-"

// ProcessDir returns the directory under base (default the system's
// temporary directory) where this process opens its stores,
// weir-state-<pid>, and first removes those of processes that no longer
// run: a worker killed -9 never closed its stores, and nothing else would
// delete them. It returns what it removed.
func ProcessDir(base string) (dir string, removed []string, err error) {
	if base == "" {
		base = os.TempDir()
	}
	ents, err := os.ReadDir(base)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("pebblestate: %w", err)
	}
	var errs []error
	for _, e := range ents {
		pid, ok := strings.CutPrefix(e.Name(), processDirPrefix)
		n, perr := strconv.Atoi(pid)
		if !ok || perr != nil || !e.IsDir() || n == os.Getpid() || running(n) {
			continue
		}
		p := filepath.Join(base, e.Name())
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	if len(errs) > 0 {
		return "", removed, fmt.Errorf("pebblestate: remove the stores of processes gone: %w", errors.Join(errs...))
	}
	return filepath.Join(base, processDirPrefix+strconv.Itoa(os.Getpid())), removed, nil
}

// running reports whether a process pid exists (signal 0 reaches it, or
// it is another user's).
func running(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
