// Package stream describes what flows on an edge of a job: the Arrow
// schema of its record batches and which column, if any, carries event
// time. Sources produce a Stream, operators (package builtin) map one to
// another, sinks consume one, and the planner (package plan) derives each
// edge's from the spec before anything runs. It is its own package so that
// the operators and the connectors (functions/connector and
// functions/connectors/...) share it without importing each other.
package stream
