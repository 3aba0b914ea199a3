#!/bin/sh
# A CUDA runtime (cudaMalloc) program on the stand-in driver, untraced and traced: it must not crash (it
# segfaulted in cuGetExportTable before), cudaMalloc must fail with "operation not supported", and stderr
# must say in one line that the stand-in does not support the runtime.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "fakecuda_runtime: FAIL: $*"; exit 1; }
prog=build/tests/cudart_program
if [ ! -x "$prog" ]; then
    echo "fakecuda_runtime: skipped: the CUDA toolkit has no libcudart_static.a, so $prog was not built"
    exit 0
fi
export LD_LIBRARY_PATH="$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OOMTRACE_QUIET=1
work=$(mktemp -d /tmp/oomtrace-rt.XXXXXX)
trap 'rm -rf "$work"' EXIT
for mode in untraced traced; do
    pre=""
    [ "$mode" = traced ] && pre="$PWD/build/liboomtrace.so"
    (cd "$work" && LD_PRELOAD=$pre "$OLDPWD/$prog") >"$work/$mode.out" 2>"$work/$mode.err"
    rc=$?
    [ "$rc" -eq 3 ] || fail "$mode: exit status $rc, want 3 (cudaMalloc refused); stderr: $(head -3 "$work/$mode.err")"
    grep -q "cudaMalloc: operation not supported" "$work/$mode.out" || fail "$mode: cudaMalloc's error: $(cat "$work/$mode.out")"
    [ "$(grep -c 'fakecuda: the CUDA runtime' "$work/$mode.err")" -eq 1 ] || fail "$mode: no one-line refusal on stderr"
done
echo "fakecuda_runtime: ok"
