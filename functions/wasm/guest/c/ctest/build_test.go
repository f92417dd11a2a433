package ctest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// wasmToolchain reports whether clang can link wasm32-wasi modules here
// (Debian's clang, lld, wasi-libc and libclang-rt-dev-wasm32).
func wasmToolchain() bool {
	if _, err := exec.LookPath("wasm-ld"); err != nil {
		return false
	}
	if _, err := os.Stat("/usr/lib/wasm32-wasi/libc.a"); err != nil {
		return false
	}
	rt, err := exec.Command("clang", "--target=wasm32-wasi", "-print-libgcc-file-name").Output()
	if err != nil {
		return false
	}
	_, err = os.Stat(string(bytes.TrimSpace(rt)))
	return err == nil
}

// built keeps the module once a test has built it.
var built struct {
	sync.Mutex
	module []byte
}

// buildWasm runs examples/wasm/build-c.sh (once per test binary) and
// returns zone-stats-c.wasm. Outside CI it skips without the toolchain; in
// CI the script installs it.
func buildWasm(t *testing.T) []byte {
	t.Helper()
	needClang(t)
	if os.Getenv("CI") != "true" && !wasmToolchain() {
		t.Skip("no wasm32-wasi toolchain (apt-get install lld wasi-libc libclang-rt-dev-wasm32)")
	}
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
