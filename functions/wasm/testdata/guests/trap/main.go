//go:build wasip1

// Command trap is a test guest of the host whose weir_process traps. It is
// written without the SDK, which would recover a panic and report it
// cleanly. See README.md.
package main

//lint:file-ignore U1000 the host calls the exports; staticcheck does not see //go:wasmexport

import (
	"encoding/json"
	"unsafe"

	_ "github.com/weirstream/weir/functions/wasm/testdata/guests/internal/bare"
)

var mode string

//go:wasmexport weir_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport weir_open
func open(p unsafe.Pointer, n int32) int32 {
	var doc struct {
		Config struct {
			Mode string `json:"mode"`
		} `json:"config"`
	}
	_ = json.Unmarshal(unsafe.Slice((*byte)(p), n), &doc)
	mode = doc.Config.Mode
	return 0
}

// far is an address past any linear memory the host allows.
var far = uintptr(0xFFFFFFF0)

//go:wasmexport weir_process
func process(unsafe.Pointer, int32) int32 {
	if mode == "panic" {
		// An unrecovered Go panic: the runtime prints it and aborts (unreachable).
		panic("trap guest: panic in weir_process")
	}
	// A load outside linear memory: a WebAssembly trap.
	return int32(*(*byte)(unsafe.Add(nil, far)))
}

func main() {}
