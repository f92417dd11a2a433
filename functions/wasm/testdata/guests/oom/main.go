//go:build wasip1

// Command oom is a test guest of the host whose weir_process allocates and
// touches memory until the memory limit ends it. See README.md.
package main

import "github.com/weirstream/weir/functions/wasm/guest"

type oom struct{}

// held keeps every block reachable, so the collector frees nothing.
var held [][]byte

func (oom) Describe() guest.Description {
	return guest.Description{
		Input:  []guest.Column{{Name: "k", Type: guest.String}},
		Output: []guest.Column{{Name: "k", Type: guest.String}},
		Doc:    "test guest: weir_process allocates until it runs out of memory",
	}
}

func (oom) Open(*guest.OpenContext) error { return nil }

func (oom) ProcessElement(*guest.Context, guest.Row, *guest.Collector) error {
	for {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
	}
}

func init() { guest.Register(oom{}) }

func main() {}
