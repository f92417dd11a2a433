#!/usr/bin/env bash
# Builds the C example functions as WebAssembly reactors:
#   examples/wasm/build-c.sh OUT_DIR   ->   OUT_DIR/zone-stats-c.wasm
# Installs what is missing from Debian (clang, lld, wasi-libc and the
# wasm32 compiler-rt builtins the link needs), with sudo unless root.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 OUT_DIR" >&2
	exit 2
fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)
sdk=$here/../../functions/wasm/guest/c

# Debian's wasi-libc lives where Debian's clang looks for wasm32-wasi
# (/usr/include/wasm32-wasi, /usr/lib/wasm32-wasi), so it needs no
# --sysroot; a wasi-sdk style sysroot can be given in WASI_SYSROOT.
sysroot_flags=()
if [ -n "${WASI_SYSROOT:-}" ]; then
	sysroot_flags=(--sysroot="$WASI_SYSROOT")
	libc=$WASI_SYSROOT/lib/wasm32-wasi/libc.a
else
	libc=/usr/lib/wasm32-wasi/libc.a
fi

sudo=
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi

missing=()
command -v clang >/dev/null || missing+=(clang)
command -v wasm-ld >/dev/null || missing+=(lld)
[ -f "$libc" ] || missing+=(wasi-libc)
# clang links libclang_rt.builtins-wasm32.a (64-bit integer division and
# the like) into every wasm32-wasi module.
if ! command -v clang >/dev/null || [ ! -f "$(clang --target=wasm32-wasi -print-libgcc-file-name 2>/dev/null)" ]; then
	missing+=(libclang-rt-dev-wasm32)
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing ${missing[*]} (Debian)" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

mkdir -p "$out"
# -mexec-model=reactor: crt1-reactor.o, an _initialize export, no _start.
# Every weir export is marked in weir.c with export_name; nothing else is
# exported but memory and _initialize. wasi-libc comes with DWARF, which
# only makes the module larger: strip it (the name section stays).
clang --target=wasm32-wasi "${sysroot_flags[@]}" -mexec-model=reactor \
	-std=c11 -O2 -Wall -Wextra -Wl,--strip-debug \
	-I "$sdk" \
	-o "$out/zone-stats-c.wasm" \
	"$sdk/weir.c" "$here/zone-stats/c/zone_stats.c"
echo "$out/zone-stats-c.wasm"
