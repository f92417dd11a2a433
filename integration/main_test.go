// Package integration holds weir's end-to-end tests: real weir processes
// (coordinator and workers), a real Redis and a real MinIO, each started by
// the tests on free loopback ports, and outputs compared with a
// straightforward batch recomputation.
package integration

import (
	"flag"
	"fmt"
	"go.uber.org/goleak"
	"net/http"
	"os"
	"testing"
	"time"
)

var httpClient = &http.Client{Timeout: 10 * time.Second}

// poisonFreed is set for tests, not benchmarks: WEIR_POISON_FREED=1.
var poisonFreed bool

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weir-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Tests run weir under the race detector; benchmarks measure a
	// normal build.
	flag.Parse()
	race := flag.Lookup("test.bench").Value.String() == ""
	if race {
		// A column read after its record's release reads poison, in this
		// process and in every weir process a test starts (see arrowfmt's
		// recycler); benchmarks measure without it.
		poisonFreed = true
		os.Setenv("WEIR_POISON_FREED", "1")
	}
	weirBin, err = buildWeir(dir, race)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// Every goroutine a test started (coordinators, workers, clients)
		// must have ended.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
