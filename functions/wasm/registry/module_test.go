package registry_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm"
	"github.com/weirstream/weir/functions/wasm/registry"
	"github.com/weirstream/weir/functions/wasm/registry/registrytest"
	"github.com/weirstream/weir/statestore/blob"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestDeployRealModule(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: builds a guest")
	}
	ctx := context.Background()
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mod, err := os.ReadFile(registrytest.Guest(t, "passthrough"))
	if err != nil {
		t.Fatal(err)
	}
	sha := sha256.Sum256(mod)
	v, err := registry.Deploy(ctx, b, "pass", mod, wasm.Limits{Memory: 32 << 20}, start)
	if err != nil {
		t.Fatal(err)
	}
	want := registry.Description{Input: []spec.ModuleColumn{{Name: "k", Type: "string"}},
		Output: []spec.ModuleColumn{{Name: "k", Type: "string"}, {Name: "v", Type: "int64"}}}
	if v.Version != 1 || v.SHA256 != hex.EncodeToString(sha[:]) || v.Memory != 32<<20 || v.ABI != 1 || !reflect.DeepEqual(v.Describe, want) {
		t.Fatalf("Deploy = %+v", v)
	}
	if again, err := registry.Deploy(ctx, b, "pass", mod, wasm.Limits{Memory: 32 << 20}, start.Add(time.Hour)); err != nil || again.Version != 1 || !again.Created.Equal(start) {
		t.Fatalf("redeploy = %+v, %v; want version 1 unchanged", again, err)
	}
	got, err := registry.Module(ctx, b, v.Pin())
	if err != nil || !bytes.Equal(got, mod) {
		t.Fatalf("Module: %d bytes, %v", len(got), err)
	}
	// A module that is WebAssembly but not a weir function: the check's
	// error, nothing stored.
	_, err = registry.Deploy(ctx, b, "broken", []byte("\x00asm\x01\x00\x00\x00"), wasm.Limits{}, start)
	if err == nil || !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("Deploy of an empty module: %v", err)
	}
	t.Logf("empty module: %v", err)
	if _, err := registry.Versions(ctx, b, "broken"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("a refused module has versions: %v", err)
	}
}
