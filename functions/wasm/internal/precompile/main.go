// Command precompile compiles Wasm modules into a weir compilation cache
// directory, as `weir` would on first use, for tests: built without
// -race, it compiles a Go guest in a few seconds where a test binary
// built with -race takes about ten times as long (wazero's compiler is
// Go code, and the race detector instruments it). See package wasmtest.
//
//	go run ./functions/wasm/internal/precompile -cache DIR module.wasm...
//
// A module that does not compile or does not fit weir's ABI is reported
// and skipped (a test may build it to see it refused); only a bad usage
// or an unreadable file fails the command.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/weirstream/weir/functions/wasm"
)

func main() {
	cache := flag.String("cache", "", "the compilation cache directory (as `weir --wasm-cache`)")
	flag.Parse()
	if *cache == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: precompile -cache DIR module.wasm...")
		os.Exit(2)
	}
	eng, err := wasm.NewEngine(wasm.EngineConfig{CacheDir: *cache})
	if err != nil {
		fmt.Fprintln(os.Stderr, "precompile:", err)
		os.Exit(1)
	}
	defer func() { _ = eng.Close() }()
	for _, path := range flag.Args() {
		mod, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "precompile:", err)
			os.Exit(1)
		}
		// Check compiles through the engine's cache, with the runtime
		// configuration the workers and the coordinator's checks use.
		if _, err := eng.Check(context.Background(), mod, wasm.Limits{}); err != nil {
			fmt.Fprintf(os.Stderr, "precompile: %s: %v (skipped)\n", path, err)
		}
	}
}
