//go:build wasip1

// Command passthrough is a guest without the SDK: it emits every input
// payload back unchanged (its output schema is its input's), to test the
// host apart from any SDK. A config naming "refuse" fails weir_open, for
// the tests of config checks.
package main

import (
	"bytes"
	"unsafe"
)

//go:wasmimport weir emit
func emit(ptr, n uint32) int32

//go:wasmimport weir fail
func fail(h int32, ptr, n uint32)

var buf []byte

//go:wasmexport weir_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport weir_alloc
func alloc(n int32) uint32 {
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
}

var desc = []byte(`{"input":[{"name":"k","type":"string"}],"output":[{"name":"k","type":"string"},{"name":"v","type":"int64"}]}`)

//go:wasmexport weir_describe
func describe() uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(desc))))<<32 | uint64(len(desc))
}

var refused = []byte("passthrough: config refuse: this guest refuses it")

//go:wasmexport weir_open
func open(p, n uint32) int32 {
	doc := unsafe.Slice((*byte)(unsafe.Pointer(uintptr(p))), n)
	if bytes.Contains(doc, []byte(`"refuse"`)) {
		fail(-1, uint32(uintptr(unsafe.Pointer(unsafe.SliceData(refused)))), uint32(len(refused)))
		return 1
	}
	return 0
}

//go:wasmexport weir_process
func process(p, n uint32) int32 {
	return emit(p, n)
}

func main() {}
