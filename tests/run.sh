#!/bin/sh
# Runs every test program and ends with one line: "N passed, N failed", counting test cases: a cmocka
# program's cases (its "[  PASSED  ] N test(s)" and "[  FAILED  ] N test(s)" lines), a script's own
# "NAME: N passed, N failed" lines, and otherwise the program as one case. A program that fails without
# a failed case (a crash, a timeout) counts one failed case more. The line before it counts the programs.
# OT_RUN_LIB=1 when sourced: define run() and the counters only (tests/sh/run_summary.sh).
set -u
[ "${OT_RUN_LIB:-0}" = 1 ] || cd "$(dirname "$0")/.."  # sourced: the caller is in the root
export LD_LIBRARY_PATH="$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
passed=0
failed=0
programs=0
failures=""
# Each program gets OT_TEST_TIMEOUT seconds (default 900; the slowest, the sanitizer runs, takes about
# 3 minutes here). A program that hangs is killed with its children and counted as failed, so a hang
# costs one program, not the whole CI run.
timeout_s=${OT_TEST_TIMEOUT:-900}
run_log=$(mktemp /tmp/oomtrace-run.XXXXXX)
trap 'rm -f "$run_log" "$run_log.rc"' EXIT
run() {
    name=$1
    shift
    printf '== %s\n' "$name"
    start=$(date +%s)
    { timeout -k 10 "$timeout_s" "$@" 2>&1; echo $? >"$run_log.rc"; } | tee "$run_log"
    rc=$(cat "$run_log.rc")
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "$name: did not finish within $timeout_s s; killed"
    fi
    # Cases: cmocka's totals, then scripts' "NAME: N passed, N failed" (the sanitizer runs' are prefixed).
    p=$(sed -n -e 's/^\[  PASSED  \] \([0-9][0-9]*\) test(s)\..*/\1/p' \
        -e 's/^[^ ].*: \([0-9][0-9]*\) passed, [0-9][0-9]* failed$/\1/p' "$run_log" | awk '{s += $1} END {print s + 0}')
    f=$(sed -n -e 's/^\[  FAILED  \] \([0-9][0-9]*\) test(s), listed below:.*/\1/p' \
        -e 's/^[^ ].*: [0-9][0-9]* passed, \([0-9][0-9]*\) failed$/\1/p' "$run_log" | awk '{s += $1} END {print s + 0}')
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
        if [ "$rc" -eq 0 ]; then p=1; else f=1; fi
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    programs=$((programs + 1))
    [ "$rc" -eq 0 ] || failures="$failures $name"
    echo "-- $name: $p passed, $f failed, $(($(date +%s) - start)) s"
}
[ "${OT_RUN_LIB:-0}" = 1 ] && return 0

run fakecuda_smoke build/tests/fakecuda_smoke
run recorder build/tests/test_recorder
run recorder_ring build/tests/test_recorder_ring
run doors build/tests/test_doors
for t in build/tests/test_*; do
    case "$t" in
    */test_recorder | */test_recorder_ring | */test_doors) ;;
    *) [ -x "$t" ] && run "$(basename "$t")" "$t" ;;
    esac
done
for s in tests/sh/*.sh; do
    [ -f "$s" ] && run "$(basename "$s" .sh)" sh "$s"
done
[ -n "$failures" ] && echo "failed:$failures"
nfailed_programs=$(echo "$failures" | wc -w)
echo "programs: $programs run, $nfailed_programs failed; test cases:"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
