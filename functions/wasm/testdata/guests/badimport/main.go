//go:build wasip1

// Command badimport is a test guest of the host that imports a function
// the host does not provide, weir.no_such_function. See README.md.
package main

//lint:file-ignore U1000 the host calls the exports; staticcheck does not see //go:wasmexport

import (
	"unsafe"

	_ "github.com/weirstream/weir/functions/wasm/testdata/guests/internal/bare"
)

//go:wasmimport weir no_such_function
func noSuchFunction() int32

//go:wasmexport weir_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport weir_open
func open(unsafe.Pointer, int32) int32 { return 0 }

// weir_process calls the missing import, so that the linker keeps it.
//
//go:wasmexport weir_process
func process(unsafe.Pointer, int32) int32 { return noSuchFunction() }

func main() {}
