package wasm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// The ABI's names (docs/wasm-abi.md).
const (
	hostModule = "weir"
	wasiModule = "wasi_snapshot_preview1"

	exportVersion  = "weir_abi_version"
	exportAlloc    = "weir_alloc"
	exportDescribe = "weir_describe"
	exportOpen     = "weir_open"
	exportProcess  = "weir_process"
	exportTimers   = "weir_timers"
	exportMemory   = "memory"
	exportInit     = "_initialize"
)

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// signature is a function type of the ABI.
type signature struct {
	params, results []api.ValueType
}

func sig(params []api.ValueType, results ...api.ValueType) signature {
	return signature{params: params, results: results}
}

func types(ts ...api.ValueType) []api.ValueType { return ts }

func (s signature) String() string {
	names := func(ts []api.ValueType) string {
		n := make([]string, len(ts))
		for i, t := range ts {
			n[i] = api.ValueTypeName(t)
		}
		return strings.Join(n, ", ")
	}
	if len(s.results) == 0 {
		return "(" + names(s.params) + ")"
	}
	return "(" + names(s.params) + ") -> " + names(s.results)
}

func (s signature) matches(def api.FunctionDefinition) bool {
	return slices.Equal(s.params, def.ParamTypes()) && slices.Equal(s.results, def.ResultTypes())
}

// exports are the functions a guest exports, and whether each is required.
var exports = []struct {
	name     string
	sig      signature
	required bool
}{
	{exportVersion, sig(nil, i32), true},
	{exportAlloc, sig(types(i32), i32), true},
	{exportDescribe, sig(nil, i64), true},
	{exportOpen, sig(types(i32, i32), i32), true},
	{exportProcess, sig(types(i32, i32), i32), true},
	{exportTimers, sig(types(i32, i32), i32), false},
}

// hostSignatures are the functions of import module weir.
var hostSignatures = map[string]signature{
	"fail":            sig(types(i32, i32, i32)),
	"log":             sig(types(i32, i32, i32)),
	"emit":            sig(types(i32, i32), i32),
	"state":           sig(types(i32, i32, i32), i32),
	"key":             sig(types(i32, i32, i32), i32),
	"watermark":       sig(nil, i64),
	"processing_time": sig(nil, i64),
	"value_get":       sig(types(i32, i32, i32, i32, i32, i32), i32),
	"value_put":       sig(types(i32, i32, i32, i32, i32, i32)),
	"value_delete":    sig(types(i32, i32, i32, i32)),
	"list_get":        sig(types(i32, i32, i32, i32, i32, i32), i32),
	"list_add":        sig(types(i32, i32, i32, i32, i32, i32)),
	"list_clear":      sig(types(i32, i32, i32, i32)),
	"map_get":         sig(types(i32, i32, i32, i32, i32, i32, i32, i32), i32),
	"map_put":         sig(types(i32, i32, i32, i32, i32, i32, i32, i32)),
	"map_delete":      sig(types(i32, i32, i32, i32, i32, i32)),
	"map_entries":     sig(types(i32, i32, i32, i32, i32, i32), i32),
	"map_clear":       sig(types(i32, i32, i32, i32)),
	"timer_register":  sig(types(i32, i32, i64)),
	"timer_delete":    sig(types(i32, i32, i64)),
}

// checkShape reports every way the module's imports and exports differ
// from the ABI. wasi lists the WASI functions the host provides.
func checkShape(imports []api.FunctionDefinition, exported map[string]api.FunctionDefinition, memories map[string]api.MemoryDefinition, wasi map[string]api.FunctionDefinition) []string {
	var problems []string
	for _, e := range exports {
		def, ok := exported[e.name]
		switch {
		case !ok && e.required:
			problems = append(problems, fmt.Sprintf("missing export %s %v", e.name, e.sig))
		case ok && !e.sig.matches(def):
			problems = append(problems, fmt.Sprintf("export %s has signature %v, want %v", e.name, sigOf(def), e.sig))
		}
	}
	if def, ok := exported[exportInit]; ok && (len(def.ParamTypes()) != 0 || len(def.ResultTypes()) != 0) {
		problems = append(problems, fmt.Sprintf("export %s has signature %v, want ()", exportInit, sigOf(def)))
	}
	if _, ok := memories[exportMemory]; !ok {
		problems = append(problems, "missing export memory (the guest's linear memory)")
	}
	for _, imp := range imports {
		mod, name, _ := imp.Import()
		switch mod {
		case hostModule:
			want, ok := hostSignatures[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("imports %s.%s, which the host does not have (it has: %s)", mod, name, strings.Join(hostNames(), ", ")))
			} else if !want.matches(imp) {
				problems = append(problems, fmt.Sprintf("imports %s.%s with signature %v, want %v", mod, name, sigOf(imp), want))
			}
		case wasiModule:
			have, ok := wasi[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("imports %s.%s, which the host does not provide", mod, name))
			} else if !sigOf(have).matches(imp) {
				problems = append(problems, fmt.Sprintf("imports %s.%s with signature %v, want %v", mod, name, sigOf(imp), sigOf(have)))
			}
		default:
			problems = append(problems, fmt.Sprintf("imports %s.%s: only modules %s and %s are provided", mod, name, hostModule, wasiModule))
		}
	}
	return problems
}

func sigOf(def api.FunctionDefinition) signature {
	return signature{params: def.ParamTypes(), results: def.ResultTypes()}
}

func hostNames() []string {
	names := make([]string, 0, len(hostSignatures))
	for n := range hostSignatures {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
