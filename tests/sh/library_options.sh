#!/bin/sh
# The library's start-up options (issue 13, items 3 and 5): a missing OOMTRACE_DIR is created (0700, with its
# missing parents) so the OOM snapshot is not lost; a symbolic link in its place is not created through; and
# OOMTRACE_DUMP=exit,none is refused with one line, keeping the default, so OOM snapshots are still written.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "library_options: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-opts.XXXXXX)
trap 'rm -rf "$work"' EXIT
traced() { # traced DIR DUMP: door_linked (an OOM, then exit 0) under the tracer; stderr in $work/err
    LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR=$1 OOMTRACE_DUMP=$2 \
        LD_PRELOAD="$PWD/build/liboomtrace.so" build/tests/door_linked >/dev/null 2>"$work/err"
}

# 3: a missing directory (two levels) is created, 0700, and holds the OOM snapshot.
traced "$work/job/snaps" oom || fail "door_linked's status"
ls "$work"/job/snaps/oomtrace-*-oom.oomt >/dev/null 2>&1 || fail "no OOM snapshot in the missing directory: $(cat "$work/err")"
[ "$(stat -c %a "$work/job/snaps")" = 700 ] || fail "mode $(stat -c %a "$work/job/snaps"), want 700"
grep -q 'not a writable directory' "$work/err" && fail "warned about a directory it could create"

# Walk 8, #29a: under a restrictive umask (0277) the directories made are 0700 still, not 0500 (in which the next
# level could not be made, except by root).
(umask 0277 && traced "$work/um/snaps" oom) || fail "door_linked's status under umask 0277"
[ "$(stat -c %a "$work/um")" = 700 ] && [ "$(stat -c %a "$work/um/snaps")" = 700 ] ||
    fail "under umask 0277: modes $(stat -c %a "$work/um") and $(stat -c %a "$work/um/snaps"), want 700: $(cat "$work/err")"
ls "$work"/um/snaps/oomtrace-*-oom.oomt >/dev/null 2>&1 || fail "under umask 0277: no OOM snapshot: $(cat "$work/err")"
# Walk 9, #5: the snapshot files are 0600 whatever the umask (under 0777 they were 000: the launcher's reader,
# as the user, could not open them).
(umask 0777 && traced "$work/um7" oom) || fail "door_linked's status under umask 0777"
set -- "$work"/um7/oomtrace-*-oom.oomt
[ -f "$1" ] && [ "$(stat -c %a "$1")" = 600 ] || fail "under umask 0777: snapshot $1 has mode $(stat -c %a "$1" 2>&1), want 600"
# Walk 8, #29b: a directory that takes no files (/proc) is said to be one, not "No such file or directory".
traced /proc oom
grep -q "^oomtrace: cannot write the out-of-memory snapshot to /proc: Operation not supported\$" "$work/err" ||
    fail "OOMTRACE_DIR=/proc: $(cat "$work/err")"

# 3: a dangling symbolic link as OOMTRACE_DIR is not followed: its target is not created.
ln -s "$work/elsewhere" "$work/link"
traced "$work/link" oom
[ -e "$work/elsewhere" ] && fail "created the directory through a symbolic link"
grep -q 'not a writable directory' "$work/err" || fail "no line about the unusable directory"

# 5: exit,none is refused in one line; the default (oom) stays, so the OOM snapshot is written.
mkdir "$work/d5"
traced "$work/d5" exit,none || fail "door_linked's status with exit,none"
[ "$(grep -c 'invalid OOMTRACE_DUMP' "$work/err")" -eq 1 ] || fail "exit,none not refused in one line: $(cat "$work/err")"
ls "$work"/d5/oomtrace-*-oom.oomt >/dev/null 2>&1 || fail "exit,none dropped the OOM snapshot"
# none alone still writes nothing.
mkdir "$work/d6"
traced "$work/d6" none || fail "door_linked's status with none"
[ -z "$(ls "$work/d6")" ] || fail "none wrote $(ls "$work/d6")"
# Walk 6, #9 and #10: OOMTRACE_DIR is resolved against the start-up directory: a program that changes directory
# keeps its snapshots where the user pointed (relative "rel", and the default "."), and the line gives the
# absolute path.
cp tests/py/drv.py "$work/"
cat >"$work/chdir.py" <<'PY'
import os, sys
from drv import cuda, ctypes
p = ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 100 << 20) == 0
os.chdir(sys.argv[1])
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 2 << 30) == 2
PY
mkdir "$work/start" "$work/elsewhere"
for d in rel ""; do
    (cd "$work/start" && env ${d:+OOMTRACE_DIR=$d} LD_LIBRARY_PATH="$OLDPWD/build/fake" FAKECUDA_CAPACITY=1G \
        LD_PRELOAD="$OLDPWD/build/liboomtrace.so" python3 "$work/chdir.py" "$work/elsewhere") >/dev/null 2>"$work/err" ||
        fail "chdir.py (OOMTRACE_DIR='$d'): $(cat "$work/err")"
    want=$work/start${d:+/$d}
    ls "$want"/oomtrace-*-oom.oomt >/dev/null 2>&1 || fail "OOMTRACE_DIR='$d' and a chdir: no snapshot in $want: $(cat "$work/err")"
    grep -q "^oomtrace: snapshot written: $want/oomtrace-[^/]*-oom\.oomt (oom)\$" "$work/err" ||
        fail "OOMTRACE_DIR='$d': the line does not give the absolute path: $(cat "$work/err")"
    rm -f "$want"/oomtrace-*.oomt
done
[ -z "$(ls "$work/elsewhere")" ] || fail "snapshots followed the chdir: $(ls "$work/elsewhere")"
# Walk 6, #26 (a): a well-formed value out of range names the bound, in the syntax the user wrote. helper-91 #7:
# a number is digits (and a size's point and unit), as the README writes them: " 1", "+8", "0x10", "1e3" and
# "nan" were read by strtod and strtoll (nan then cast, undefined).
for case in 'OOMTRACE_RING=1K|OOMTRACE_RING="1K" is below its minimum, 4K; using the default "64M"' \
    'OOMTRACE_DEPTH=0|OOMTRACE_DEPTH="0" is below its minimum, 1; using the default "64"' \
    'OOMTRACE_RING=2T|OOMTRACE_RING="2T" is above its maximum, 1T; using the default "64M"' \
    'OOMTRACE_RING=nan|invalid OOMTRACE_RING="nan"; using the default "64M"' \
    'OOMTRACE_RING=0x10000|invalid OOMTRACE_RING="0x10000"; using the default "64M"' \
    'OOMTRACE_RING= 1M|invalid OOMTRACE_RING=" 1M"; using the default "64M"' \
    'OOMTRACE_DEPTH=+8|invalid OOMTRACE_DEPTH="+8"; using the default "64"' \
    'OOMTRACE_SIGNAL=+12|invalid OOMTRACE_SIGNAL="+12"; ignored, as if unset'; do
    env "${case%%|*}" LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR="$work/d6" OOMTRACE_DUMP=none \
        LD_PRELOAD="$PWD/build/liboomtrace.so" build/tests/door_linked >/dev/null 2>"$work/err"
    [ "$(cat "$work/err")" = "oomtrace: ${case#*|}" ] || fail "${case%%|*}: $(cat "$work/err")"
done
env OOMTRACE_RING=1.5M LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR="$work/d6" OOMTRACE_DUMP=none \
    LD_PRELOAD="$PWD/build/liboomtrace.so" build/tests/door_linked >/dev/null 2>"$work/err"
[ -s "$work/err" ] && fail "OOMTRACE_RING=1.5M: $(cat "$work/err")"
# helper-91 #5: with OOMTRACE_DIR unset, an unwritable current directory is named as such, not as a variable set.
# Root writes anywhere: as root the program runs as nobody (setpriv), where setpriv is.
as_user=
[ "$(id -u)" = 0 ] && as_user="setpriv --reuid=65534 --regid=65534 --clear-groups"
if [ "$(id -u)" != 0 ] || command -v setpriv >/dev/null 2>&1; then
    mkdir "$work/ro" && chmod 555 "$work/ro" && chmod o+x "$work"
    # shellcheck disable=SC2086
    (cd "$work/ro" && env -u OOMTRACE_DIR LD_LIBRARY_PATH="$OLDPWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DUMP=none \
        LD_PRELOAD="$OLDPWD/build/liboomtrace.so" $as_user "$OLDPWD/build/tests/door_linked") >/dev/null 2>"$work/err"
    [ "$(head -1 "$work/err")" = "oomtrace: the current directory, $work/ro, where snapshots go without a usable OOMTRACE_DIR, is not writable; snapshots will fail (tracing continues; set OOMTRACE_DIR)" ] ||
        fail "an unwritable current directory: $(cat "$work/err")"
    # An OOMTRACE_DIR refused at start (helper-92 #5) leaves the same directory, said the same way.
    # shellcheck disable=SC2086
    (cd "$work/ro" && env OOMTRACE_DIR='~nosuch_user_x/d' LD_LIBRARY_PATH="$OLDPWD/build/fake" FAKECUDA_CAPACITY=1G \
        OOMTRACE_DUMP=none LD_PRELOAD="$OLDPWD/build/liboomtrace.so" $as_user "$OLDPWD/build/tests/door_linked") >/dev/null 2>"$work/err"
    [ "$(grep -v "^oomtrace: OOMTRACE_DIR=" "$work/err")" = "oomtrace: the current directory, $work/ro, where snapshots go without a usable OOMTRACE_DIR, is not writable; snapshots will fail (tracing continues; set OOMTRACE_DIR)" ] ||
        fail "a refused OOMTRACE_DIR in an unwritable current directory: $(cat "$work/err")"
fi
# Walk 11, #6: a variable whose default is none (OOMTRACE_SIGNAL) says it is ignored, not 'using the default ""'.
env OOMTRACE_SIGNAL=FOO LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR="$work/d6" OOMTRACE_DUMP=none \
    LD_PRELOAD="$PWD/build/liboomtrace.so" build/tests/door_linked >/dev/null 2>"$work/err"
[ "$(cat "$work/err")" = 'oomtrace: invalid OOMTRACE_SIGNAL="FOO"; ignored, as if unset' ] || fail "OOMTRACE_SIGNAL=FOO: $(cat "$work/err")"
# Walk 8, #8: an empty value is the variable unset, for every variable, silently (a CI template's
# OOMTRACE_RING=${RING} with RING unset): no line, the default kept.
for v in DISABLE RING DIR DUMP SIGNAL DEPTH PYTHON FLUSH_MS MAX_SNAPSHOTS MAX_BYTES QUIET FRAMEWORKS TSC; do
    (cd "$work" && env "OOMTRACE_$v=" LD_LIBRARY_PATH="$OLDPWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1 \
        LD_PRELOAD="$OLDPWD/build/liboomtrace.so" "$OLDPWD/build/tests/door_linked") >/dev/null 2>"$work/err"
    [ -s "$work/err" ] && fail "OOMTRACE_$v= (empty): $(cat "$work/err")"
done
ls "$work"/oomtrace-*-oom.oomt >/dev/null 2>&1 || fail "OOMTRACE_DIR= (empty) is not the default, the current directory"
rm -f "$work"/oomtrace-*.oomt
# Walk 8, #21: '~' that no shell expanded is HOME's (never a directory named '~'); '~user' and '$VAR' are refused
# with one line saying why, the default kept. #22: a directory too long for the library says so.
mkdir "$work/home" "$work/cwd"
opt_dir() { # opt_dir VALUE: door_linked from $work/cwd, HOME=$work/home; stderr in $work/err
    (cd "$work/cwd" && HOME=$work/home OOMTRACE_DIR=$1 LD_LIBRARY_PATH="$OLDPWD/build/fake" FAKECUDA_CAPACITY=1G \
        OOMTRACE_QUIET=1 LD_PRELOAD="$OLDPWD/build/liboomtrace.so" "$OLDPWD/build/tests/door_linked") >/dev/null 2>"$work/err"
}
opt_dir '~/snaps'
ls "$work"/home/snaps/oomtrace-*-oom.oomt >/dev/null 2>&1 && [ ! -e "$work/cwd/~" ] ||
    fail "OOMTRACE_DIR='~/snaps': $(ls -A "$work/cwd") $(cat "$work/err")"
long=$work/$(printf '%0300d' 0)/$(printf '%0250d' 0)
for case in '~nobody/x|starts with '"'~user'"', which no shell expanded: give the path itself' \
    '$HOME/x|holds a '"'\$'"' variable that no shell expanded: give the path itself' \
    "$long|is longer than the 511 bytes a snapshot's directory may have"; do
    val=${case%%|*}
    opt_dir "$val"
    shown=$(printf '%.64s' "$val")
    [ "${#shown}" -lt "${#val}" ] && shown="$shown..."
    [ "$(cat "$work/err")" = "oomtrace: OOMTRACE_DIR=\"$shown\" ${case#*|}; using the default \".\"" ] ||
        fail "OOMTRACE_DIR='$val': $(cat "$work/err")"
    [ -z "$(ls -A "$work/cwd" | grep -v '^oomtrace-')" ] || fail "OOMTRACE_DIR='$val' made $(ls -A "$work/cwd")"
    rm -f "$work"/cwd/oomtrace-*.oomt
done
echo "library_options: ok"
