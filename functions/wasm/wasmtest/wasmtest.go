// Package wasmtest lets the tests of every package share compiled Wasm
// modules. Compiling a Go guest takes about 35 s in a test binary built
// with -race (wazero's compiler is Go code, and the race detector
// instruments it) and about 4 s without; the same guests are compiled by
// the tests of several packages. CacheDir is a compilation cache
// directory for every test engine, and Precompile compiles a module into
// it with a command built without -race (functions/wasm/internal/
// precompile), so that a test's engine loads the module from there.
//
// It imports nothing of weir, so that package wasm's own tests may use it.
package wasmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
)

// CacheDir returns the compilation cache directory tests share:
// $WEIR_WASM_CACHE, else the one `weir` uses by default (the user's
// cache directory's weir/wasm), so that the weir processes the
// integration tests start find the modules there too.
func CacheDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("WEIR_WASM_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("wasmtest: no cache directory: %v (set WEIR_WASM_CACHE)", err)
	}
	return filepath.Join(d, "weir", "wasm")
}

// Precompile compiles the modules at paths into CacheDir, unless they
// are there already. A module that does not compile is left to the test.
//
// wazero keeps what it compiled under its own version, which it reads
// from the build information: a test binary has none and says "dev", a
// weir binary (what the integration tests start) says the version in
// go.mod. The command is run for both, with the test's version set at
// link time, so that either finds the modules.
func Precompile(t testing.TB, paths ...string) {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("wasmtest: cannot locate its source")
	}
	root := filepath.Join(filepath.Dir(self), "..", "..", "..")
	abs := make([]string, len(paths))
	for i, p := range paths {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		abs[i] = a
	}
	for _, ldflags := range []string{"-ldflags=-X=" + versionVar + "=" + ownWazeroVersion(), ""} {
		args := []string{"run"}
		if ldflags != "" {
			args = append(args, ldflags)
		}
		args = append(args, "./functions/wasm/internal/precompile", "-cache", CacheDir(t))
		cmd := exec.Command("go", append(args, abs...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("precompile %v: %v\n%s", paths, err, out)
		}
	}
}

// versionVar is where wazero keeps a version set at link time.
const versionVar = "github.com/tetratelabs/wazero/internal/version.version"

// ownWazeroVersion is the version wazero finds in this binary, as
// wazero's internal/version reads it.
func ownWazeroVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/tetratelabs/wazero" && dep.Version != "" && dep.Version != "(devel)" {
				return dep.Version
			}
		}
	}
	return "dev"
}
