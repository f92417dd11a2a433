//go:build wasip1

// Package bare is the part of the ABI the test guests written without the
// SDK share: weir_alloc, and a weir_describe declaring {k string} in and
// out. Each guest adds the exports it tests with.
package bare

//lint:file-ignore U1000 the host calls the exports; staticcheck does not see //go:wasmexport

import "unsafe"

var (
	in       []byte
	describe = []byte(`{"input":[{"name":"k","type":"string"}],"output":[{"name":"k","type":"string"}]}`)
)

//go:wasmexport weir_alloc
func alloc(size int32) int32 {
	if n := max(int(size), 1); cap(in) < n {
		in = make([]byte, n)
	}
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(in))))
}

//go:wasmexport weir_describe
func weirDescribe() int64 {
	return int64(uintptr(unsafe.Pointer(&describe[0])))<<32 | int64(len(describe))
}
