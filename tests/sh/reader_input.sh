#!/bin/sh
# What the reader is given, and where its output goes (walk 8): a large file that is no snapshot (#9); -o - (#17).
set -u
cd "$(dirname "$0")/../.."
fail() { echo "reader_input: FAIL: $*"; exit 1; }
READER=${READER:-$PWD/build/oomtrace-read}
work=$(mktemp -d /tmp/oomtrace-input.XXXXXX)
trap 'rm -rf "$work"' EXIT

# #9: a 1 GiB file that is no snapshot (a checkpoint, a core file) is refused by its first bytes, before it is
# read: under a 512 MiB address-space limit the reader says "bad magic", not that it ran out of memory.
truncate -s 1G "$work/sparse.oomt" || fail "truncate"
out=$( (ulimit -v 524288 && "$READER" "$work/sparse.oomt") 2>&1)
rc=$?
[ "$rc" -eq 2 ] && [ "$out" = "oomtrace-read: $work/sparse.oomt: not an oomtrace snapshot (bad magic)" ] ||
    fail "a 1 GiB file that is no snapshot: status $rc: $out"

# #17: -o - is standard output, never a file named "-".
mkdir "$work/snaps"
(cd "$work/snaps" && LD_LIBRARY_PATH="$OLDPWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1 OOMTRACE_DUMP=oom,exit \
    LD_PRELOAD="$OLDPWD/build/liboomtrace.so" "$OLDPWD/build/tests/door_linked") >/dev/null 2>&1 || fail "door_linked"
oom=$(ls "$work"/snaps/*-oom.oomt | head -1)
(cd "$work" && "$READER" -o - "$oom" >"$work/dash.out" 2>&1) || fail "-o -: $(cat "$work/dash.out")"
[ -e "$work/-" ] && fail "-o - wrote a file named '-'"
"$READER" "$oom" | cmp -s - "$work/dash.out" || fail "-o - is not the report on standard output: $(head -2 "$work/dash.out")"

echo "reader_input: ok"
