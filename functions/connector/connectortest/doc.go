// Package connectortest helps test connectors: leak and allocation checks,
// source contexts, draining a source, comparing rows, and input batches of
// every column type from the datagen source for sink tests. Only tests
// import it.
package connectortest
