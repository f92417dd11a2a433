package registry

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/wasm"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// Errors, wrapped (errors.Is) in the errors of this package; their own
// text names the function and what exists, not the sentinel.
var (
	// ErrNotFound: no such function, version or module in the bucket.
	ErrNotFound = errors.New("registry: function not found")
	// ErrInvalid: a name, limit or module Deploy refuses (the module's
	// problem is wasm.Check's error, unchanged).
	ErrInvalid = errors.New("registry: invalid function")
)

// Bounds of what Deploy accepts.
const (
	// MaxModuleBytes is the largest module Deploy stores.
	MaxModuleBytes = 64 << 20
	// MinMemory is one WebAssembly page; MaxMemory all of wasm32's
	// address space.
	MinMemory = 64 << 10
	MaxMemory = 4 << 30
)

// deployAttempts bounds the retries of a deploy that lost the race for a
// version number to concurrent deploys.
const deployAttempts = 64

// Version is the record of one deployed version of a function, stored as
// JSON at layout.VersionKey and never changed.
type Version struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	// SHA256 is the lower-case hex SHA-256 of the module, which is stored
	// at layout.ModuleKey(Name, SHA256); Size its length in bytes.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// ABI is the version of the ABI the module implements.
	ABI int `json:"abi"`
	// Memory limits the linear memory of an instance, in bytes (a whole
	// number of 64 KiB pages); Timeout bounds one call of an export.
	Memory  int64         `json:"memory"`
	Timeout spec.Duration `json:"timeout"`
	// Trusted: calls run without deadline checks (wasm.Limits.Trusted).
	Trusted bool `json:"trusted,omitempty"`
	// Describe is what the module declared through weir_describe.
	Describe Description `json:"describe"`
	Created  time.Time   `json:"created"`
}

// Description is what a module declares (wasm.Description), as recorded.
type Description struct {
	Input      []spec.ModuleColumn `json:"input"`
	Output     []spec.ModuleColumn `json:"output"`
	TimeColumn string              `json:"timeColumn,omitempty"`
	TimeOffset int64               `json:"timeOffset,omitempty"`
	Doc        string              `json:"doc,omitempty"`
}

// Ref is the reference a job spec can name this version by: NAME@VERSION.
func (v Version) Ref() string { return v.Name + "@" + strconv.Itoa(v.Version) }

// Limits are the limits the version was deployed with.
func (v Version) Limits() wasm.Limits {
	return wasm.Limits{Memory: v.Memory, Timeout: v.Timeout.D(), Trusted: v.Trusted}
}

// Pin returns what a function operator running this version records in
// the stored job spec (spec.Operator.Module).
func (v Version) Pin() *spec.Module {
	return &spec.Module{Name: v.Name, Version: v.Version, SHA256: v.SHA256,
		MemoryBytes: v.Memory, Timeout: v.Timeout, Trusted: v.Trusted,
		Input: slices.Clone(v.Describe.Input), Output: slices.Clone(v.Describe.Output), TimeColumn: v.Describe.TimeColumn, TimeOffset: v.Describe.TimeOffset}
}

// Function is one deployed function: its newest version and how many it
// has.
type Function struct {
	Name     string  `json:"name"`
	Latest   Version `json:"latest"`
	Versions int     `json:"versions"`
}

// nameRule says what ValidateName accepts.
const nameRule = "want a lower-case letter, then up to 62 lower-case letters, digits, '_' or '-'"

// ValidateName reports whether name can be deployed: it follows
// layout.ValidFunctionName and is not the name of a Go function
// registered in this binary (which a job spec naming it would run
// instead). The error wraps ErrInvalid.
func ValidateName(name string) error {
	switch {
	case name == "":
		return invalid(fmt.Errorf("function name: empty: %s", nameRule))
	case !layout.ValidFunctionName(name):
		return invalid(fmt.Errorf("function name %q: %s", name, nameRule))
	}
	if _, ok := functions.Lookup(name); ok {
		return invalid(fmt.Errorf("function name %q: a Go function of that name is registered in this binary, and a job spec naming it runs that; choose another name", name))
	}
	return nil
}

// EffectiveLimits returns lim with the defaults filled in (wasm.DefaultMemory,
// wasm.DefaultTimeout for zero fields) and the memory rounded down to whole
// pages, or an error (wrapping ErrInvalid) naming the limit and the
// accepted range.
func EffectiveLimits(lim wasm.Limits) (wasm.Limits, error) {
	var errs []error
	if lim.Memory == 0 {
		lim.Memory = wasm.DefaultMemory
	}
	if lim.Memory < MinMemory || lim.Memory > MaxMemory {
		errs = append(errs, fmt.Errorf("memory %s: want between %s and %s", spec.FormatSize(lim.Memory), spec.FormatSize(MinMemory), spec.FormatSize(MaxMemory)))
	}
	lim.Memory -= lim.Memory % MinMemory
	if lim.Timeout == 0 {
		lim.Timeout = wasm.DefaultTimeout
	}
	if lim.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %s: want a positive duration such as 5s", lim.Timeout))
	}
	if len(errs) > 0 {
		return wasm.Limits{}, invalid(errors.Join(errs...))
	}
	return lim, nil
}

// CheckFunc checks a module: wasm.Check, or an Engine's Check (with its
// compilation cache).
type CheckFunc func(ctx context.Context, module []byte, lim wasm.Limits) (wasm.Description, error)

// Deploy stores module as the next version of function name, with the
// limits lim (zero fields take the defaults), and returns the version. It
// validates the name (ValidateName) and the limits, checks the module
// (wasm.Check: its error comes back unchanged, wrapping ErrInvalid), stores
// the module at layout.ModuleKey and then the record with the next
// version number; of concurrent deploys each gets its own version. When
// the latest version has the same bytes and limits, that version is
// returned and nothing is written. When anything fails nothing is left
// stored. now is the record's creation time.
func Deploy(ctx context.Context, b blob.Bucket, name string, module []byte, lim wasm.Limits, now time.Time) (Version, error) {
	return DeployChecked(ctx, b, name, module, lim, now, wasm.Check)
}

// DeployChecked is Deploy with the module checked by check.
func DeployChecked(ctx context.Context, b blob.Bucket, name string, module []byte, lim wasm.Limits, now time.Time, check CheckFunc) (Version, error) {
	if err := ValidateName(name); err != nil {
		return Version{}, err
	}
	lim, err := EffectiveLimits(lim)
	if err != nil {
		return Version{}, err
	}
	switch {
	case len(module) == 0:
		return Version{}, invalid(errors.New("module: empty file"))
	case len(module) > MaxModuleBytes:
		return Version{}, invalid(fmt.Errorf("module: %s, more than the %s accepted", spec.FormatSize(int64(len(module))), spec.FormatSize(MaxModuleBytes)))
	}
	desc, err := check(ctx, module, lim)
	if err != nil {
		if ctx.Err() != nil {
			return Version{}, fmt.Errorf("check module: %w", ctx.Err())
		}
		return Version{}, invalid(err)
	}
	sum := sha256.Sum256(module)
	v := Version{Name: name, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(module)), ABI: wasm.ABIVersion,
		Memory: lim.Memory, Timeout: spec.Duration(lim.Timeout), Trusted: lim.Trusted, Describe: describe(desc), Created: now.UTC()}
	createdModule := false
	fail := func(err error) (Version, error) {
		if createdModule {
			removeOrphan(ctx, b, name, v.SHA256)
		}
		return Version{}, fmt.Errorf("deploy %s: %w", name, err)
	}
	for range deployAttempts {
		latest, next, err := latestVersion(ctx, b, name)
		if err != nil {
			return fail(err)
		}
		if latest != nil && latest.SHA256 == v.SHA256 && latest.Memory == v.Memory && latest.Timeout == v.Timeout && latest.Trusted == v.Trusted && latest.ABI == v.ABI {
			return *latest, nil
		}
		if !createdModule {
			if createdModule, err = putModule(ctx, b, name, v.SHA256, module); err != nil {
				return fail(err)
			}
		}
		v.Version = next
		raw, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fail(fmt.Errorf("encode version record: %w", err))
		}
		err = b.PutIfAbsent(ctx, layout.VersionKey(name, next), raw)
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, blob.ErrExists) {
			return fail(fmt.Errorf("store version %d: %w", next, err))
		}
		// A concurrent deploy took the number: look again.
	}
	return fail(fmt.Errorf("no version number free after %d attempts (as many concurrent deploys)", deployAttempts))
}

func describe(d wasm.Description) Description {
	cols := func(fs []arrowfmt.Field) []spec.ModuleColumn {
		out := make([]spec.ModuleColumn, len(fs))
		for i, f := range fs {
			out[i] = spec.ModuleColumn{Name: f.Name, Type: string(f.Type)}
		}
		return out
	}
	return Description{Input: cols(d.Input), Output: cols(d.Output), TimeColumn: d.TimeColumn, TimeOffset: d.TimeOffset, Doc: d.Doc}
}

// putModule stores a module at its content address and reports whether
// this call created the object. An object already there has the same bytes
// (its name is their hash) unless it was damaged: one of another size is
// replaced.
func putModule(ctx context.Context, b blob.Bucket, name, sum string, module []byte) (bool, error) {
	key := layout.ModuleKey(name, sum)
	err := b.PutIfAbsent(ctx, key, module)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, blob.ErrExists) {
		return false, fmt.Errorf("store module: %w", err)
	}
	info, err := b.Stat(ctx, key)
	if err == nil && info.Size == int64(len(module)) {
		return false, nil
	}
	if err := b.Put(ctx, key, module); err != nil {
		return false, fmt.Errorf("replace damaged module %s: %w", key, err)
	}
	return false, nil
}

// removeOrphan deletes a module a failed deploy stored, unless a version
// record (of a concurrent deploy of the same bytes) uses it.
func removeOrphan(ctx context.Context, b blob.Bucket, name, sum string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	vs, err := versions(ctx, b, name)
	if err != nil {
		return
	}
	for _, v := range vs {
		if v.SHA256 == sum {
			return
		}
	}
	_ = b.Delete(ctx, layout.ModuleKey(name, sum))
}

// latestVersion returns the newest version record of name (nil if none)
// and the number the next version gets: one past the newest, or past the
// last version of a deleted function of that name.
func latestVersion(ctx context.Context, b blob.BucketReader, name string) (*Version, int, error) {
	nums, err := versionNumbers(ctx, b, name)
	if err != nil {
		return nil, 0, err
	}
	last, err := deletedLast(ctx, b, name)
	if err != nil {
		return nil, 0, err
	}
	if len(nums) == 0 {
		return nil, last + 1, nil
	}
	n := nums[len(nums)-1]
	v, err := readVersion(ctx, b, name, n)
	if err != nil {
		return nil, 0, err
	}
	return &v, max(n, last) + 1, nil
}

// tombstone is the object at layout.FunctionDeletedKey.
type tombstone struct {
	LastVersion int `json:"lastVersion"`
}

func deletedLast(ctx context.Context, b blob.BucketReader, name string) (int, error) {
	raw, err := b.Get(ctx, layout.FunctionDeletedKey(name))
	if errors.Is(err, blob.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", layout.FunctionDeletedKey(name), err)
	}
	var t tombstone
	if err := json.Unmarshal(raw, &t); err != nil {
		return 0, fmt.Errorf("decode %s: %w", layout.FunctionDeletedKey(name), err)
	}
	return t.LastVersion, nil
}

// versionNumbers lists the versions of name, ascending.
func versionNumbers(ctx context.Context, b blob.BucketReader, name string) ([]int, error) {
	infos, err := b.List(ctx, layout.VersionsPrefix(name))
	if err != nil {
		return nil, fmt.Errorf("list versions of %s: %w", name, err)
	}
	var nums []int
	for _, o := range infos {
		if n, v, ok := layout.ParseVersionKey(o.Key); ok && n == name {
			nums = append(nums, v)
		}
	}
	slices.Sort(nums)
	return nums, nil
}

func readVersion(ctx context.Context, b blob.BucketReader, name string, n int) (Version, error) {
	key := layout.VersionKey(name, n)
	raw, err := b.Get(ctx, key)
	if err != nil {
		if errors.Is(err, blob.ErrNotFound) {
			return Version{}, notFound(fmt.Errorf("function %q has no version %d", name, n))
		}
		return Version{}, fmt.Errorf("read %s: %w", key, err)
	}
	var v Version
	if err := json.Unmarshal(raw, &v); err != nil {
		return Version{}, fmt.Errorf("decode %s: %w", key, err)
	}
	if v.Name != name || v.Version != n || !validSHA256(v.SHA256) {
		return Version{}, fmt.Errorf("decode %s: the record says %s@%d, sha256 %q", key, v.Name, v.Version, v.SHA256)
	}
	return v, nil
}

func validSHA256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// List returns every deployed function, sorted by name.
func List(ctx context.Context, b blob.BucketReader) ([]Function, error) {
	infos, err := b.List(ctx, layout.FunctionsPrefix)
	if err != nil {
		return nil, fmt.Errorf("list functions: %w", err)
	}
	count := map[string]int{}
	latest := map[string]int{}
	for _, o := range infos {
		if name, v, ok := layout.ParseVersionKey(o.Key); ok {
			count[name]++
			latest[name] = max(latest[name], v)
		}
	}
	out := make([]Function, 0, len(count))
	for name, n := range count {
		v, err := readVersion(ctx, b, name, latest[name])
		if err != nil {
			return nil, err
		}
		out = append(out, Function{Name: name, Latest: v, Versions: n})
	}
	slices.SortFunc(out, func(a, b Function) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// names returns the deployed functions' names for messages: "a, b" or
// "none".
func names(ctx context.Context, b blob.BucketReader) string {
	infos, err := b.List(ctx, layout.FunctionsPrefix)
	if err != nil {
		return "unknown: " + err.Error()
	}
	var ns []string
	for _, o := range infos {
		if name, _, ok := layout.ParseVersionKey(o.Key); ok && !slices.Contains(ns, name) {
			ns = append(ns, name)
		}
	}
	return listOrNone(ns)
}

func listOrNone(ns []string) string {
	if len(ns) == 0 {
		return "none"
	}
	slices.Sort(ns)
	return strings.Join(ns, ", ")
}

// Versions returns every version of function name, oldest first; an error
// wrapping ErrNotFound (naming the deployed functions) if it has none.
func Versions(ctx context.Context, b blob.BucketReader, name string) ([]Version, error) {
	if !layout.ValidFunctionName(name) {
		return nil, notFound(fmt.Errorf("function %q is not deployed: a deployed function's name must be valid (%s)", name, nameRule))
	}
	vs, err := versions(ctx, b, name)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, notFound(fmt.Errorf("function %q is not deployed (deployed: %s)", name, names(ctx, b)))
	}
	return vs, nil
}

func versions(ctx context.Context, b blob.BucketReader, name string) ([]Version, error) {
	nums, err := versionNumbers(ctx, b, name)
	if err != nil {
		return nil, err
	}
	vs := make([]Version, 0, len(nums))
	for _, n := range nums {
		v, err := readVersion(ctx, b, name, n)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// ParseRef splits a job spec's reference to a deployed function: NAME, or
// NAME@VERSION with a version ≥ 1 (version 0 for the latest).
func ParseRef(ref string) (name string, version int, err error) {
	name, ver, pinned := strings.Cut(ref, "@")
	if !pinned {
		return name, 0, nil
	}
	v, err := strconv.Atoi(ver)
	if err != nil || v < 1 || ver[0] == '+' {
		return "", 0, invalid(fmt.Errorf("function %q: version %q: want a whole number ≥ 1, as in %s@3", ref, ver, name))
	}
	return name, v, nil
}

// Resolve returns the version ref names: NAME for the latest version,
// NAME@VERSION for that one. An error wraps ErrNotFound and names the
// function and what is deployed (the functions, or the function's
// versions), or ErrInvalid for a malformed ref.
func Resolve(ctx context.Context, b blob.BucketReader, ref string) (Version, error) {
	name, n, err := ParseRef(ref)
	if err != nil {
		return Version{}, err
	}
	if !layout.ValidFunctionName(name) {
		return Version{}, notFound(fmt.Errorf("function %q is not deployed (deployed: %s)", name, names(ctx, b)))
	}
	if n == 0 {
		latest, _, err := latestVersion(ctx, b, name)
		if err != nil {
			return Version{}, err
		}
		if latest == nil {
			return Version{}, notFound(fmt.Errorf("function %q is not deployed (deployed: %s)", name, names(ctx, b)))
		}
		return *latest, nil
	}
	v, err := readVersion(ctx, b, name, n)
	if errors.Is(err, ErrNotFound) {
		nums, lerr := versionNumbers(ctx, b, name)
		if lerr != nil {
			return Version{}, lerr
		}
		if len(nums) == 0 {
			return Version{}, notFound(fmt.Errorf("function %q is not deployed (deployed: %s)", name, names(ctx, b)))
		}
		vs := make([]string, len(nums))
		for i, n := range nums {
			vs[i] = strconv.Itoa(n)
		}
		return Version{}, notFound(fmt.Errorf("function %q has no version %d (versions: %s)", name, n, strings.Join(vs, ", ")))
	}
	return v, err
}

// Module reads the module pin names and verifies its SHA-256. An error
// wraps ErrNotFound when the module is gone (the function was deleted).
func Module(ctx context.Context, b blob.BucketReader, pin *spec.Module) ([]byte, error) {
	if pin == nil {
		return nil, errors.New("read module: no pin")
	}
	if !layout.ValidFunctionName(pin.Name) || !validSHA256(pin.SHA256) {
		return nil, fmt.Errorf("read module of %s@%d: the pin's name or sha256 %q is malformed", pin.Name, pin.Version, pin.SHA256)
	}
	key := layout.ModuleKey(pin.Name, pin.SHA256)
	raw, err := b.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, notFound(fmt.Errorf("read module of %s@%d: %s is not in %s (was the function deleted?)", pin.Name, pin.Version, key, b.Describe()))
	}
	if err != nil {
		return nil, fmt.Errorf("read module of %s@%d: %w", pin.Name, pin.Version, err)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != pin.SHA256 {
		return nil, fmt.Errorf("read module of %s@%d: %s has SHA-256 %x, the job pins %s: the object is damaged", pin.Name, pin.Version, key, sum, pin.SHA256)
	}
	return raw, nil
}

// Delete removes function name: its version records, then its modules.
// It leaves a tombstone (layout.FunctionDeletedKey) with the last version
// number, so that a later deploy of the name does not reuse a version. An
// error wraps ErrNotFound if the function has no version. Whether a job
// still uses it is the caller's question (Uses).
func Delete(ctx context.Context, b blob.Bucket, name string) error {
	if !layout.ValidFunctionName(name) {
		return notFound(fmt.Errorf("delete function %q: not deployed: a deployed function's name must be valid (%s)", name, nameRule))
	}
	nums, err := versionNumbers(ctx, b, name)
	if err != nil {
		return fmt.Errorf("delete function %s: %w", name, err)
	}
	if len(nums) == 0 {
		return notFound(fmt.Errorf("delete function %q: not deployed (deployed: %s)", name, names(ctx, b)))
	}
	last, err := deletedLast(ctx, b, name)
	if err != nil {
		return fmt.Errorf("delete function %s: %w", name, err)
	}
	raw, _ := json.Marshal(tombstone{LastVersion: max(last, nums[len(nums)-1])})
	if err := b.Put(ctx, layout.FunctionDeletedKey(name), raw); err != nil {
		return fmt.Errorf("delete function %s: store tombstone: %w", name, err)
	}
	var errs []error
	for _, n := range nums {
		if err := b.Delete(ctx, layout.VersionKey(name, n)); err != nil {
			errs = append(errs, err)
		}
	}
	mods, err := b.List(ctx, layout.ModulesPrefix(name))
	if err != nil {
		errs = append(errs, err)
	}
	for _, o := range mods {
		if err := b.Delete(ctx, o.Key); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete function %s: %w", name, errors.Join(errs...))
	}
	return nil
}

// Pin records in every function operator of job whose Function is not a
// Go function registered in this binary the deployed version it names
// (Resolve), as op.Module; Function stays as the user wrote it. Operators
// already pinned (a stored spec read back) are left alone, and one
// reference resolves to one version for the whole job. A name neither
// registered nor deployed is a spec.Problem of operators[NAME].function
// listing both kinds of function; every such operator is reported at once.
// Other errors (the bucket's) are returned as they come.
func Pin(ctx context.Context, b blob.BucketReader, job *spec.Job) error {
	resolved := map[string]Version{}
	var ps spec.Problems
	for i := range job.Operators {
		op := &job.Operators[i]
		if op.Function == "" || op.Module != nil {
			continue
		}
		if _, ok := functions.Lookup(op.Function); ok {
			continue
		}
		field := fmt.Sprintf("operators[%s].function", op.Name)
		v, ok := resolved[op.Function]
		if !ok {
			var err error
			v, err = Resolve(ctx, b, op.Function)
			switch {
			case errors.Is(err, ErrInvalid):
				ps.Add(field, "%v", err)
				continue
			case errors.Is(err, ErrNotFound):
				if name, _, _ := ParseRef(op.Function); deployed(ctx, b, name) {
					ps.Add(field, "%v", err)
				} else {
					ps.Add(field, "%q is neither a Go function registered in this binary (registered: %s) nor a deployed Wasm function (deployed: %s)",
						op.Function, listOrNone(functions.Names()), names(ctx, b))
				}
				continue
			case err != nil:
				return fmt.Errorf("pin %s: %w", field, err)
			}
			resolved[op.Function] = v
		}
		op.Module = v.Pin()
	}
	if len(ps) > 0 {
		return ps
	}
	return nil
}

func deployed(ctx context.Context, b blob.BucketReader, name string) bool {
	if !layout.ValidFunctionName(name) {
		return false
	}
	nums, err := versionNumbers(ctx, b, name)
	return err == nil && len(nums) > 0
}

// Uses returns the versions of function name that job's operators pin,
// ascending and without repeats; nil if none.
func Uses(job *spec.Job, name string) []int {
	var vs []int
	for _, op := range job.Operators {
		if op.Module != nil && op.Module.Name == name && !slices.Contains(vs, op.Module.Version) {
			vs = append(vs, op.Module.Version)
		}
	}
	slices.Sort(vs)
	return vs
}

// classified is an error whose text is its own and that also matches a
// sentinel of this package.
type classified struct{ err, kind error }

func (e *classified) Error() string   { return e.err.Error() }
func (e *classified) Unwrap() []error { return []error{e.err, e.kind} }

func invalid(err error) error  { return &classified{err: err, kind: ErrInvalid} }
func notFound(err error) error { return &classified{err: err, kind: ErrNotFound} }
