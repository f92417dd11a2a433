package wasm

import (
	"time"

	"github.com/weirstream/weir/arrowfmt"
)

// ABIVersion is the version of the ABI this host implements; a module
// whose weir_abi_version returns another is refused.
const ABIVersion = 1

// Default limits of a deployed function.
const (
	DefaultMemory  = 64 << 20
	DefaultTimeout = 5 * time.Second
)

// Limits bound one instance of a module.
type Limits struct {
	// Memory is the most linear memory the instance may have, in bytes
	// (rounded down to 64 KiB pages; default DefaultMemory).
	Memory int64
	// Timeout is the deadline of one call of an export (default
	// DefaultTimeout).
	Timeout time.Duration
	// Trusted compiles the module without the checks at every loop that
	// let wazero stop a call at its deadline: Go guests run about 2× as
	// fast, C guests somewhat faster, but a call that never returns can
	// then only be ended by stopping the worker. For modules the
	// cluster's operators wrote themselves.
	Trusted bool
}

// Description is what a module declares through weir_describe.
type Description struct {
	// Input are the columns it reads, which the operator's input must
	// have, with these types.
	Input []arrowfmt.Field
	// Output are the columns it emits, in order.
	Output []arrowfmt.Field
	// TimeColumn names the timestamp_ms output column that carries the
	// output's event time, "" for none.
	TimeColumn string
	// TimeOffset is added to the time column's value to get an output
	// row's event time, in milliseconds (-1 for a window's window_end, as
	// the built-in windows do; usually 0).
	TimeOffset int64
	// Doc is one line on what it does.
	Doc string
}
