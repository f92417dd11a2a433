//go:build wasip1

// Command badversion is a test guest of the host that reports ABI
// version 2. See README.md.
package main

//lint:file-ignore U1000 the host calls the exports; staticcheck does not see //go:wasmexport

import (
	"unsafe"

	_ "github.com/weirstream/weir/functions/wasm/testdata/guests/internal/bare"
)

//go:wasmexport weir_abi_version
func abiVersion() int32 { return 2 }

//go:wasmexport weir_open
func open(unsafe.Pointer, int32) int32 { return 0 }

//go:wasmexport weir_process
func process(unsafe.Pointer, int32) int32 { return 0 }

func main() {}
