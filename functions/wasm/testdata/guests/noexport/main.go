//go:build wasip1

// Command noexport is a test guest of the host that lacks the required
// export weir_process. See README.md.
package main

//lint:file-ignore U1000 the host calls the exports; staticcheck does not see //go:wasmexport

import (
	"unsafe"

	_ "github.com/weirstream/weir/functions/wasm/testdata/guests/internal/bare"
)

//go:wasmexport weir_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport weir_open
func open(unsafe.Pointer, int32) int32 { return 0 }

func main() {}
