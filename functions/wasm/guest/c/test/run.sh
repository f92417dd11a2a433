#!/usr/bin/env bash
# Builds the C SDK's native tests and runs them:
#   functions/wasm/guest/c/test/run.sh [OUT_DIR]
# weir.c is compiled for this machine with -DWEIR_NATIVE, so the host
# functions are the fake host's (fakehost.c). With a compiler that has
# them (clang or gcc with their runtimes), AddressSanitizer and
# UndefinedBehaviorSanitizer watch every read of a payload. The binaries
# stay in OUT_DIR (default: a temporary directory) for the Go test
# (../ctest), which runs sdk_test against arrowfmt.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
sdk=$(dirname "$here")
example=$sdk/../../../../examples/wasm/zone-stats/c
out=${1:-$(mktemp -d)}
mkdir -p "$out"

cc=${CC:-}
if [ -z "$cc" ]; then
	if command -v clang >/dev/null; then cc=clang; else cc=cc; fi
fi

flags=(-std=c11 -D_POSIX_C_SOURCE=200809L -O1 -g -Wall -Wextra -Werror -DWEIR_NATIVE -I "$sdk" -I "$here")
san=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
echo 'int main(void){return 0;}' >"$out/probe.c"
if "$cc" "${san[@]}" -o "$out/probe" "$out/probe.c" 2>/dev/null && "$out/probe"; then
	flags+=("${san[@]}")
else
	echo "run.sh: $cc has no sanitizers here; testing without them" >&2
fi
rm -f "$out/probe" "$out/probe.c"

"$cc" "${flags[@]}" -o "$out/sdk_test" "$sdk/weir.c" "$here/fakehost.c" "$here/sdk_test.c" -lm
"$cc" "${flags[@]}" -o "$out/zone_stats_test" "$sdk/weir.c" "$here/fakehost.c" "$here/zone_stats_test.c" \
	"$example/zone_stats.c"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
"$out/sdk_test" self
"$out/zone_stats_test"
