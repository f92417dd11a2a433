package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/weirstream/weir/functions/spec"
)

// EngineConfig configures an Engine.
type EngineConfig struct {
	// CacheDir holds compiled code and module bytes between runs of the
	// process, so a module is fetched and compiled once per machine. ""
	// keeps them in memory only.
	CacheDir string
	// Fetch returns the bytes of a pinned module (from the bucket). The
	// engine verifies their SHA-256 against the pin.
	Fetch func(ctx context.Context, pin *spec.Module) ([]byte, error)
	// Logger receives what guests log and write to stdout and stderr
	// (default: discards).
	Logger *slog.Logger
}

// An Engine loads and compiles deployed modules and makes instances of
// them. One is shared by the tasks of a worker process; its methods are
// safe for concurrent use. Close releases the compiled code.
type Engine struct {
	cfg   EngineConfig
	cache wazero.CompilationCache

	mu struct {
		sync.Mutex
		runtimes map[runtimeKey]*runtime
		modules  map[moduleKey]*Module
		loading  map[moduleKey]*loadCall
		closed   bool
	}
}

type moduleKey struct {
	sha string
	rt  runtimeKey
}

// runtimeKey is what wazero fixes per runtime: the memory limit, and
// whether calls can be stopped at their deadline.
type runtimeKey struct {
	pages   uint32
	trusted bool
}

// loadCall is a Load in progress that later callers of the same module
// wait for.
type loadCall struct {
	done chan struct{}
	mod  *Module
	err  error
}

// runtime is a wazero runtime with the host module and WASI in it; one per
// memory limit, since wazero sets the limit per runtime.
type runtime struct {
	r       wazero.Runtime
	wasi    map[string]api.FunctionDefinition
	trusted bool // calls cannot be stopped at their deadline
}

// NewEngine returns an engine. With a CacheDir it creates the directory.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{cfg: cfg}
	c, err := processCache(cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	e.cache = c
	e.mu.runtimes = map[runtimeKey]*runtime{}
	e.mu.modules = map[moduleKey]*Module{}
	e.mu.loading = map[moduleKey]*loadCall{}
	return e, nil
}

// pagesOf turns a memory limit in bytes into 64 KiB pages (at least one,
// at most wazero's 65536).
func pagesOf(memory int64) uint32 {
	if memory <= 0 {
		memory = DefaultMemory
	}
	p := memory >> 16
	switch {
	case p < 1:
		p = 1
	case p > 65536:
		p = 65536
	}
	return uint32(p)
}

// runtimeLocked returns the runtime for k, making it.
func (e *Engine) runtimeLocked(ctx context.Context, k runtimeKey) (*runtime, error) {
	if rt, ok := e.mu.runtimes[k]; ok {
		return rt, nil
	}
	rt, err := newRuntime(ctx, k, e.cache)
	if err != nil {
		return nil, err
	}
	e.mu.runtimes[k] = rt
	return rt, nil
}

func newRuntime(ctx context.Context, k runtimeKey, cache wazero.CompilationCache) (*runtime, error) {
	cfg := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(k.pages).
		WithCloseOnContextDone(!k.trusted)
	if cache != nil {
		cfg = cfg.WithCompilationCache(cache)
	}
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	compiled, err := wasi_snapshot_preview1.NewBuilder(r).Compile(ctx)
	if err != nil {
		_ = r.Close(ctx)
		return nil, fmt.Errorf("compile wasi: %w", err)
	}
	if _, err := r.InstantiateModule(ctx, compiled, wazero.NewModuleConfig()); err != nil {
		_ = r.Close(ctx)
		return nil, fmt.Errorf("instantiate wasi: %w", err)
	}
	if err := instantiateHost(ctx, r); err != nil {
		_ = r.Close(ctx)
		return nil, err
	}
	return &runtime{r: r, wasi: compiled.ExportedFunctions(), trusted: k.trusted}, nil
}

// Module is a compiled, checked module ready for instances.
type Module struct {
	pin      spec.Module
	rt       *runtime
	compiled wazero.CompiledModule
	hasTimer bool
}

// Load returns the compiled module pin names, fetching and compiling it
// on first use (at most once at a time per module), and checking it
// against the ABI and the pin's hash.
func (e *Engine) Load(ctx context.Context, pin *spec.Module) (*Module, error) {
	key := moduleKey{sha: pin.SHA256, rt: runtimeKey{pages: pagesOf(pin.MemoryBytes), trusted: pin.Trusted}}
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil, errors.New("wasm: engine closed")
	}
	if m, ok := e.mu.modules[key]; ok {
		e.mu.Unlock()
		return m.withPin(pin), nil
	}
	if c, ok := e.mu.loading[key]; ok {
		e.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if c.err != nil {
			return nil, c.err
		}
		return c.mod.withPin(pin), nil
	}
	c := &loadCall{done: make(chan struct{})}
	e.mu.loading[key] = c
	rt, err := e.runtimeLocked(ctx, key.rt)
	e.mu.Unlock()

	if err == nil {
		c.mod, err = e.load(ctx, pin, rt)
	}
	c.err = err
	e.mu.Lock()
	delete(e.mu.loading, key)
	if err == nil {
		if e.mu.closed {
			c.err = errors.New("wasm: engine closed")
		} else {
			e.mu.modules[key] = c.mod
		}
	}
	e.mu.Unlock()
	close(c.done)
	if c.err != nil {
		return nil, c.err
	}
	return c.mod.withPin(pin), nil
}

func (m *Module) withPin(pin *spec.Module) *Module {
	c := *m
	c.pin = *pin
	return &c
}

func (e *Engine) load(ctx context.Context, pin *spec.Module, rt *runtime) (*Module, error) {
	what := fmt.Sprintf("function %s version %d", pin.Name, pin.Version)
	bytes, err := e.moduleBytes(ctx, pin)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", what, err)
	}
	unlock := lockCompile(pin.SHA256)
	compiled, err := rt.r.CompileModule(ctx, bytes)
	unlock()
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", what, err)
	}
	if problems := checkShape(compiled.ImportedFunctions(), compiled.ExportedFunctions(), compiled.ExportedMemories(), rt.wasi); len(problems) > 0 {
		_ = compiled.Close(ctx)
		return nil, fmt.Errorf("%s does not fit ABI version %d: %s", what, ABIVersion, joinProblems(problems))
	}
	_, hasTimer := compiled.ExportedFunctions()[exportTimers]
	return &Module{pin: *pin, rt: rt, compiled: compiled, hasTimer: hasTimer}, nil
}

// moduleBytes returns the module's bytes from the local cache or Fetch,
// verified against the pin's SHA-256.
func (e *Engine) moduleBytes(ctx context.Context, pin *spec.Module) ([]byte, error) {
	var path string
	if e.cfg.CacheDir != "" {
		path = filepath.Join(e.cfg.CacheDir, "modules", pin.SHA256+".wasm")
		if b, err := os.ReadFile(path); err == nil && shaHex(b) == pin.SHA256 {
			return b, nil
		}
	}
	if e.cfg.Fetch == nil {
		return nil, errors.New("this process has no way to fetch deployed modules")
	}
	b, err := e.cfg.Fetch(ctx, pin)
	if err != nil {
		return nil, err
	}
	if got := shaHex(b); got != pin.SHA256 {
		return nil, fmt.Errorf("module has SHA-256 %s, the job pinned %s: the stored module changed", got, pin.SHA256)
	}
	if path != "" {
		if err := writeFileAtomic(path, b); err != nil {
			e.cfg.Logger.Warn("cache wasm module", "path", path, "err", err)
		}
	}
	return b, nil
}

func shaHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

// Close releases every runtime and compiled module. Instances must be
// closed first. It is safe to call twice.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		return nil
	}
	e.mu.closed = true
	ctx := context.Background()
	var errs []error
	for _, rt := range e.mu.runtimes {
		errs = append(errs, rt.r.Close(ctx))
	}
	clear(e.mu.modules)
	return errors.Join(errs...)
}

var discard = slog.New(slog.DiscardHandler)

// The engines of one process share their compilation caches, one per
// cache directory ("" for memory only): the coordinator's checks and the
// workers of `weir run`, or of tests that run several workers in one
// process, then compile a module once instead of once per engine. wazero
// counts the users of a compiled module; a cache lives as long as the
// process.
var caches struct {
	sync.Mutex
	byDir     map[string]wazero.CompilationCache
	compiling map[string]*sync.Mutex // by module hash
}

// processCache returns the process's compilation cache of dir (see
// caches), making it and the directory.
func processCache(dir string) (wazero.CompilationCache, error) {
	caches.Lock()
	defer caches.Unlock()
	if c, ok := caches.byDir[dir]; ok {
		return c, nil
	}
	var c wazero.CompilationCache
	if dir == "" {
		c = wazero.NewCompilationCache()
	} else {
		d := filepath.Join(dir, "compiled")
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create wasm cache: %w", err)
		}
		var err error
		if c, err = wazero.NewCompilationCacheWithDir(d); err != nil {
			return nil, fmt.Errorf("open wasm compilation cache %s: %w", d, err)
		}
	}
	if caches.byDir == nil {
		caches.byDir = map[string]wazero.CompilationCache{}
	}
	caches.byDir[dir] = c
	return c, nil
}

// lockCompile serializes the compiles of one module in the process and
// returns the unlock: wazero looks in its cache before it compiles, so
// two engines compiling one module at once would both do the work; the
// second now finds the first's result.
func lockCompile(sha string) (unlock func()) {
	caches.Lock()
	if caches.compiling == nil {
		caches.compiling = map[string]*sync.Mutex{}
	}
	mu, ok := caches.compiling[sha]
	if !ok {
		mu = &sync.Mutex{}
		caches.compiling[sha] = mu
	}
	caches.Unlock()
	mu.Lock()
	return mu.Unlock
}
