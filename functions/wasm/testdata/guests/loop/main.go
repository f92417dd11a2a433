//go:build wasip1

// Command loop is a test guest of the host whose weir_process never
// returns, for the call deadline. See README.md.
package main

//lint:file-ignore U1000 spins is written only, to give the loop an effect

import "github.com/weirstream/weir/functions/wasm/guest"

type loop struct{}

// spins is where the loop writes, so that it is not a loop without effects.
var spins int64

func (loop) Describe() guest.Description {
	return guest.Description{
		Input:  []guest.Column{{Name: "k", Type: guest.String}},
		Output: []guest.Column{{Name: "k", Type: guest.String}},
		Doc:    "test guest: weir_process never returns",
	}
}

func (loop) Open(*guest.OpenContext) error { return nil }

func (loop) ProcessElement(*guest.Context, guest.Row, *guest.Collector) error {
	for {
		spins++
	}
}

func init() { guest.Register(loop{}) }

func main() {}
