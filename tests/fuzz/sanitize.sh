#!/bin/sh
# Runs tests against sanitizer builds; called by `make sanitize` and `make tsan` (tests/fuzz/fuzz.mk),
# which build what it needs first.
#   tests/fuzz/sanitize.sh asan BUILD_DIR RUNTIME   every test program of BUILD_DIR (ASan+UBSan), and
#                                                   the reader's snapgen checks
#   tests/fuzz/sanitize.sh tsan BUILD_DIR RUNTIME   the threaded tests, traced with BUILD_DIR's library
# RUNTIME is the sanitizer's shared runtime, preloaded into traced programs that are not built with it
# (the door programs, python3) ahead of the library. Ends with "N passed, N failed" like tests/run.sh.
set -u
cd "$(dirname "$0")/../.."
mode=$1
SB=$2
RT=$3
case $SB in /*) ;; *) SB=$PWD/$SB ;; esac
export LD_LIBRARY_PATH="$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OOMTRACE_TEST_LIB="$SB/liboomtrace.so"
# Under a sanitizer, main's dlsym(RTLD_NEXT, "malloc") is the interceptor, not libc's malloc.
export OOMTRACE_TEST_SKIP="${OOMTRACE_TEST_SKIP-test_lookups_as_untraced}"
# The 16-thread stress test's default million operations take minutes under a sanitizer; a sanitizer
# finds the same races and bugs in far fewer.
export OT_STRESS_OPS="${OT_STRESS_OPS:-20000}"
skip="$SB/cmocka_skip.so"

passed=0
failed=0
failures=""
run() {
    name=$1
    shift
    printf '== %s (%s)\n' "$name" "$mode"
    start=$(date +%s)
    # A hang under a sanitizer (a deadlock, a runtime that never lets a thread finish) fails the step
    # rather than stalling CI; timeout signals the test's whole process group.
    if timeout -k 10 "${OOMTRACE_SAN_TIMEOUT:-300}" "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures="$failures $name"
    fi
    printf '   %s: %ss\n' "$name" $(($(date +%s) - start))
}

case $mode in
asan)
    export OOMTRACE_TEST_PRELOAD_EXTRA="$RT"
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}"
    export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0}"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
    # The test programs link the runtime themselves; it is named again only because a preloaded
    # library may not come before it.
    for t in "$SB"/tests/fakecuda_smoke "$SB"/tests/test_*; do
        [ -x "$t" ] || continue
        # ASan owns SIGSEGV in the process: a real fault reaches its handler, not the one test_hostile's
        # refused-OOMTRACE_SIGNAL case expects, so that case is skipped here (it runs in make test).
        case "$t" in
        */test_hostile) run "$(basename "$t")" env OOMTRACE_TEST_SKIP=test_fatal_signal_refused LD_PRELOAD="$RT $skip" "$t" ;;
        *) run "$(basename "$t")" env LD_PRELOAD="$RT $skip" "$t" ;;
        esac
    done
    # The reader on every damaged and valid snapgen variant (SNAPGEN: a snapgen binary, when there is one).
    if [ -x "${SNAPGEN:-}" ] && [ -f tests/snapgen/check.sh ]; then
        run snapgen_check env READER="$SB/oomtrace-read" sh tests/snapgen/check.sh
    fi
    ;;
tsan)
    export OOMTRACE_TEST_PRELOAD_EXTRA="$SB/tsan_unwind.so $RT"
    export TSAN_OPTIONS="${TSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/tsan.supp:second_deadlock_stack=1}"
    # The unit tests link the instrumented objects; the e2e programs are the ordinary build, tracing
    # with the instrumented library in their children (which is where the threads are).
    run test_recorder "$SB"/tests/test_recorder
    run test_recorder_ring "$SB"/tests/test_recorder_ring
    run test_lock "$SB"/tests/test_lock
    for t in build/tests/test_doors build/tests/test_pitfalls build/tests/test_*thread* build/tests/test_*stress*; do
        [ -x "$t" ] || continue
        run "$(basename "$t")" env LD_PRELOAD="$skip" "$t"
    done
    # The reader decodes the ring on several threads; snapgen's many-chunk files exercise them.
    if [ -x "${SNAPGEN:-}" ] && [ -f tests/snapgen/check.sh ]; then
        run snapgen_check env READER="$SB/oomtrace-read" sh tests/snapgen/check.sh
    fi
    ;;
*)
    echo "usage: $0 asan|tsan BUILD_DIR RUNTIME" >&2
    exit 2
    ;;
esac
[ -n "$failures" ] && echo "failed:$failures"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
