// Package examples ships the example job specs inside the weir binary, so
// `weir demo` runs on a fresh machine without the source tree.
package examples

import _ "embed"

// SurgePricing is examples/surge-pricing.yaml.
//
//go:embed surge-pricing.yaml
var SurgePricing []byte
