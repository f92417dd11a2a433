// Package connectors registers weir's built-in sources and sinks with the
// connector registry (package functions/connector) when it is
// initialised. Each connector lives in a package of its own below this
// one (datagen, files, redis, nexmark, stdout, blackhole); the list here is
// the one place that names them all, in the order error messages list the
// types ("want datagen, files, redis or nexmark").
//
// Registration is by import, for its side effect, rather than by a call
// each program must remember: every program that builds, checks or runs
// jobs needs all of them, and the packages such programs cannot do
// without import this one. The SDK (package functions, whose JobBuilder
// validates) and the planner (package plan) do, so the weir binary, the
// coordinator, the workers and their tests have them; a test that only
// parses specs imports it itself:
//
//	import _ "github.com/weirstream/weir/functions/connectors"
//
// A new connector is a package below this one and a line in the list; a
// field it needs in spec.Source or spec.Sink goes there, since a stored
// spec is one flat struct.
package connectors
