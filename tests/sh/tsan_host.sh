#!/bin/sh
# A program built with ThreadSanitizer runs traced as untraced (walk 8, #25): TSan reported races inside the
# tracer (the recorder's lock and the run id's publication, invisible to it in uninstrumented code) and the
# program exited 66. tests/doors/tsan_host.c: 16 threads allocate through different stacks, fail together,
# free; with OOMTRACE_DUMP=oom,exit,crash so that the flusher thread runs too. halt_on_error: the first
# report ends it. Then the "unmapped" case, below. Skipped with a line where the compiler cannot build with
# -fsanitize=thread.
set -u
cd "$(dirname "$0")/../.."
CC=${CC:-cc}
work=$(mktemp -d /tmp/oomtrace-tsan.XXXXXX)
trap 'rm -rf "$work"' EXIT
NAME=tsan_host
. tests/sh/lib/cases.sh
skip() {
    echo "tsan_host: skipped: $*"
    echo "tsan_host: 0 passed, 0 failed"
    exit 0
}
$CC -g -O1 -fsanitize=thread -pthread -Iinclude -I/usr/local/cuda/include -o "$work/tsan_host" \
    tests/doors/tsan_host.c -Lbuild/fake -lcuda 2>"$work/cc.err" ||
    skip "$CC cannot build with -fsanitize=thread here: $(head -c 200 "$work/cc.err")"
export LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G TSAN_OPTIONS=halt_on_error=1:exitcode=66
"$work/tsan_host" >"$work/out" 2>&1 || skip "untraced, it fails here (the TSan runtime): $(head -c 300 "$work/out")"
for round in 1 2 3; do
    mkdir "$work/d$round"
    OOMTRACE_DIR="$work/d$round" OOMTRACE_DUMP=oom,exit,crash OOMTRACE_FLUSH_MS=5 OOMTRACE_QUIET=1 \
        LD_PRELOAD="$PWD/build/liboomtrace.so" "$work/tsan_host" >"$work/out" 2>&1
    st=$?
    if [ "$st" = 0 ] && grep -q '^failed 16 of 16$' "$work/out"; then ok; else
        bad "traced, round $round: status $st (66: a race reported): $(grep -A12 'WARNING: ThreadSanitizer' "$work/out" | head -30)"
    fi
    n=$(ls "$work/d$round" | grep -c -- '-oom\.oomt$')
    if [ "$n" = 16 ] && [ -n "$(ls "$work/d$round" | grep -- '-exit\.oomt$')" ]; then ok; else
        bad "traced, round $round: $n OOM snapshots of 16, files: $(ls -A "$work/d$round" | tr '\n' ' ')"
    fi
done
# What the tracer unmaps leaves nothing on TSan's record (tests/doors/tsan_unmapped.c): a thread with no order
# with a snapshot maps again, as the loader maps NVML, the ranges the snapshot unmapped, and reads them. The
# scratch buffers' tails (lengths short of a page) read as racing with their mmap before (tsan_host's CI
# failures at d007611, 2 rounds of 3).
if $CC -g -O1 -fsanitize=thread -pthread -rdynamic -Iinclude -I/usr/local/cuda/include -o "$work/tsan_unmapped" \
    tests/doors/tsan_unmapped.c -Lbuild/fake -lcuda -ldl 2>"$work/cc.err"; then
    mkdir "$work/du"
    OOMTRACE_DIR="$work/du" OOMTRACE_QUIET=1 LD_PRELOAD="$PWD/build/liboomtrace.so" "$work/tsan_unmapped" >"$work/out" 2>&1
    st=$?
    if [ "$st" = 0 ] && grep -Eq '^mapped again [1-9][0-9]* of ' "$work/out"; then ok; else
        bad "unmapped: status $st (66: a race reported): $(grep -m1 '^mapped again' "$work/out") $(grep -A12 'WARNING: ThreadSanitizer' "$work/out" | head -30)"
    fi
else
    bad "unmapped: $CC built tsan_host but not tsan_unmapped: $(head -c 300 "$work/cc.err")"
fi
summary
