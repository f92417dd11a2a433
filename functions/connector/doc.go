// Package connector is the registry of connectors: the types of source
// and sink a job spec can name (sources[].type, sinks[].type), each
// registered once with everything the rest of weir needs to know about
// it. A type is a value (SourceType, SinkType) of plain functions: its
// checks of the spec fields it owns, its constructor and, for sinks with
// transactions, how the CLI reads their transactions back. The connectors
// themselves live in packages of their own under functions/connectors,
// which registers the built-in ones; this package imports none of them.
//
// The planner and the coordinator build sinks through NewSink, which also
// adds the rate limit a sink's spec may ask for.
package connector
