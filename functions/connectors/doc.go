// Package connectors registers weir's built-in sources and sinks with the
// connector registry (package functions/connector) when it is
// initialised. Each connector lives in a package of its own below this
// one; the list here is the one place that names them all, in the order
// error messages list the types.
//
// Registration is by import, for its side effect, because every program
// that runs or checks jobs needs all of them: the planner (package plan)
// imports this package, so the weir binary, the coordinator and the
// workers have them, and a test that only parses specs imports it itself:
//
//	import _ "github.com/weirstream/weir/functions/connectors"
package connectors
