// Package nexmark holds the Nexmark queries as weir job specs (q0, q1, q2,
// q3, q5, q7, q8, q11), embedded so that benchmarks and tools can load
// them. Each spec reads a nexmark source named "nexmark" and writes its
// result to a files sink named "out"; see docs/nexmark.md.
package nexmark

import (
	"embed"
	"fmt"

	"github.com/weirstream/weir/functions/spec"
)

//go:embed *.yaml
var specs embed.FS

// Queries are the implemented queries, in order.
var Queries = []string{"q0", "q1", "q2", "q3", "q5", "q7", "q8", "q11"}

// Spec returns the parsed spec of query q ("q5").
func Spec(q string) (*spec.Job, error) {
	data, err := specs.ReadFile(q + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("nexmark query %q: no such query (have %v)", q, Queries)
	}
	return spec.Parse(data, "examples/nexmark/"+q+".yaml")
}
