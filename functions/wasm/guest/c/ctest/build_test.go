package ctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// built keeps the module once a test has built it.
var built struct {
	sync.Mutex
	module []byte
}

// buildWasm runs examples/wasm/build-c.sh (once per test binary) and
// returns zone-stats-c.wasm. Without the wasm32-wasi toolchain the test
// fails (make deps installs it; the script installs what is missing too).
func buildWasm(t *testing.T) []byte {
	t.Helper()
	needClang(t)
	built.Lock()
	defer built.Unlock()
	if built.module != nil {
		return built.module
	}
	dir := t.TempDir()
	script := filepath.Join("..", "..", "..", "..", "..", "examples", "wasm", "build-c.sh")
	if out, err := exec.Command("bash", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("build-c.sh: %v\n%s", err, out)
	}
	module, err := os.ReadFile(filepath.Join(dir, "zone-stats-c.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("zone-stats-c.wasm: %d bytes", len(module))
	built.module = module
	return module
}
