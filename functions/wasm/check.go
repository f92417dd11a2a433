package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
)

// Check compiles module and verifies it against the ABI: the version it
// reports, the exports it must have (with their signatures), and that it
// imports nothing but the host's functions and WASI. It instantiates the
// module under lim and calls weir_describe, and returns the declaration,
// checked (known types, unique names, the time column an output
// timestamp_ms column). The error names what is wrong.
func Check(ctx context.Context, module []byte, lim Limits) (Description, error) {
	return check(ctx, module, lim, nil)
}

// Check is the package's Check with the engine's compilation cache, so a
// module checked and then run is compiled once.
func (e *Engine) Check(ctx context.Context, module []byte, lim Limits) (Description, error) {
	return check(ctx, module, lim, e.cache)
}

func check(ctx context.Context, module []byte, lim Limits, cache wazero.CompilationCache) (Description, error) {
	if len(module) < 8 || !bytes.Equal(module[:4], []byte("\x00asm")) {
		return Description{}, errors.New("not a WebAssembly module (it does not start with \\0asm)")
	}
	rt, err := newRuntime(ctx, runtimeKey{pages: pagesOf(lim.Memory), trusted: lim.Trusted}, cache)
	if err != nil {
		return Description{}, err
	}
	defer func() { _ = rt.r.Close(ctx) }()
	compiled, err := rt.r.CompileModule(ctx, module)
	if err != nil {
		return Description{}, fmt.Errorf("compile: %w", err)
	}
	if problems := checkShape(compiled.ImportedFunctions(), compiled.ExportedFunctions(), compiled.ExportedMemories(), rt.wasi); len(problems) > 0 {
		return Description{}, fmt.Errorf("the module does not fit ABI version %d: %s", ABIVersion, joinProblems(problems))
	}
	m := &Module{rt: rt, compiled: compiled, pin: spec.Module{Name: "(being checked)", Timeout: spec.Duration(lim.Timeout)}}
	in := &Instance{what: "function being checked", cfg: InstanceConfig{}, timeout: lim.Timeout, stack: make([]uint64, 2), failRow: -1}
	if in.timeout <= 0 {
		in.timeout = DefaultTimeout
	}
	in.base = context.WithValue(context.WithoutCancel(ctx), instKey{}, in)
	in.cfg.Logger = discard
	if err := in.instantiate(m); err != nil {
		return Description{}, err
	}
	defer func() { _ = in.Close() }()
	if err := in.call(phaseDescribe, in.mod.ExportedFunction(exportDescribe), "describe"); err != nil {
		return Description{}, err
	}
	packed := in.stack[0]
	ptr, n := uint32(packed>>32), uint32(packed)
	doc, ok := in.mem.Read(ptr, n)
	if !ok {
		return Description{}, fmt.Errorf("weir_describe returned range [%d, %d), outside the guest's %d bytes of memory", ptr, uint64(ptr)+uint64(n), in.mem.Size())
	}
	return ParseDescription(doc)
}

func joinProblems(p []string) string { return strings.Join(p, "; ") }

// describeDoc is weir_describe's JSON.
type describeDoc struct {
	Input      []spec.ModuleColumn `json:"input"`
	Output     []spec.ModuleColumn `json:"output"`
	TimeColumn string              `json:"timeColumn"`
	TimeOffset int64               `json:"timeOffset"`
	Doc        string              `json:"doc"`
}

// ParseDescription decodes and checks weir_describe's JSON, reporting
// every problem at once.
func ParseDescription(doc []byte) (Description, error) {
	var d describeDoc
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Description{}, fmt.Errorf("weir_describe: decode %q: %w (the fields are input, output, timeColumn, timeOffset, doc)", truncate(doc), err)
	}
	var errs []error
	in, err := columns("input", d.Input)
	errs = append(errs, err)
	out, err := columns("output", d.Output)
	errs = append(errs, err)
	if len(d.Output) == 0 {
		errs = append(errs, errors.New("output: no columns: a function emits at least one"))
	}
	if d.TimeOffset != 0 && d.TimeColumn == "" {
		errs = append(errs, fmt.Errorf("timeOffset: %d without a timeColumn", d.TimeOffset))
	}
	if d.TimeColumn != "" {
		found := false
		for _, c := range out {
			if c.Name == d.TimeColumn {
				found = true
				if c.Type != arrowfmt.TimestampMs {
					errs = append(errs, fmt.Errorf("timeColumn: %q is %s, want timestamp_ms", d.TimeColumn, c.Type))
				}
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("timeColumn: %q is not an output column", d.TimeColumn))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Description{}, fmt.Errorf("weir_describe: %w", err)
	}
	return Description{Input: in, Output: out, TimeColumn: d.TimeColumn, TimeOffset: d.TimeOffset, Doc: d.Doc}, nil
}

func columns(what string, cols []spec.ModuleColumn) ([]arrowfmt.Field, error) {
	var errs []error
	seen := map[string]bool{}
	fields := make([]arrowfmt.Field, 0, len(cols))
	for i, c := range cols {
		switch {
		case c.Name == "":
			errs = append(errs, fmt.Errorf("%s[%d]: empty name", what, i))
		case seen[c.Name]:
			errs = append(errs, fmt.Errorf("%s[%d]: column %q twice", what, i, c.Name))
		}
		seen[c.Name] = true
		t := arrowfmt.Type(c.Type)
		if t.Arrow() == nil {
			errs = append(errs, fmt.Errorf("%s[%d]: column %q has type %q: want int64, float64, string, bool or timestamp_ms", what, i, c.Name, c.Type))
		}
		fields = append(fields, arrowfmt.Field{Name: c.Name, Type: t})
	}
	return fields, errors.Join(errs...)
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// Columns returns fields as a pin's columns.
func Columns(fields []arrowfmt.Field) []spec.ModuleColumn {
	cols := make([]spec.ModuleColumn, len(fields))
	for i, f := range fields {
		cols[i] = spec.ModuleColumn{Name: f.Name, Type: string(f.Type)}
	}
	return cols
}
