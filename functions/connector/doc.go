// Package connector is the registry of connectors: the types of source
// and sink a job spec can name (sources[].type, sinks[].type), each
// registered once with everything the rest of weir needs to know about
// it. A type is a value (SourceType, SinkType) of plain functions: the
// checks of the spec fields it owns, its constructor and, for sinks with
// transactions, how the CLI reads their transactions back. The connectors
// themselves live in packages of their own under functions/connectors,
// which registers the built-in ones; this package imports none of them.
//
// Who asks the registry what:
//
//   - package spec, validating a job, has each source and sink checked by
//     its type and learns the outputs of a source read through them (spec
//     cannot import this package, which imports it, so this package
//     installs itself there with spec.UseConnectors);
//   - package plan derives each source's stream (SourceSchema,
//     SourceOutputs), checks what needs the job's defaults (PlanSource),
//     and builds sources and sinks (NewSource, NewSink);
//   - the coordinator opens two-phase sinks to commit transactions and
//     runs their StagingCleaner on recovery;
//   - the CLI describes source positions (DescribePosition) and asks each
//     sink type's TxnInspector whether a transaction is committed.
//
// What the connectors share is here too: the rate limit NewSink puts
// around any sink, the strict decoding of source positions
// (DecodePosition) and of transaction handles (DecodeHandle), and which
// transaction ids are valid.
package connector
