package connector

import "github.com/weirstream/weir/functions/spec"

// spec.Validate checks sources and sinks through the registry: it cannot
// import this package, which imports it, so the registry installs itself.
func init() { spec.UseConnectors(specChecks{}) }

// specChecks answers spec.Validate from the registered types.
type specChecks struct{}

var _ spec.Connectors = specChecks{}

func (specChecks) SourceOutputs(typ string) []string {
	t, ok := LookupSource(typ)
	if !ok || t.Outputs == nil {
		return nil
	}
	names := make([]string, len(t.Outputs))
	for i, o := range t.Outputs {
		names[i] = o.Name
	}
	return names
}

func (specChecks) CheckSource(src *spec.Source) spec.Problems {
	t, ok := LookupSource(src.Type)
	if !ok {
		return spec.Problems{unknownSource(src)}
	}
	return t.Check(src)
}

func (specChecks) CheckSink(snk *spec.Sink) spec.Problems {
	t, ok := LookupSink(snk.Type)
	if !ok {
		return spec.Problems{unknownSink(snk)}
	}
	return t.Check(snk)
}
