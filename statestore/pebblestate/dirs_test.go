package pebblestate_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/weirstream/weir/statestore/pebblestate"
)

// ProcessDir removes the store directories of processes that exited and
// keeps this process's, a live one's and anything not named like one.
func TestProcessDir(t *testing.T) {
	base := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	mk := func(name string) string {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Join(p, "pebble-1"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dead := mk("weir-state-" + strconv.Itoa(gone.Process.Pid))
	mine := mk("weir-state-" + strconv.Itoa(os.Getpid()))
	alive := mk("weir-state-" + strconv.Itoa(live.Process.Pid))
	other := mk("weir-state-notapid")
	dir, removed, err := pebblestate.ProcessDir(base)
	if err != nil {
		t.Fatal(err)
	}
	if dir != mine || !slices.Equal(removed, []string{dead}) {
		t.Fatalf("ProcessDir = %s, removed %v; want %s, removed [%s]", dir, removed, mine, dead)
	}
	for _, p := range []string{mine, alive, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", dead, err)
	}
}
