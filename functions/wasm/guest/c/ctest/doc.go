// Package ctest cross-checks the C guest SDK (functions/wasm/guest/c)
// against arrowfmt. It has only tests: they build the SDK's native test
// program with clang (test/run.sh, which runs the SDK's own tests first)
// and check that payloads arrowfmt.NewEncoder makes decode in C to the
// same values, that what C encodes decodes with arrowfmt.NewDecoder (which
// verifies flatbuffers strictly) to the same values, that C decodes keys
// made by arrowfmt.AppendKey as arrowfmt.DecodeKeyString does, and that C
// refuses Arrow types weir does not have. Then they build zone-stats in C
// (examples/wasm/build-c.sh) and run it on the wazero host
// (functions/wasm): Check accepts it, and its windows equal a
// recomputation. Without clang the tests skip, except in CI (CI=true),
// where they fail.
package ctest
