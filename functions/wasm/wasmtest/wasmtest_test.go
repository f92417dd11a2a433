package wasmtest_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/weirstream/weir/functions/wasm/registry/registrytest"
)

// TestPrecompileForBothVersions: a guest built for the tests is compiled
// into $WEIR_WASM_CACHE under the version a test binary reports ("dev")
// and under the one a weir binary reports (go.mod's), the same module in
// each. If wazero stopped reading the version set at link time, the
// "dev" directory would be missing.
func TestPrecompileForBothVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: builds a guest")
	}
	dir := t.TempDir()
	t.Setenv("WEIR_WASM_CACHE", dir)
	registrytest.Guest(t, "passthrough")
	suffix := "-" + runtime.GOARCH + "-" + runtime.GOOS
	entries, err := os.ReadDir(filepath.Join(dir, "compiled"))
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	files := map[string][]string{}
	for _, e := range entries {
		v := strings.TrimSuffix(strings.TrimPrefix(e.Name(), "wazero-"), suffix)
		versions = append(versions, v)
		fs, err := os.ReadDir(filepath.Join(dir, "compiled", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			files[v] = append(files[v], f.Name())
		}
	}
	if len(versions) != 2 || versions[0] != "dev" || !strings.HasPrefix(versions[1], "v") {
		t.Fatalf("compiled for wazero versions %q, want \"dev\" and go.mod's", versions)
	}
	if len(files["dev"]) != 1 || strings.Join(files["dev"], ",") != strings.Join(files[versions[1]], ",") {
		t.Fatalf("compiled modules %v, want the guest once under each version", files)
	}
}
