#!/bin/sh
# tests/run.sh counts test cases, not programs: a cmocka program with 3 cases and one failed, a script that
# reports "check: 5 passed, 0 failed", a plain program, and one that crashes without a failed case.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "run_summary: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-summary.XXXXXX)
cat >"$work/cmocka" <<'P'
echo "[==========] 3 test(s) run."
echo "[  PASSED  ] 2 test(s)."
echo "[  FAILED  ] 1 test(s), listed below:"
echo "[  FAILED  ] test_x"
exit 1
P
printf 'echo "check: 5 passed, 0 failed"\n' >"$work/script"
printf 'exit 0\n' >"$work/plain"
printf 'echo "[  PASSED  ] 4 test(s)."; exit 139\n' >"$work/crash"
out=$(OT_RUN_LIB=1 sh -c '. tests/run.sh; for p in cmocka script plain crash; do run "$p" sh "$1/$p"; done >/dev/null
    echo "$passed $failed $programs"' sh "$work")
rm -rf "$work"
[ "$out" = "12 2 4" ] || fail "counted '$out', want '12 2 4' (passed failed programs)"
tail -1 tests/run.sh | grep -q '^\[ "$failed" -eq 0 \]$' || fail "run.sh's status line moved"
echo "run_summary: ok"
