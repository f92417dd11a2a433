package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// goFunction is a Go function registered in this test binary: a name
// Deploy refuses and Pin leaves alone.
const goFunction = "registry-test-go"

func init() {
	functions.Register(goFunction, functions.Definition{
		New:    func(map[string]any) (functions.ProcessFunction, error) { return nil, errors.New("not for running") },
		Output: func(*arrow.Schema) ([]arrowfmt.Field, error) { return nil, nil },
	})
}

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeCheck stands in for wasm.Check (which needs a real module): bytes
// starting with the Wasm magic pass and declare zoneStats; anything else
// fails the way a check does.
func fakeCheck(_ context.Context, module []byte, lim wasm.Limits) (wasm.Description, error) {
	if !bytes.HasPrefix(module, []byte("\x00asm")) {
		return wasm.Description{}, errors.New("module is not WebAssembly: it does not start with \\0asm")
	}
	if lim.Memory <= 0 || lim.Timeout <= 0 {
		return wasm.Description{}, fmt.Errorf("limits not filled in: %+v", lim)
	}
	return zoneStats, nil
}

var zoneStats = wasm.Description{
	Input:      []arrowfmt.Field{{Name: "zone", Type: arrowfmt.String}, {Name: "fare", Type: arrowfmt.Float64}},
	Output:     []arrowfmt.Field{{Name: "window_end", Type: arrowfmt.TimestampMs}, {Name: "zone", Type: arrowfmt.String}, {Name: "n", Type: arrowfmt.Int64}},
	TimeColumn: "window_end",
	Doc:        "count per zone",
}

func module(tag string) []byte { return []byte("\x00asm\x01\x00\x00\x00" + tag) }

func newBucket(t *testing.T) blob.Bucket {
	t.Helper()
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func mustDeploy(t *testing.T, b blob.Bucket, name string, mod []byte, lim wasm.Limits) Version {
	t.Helper()
	v, err := DeployChecked(context.Background(), b, name, mod, lim, now, fakeCheck)
	if err != nil {
		t.Fatalf("deploy %s: %v", name, err)
	}
	return v
}

// keys lists every object in the bucket.
func keys(t *testing.T, b blob.BucketReader) []string {
	t.Helper()
	infos, err := b.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, o := range infos {
		ks = append(ks, o.Key)
	}
	return ks
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestDeployCountsVersions(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	a, bb := module("a"), module("b")

	v1 := mustDeploy(t, b, "zone-stats", a, wasm.Limits{})
	want := Version{Name: "zone-stats", Version: 1, SHA256: sum(a), Size: int64(len(a)), ABI: wasm.ABIVersion,
		Memory: wasm.DefaultMemory, Timeout: spec.Duration(wasm.DefaultTimeout), Created: now, Describe: Description{
			Input:      []spec.ModuleColumn{{Name: "zone", Type: "string"}, {Name: "fare", Type: "float64"}},
			Output:     []spec.ModuleColumn{{Name: "window_end", Type: "timestamp_ms"}, {Name: "zone", Type: "string"}, {Name: "n", Type: "int64"}},
			TimeColumn: "window_end", Doc: "count per zone"}}
	if !equalJSON(v1, want) {
		t.Fatalf("first deploy = %+v\nwant %+v", v1, want)
	}
	if v := mustDeploy(t, b, "zone-stats", bb, wasm.Limits{}); v.Version != 2 || v.SHA256 != sum(bb) {
		t.Fatalf("second deploy = %+v, want version 2 of the new bytes", v)
	}
	before := keys(t, b)
	// The same bytes as the latest: that version, nothing written.
	if v := mustDeploy(t, b, "zone-stats", bb, wasm.Limits{}); v.Version != 2 {
		t.Fatalf("redeploy of the latest bytes = version %d, want 2", v.Version)
	}
	if after := keys(t, b); !slices.Equal(before, after) {
		t.Fatalf("redeploy of the latest bytes wrote objects: %v -> %v", before, after)
	}
	// The bytes of an older version: a new version sharing the module.
	if v := mustDeploy(t, b, "zone-stats", a, wasm.Limits{}); v.Version != 3 || v.SHA256 != sum(a) {
		t.Fatalf("deploy of v1's bytes again = %+v, want version 3", v)
	}
	// The latest bytes with other limits: a new version.
	v4 := mustDeploy(t, b, "zone-stats", a, wasm.Limits{Memory: 100<<20 + 123, Timeout: time.Second})
	if v4.Version != 4 || v4.Memory != 100<<20 || v4.Timeout != spec.Duration(time.Second) {
		t.Fatalf("deploy with new limits = %+v, want version 4 with 100MiB (rounded to pages) and 1s", v4)
	}
	wantKeys := []string{
		layout.ModuleKey("zone-stats", sum(a)), layout.ModuleKey("zone-stats", sum(bb)),
		layout.VersionKey("zone-stats", 1), layout.VersionKey("zone-stats", 2), layout.VersionKey("zone-stats", 3), layout.VersionKey("zone-stats", 4),
	}
	slices.Sort(wantKeys)
	if got := keys(t, b); !slices.Equal(got, wantKeys) {
		t.Fatalf("objects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantKeys, "\n"))
	}

	// The record as stored: the fields docs/wasm-abi.md lists.
	raw, err := b.Get(ctx, layout.VersionKey("zone-stats", 1))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "version", "sha256", "size", "abi", "memory", "timeout", "describe", "created"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("record lacks %q: %s", k, raw)
		}
	}
	if rec["timeout"] != "5s" || rec["memory"] != float64(64<<20) {
		t.Errorf("record limits: timeout %v, memory %v; want \"5s\", %d", rec["timeout"], rec["memory"], 64<<20)
	}

	vs, err := Versions(ctx, b, "zone-stats")
	if err != nil || len(vs) != 4 || !equalJSON(vs[0], want) || vs[3].Version != 4 {
		t.Fatalf("Versions = %+v, %v", vs, err)
	}
	list, err := List(ctx, b)
	if err != nil || len(list) != 1 || list[0].Name != "zone-stats" || list[0].Versions != 4 || list[0].Latest.Version != 4 {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

func TestDeployConcurrent(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	const n = 12
	var wg sync.WaitGroup
	got := make([]Version, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = DeployChecked(ctx, b, "f", module(fmt.Sprint(i)), wasm.Limits{}, now, fakeCheck)
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for i, v := range got {
		if errs[i] != nil {
			t.Fatalf("deploy %d: %v", i, errs[i])
		}
		if seen[v.Version] {
			t.Fatalf("two deploys got version %d", v.Version)
		}
		seen[v.Version] = true
		stored, err := Resolve(ctx, b, v.Ref())
		if err != nil || stored.SHA256 != sum(module(fmt.Sprint(i))) {
			t.Fatalf("deploy %d got %s, whose record is %+v (%v); want the deploy's bytes", i, v.Ref(), stored, err)
		}
	}
	for v := 1; v <= n; v++ {
		if !seen[v] {
			t.Fatalf("versions %v: want 1..%d", seen, n)
		}
	}
}

func TestDeployRefusesAndStoresNothing(t *testing.T) {
	for _, tc := range []struct {
		name, fn string
		mod      []byte
		lim      wasm.Limits
		want     string
	}{
		{"empty name", "", module("a"), wasm.Limits{}, "function name: empty: want a lower-case letter"},
		{"upper case", "Zone", module("a"), wasm.Limits{}, `function name "Zone": want a lower-case letter, then up to 62 lower-case letters, digits, '_' or '-'`},
		{"version in name", "f@2", module("a"), wasm.Limits{}, `function name "f@2"`},
		{"path", "a/b", module("a"), wasm.Limits{}, `function name "a/b"`},
		{"Go function", goFunction, module("a"), wasm.Limits{}, `a Go function of that name is registered in this binary`},
		{"memory too small", "f", module("a"), wasm.Limits{Memory: 1000}, "memory 1000B: want between 64KiB and 4GiB"},
		{"memory too large", "f", module("a"), wasm.Limits{Memory: 5 << 30}, "memory 5GiB: want between 64KiB and 4GiB"},
		{"negative timeout", "f", module("a"), wasm.Limits{Timeout: -time.Second}, "timeout -1s: want a positive duration"},
		{"empty module", "f", nil, wasm.Limits{}, "module: empty file"},
		{"huge module", "f", make([]byte, MaxModuleBytes+1), wasm.Limits{}, "more than the 64MiB accepted"},
		{"check fails", "f", []byte("hello"), wasm.Limits{}, `module is not WebAssembly: it does not start with \0asm`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBucket(t)
			_, err := DeployChecked(context.Background(), b, tc.fn, tc.mod, tc.lim, now, fakeCheck)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("deploy: %v; want ErrInvalid saying %q", err, tc.want)
			}
			if ks := keys(t, b); len(ks) != 0 {
				t.Fatalf("a refused deploy stored %v", ks)
			}
		})
	}
	t.Run("check error unchanged", func(t *testing.T) {
		_, err := DeployChecked(context.Background(), newBucket(t), "f", []byte("x"), wasm.Limits{}, now, fakeCheck)
		if want := `module is not WebAssembly: it does not start with \0asm`; err == nil || err.Error() != want {
			t.Fatalf("deploy: %v; want exactly the check's error %q", err, want)
		}
	})
	t.Run("real check", func(t *testing.T) {
		b := newBucket(t)
		_, err := Deploy(context.Background(), b, "f", []byte("not a wasm module"), wasm.Limits{}, now)
		if err == nil || !errors.Is(err, ErrInvalid) {
			t.Fatalf("Deploy of a text file: %v, want ErrInvalid", err)
		}
		if ks := keys(t, b); len(ks) != 0 {
			t.Fatalf("a refused deploy stored %v", ks)
		}
	})
}

// failingBucket fails every PutIfAbsent of a version record.
type failingBucket struct{ blob.Bucket }

func (f failingBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if _, _, ok := layout.ParseVersionKey(key); ok {
		return errors.New("injected: bucket unavailable")
	}
	return f.Bucket.PutIfAbsent(ctx, key, data)
}

func TestDeployFailureRemovesModule(t *testing.T) {
	b := newBucket(t)
	_, err := DeployChecked(context.Background(), failingBucket{b}, "f", module("a"), wasm.Limits{}, now, fakeCheck)
	if err == nil || !strings.Contains(err.Error(), "deploy f: store version 1: injected") {
		t.Fatalf("deploy: %v", err)
	}
	if ks := keys(t, b); len(ks) != 0 {
		t.Fatalf("a failed deploy left %v", ks)
	}
	// A module a version uses stays when a later deploy of it fails.
	mustDeploy(t, b, "f", module("a"), wasm.Limits{})
	if _, err := DeployChecked(context.Background(), failingBucket{b}, "f", module("a"), wasm.Limits{Timeout: time.Second}, now, fakeCheck); err == nil {
		t.Fatal("deploy with failing version writes succeeded")
	}
	if _, err := Module(context.Background(), b, mustResolve(t, b, "f@1").Pin()); err != nil {
		t.Fatalf("module of f@1 after a failed deploy of the same bytes: %v", err)
	}
}

func mustResolve(t *testing.T, b blob.BucketReader, ref string) Version {
	t.Helper()
	v, err := Resolve(context.Background(), b, ref)
	if err != nil {
		t.Fatalf("Resolve(%s): %v", ref, err)
	}
	return v
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	for _, tag := range []string{"a", "b", "c"} {
		mustDeploy(t, b, "zone-stats", module(tag), wasm.Limits{})
	}
	mustDeploy(t, b, "other", module("x"), wasm.Limits{})
	if v := mustResolve(t, b, "zone-stats"); v.Version != 3 || v.SHA256 != sum(module("c")) {
		t.Errorf("Resolve(zone-stats) = %+v, want version 3", v)
	}
	if v := mustResolve(t, b, "zone-stats@2"); v.Version != 2 || v.SHA256 != sum(module("b")) {
		t.Errorf("Resolve(zone-stats@2) = %+v", v)
	}
	for _, tc := range []struct {
		ref, want string
		kind      error
	}{
		{"zone-stats@7", `function "zone-stats" has no version 7 (versions: 1, 2, 3)`, ErrNotFound},
		{"nope", `function "nope" is not deployed (deployed: other, zone-stats)`, ErrNotFound},
		{"nope@1", `function "nope" is not deployed (deployed: other, zone-stats)`, ErrNotFound},
		{"Bad/Name", `function "Bad/Name" is not deployed (deployed: other, zone-stats)`, ErrNotFound},
		{"zone-stats@x", `function "zone-stats@x": version "x": want a whole number ≥ 1, as in zone-stats@3`, ErrInvalid},
		{"zone-stats@0", `version "0": want a whole number ≥ 1`, ErrInvalid},
		{"zone-stats@", `version "": want a whole number ≥ 1`, ErrInvalid},
		{"zone-stats@+1", `version "+1"`, ErrInvalid},
	} {
		_, err := Resolve(ctx, b, tc.ref)
		if err == nil || !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Resolve(%s): %v; want %v saying %q", tc.ref, err, tc.kind, tc.want)
		}
	}
}

func TestModule(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	v := mustDeploy(t, b, "f", module("a"), wasm.Limits{})
	got, err := Module(ctx, b, v.Pin())
	if err != nil || !bytes.Equal(got, module("a")) {
		t.Fatalf("Module = %q, %v", got, err)
	}
	// Damaged in the bucket: refused, naming both hashes.
	if err := b.Put(ctx, layout.ModuleKey("f", v.SHA256), module("evil")); err != nil {
		t.Fatal(err)
	}
	if _, err := Module(ctx, b, v.Pin()); err == nil || !strings.Contains(err.Error(), "the job pins "+v.SHA256) {
		t.Fatalf("Module of a damaged object: %v", err)
	}
	// A redeploy of the same bytes repairs it.
	mustDeploy(t, b, "f", module("a"), wasm.Limits{Timeout: time.Second})
	if _, err := Module(ctx, b, v.Pin()); err != nil {
		t.Fatalf("Module after a redeploy repaired it: %v", err)
	}
	pin := v.Pin()
	pin.SHA256 = "../../x"
	if _, err := Module(ctx, b, pin); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("Module of a malformed pin: %v", err)
	}
	if err := Delete(ctx, b, "f"); err != nil {
		t.Fatal(err)
	}
	if _, err := Module(ctx, b, v.Pin()); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "was the function deleted?") {
		t.Fatalf("Module of a deleted function: %v", err)
	}
}

func TestPin(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	v1 := mustDeploy(t, b, "zone-stats", module("a"), wasm.Limits{})
	v2 := mustDeploy(t, b, "zone-stats", module("b"), wasm.Limits{Memory: 1 << 20})
	other := &spec.Module{Name: "zone-stats", Version: 99, SHA256: strings.Repeat("0", 64)}
	job := &spec.Job{Name: "j", Operators: []spec.Operator{
		{Name: "go", Function: goFunction},
		{Name: "latest", Function: "zone-stats"},
		{Name: "latest-too", Function: "zone-stats"},
		{Name: "first", Function: "zone-stats@1"},
		{Name: "pinned", Function: "zone-stats", Module: other},
		{Name: "filter", Filter: "true"},
	}}
	if err := Pin(ctx, b, job); err != nil {
		t.Fatal(err)
	}
	ops := job.Operators
	if ops[0].Module != nil || ops[5].Module != nil {
		t.Errorf("Pin pinned a Go function or a filter: %+v, %+v", ops[0].Module, ops[5].Module)
	}
	for _, i := range []int{1, 2} {
		if m := ops[i].Module; m == nil || m.Version != 2 || m.SHA256 != v2.SHA256 || ops[i].Function != "zone-stats" {
			t.Errorf("operator %s pinned %+v, want version 2", ops[i].Name, m)
		}
	}
	if m := ops[1].Module; m.MemoryBytes != 1<<20 || m.Timeout != spec.Duration(wasm.DefaultTimeout) || len(m.Output) != 3 || m.TimeColumn != "window_end" {
		t.Errorf("pin carries %+v; want the limits and the declared output", m)
	}
	if m := ops[3].Module; m == nil || m.Version != 1 || m.SHA256 != v1.SHA256 || ops[3].Function != "zone-stats@1" {
		t.Errorf("operator first pinned %+v, want version 1", m)
	}
	if ops[4].Module != other {
		t.Errorf("Pin replaced an existing pin: %+v", ops[4].Module)
	}
	if got := Uses(job, "zone-stats"); !slices.Equal(got, []int{1, 2, 99}) {
		t.Errorf("Uses = %v, want [1 2 99]", got)
	}
	if got := Uses(job, "other"); got != nil {
		t.Errorf("Uses(other) = %v", got)
	}

	bad := &spec.Job{Name: "j", Operators: []spec.Operator{
		{Name: "ok", Function: "zone-stats"},
		{Name: "typo", Function: "zone-stat"},
		{Name: "old", Function: "zone-stats@5"},
		{Name: "junk", Function: "zone-stats@v1"},
	}}
	err := Pin(ctx, b, bad)
	ps, ok := spec.AsProblems(err)
	if !ok || len(ps) != 3 {
		t.Fatalf("Pin: %v; want three problems", err)
	}
	for i, want := range []string{
		`operators[typo].function: "zone-stat" is neither a Go function registered in this binary (registered: ` + goFunction + `) nor a deployed Wasm function (deployed: zone-stats)`,
		`operators[old].function: function "zone-stats" has no version 5 (versions: 1, 2)`,
		`operators[junk].function: function "zone-stats@v1": version "v1": want a whole number ≥ 1`,
	} {
		if !strings.Contains(ps[i].Error(), want) {
			t.Errorf("problem %d = %q, want %q", i, ps[i].Error(), want)
		}
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	mustDeploy(t, b, "f", module("a"), wasm.Limits{})
	mustDeploy(t, b, "f", module("b"), wasm.Limits{})
	mustDeploy(t, b, "g", module("a"), wasm.Limits{})
	if err := Delete(ctx, b, "f"); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(t, b), []string{layout.FunctionDeletedKey("f"), layout.ModuleKey("g", sum(module("a"))), layout.VersionKey("g", 1)}; !slices.Equal(got, want) {
		t.Fatalf("after delete: %v, want %v", got, want)
	}
	list, err := List(ctx, b)
	if err != nil || len(list) != 1 || list[0].Name != "g" {
		t.Fatalf("List after delete = %+v, %v", list, err)
	}
	if _, err := Resolve(ctx, b, "f"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Resolve of a deleted function: %v", err)
	}
	if _, err := Versions(ctx, b, "f"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `function "f" is not deployed (deployed: g)`) {
		t.Fatalf("Versions of a deleted function: %v", err)
	}
	if err := Delete(ctx, b, "f"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if err := Delete(ctx, b, "Nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete of an invalid name: %v", err)
	}
	// Deployed again, the name continues its count: a job that pinned f@1
	// never meets other code under that number.
	if v := mustDeploy(t, b, "f", module("c"), wasm.Limits{}); v.Version != 3 {
		t.Fatalf("redeploy after delete = version %d, want 3", v.Version)
	}
	if err := Delete(ctx, b, "f"); err != nil {
		t.Fatal(err)
	}
	if v := mustDeploy(t, b, "f", module("c"), wasm.Limits{}); v.Version != 4 {
		t.Fatalf("redeploy after the second delete = version %d, want 4", v.Version)
	}
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
