#!/usr/bin/env bash
# Builds the Go Wasm examples into OUT_DIR: zone-stats-go.wasm and
# surge-multiplier.wasm. Uses the go on PATH (the standard toolchain,
# GOOS=wasip1; c-shared makes a reactor, as the ABI wants).
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 OUT_DIR" >&2
	exit 2
fi
out=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

build() { # name package
	(cd "$root" && GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 \
		go build -trimpath -buildmode=c-shared -o "$out/$1.wasm" "$2")
}
build zone-stats-go ./examples/wasm/zone-stats/go
build surge-multiplier ./examples/wasm/surge-multiplier
