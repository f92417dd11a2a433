package builtin

import "github.com/weirstream/weir/functions/spec"

// SourceOutputs returns the outputs of a source with several (a nexmark
// source: person, auction, bid) and their streams; nil for a source with
// one output, whose stream SourceSchema returns.
func SourceOutputs(src *spec.Source) ([]string, []Stream) {
	if src.Type == spec.SourceNexmark {
		return nexmarkOutputs()
	}
	return nil, nil
}
