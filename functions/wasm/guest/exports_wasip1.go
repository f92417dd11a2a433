//go:build wasip1

package guest

//lint:file-ignore U1000 the host calls these through //go:wasmexport

import "unsafe"

// The exports of docs/wasm-abi.md. They live here rather than in the
// user's package main: //go:wasmexport works in any package of a
// c-shared build, so a module gets all of them by importing this package.

// abiVersion is the ABI version this SDK implements.
const abiVersion = 1

// instance is the module's runtime, made on the first export call (after
// _initialize has run the init functions that Register).
var instance *runtime

func rt() *runtime {
	if instance == nil {
		instance = newRuntime(wasmHost{}, registered)
	}
	return instance
}

func linear(p unsafe.Pointer, n int32) []byte {
	if n <= 0 {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

//go:wasmexport weir_abi_version
func weirABIVersion() int32 { return abiVersion }

//go:wasmexport weir_alloc
func weirAlloc(size int32) int32 {
	b := rt().alloc(int(size))
	if cap(b) == 0 {
		return 0
	}
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(b[:1]))))
}

//go:wasmexport weir_describe
func weirDescribe() int64 {
	b := rt().describe()
	if len(b) == 0 {
		return 0
	}
	return int64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))<<32 | int64(len(b))
}

//go:wasmexport weir_open
func weirOpen(p unsafe.Pointer, n int32) int32 { return rt().open(linear(p, n)) }

//go:wasmexport weir_process
func weirProcess(p unsafe.Pointer, n int32) int32 { return rt().process(linear(p, n)) }

//go:wasmexport weir_timers
func weirTimers(p unsafe.Pointer, n int32) int32 { return rt().timers(linear(p, n)) }
