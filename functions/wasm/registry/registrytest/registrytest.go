// Package registrytest helps the tests of what reads deployed functions:
// it stores a version without a module wasm.Check accepts, and builds the
// test guests of package wasm (functions/wasm/testdata/guests) from any
// package's tests.
package registrytest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm/registry"
	"github.com/weirstream/weir/functions/wasm/wasmtest"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// Store writes module and a record of it as version version of function
// name into b, the way registry.Deploy would but without checking the
// module, and returns the record: 64 MiB, 5 s, input zone string and
// output zone string, n int64 unless describe says otherwise (its zero
// value takes those).
func Store(t testing.TB, b blob.Bucket, name string, version int, module string, describe registry.Description) registry.Version {
	t.Helper()
	if describe.Input == nil && describe.Output == nil {
		describe.Input = []spec.ModuleColumn{{Name: "zone", Type: "string"}}
		describe.Output = []spec.ModuleColumn{{Name: "zone", Type: "string"}, {Name: "n", Type: "int64"}}
	}
	sum := sha256.Sum256([]byte(module))
	v := registry.Version{Name: name, Version: version, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(module)), ABI: 1,
		Memory: 64 << 20, Timeout: spec.Duration(5 * time.Second), Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Describe: describe}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Put(ctx, layout.ModuleKey(name, v.SHA256), []byte(module)); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, layout.VersionKey(name, version), raw); err != nil {
		t.Fatal(err)
	}
	return v
}

// Guest builds the test guest functions/wasm/testdata/guests/name with
// the standard toolchain for wasip1 into a temporary directory of t and
// returns the module's path, compiled into wasmtest.CacheDir (engines
// with that cache directory load it from there).
func Guest(t testing.TB, name string) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("registrytest: cannot locate its source")
	}
	wasmDir := filepath.Join(filepath.Dir(self), "..", "..")
	out := filepath.Join(t.TempDir(), name+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./testdata/guests/"+name)
	cmd.Dir = wasmDir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build guest %s: %v\n%s", name, err, msg)
	}
	wasmtest.Precompile(t, out)
	return out
}
