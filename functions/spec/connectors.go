package spec

import (
	"fmt"
	"sync"
)

// Connectors is what Validate asks about the types of sources and sinks.
// The types are registered in package functions/connector, which imports
// this one (a connector's checks read these types), so it installs itself
// here with UseConnectors when it is initialised; a program that runs or
// checks jobs imports the built-in connectors (functions/connectors).
type Connectors interface {
	// SourceOutputs returns the outputs of a source of type typ that is
	// read through them only, each as <source>.<output>, with schemas of
	// their own; nil for a source with one output whose schema the spec
	// gives, and for an unknown type.
	SourceOutputs(typ string) []string
	// CheckSource reports the problems of the fields src's type owns, or
	// that its type is unknown.
	CheckSource(src *Source) Problems
	// CheckSink reports the problems of the fields snk's type owns, or
	// that its type is unknown.
	CheckSink(snk *Sink) Problems
}

var connectors struct {
	sync.Mutex
	c Connectors
}

// UseConnectors makes Validate check sources and sinks with c.
func UseConnectors(c Connectors) {
	connectors.Lock()
	defer connectors.Unlock()
	connectors.c = c
}

// currentConnectors returns what UseConnectors installed, or what knows
// no type.
func currentConnectors() Connectors {
	connectors.Lock()
	defer connectors.Unlock()
	if connectors.c == nil {
		return noConnectors{}
	}
	return connectors.c
}

// noConnectors is the Connectors of a program that has none.
type noConnectors struct{}

const noneRegistered = "none is registered (a program that runs jobs imports functions/connectors)"

func (noConnectors) SourceOutputs(string) []string { return nil }

func (noConnectors) CheckSource(src *Source) Problems {
	return Problems{{Field: fmt.Sprintf("sources[%s].type", src.Name), Msg: fmt.Sprintf("%q is not a source type: %s", src.Type, noneRegistered)}}
}

func (noConnectors) CheckSink(snk *Sink) Problems {
	return Problems{{Field: fmt.Sprintf("sinks[%s].type", snk.Name), Msg: fmt.Sprintf("%q is not a sink type: %s", snk.Type, noneRegistered)}}
}
