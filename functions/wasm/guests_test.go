package wasm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/weirstream/weir/functions/wasm/wasmtest"
)

// The test guests are Go programs in testdata/guests, built here with the
// standard toolchain for wasip1 (once per test binary).
var guests struct {
	sync.Mutex
	dir   string
	built map[string][]byte
}

// guest returns the module built from testdata/guests/name.
func guest(t testing.TB, name string) []byte {
	t.Helper()
	guests.Lock()
	defer guests.Unlock()
	if b, ok := guests.built[name]; ok {
		return b
	}
	if guests.dir == "" {
		d, err := os.MkdirTemp("", "weir-wasm-guests-")
		if err != nil {
			t.Fatal(err)
		}
		guests.dir = d
		guests.built = map[string][]byte{}
	}
	out := filepath.Join(guests.dir, name+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./testdata/guests/"+name)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build guest %s: %v\n%s", name, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	wasmtest.Precompile(t, out)
	guests.built[name] = b
	return b
}

// testCache is the compilation cache directory the tests' engines share
// with every package's tests: Precompile has compiled the guests there,
// without -race (see package wasmtest).
func testCache(t testing.TB) string {
	t.Helper()
	return wasmtest.CacheDir(t)
}

var checker struct {
	sync.Mutex
	eng *Engine
}

// checkModule is Check through a shared engine's compilation cache.
func checkModule(t testing.TB, module []byte, lim Limits) (Description, error) {
	t.Helper()
	checker.Lock()
	defer checker.Unlock()
	if checker.eng == nil {
		eng, err := NewEngine(EngineConfig{CacheDir: testCache(t)})
		if err != nil {
			t.Fatal(err)
		}
		checker.eng = eng
	}
	return checker.eng.Check(context.Background(), module, lim)
}

func removeGuests() {
	if checker.eng != nil {
		_ = checker.eng.Close()
	}
	if guests.dir != "" {
		_ = os.RemoveAll(guests.dir)
	}
}
