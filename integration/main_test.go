// Package integration holds weir's end-to-end tests: real weir processes
// (coordinator and workers), a real Redis and a real MinIO, each started by
// the tests on free loopback ports, and outputs compared with a
// straightforward batch recomputation.
package integration

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"
)

var httpClient = &http.Client{Timeout: 10 * time.Second}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weir-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	weirBin, err = buildWeir(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
