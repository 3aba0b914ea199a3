#!/bin/sh
# Runs every test program and ends with one line: "N passed, N failed".
# The cmocka programs print their own detail; this script counts programs, not cases.
set -u
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
passed=0
failed=0
failures=""
run() {
    name=$1
    shift
    printf '== %s\n' "$name"
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures="$failures $name"
    fi
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
