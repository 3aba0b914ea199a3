#!/bin/sh
# A request that grows every step under a caching allocator, and fails inside it (tests/py/grow_cached.py: a
# PyTorch-like pool in a site-packages folder, against the stand-in driver). The framework's OOM has no driver
# allocation of its own: the request's growth is read from the allocations under the same line of the user's
# code, step by step, and What to try bounds the input (runs 43-44 on the H200 under torch's default allocator:
# before, only "41x the step before" and its remedy, from the driver's view of the cache).
set -u
cd "$(dirname "$0")/../.."
READER=${READER:-build/oomtrace-read}
command -v python3 >/dev/null 2>&1 || { echo "grow_cached: skipped, no python3"; exit 0; }
T=$(mktemp -d /tmp/oomtrace-growcached-XXXXXX)
trap 'rm -rf "$T"' EXIT INT TERM
failed=0
LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=256M FAKECUDA_OTHER_USED=0 OOMTRACE_DIR="$T" OOMTRACE_QUIET=1 \
    LD_PRELOAD="$PWD/build/liboomtrace.so" python3 tests/py/grow_cached.py >"$T/out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || { echo "grow_cached: FAIL: the program's status $rc, want 1 (its own OOM): $(cat "$T/out")"; exit 1; }
set -- "$T"/*-framework-oom.oomt
[ -f "$1" ] || { echo "grow_cached: FAIL: no framework OOM snapshot: $(ls "$T")"; exit 1; }
"$READER" "$1" >"$T/r" 2>&1 || { echo "grow_cached: FAIL: exit $? reading $1"; exit 1; }
has() {
    grep -Eq -- "$2" "$T/r" || { echo "grow_cached: FAIL: $1 (no line matching: $2)"; failed=1; }
}
hasnt() {
    ! grep -Eq -- "$2" "$T/r" || { echo "grow_cached: FAIL: $1 (a line matches: $2)"; failed=1; }
}
has "the growth" 'The request grew from step to step: the largest allocation on device 0 at grow_cached\.py:[0-9]+ in train .*rose in 40 of 40 steps and never fell, from 4\.00 MiB after marker "step 0" .* to 160 MiB after marker "step 39" .*164 MiB, the failed request, after marker "step 40" .*\+4\.00 MiB a step'
has "the remedy" 'grew by 4\.00 MiB a step, to 164 MiB at the failure: bound what one step gets'
hasnt "the remedy for a one-step jump" 'that step was given more \(a longer input'
# The step before the failure was served from the pool's cache: the driver saw it ask for little, but the request
# grew by 1.03x, not the "41.0x the one before it" of the driver's view.
hasnt "a one-step jump from the driver's view of the cache" 'asked for [0-9.]+x the one before it'
"$READER" --format json "$1" >"$T/j" 2>&1
python3 - "$T/j" <<'PY' || { echo "grow_cached: FAIL: growing_request's numbers in JSON"; failed=1; }
import json, sys
d = json.load(open(sys.argv[1]))
g = [w for w in d["why"] if w["kind"] == "growing_request"]
assert g and g[0]["numbers"]["rises"] == 40 and g[0]["numbers"]["bytes_per_step"] == 4 << 20, g
assert [r["kind"] for r in d["what_to_try"]][:1] == ["bound_input"], d["what_to_try"]
PY
[ "$failed" -eq 0 ] && echo "grow_cached: ok"
exit "$failed"
