#!/bin/sh
# Runs every test program and ends with one line: "N passed, N failed".
# The cmocka programs print their own detail; this script counts programs, not cases.
set -u
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
passed=0
failed=0
failures=""
# Each program gets OT_TEST_TIMEOUT seconds (default 900; the slowest, the sanitizer runs, takes about
# 3 minutes here). A program that hangs is killed with its children and counted as failed, so a hang
# costs one program, not the whole CI run.
timeout_s=${OT_TEST_TIMEOUT:-900}
run() {
    name=$1
    shift
    printf '== %s\n' "$name"
    start=$(date +%s)
    timeout -k 10 "$timeout_s" "$@"
    rc=$?
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "$name: did not finish within $timeout_s s; killed"
    fi
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures="$failures $name"
    fi
    echo "-- $name: $(($(date +%s) - start)) s"
}
run fakecuda_smoke build/tests/fakecuda_smoke
run recorder build/tests/test_recorder
run doors build/tests/test_doors
for t in build/tests/test_*; do
    case "$t" in
    */test_recorder | */test_doors) ;;
    *) [ -x "$t" ] && run "$(basename "$t")" "$t" ;;
    esac
done
for s in tests/sh/*.sh; do
    [ -f "$s" ] && run "$(basename "$s" .sh)" sh "$s"
done
[ -n "$failures" ] && echo "failed:$failures"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
