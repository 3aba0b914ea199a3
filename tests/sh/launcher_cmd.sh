#!/bin/sh
# The launcher (tools/oomtrace, from the build tree) against what a command does to its own run: a program built
# with a sanitizer, a sanitizer already preloaded (walk 8, #14); a process that went on after an out-of-memory and
# then died (#3), or failed in its exit handlers (#30); a failed command's status said (#11).
set -u
cd "$(dirname "$0")/../.."
fail() { echo "launcher_cmd: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-lcmd.XXXXXX)
trap 'rm -rf "$work"' EXIT
export LD_LIBRARY_PATH="$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1
unset OOMTRACE_DIR OOMTRACE_DUMP ASAN_OPTIONS
run() { "$launcher" run "$@"; }
launcher=$PWD/tools/oomtrace
door=$PWD/build/tests/door_linked
CC=${CC:-cc}

# Walk 8, #14: AddressSanitizer's runtime exits 1 at start unless it comes first in the initial library list. A
# program linked with it runs under the launcher as untraced (status 0, traced: its out-of-memory reported); one
# preloaded by the user stays first, for a plain program and for a sanitized one; the user's own
# verify_asan_link_order is kept, and the closing line then names it. The launcher's own tools do not run under
# the user's preload (LeakSanitizer would report sed's leaks).
if $CC -g -fsanitize=address -Iinclude -I/usr/local/cuda/include -o "$work/door_asan" tests/doors/door_linked.c \
    -Lbuild/fake -lcuda 2>"$work/cc.err" && asan=$($CC -print-file-name=libasan.so) && [ -f "$asan" ]; then
    "$work/door_asan" >/dev/null 2>&1 || fail "door_asan fails untraced"
    run --dir "$work/as" -- "$work/door_asan" >"$work/as.out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] && grep -q "Failed request: 700 MiB" "$work/as.out" ||
        fail "a program built with ASan: status $rc: $(grep -v '^ ' "$work/as.out" | head -3)"
    for prog in "$door" "$work/door_asan"; do
        LD_PRELOAD=$asan run --dir "$work/asp" -- "$prog" >"$work/asp.out" 2>&1
        rc=$?
        [ "$rc" -eq 0 ] && grep -q "Failed request: 700 MiB" "$work/asp.out" ||
            fail "LD_PRELOAD=libasan.so, ${prog##*/}: status $rc: $(grep -v '^ ' "$work/asp.out" | head -3)"
        grep -q "LeakSanitizer" "$work/asp.out" && fail "the launcher's tools ran under the user's preload: $(grep -m3 'Sanitizer\|#1' "$work/asp.out")"
    done
    got=$(LD_PRELOAD="$asan libz.so.1" ASAN_OPTIONS=detect_leaks=0 run --dir "$work/asp" -- sh -c 'echo "$LD_PRELOAD|$ASAN_OPTIONS"' 2>/dev/null)
    [ "$got" = "$asan:$(cd build && pwd -P)/liboomtrace.so:libz.so.1|detect_leaks=0:verify_asan_link_order=0" ] ||
        fail "the preload's order, or ASAN_OPTIONS: $got"
    ASAN_OPTIONS=verify_asan_link_order=1 run --dir "$work/as1" -- "$work/door_asan" >"$work/as1.out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] && grep -q "^oomtrace: no snapshot was written: $work/door_asan exited with status 1: ASAN_OPTIONS sets verify_asan_link_order, with which a program built with AddressSanitizer refuses to start under a preload (its line above); leave that option out, and the launcher turns the check off\$" "$work/as1.out" ||
        fail "the user's verify_asan_link_order=1: status $rc: $(tail -1 "$work/as1.out")"
else
    echo "launcher_cmd: no AddressSanitizer here ($(tail -1 "$work/cc.err")): its cases skipped"
fi

# #3: a process that caught its first out-of-memory, went on, and died of the second by SIGABRT (an uncaught C++
# exception): said, with its last failure reported; one killed by SIGKILL after its only one: said too. #11: the
# command's status is said last, in the log and the summary, even when the gate passed.
cp tests/py/drv.py "$work/"
cat >"$work/die.py" <<'PY'
import os, signal, sys
from drv import try_alloc
assert try_alloc(200 << 20)[0] == 0
if sys.argv[1] == "abort":
    assert try_alloc(900 << 20)[0] != 0  # caught: goes on with less
    assert try_alloc(64 << 20)[0] == 0
    assert try_alloc(1000 << 20)[0] != 0
    os.abort()
assert try_alloc(2000 << 20)[0] != 0
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(1)
PY
run --dir "$work/die" --max-peak 1G --summary "$work/die.md" -- python3 "$work/die.py" abort >"$work/die.out" 2>&1
rc=$?
[ "$rc" -eq 134 ] && grep -q "^== oomtrace: the process went on after the first of its 2 out-of-memory failures and was killed by SIGABRT (an uncaught C++ exception, or abort()); the report below is of its last, oomtrace-[^ ]*-2-oom\.oomt, the one it died of\$" "$work/die.out" ||
    fail "died of its second out-of-memory: status $rc: $(grep '^==' "$work/die.out")"
grep -q "^Failed request: 1000 MiB" "$work/die.out" || fail "the fatal failure is not the one reported: $(grep '^Failed' "$work/die.out")"
[ "$(tail -1 "$work/die.out")" = "== oomtrace: python3 was killed by SIGABRT; the launcher's status is 134 (the command's own failure: the gate passed)" ] ||
    fail "the command's end is not said last: $(tail -1 "$work/die.out")"
grep -q "^\`oomtrace run\`: \*\*python3 was killed by SIGABRT; the launcher's status is 134 (the command's own failure: the gate passed)\*\*\$" "$work/die.md" ||
    fail "the summary does not say how the command ended: $(head -5 "$work/die.md")"
run --dir "$work/die" -- python3 "$work/die.py" kill >"$work/kill.out" 2>&1
rc=$?
[ "$rc" -eq 137 ] && grep -q "^== oomtrace: the process was killed by SIGKILL (the kernel's out-of-memory killer sends it: see dmesg) after its out-of-memory; the report below is of that failure\$" "$work/kill.out" ||
    fail "killed after its out-of-memory: status $rc: $(grep '^==' "$work/kill.out")"
run --dir "$work/die" --max-peak 100M -- python3 "$work/die.py" exit1 >"$work/exit1.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && [ "$(tail -1 "$work/exit1.out")" = "== oomtrace: python3 exited with status 1, the launcher's status too (and the gate failed)" ] ||
    fail "a failed command and a failed gate: status $rc: $(tail -1 "$work/exit1.out")"

# #30: out-of-memory failures in exit handlers come after the exit snapshot: said so, not "went on and exited 0".
cat >"$work/atx.c" <<'C'
#include <cuda.h>
#include <stdlib.h>
static void late(void) { CUdeviceptr p; cuMemAlloc(&p, 2000u << 20); }
int main(void)
{
    CUcontext c;
    CUdeviceptr p;
    cuInit(0);
    cuDevicePrimaryCtxRetain(&c, 0);
    cuCtxSetCurrent(c);
    atexit(late);
    cuMemAlloc(&p, 64 << 20);
    return 0;
}
C
if $CC -I/usr/local/cuda/include -o "$work/atx" "$work/atx.c" -Lbuild/fake -lcuda 2>"$work/cc.err"; then
    run --dir "$work/atxdir" -- "$work/atx" >"$work/atx.out" 2>&1 || fail "atx: status"
    grep -q "^== oomtrace: the process's out-of-memory failures came after its exit snapshot (oomtrace-[^ ]*-1-exit\.oomt), in its exit handlers (atexit, static destructors)\$" "$work/atx.out" ||
        fail "an out-of-memory in an exit handler: $(grep '^==' "$work/atx.out")"
else
    fail "cannot build atx.c: $(tail -1 "$work/cc.err")"
fi

# #21: a '~' in OOMTRACE_DIR or --dir that no shell expanded is HOME's, never a directory named '~'; '~user' and
# '$VAR' are refused before the command runs. #22: a --dir whose run directory the library could not take (over
# 511 bytes) is refused before the command runs, not run with its snapshots in the current directory.
mkdir "$work/home" "$work/cwd"
(cd "$work/cwd" && HOME=$work/home OOMTRACE_DIR='~/snaps' run -- "$door") >/dev/null 2>&1 || fail "OOMTRACE_DIR='~/snaps': status"
ls "$work"/home/snaps/run-*/oomtrace-*-exit.oomt >/dev/null 2>&1 && [ -z "$(ls -A "$work/cwd")" ] ||
    fail "OOMTRACE_DIR='~/snaps': $(ls -A "$work/cwd")"
long=$work/$(printf '%0200d' 0)/$(printf '%0200d' 0)/$(printf '%080d' 0)
for case in "--dir=~nobody/x|it starts with '~user', which no shell expanded: give the path itself" \
    "--dir=\$HOME/x|it holds a '\$' variable that no shell expanded: give the path itself" \
    "--dir=$long|the run's directory would be longer than the 511 bytes the library takes for its directory"; do
    opt=${case%%|*}
    rm -f "$work/ran"
    (cd "$work/cwd" && run "$opt" -- touch "$work/ran") >"$work/dir.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] && [ ! -e "$work/ran" ] && [ -z "$(ls -A "$work/cwd")" ] &&
        [ "$(cat "$work/dir.out")" = "oomtrace: cannot create a run directory in ${opt#--dir=}: ${case#*|}; touch was not run (--dir or OOMTRACE_DIR picks another)" ] ||
        fail "$opt: status $rc: $(cat "$work/dir.out") $(ls -A "$work/cwd")"
done
[ -e "$work/$(printf '%0200d' 0)" ] && fail "a --dir refused as too long was made"

# #31: a library that cannot be loaded here (a dependency missing: the wheel on a slim image without libunwind8;
# a broken file) is refused before the command runs, naming what is missing, not blamed on the command.
mkdir "$work/inst"
cp tools/oomtrace tools/oomtrace-report.sh "$work/inst/"
ln -s "$PWD/build/oomtrace-read" "$PWD/build/oomtrace-supervise" "$work/inst/"
printf 'int needed_one(void) { return 1; }\n' >"$work/notthere.c"
printf 'int needed_one(void); int use(void) { return needed_one(); }\n' >"$work/needs.c"
$CC -shared -fPIC -o "$work/libnotthere.so" "$work/notthere.c" &&
    $CC -shared -fPIC -o "$work/inst/liboomtrace.so" "$work/needs.c" -L"$work" -lnotthere || fail "building libneeds"
rm "$work/libnotthere.so"
for case in "libnotthere.so: cannot open shared object file (the library needs libunwind, libzstd and liblzma from the system: apt-get install libunwind8 libzstd1 liblzma5, or dnf install libunwind libzstd xz-libs)" \
    "file too short"; do
    rm -f "$work/ran"
    "$work/inst/oomtrace" run --dir "$work/inst-out" -- touch "$work/ran" >"$work/inst.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] && [ ! -e "$work/ran" ] &&
        [ "$(cat "$work/inst.out")" = "oomtrace: $work/inst/liboomtrace.so cannot be loaded here: $case; touch was not run" ] ||
        fail "a library that cannot be loaded: status $rc: $(cat "$work/inst.out")"
    [ -z "$(ls -A "$work/inst-out")" ] || fail "a refused run left $(ls -A "$work/inst-out")"
    : >"$work/inst/liboomtrace.so" # then a broken file, which ld.so ignores with a line
done
OOMTRACE_RING=lots run --dir "$work/inst-ok" -- true >"$work/ok.out" 2>&1 || fail "the probe refused a library that loads: $(cat "$work/ok.out")"

# #12: a command that sets its own OOMTRACE_DIR (a job script's export OOMTRACE_DIR=/scratch/$JOB), or unsets it
# (the process's own directory): the library's note tells the launcher where; those snapshots of this run are
# linked into the run's directory, reported and gated, not "no snapshot was written".
mkdir "$work/own" "$work/unset"
touch -d '1 hour ago' "$work/own/oomtrace-old-1-1-oom.oomt" # an earlier run's file there is not this run's
for case in "OOMTRACE_DIR=$work/own|$work/own" "-u OOMTRACE_DIR|$work/unset"; do
    (cd "$work/unset" && run --dir "$work/ownrun" --max-peak 1G -- env ${case%%|*} "$door") >"$work/own.out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] && grep -q "^== oomtrace: the command's processes wrote 2 snapshots into ${case#*|}, not the run's directory (the command set its own OOMTRACE_DIR, or unset it): linked into the run's directory, and read with it\$" "$work/own.out" &&
        grep -q "^oomtrace: gate --max-peak passed: peak 512 MiB" "$work/own.out" && grep -q "^Failed request: 700 MiB" "$work/own.out" ||
        fail "env ${case%%|*}: status $rc: $(grep '^oomtrace\|^==' "$work/own.out")"
done
# Walk 11, #7: two processes of the command write into its own directory: each file is counted once (the second
# process's note finds the first's files too, already linked).
rm -rf "$work/ownrun"
run --dir "$work/ownrun" -- sh -c 'export OOMTRACE_DIR="$1"; "$0"; "$0"' "$door" "$work/own2" >"$work/own2.out" 2>&1
grep -q "^== oomtrace: the command's processes wrote 4 snapshots into $work/own2, not the run's directory" "$work/own2.out" &&
    grep -q "^== oomtrace: 4 snapshots from 2 processes in " "$work/own2.out" ||
    fail "two processes into the command's own directory: $(grep '^oomtrace\|^==' "$work/own2.out")"
# #13: a command that drops LD_PRELOAD (env -i, sudo, docker run) left no process that allocated with the library:
# said so, not "_exit or killed by a signal".
run --dir "$work/ei" --max-peak 1G -- env -i LD_LIBRARY_PATH="$LD_LIBRARY_PATH" FAKECUDA_CAPACITY=1G "$door" >"$work/ei.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && [ "$(cat "$work/ei.out")" = "oomtrace: no snapshot was written: no process of the command allocated GPU memory with the library loaded: it allocated none, or env cleared the environment for what it ran, LD_PRELOAD with it, as env -i, sudo and docker run do: run oomtrace inside it (sudo oomtrace run -- CMD); the gate could not be checked, so it fails" ] ||
    fail "env -i: status $rc: $(cat "$work/ei.out")"
run --dir "$work/ei" -- sh -c 'env -i "$0"' "$door" >"$work/ei.out" 2>&1
grep -q "^oomtrace: no snapshot was written: no process of the command allocated GPU memory with the library loaded: it allocated none, or what allocated ran untraced: a command that clears the environment (env -i, sudo, docker run) or a setuid program drops LD_PRELOAD; run oomtrace inside it\$" "$work/ei.out" ||
    fail "env -i under a script: $(cat "$work/ei.out")"

# Walk 8, #27: the launcher's report into a pipe whose reader has gone (`oomtrace run -- CMD 2>&1 | head -1`): the
# launcher's status is still the command's, or the gate's (not 141, which `set -o pipefail` would make the job's),
# and the summary file is still written; the command keeps the dispositions it had (launcher.sh checks SigIgn).
for case in "|0|" "--max-peak 1G|0|gate --max-peak passed" "--max-peak 1M|1|gate --max-peak failed"; do
    rm -f "$work/pipe.md"
    (run --dir "$work/pipe" ${case%%|*} --summary "$work/pipe.md" -- sh -c 'exec "$0" >/dev/null 2>&1' "$door" 2>&1
        echo $? >"$work/pipe.rc") | true
    rc=$(cat "$work/pipe.rc")
    want=${case#*|}
    [ "$rc" -eq "${want%%|*}" ] && grep -q "Failed request:\*\* 700 MiB" "$work/pipe.md" && grep -q "${want#*|}" "$work/pipe.md" ||
        fail "${case%%|*} into a closed pipe: status $rc, want ${want%%|*}; summary: $(head -c 300 "$work/pipe.md")"
done

# ... and a SIGTERM sent to the launcher then: its line "SIGTERM passed on" goes into the gone pipe, and the
# launcher still waits for the command and ends with its status (143), not by SIGPIPE (141).
rm -f "$work/l.pid" "$work/c.pid"
( (sh -c 'echo $$ >"$0"; exec "$1" run --dir "$2" -- sh -c "echo \$\$ >\"\$0\"; exec sleep 30" "$3" 2>&1' \
    "$work/l.pid" "$launcher" "$work/tp" "$work/c.pid"
    echo $? >"$work/tp.rc") | true) &
job=$!
n=0
until [ -s "$work/c.pid" ] && grep -q "^sleep" "/proc/$(cat "$work/c.pid")/cmdline" 2>/dev/null; do
    n=$((n + 1))
    [ "$n" -lt 200 ] || fail "the command under the launcher did not start"
    sleep 0.05
done
kill -TERM "$(cat "$work/l.pid")"
wait "$job"
n=0
while grep -q '^State:[^Z]*$' "/proc/$(cat "$work/c.pid")/status" 2>/dev/null; do
    n=$((n + 1))
    [ "$n" -lt 40 ] || { kill "$(cat "$work/c.pid")"; fail "SIGTERM into a closed pipe left the command running"; }
    sleep 0.05
done
[ "$(cat "$work/tp.rc")" -eq 143 ] || fail "SIGTERM to the launcher whose stderr is a closed pipe: status $(cat "$work/tp.rc"), want 143"

# #19c: a gate given twice is refused, not the last kept silently; #19e: a --summary that takes no write
# (/dev/full) is refused before the command runs, not found missing after it.
for case in "--max-peak 1G --max-peak 2G|oomtrace: --max-peak given twice (1G, then 2G): give one; nothing was run (see oomtrace --help)" \
    "--max-peak --|oomtrace: --max-peak needs a value, got the option '--' (a value starting with '-' is written --max-peak=VALUE); nothing was run (see oomtrace --help)" \
    "--summary /dev/full|oomtrace: cannot write --summary /dev/full: I/O error; touch was not run"; do
    rm -f "$work/ran"
    run ${case%%|*} -- touch "$work/ran" >"$work/twice.out" 2>&1
    rc=$?
    got=$(sed 's/No space left on device/I\/O error/' "$work/twice.out")
    [ "$rc" -eq 2 ] && [ ! -e "$work/ran" ] && [ "$got" = "${case#*|}" ] || fail "${case%%|*}: status $rc: $got"
done

echo "launcher_cmd: ok"
