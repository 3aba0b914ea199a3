#!/bin/sh
# Growth without markers (issue 12): a loop that leaks one allocation per iteration, with no marker and no
# optimizer step hook (tests/py/leak_nomarkers.py, against the stand-in driver). The report cuts the event
# ring into windows and states the growing site, its growth, and the leak remedy; before an OOM it projects
# how long the free memory lasts. The growth is a rate per second only over a second or more; over less (a
# burst of milliseconds reads as "+119 GiB per second") it is bytes over the span and per allocation kept,
# and the projection counts allocations. A buildup with no frees in between (a model, an optimizer's state)
# is not called a leak.
set -u
cd "$(dirname "$0")/../.."
READER=${READER:-build/oomtrace-read}
command -v python3 >/dev/null 2>&1 || { echo "growth_windows: skipped, no python3"; exit 0; }
TMP=$(mktemp -d /tmp/oomtrace-growth-XXXXXX)
trap 'rm -rf "$TMP"' EXIT INT TERM
failed=0
traced() { # traced DIR [VAR=VALUE...] -- ARGS of leak_nomarkers.py
    dir=$1
    shift
    mkdir -p "$dir"
    env LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=96M FAKECUDA_OTHER_USED=0 OOMTRACE_DIR="$dir" \
        OOMTRACE_QUIET=1 LD_PRELOAD="$PWD/build/liboomtrace.so" "$@" >>"$TMP/programs.log" 2>&1
}
report() { # report DIR: the text report of the one snapshot in DIR into $TMP/r
    set -- "$1"/*.oomt
    [ -f "$1" ] || { echo "growth_windows: FAIL: no snapshot in $(dirname "$1")"; cat "$TMP/programs.log"; exit 1; }
    "$READER" "$1" >"$TMP/r" 2>&1 || { echo "growth_windows: FAIL: exit $? reading $1"; failed=1; }
}
has() {
    grep -Eq -- "$2" "$TMP/r" || { echo "growth_windows: FAIL: $1 (no line matching: $2)"; failed=1; }
}
hasnt() {
    ! grep -Eq -- "$2" "$TMP/r" || { echo "growth_windows: FAIL: $1 (a line matches: $2)"; failed=1; }
}

traced "$TMP/oom" python3 tests/py/leak_nomarkers.py oom
report "$TMP/oom"
has oom 'One call site grew through the event ring \(a suspected leak\): with no marker to divide it, the ring up to the failure \(seq [0-9]+\.\.[0-9]+\) cut into 8 windows' "the growth statement"
has oom 'rising in [3-8] of [3-8] windows and never falling, from [0-9]+ allocations? \([^)]*\) at seq [0-9]+ to [0-9]+ allocations \([^)]*\) at seq [0-9]+, [0-9.]+ ms later: leak_nomarkers\.py:[0-9]+ in device_alloc, called from leak_nomarkers\.py:[0-9]+ in kept' "the site, the user's line, the span in ms"
has oom 'in kept .*; \+[0-9.]+ [KMG]?i?B in all, 1\.00 MiB per allocation kept \(less than a second: too short a span for a rate per second\)' "the growth of a short run"
hasnt oom 'per second over|B per second' "a rate per second over less than a second"
hasnt oom 'lasts about|has room for about' "no projection once the device ran out"
has oom 'Live memory grew by [0-9.]+ [KMG]?i?B in [0-9.]+ ms \(1\.00 MiB per allocation kept, at the growing site above\)' "the leak remedy"
hasnt oom "gradient checkpointing \\(torch" "checkpointing for a leak"
# No framework on the growing site's stack: no PyTorch words (loss.item()) for it.
hasnt oom 'loss\.item' "PyTorch's leak advice for a program without PyTorch"

# The same leak over 2 s or more: a rate per second.
traced "$TMP/slow" LEAK_ITER_S=0.025 python3 tests/py/leak_nomarkers.py oom
report "$TMP/slow"
has slow 'at seq [0-9]+, [0-9.]+ s later: leak_nomarkers\.py:[0-9]+ in device_alloc, called from leak_nomarkers\.py:[0-9]+ in kept \(stack [0-9]+\); \+[0-9.]+ [KMG]?i?B in all, \+[0-9.]+ [KMG]?i?B per second; it holds [0-9.]+ [KMG]?i?B at the failure\.' "the rate per second of a long run"
has slow 'Live memory grew by [0-9.]+ [KMG]?i?B per second over [0-9.]+ s' "the leak remedy per second"

# The same leak through CuPy (a stand-in in a site-packages/cupy folder): CuPy's words.
traced "$TMP/cupy" python3 tests/py/leak_nomarkers.py cupy
report "$TMP/cupy"
has cupy 'Live memory grew by .*: memory that grows by the same amount every iteration is held across iterations: do not keep CuPy arrays' "CuPy's leak advice"
hasnt cupy 'loss\.item|torch' "PyTorch's leak advice for a CuPy program"

traced "$TMP/stop" OOMTRACE_DUMP=exit LEAK_ITER_S=0.03 python3 tests/py/leak_nomarkers.py stop 60
report "$TMP/stop"
has stop 'grew through the event ring' "the growth statement before an OOM"
has stop "at this rate the device's free memory \([0-9.]+ [KMG]?i?B at the snapshot\) lasts about [0-9.e+]+ more seconds" "the projection"
traced "$TMP/stopfast" OOMTRACE_DUMP=exit python3 tests/py/leak_nomarkers.py stop 60
report "$TMP/stopfast"
has stopfast "at this rate the device's free memory \([0-9.]+ [KMG]?i?B at the snapshot\) has room for about [0-9]+ more of its allocations" "the projection of a short run, in allocations"
hasnt stopfast 'more seconds' "a projection in seconds from less than a second"

traced "$TMP/build" python3 tests/py/leak_nomarkers.py build
report "$TMP/build"
hasnt build 'grew through the event ring|Live memory grew' "a buildup with no frees read as a leak"

[ "$failed" -eq 0 ] && echo "growth_windows: ok (6 snapshots)"
exit "$failed"
