package wasm

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/weirstream/weir/statestore"
)

// State kinds, as the guest names them in `state`.
const (
	kindValue int32 = 0
	kindList  int32 = 1
	kindMap   int32 = 2
)

var kindNames = map[int32]string{kindValue: "value", kindList: "list", kindMap: "map"}

// stateTable is a declared state of an instance.
type stateTable struct {
	name  string
	kind  int32
	value statestore.Table[string]
	list  *statestore.ListState[string]
	mp    *statestore.MapState[string, string]
}

// trap is what a host function panics with when the guest misuses the
// ABI; wazero turns the panic into the export call's error, and call
// reports the message.
type trap struct{ msg string }

func (in *Instance) trap(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	in.hostErr = err
	panic(trap{err.Error()})
}

// instantiateHost adds the weir host module to r. Every function finds its
// instance in the context of the export call that led to it.
func instantiateHost(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(hostModule)
	for name, fn := range hostFuncs {
		s := hostSignatures[name]
		b = b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			in, ok := ctx.Value(instKey{}).(*Instance)
			if !ok {
				panic(trap{"weir." + name + " called outside a weir export call"})
			}
			in.stats.HostCalls.Add(1)
			fn(in, stack)
		}), s.params, s.results).Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("instantiate host module: %w", err)
	}
	return nil
}

func init() {
	for name := range hostSignatures {
		if _, ok := hostFuncs[name]; !ok {
			panic("wasm: host function " + name + " has a signature but no implementation")
		}
	}
	for name := range hostFuncs {
		if _, ok := hostSignatures[name]; !ok {
			panic("wasm: host function " + name + " has no signature")
		}
	}
}

func u32(v uint64) uint32 { return api.DecodeU32(v) }
func i32v(v uint64) int32 { return api.DecodeI32(v) }

// read returns guest memory [ptr, ptr+n), the argument arg of host
// function fn, trapping when it is outside.
func (in *Instance) read(ptr, n uint32, fn, arg string) []byte {
	b, ok := in.mem.Read(ptr, n)
	if !ok {
		in.trap("weir.%s %s: range [%d, %d) is outside the guest's %d bytes of memory", fn, arg, ptr, uint64(ptr)+uint64(n), in.mem.Size())
	}
	return b
}

// view is b as a string without a copy, for lookups that do not keep it.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// handle returns the key group and key of key handle h.
func (in *Instance) handle(h int32, what string) (int, string) {
	if in.phase != phaseProcess && in.phase != phaseTimers {
		in.trap("weir.%s called outside weir_process and weir_timers: there is no key", what)
	}
	if h < 0 || int(h) >= len(in.keys) {
		in.trap("weir.%s: key handle %d is out of range: this call has handles 0..%d", what, h, len(in.keys)-1)
	}
	return in.keyGroups[h], in.keys[h]
}

func (in *Instance) table(id int32, kind int32, what string) *stateTable {
	if id < 0 || int(id) >= len(in.tables) {
		in.trap("weir.%s: state id %d was not declared (declared: %d states)", what, id, len(in.tables))
	}
	t := &in.tables[id]
	if t.kind != kind {
		in.trap("weir.%s: state %q is %s state, not %s", what, t.name, kindNames[t.kind], kindNames[kind])
	}
	return t
}

// copyOut writes v to (out, cap) when it fits and returns its length.
func (in *Instance) copyOut(v []byte, out, capacity uint32, what string) int32 {
	if uint32(len(v)) <= capacity && len(v) > 0 {
		if !in.mem.Write(out, v) {
			in.trap("weir.%s: output range [%d, %d) is outside the guest's memory", what, out, uint64(out)+uint64(len(v)))
		}
	}
	return int32(len(v))
}

// scope reads the (state, handle, ns) arguments every state call starts with.
func (in *Instance) scope(stack []uint64, kind int32, what string) (*stateTable, int, string, []byte) {
	t := in.table(i32v(stack[0]), kind, what)
	kg, key := in.handle(i32v(stack[1]), what)
	ns := in.read(u32(stack[2]), u32(stack[3]), what, "namespace")
	return t, kg, key, ns
}

var hostFuncs = map[string]func(in *Instance, stack []uint64){
	"fail": func(in *Instance, stack []uint64) {
		in.failRow = int(i32v(stack[0]))
		in.failMsg = string(in.read(u32(stack[1]), u32(stack[2]), "fail", "message"))
	},
	"log": func(in *Instance, stack []uint64) {
		level := slog.LevelInfo
		switch i32v(stack[0]) {
		case 0:
			level = slog.LevelDebug
		case 2:
			level = slog.LevelWarn
		case 3:
			level = slog.LevelError
		}
		msg := in.read(u32(stack[1]), u32(stack[2]), "log", "message")
		in.cfg.Logger.Log(context.Background(), level, string(msg), "function", in.what)
	},
	"emit": func(in *Instance, stack []uint64) {
		if in.phase != phaseProcess && in.phase != phaseTimers {
			in.trap("weir.emit called outside weir_process and weir_timers")
		}
		b := in.read(u32(stack[0]), u32(stack[1]), "emit", "payload")
		if err := in.emitPayload(b); err != nil {
			in.hostErr = err
			stack[0] = api.EncodeI32(1)
			return
		}
		stack[0] = api.EncodeI32(0)
	},
	"state": func(in *Instance, stack []uint64) {
		kind := i32v(stack[0])
		name := string(in.read(u32(stack[1]), u32(stack[2]), "state", "name"))
		if in.phase != phaseOpen {
			in.trap("weir.state(%q) called outside weir_open: declare state in weir_open", name)
		}
		if _, ok := kindNames[kind]; !ok {
			in.trap("weir.state(%q): kind %d is not 0 (value), 1 (list) or 2 (map)", name, kind)
		}
		if id, ok := in.tableByID[name]; ok {
			if in.tables[id].kind != kind {
				in.trap("weir.state(%q): declared as %s state before, now as %s", name, kindNames[in.tables[id].kind], kindNames[kind])
			}
			stack[0] = api.EncodeI32(int32(id))
			return
		}
		t := stateTable{name: name, kind: kind}
		var err error
		switch kind {
		case kindValue:
			t.value, err = statestore.OpenTable[string](in.cfg.State, name, statestore.StringCodec)
		case kindList:
			t.list, err = statestore.OpenList[string](in.cfg.State, name)
		case kindMap:
			t.mp, err = statestore.OpenMap[string, string](in.cfg.State, name)
		}
		if err != nil {
			in.trap("weir.state(%q): %v", name, err)
		}
		in.tables = append(in.tables, t)
		in.tableByID[name] = len(in.tables) - 1
		stack[0] = api.EncodeI32(int32(len(in.tables) - 1))
	},
	"key": func(in *Instance, stack []uint64) {
		_, key := in.handle(i32v(stack[0]), "key")
		stack[0] = api.EncodeI32(in.copyOut([]byte(key), u32(stack[1]), u32(stack[2]), "key"))
	},
	"watermark": func(in *Instance, stack []uint64) {
		stack[0] = api.EncodeI64(in.watermark)
	},
	"processing_time": func(in *Instance, stack []uint64) {
		stack[0] = api.EncodeI64(in.cfg.Now().UnixMilli())
	},
	"value_get": func(in *Instance, stack []uint64) {
		t, kg, key, ns := in.scope(stack, kindValue, "value_get")
		v, ok := t.value.Get(kg, key, view(ns))
		if !ok {
			stack[0] = api.EncodeI32(-1)
			return
		}
		stack[0] = api.EncodeI32(in.copyOut(unsafe.Slice(unsafe.StringData(v), len(v)), u32(stack[4]), u32(stack[5]), "value_get"))
	},
	"value_put": func(in *Instance, stack []uint64) {
		t, kg, key, ns := in.scope(stack, kindValue, "value_put")
		v := in.read(u32(stack[4]), u32(stack[5]), "value_put", "value")
		t.value.Put(kg, key, string(ns), string(v))
	},
	"value_delete": func(in *Instance, stack []uint64) {
		t, kg, key, ns := in.scope(stack, kindValue, "value_delete")
		t.value.Delete(kg, key, view(ns))
	},
	"list_get": func(in *Instance, stack []uint64) {
		t, kg, key, ns := in.scope(stack, kindList, "list_get")
		vs := t.list.Get(kg, key, view(ns))
		if len(vs) == 0 {
			stack[0] = api.EncodeI32(-1)
			return
		}
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
		stack[0] = api.EncodeI32(in.copyOut(b, u32(stack[4]), u32(stack[5]), "list_get"))
	},
	"list_add": func(in *Instance, stack []uint64) {
		t, kg, key, ns := in.scope(stack, kindList, "list_add")
		v := in.read(u32(stack[4]), u32(stack[5]), "list_add", "value")
		t.list.Add(kg, key, string(ns), string(v))
	},
	"list_clear": func(in *Instance, stack []uint64) {
		t, kg, key, ns := in.scope(stack, kindList, "list_clear")
		t.list.Clear(kg, key, view(ns))
	},
	"map_get": func(in *Instance, stack []uint64) {
		t, kg, key, ns := in.scope(stack, kindMap, "map_get")
		k := in.read(u32(stack[4]), u32(stack[5]), "map_get", "key")
		v, ok := t.mp.Get(kg, key, view(ns), view(k))
		if !ok {
			stack[0] = api.EncodeI32(-1)
			return
		}
		stack[0] = api.EncodeI32(in.copyOut([]byte(v), u32(stack[6]), u32(stack[7]), "map_get"))
	},
	"map_put": func(in *Instance, stack []uint64) {
		t, kg, key, ns := in.scope(stack, kindMap, "map_put")
		k := in.read(u32(stack[4]), u32(stack[5]), "map_put", "key")
		v := in.read(u32(stack[6]), u32(stack[7]), "map_put", "value")
		t.mp.Put(kg, key, string(ns), string(k), string(v))
	},
	"map_delete": func(in *Instance, stack []uint64) {
		t, kg, key, ns := in.scope(stack, kindMap, "map_delete")
		k := in.read(u32(stack[4]), u32(stack[5]), "map_delete", "key")
		t.mp.Delete(kg, key, view(ns), view(k))
	},
	"map_entries": func(in *Instance, stack []uint64) {
		t, kg, key, ns := in.scope(stack, kindMap, "map_entries")
		var b []byte
		for k, v := range t.mp.All(kg, key, view(ns)) {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
			b = append(b, k...)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
		if len(b) == 0 {
			stack[0] = api.EncodeI32(-1)
			return
		}
		stack[0] = api.EncodeI32(in.copyOut(b, u32(stack[4]), u32(stack[5]), "map_entries"))
	},
	"map_clear": func(in *Instance, stack []uint64) {
		t, kg, key, ns := in.scope(stack, kindMap, "map_clear")
		t.mp.Clear(kg, key, view(ns))
	},
	"timer_register": func(in *Instance, stack []uint64) {
		d, t := in.timer(stack, "timer_register")
		in.cfg.State.Timers().Register(d, t)
	},
	"timer_delete": func(in *Instance, stack []uint64) {
		d, t := in.timer(stack, "timer_delete")
		in.cfg.State.Timers().Delete(d, t)
	},
}

func (in *Instance) timer(stack []uint64, what string) (statestore.Domain, statestore.Timer) {
	kg, key := in.handle(i32v(stack[0]), what)
	if in.timers == nil {
		in.trap("weir.%s: the module sets timers but does not export weir_timers", what)
	}
	var d statestore.Domain
	switch i32v(stack[1]) {
	case 0:
		d = statestore.EventTime
	case 1:
		d = statestore.ProcessingTime
	default:
		in.trap("weir.%s: domain %d is not 0 (event time) or 1 (processing time)", what, i32v(stack[1]))
	}
	return d, statestore.Timer{Timestamp: int64(stack[2]), KeyGroup: kg, Key: key}
}
