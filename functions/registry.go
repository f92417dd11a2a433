package functions

import (
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
)

// ProcessFunction is a user function over a keyed stream.
//
// A function may also implement
//
//	OnTimer(ctx *Context, t Timer, out *Collector) error  // timers (TimerFunction)
//	Open(ctx *OpenContext) error                          // declare state, read config (Opener)
//	Close() error                                         // release what Open took (Closer)
type ProcessFunction interface {
	// ProcessElement is called for each input row, with the row's key
	// current. An error fails the task (it restarts from the last
	// checkpoint).
	ProcessElement(ctx *Context, row Row, out *Collector) error
}

// TimerFunction is a ProcessFunction with timers.
type TimerFunction interface {
	// OnTimer is called when a timer the function registered fires, with
	// the timer's key current.
	OnTimer(ctx *Context, t Timer, out *Collector) error
}

// Opener is a ProcessFunction that prepares itself before the first row.
type Opener interface {
	// Open is called once per instance before anything else; state is
	// declared here.
	Open(ctx *OpenContext) error
}

// Closer is a ProcessFunction that releases resources when its instance
// stops. Close is called once, also after a failure.
type Closer interface {
	Close() error
}

// Definition is what Register records for a function.
type Definition struct {
	// New returns a new instance configured by cfg (the operator's config
	// in the job spec, as decoded from YAML). It is also called at deploy
	// time to validate cfg, so it must not start anything: that belongs in
	// Open. Errors should name the config field and what is accepted.
	New func(cfg map[string]any) (ProcessFunction, error)
	// Output returns the output columns given the input schema. It runs at
	// deploy time: check here that the input has the columns the function
	// reads, and name the problem (column, expected type) in the error.
	Output func(in *arrow.Schema) ([]arrowfmt.Field, error)
	// TimeColumn names the timestamp_ms output column that carries the
	// output rows' event time, for windows downstream; "" means output rows
	// have no event time.
	TimeColumn string
	// Doc says in a line or two what the function does and how it is
	// configured.
	Doc string
}

var registry struct {
	sync.Mutex
	defs map[string]Definition
}

// Register makes a function available to job specs under name. It is
// meant for init functions and panics if name is empty or taken, or if New
// or Output is nil.
func Register(name string, def Definition) {
	if name == "" {
		panic("functions: Register with an empty name")
	}
	if def.New == nil || def.Output == nil {
		panic(fmt.Sprintf("functions: Register %q: Definition needs New and Output", name))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.defs[name]; dup {
		panic(fmt.Sprintf("functions: Register called twice for %q", name))
	}
	if registry.defs == nil {
		registry.defs = map[string]Definition{}
	}
	registry.defs[name] = def
}

// Lookup returns the function registered under name.
func Lookup(name string) (Definition, bool) {
	registry.Lock()
	defer registry.Unlock()
	def, ok := registry.defs[name]
	return def, ok
}

// Names returns the names of the registered functions, sorted.
func Names() []string {
	registry.Lock()
	defer registry.Unlock()
	names := make([]string, 0, len(registry.defs))
	for n := range registry.defs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
