#!/bin/sh
# make install into a scratch prefix, then the installed launcher: it finds the library beside itself, passes
# the command's exit status through, writes the exit snapshot, and fails (1) only when a gate fails.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "launcher: FAIL: $*"; exit 1; }
prefix=$(mktemp -d /tmp/oomtrace-install.XXXXXX)
make -s install PREFIX="$prefix" >/dev/null || fail "make install"
for f in bin/oomtrace bin/oomtrace-read lib/liboomtrace.so include/oomtrace.h share/man/man1/oomtrace.1 \
    share/man/man1/oomtrace-read.1 share/oomtrace/python/oomtrace.py; do
    [ -e "$prefix/$f" ] || fail "install is missing $f"
done
export LD_LIBRARY_PATH="$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1
work=$(mktemp -d /tmp/oomtrace-launch.XXXXXX)

# The command's own status comes back (door_linked exits 0 after its out-of-memory scenario).
"$prefix/bin/oomtrace" run --dir "$work/a" -- build/tests/door_linked >"$work/a.out" 2>&1
[ $? -eq 0 ] || fail "status of a passing command"
grep -q "Failed request: 700 MiB" "$work/a.out" || fail "no report printed"
[ "$(ls "$work/a" | grep -c -- '-exit.oomt')" -eq 1 ] || fail "no exit snapshot"

# A failing command keeps its status.
"$prefix/bin/oomtrace" run --dir "$work/b" -- sh -c 'exit 3' >/dev/null 2>&1
[ $? -eq 3 ] || fail "status of a failing command"

# The gate: a peak of 512 MiB passes 1G and fails 256M.
"$prefix/bin/oomtrace" run --dir "$work/c" --max-peak 1G -- build/tests/door_linked >/dev/null 2>&1
[ $? -eq 0 ] || fail "gate that should pass"
"$prefix/bin/oomtrace" run --dir "$work/d" --max-peak 256M -- build/tests/door_linked >"$work/d.out" 2>&1
[ $? -eq 1 ] || fail "gate that should fail"
grep -q "max-peak" "$work/d.out" || fail "no line naming the failed gate"

# Usage errors.
"$prefix/bin/oomtrace" bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "usage error status"
rm -rf "$prefix" "$work"
echo "launcher: ok"
