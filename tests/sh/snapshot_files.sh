#!/bin/sh
# The snapshot files on disk (issue 15, items 8, 9 and 11): a write cut off leaves no file that reads as a
# snapshot (it is written under a hidden name and published by rename once whole), and its hidden file is
# removed by the next process that writes there; the crash-surviving file of
# one run is neither replaced nor removed by a later run with the same pid (two runs as PID 1 of a fresh PID
# namespace, a container restart); and a loop of failing allocations stops at the byte budget, with one line.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "snapshot_files: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-files.XXXXXX)
trap 'rm -rf "$work"' EXIT
traced() { # traced DIR PROGRAM ARGS...: under the tracer (after $FIRST, a library preloaded first), stderr in $work/err
    d=$1
    shift
    LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR=$d \
        LD_PRELOAD="${FIRST:+$FIRST:}$PWD/build/liboomtrace.so" "$@" >/dev/null 2>"$work/err"
}

# 8: the process is killed (SIGKILL, from tests/faults/libfault.c) in the middle of its first snapshot's
# write, after 1 KiB. Nothing may be left under a snapshot's name: before, the cut-off file had its COMPLETE
# flag and read as whole. (A file size limit killed it here until walk 8, #26: tests/sh/host_signals.sh.)
mkdir "$work/d8"
# The periodic flush is put off past the run, so that the one write the kill cuts is the snapshot's.
(OOMTRACE_FLUSH_MS=3600000 FAULT_KILL_AFTER=1024 FIRST="$PWD/build/tests/libfault.so" traced "$work/d8" build/tests/hostile oomloop 1)
st=$?
[ "$st" -eq $((128 + 9)) ] || fail "hostile oomloop killed after 1 KiB of its snapshot: status $st, want SIGKILL (137)"
for f in "$work"/d8/*.oomt; do
    [ -e "$f" ] && fail "a snapshot cut off at 1 KiB was published as $(basename "$f")"
done
# The killed process left its hidden temporary file. The next process to write here removes it, once it is
# a minute old and its writer is gone; it leaves alone the one of a live process, another host's, and a
# fresh one (a writer of another PID namespace may still be at it).
set -- "$work"/d8/.oomtrace-*.tmp-*
[ $# -eq 1 ] && [ -f "$1" ] || fail "the killed write left no single temporary file: $(ls -A "$work/d8")"
killed=$1
host=$(hostname | tr '/ ' '__')
dead=$(sh -c 'echo $$')
touch -d '2 minutes ago' "$killed"
for keep in ".oomtrace-$host-$$-oom.oomt.tmp-r1" ".oomtrace-elsewhere-$dead-oom.oomt.tmp-r1"; do
    : >"$work/d8/$keep"
    touch -d '2 minutes ago' "$work/d8/$keep"
done
: >"$work/d8/.oomtrace-$host-$dead-exit.oomt.tmp-r1"
# The same write without the limit publishes a snapshot that reads as finished, and no temporary file.
traced "$work/d8" build/tests/hostile oomloop 1 || fail "hostile oomloop: $(cat "$work/err")"
[ -e "$killed" ] && fail "the temporary file of a process killed while writing was not removed"
for keep in ".oomtrace-$host-$$-oom.oomt.tmp-r1" ".oomtrace-elsewhere-$dead-oom.oomt.tmp-r1" \
    ".oomtrace-$host-$dead-exit.oomt.tmp-r1"; do
    [ -e "$work/d8/$keep" ] || fail "$keep was removed (a live writer's, another host's or a fresh one)"
    rm -f "$work/d8/$keep"
done
set -- "$work"/d8/oomtrace-*-oom.oomt
[ $# -eq 1 ] && [ -f "$1" ] || fail "want one OOM snapshot, have: $(ls -A "$work/d8")"
[ -z "$(ls -A "$work/d8" | grep -v '^oomtrace-.*-oom\.oomt$')" ] || fail "left beside it: $(ls -A "$work/d8")"
build/oomtrace-read "$1" >"$work/report" 2>&1 || fail "oomtrace-read: $(cat "$work/report")"
grep -q 'did not finish' "$work/report" && fail "a finished snapshot reads as unfinished"

# 9: two runs as PID 1 (skipped where a PID namespace cannot be made: not root).
if unshare --pid --fork --kill-child true 2>/dev/null; then
    mkdir "$work/d9"
    LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR="$work/d9" OOMTRACE_DUMP=crash \
        OOMTRACE_FLUSH_MS=20 LD_PRELOAD="$PWD/build/liboomtrace.so" \
        unshare --pid --fork --kill-child build/tests/crash_workload run >/dev/null 2>&1 &
    first=$!
    n=0
    until ls "$work"/d9/*-flush.oomt >/dev/null 2>&1; do
        n=$((n + 1))
        [ $n -lt 500 ] || { kill -KILL $first; fail "the first run left no flush file in 10 s"; }
        sleep 0.02
    done
    sleep 0.1
    kill -KILL $first
    wait $first 2>/dev/null
    one=$(ls "$work"/d9/*-flush.oomt)
    [ "$(echo "$one" | wc -l)" -eq 1 ] || fail "the first run left $(ls -A "$work/d9")"
    case "$one" in *-1-*) ;; *) fail "the first run was not PID 1: $one" ;; esac
    sum=$(cksum <"$one")
    # A kill that lands inside one of its flushes (one every 20 ms) leaves that write's hidden temporary file,
    # fresh, which the second run must leave alone (its writer may be another namespace's, still at it).
    left=$(ls -A "$work/d9" | grep '\.tmp-' || true)
    # The second run flushes, then finishes normally and removes its own flush file.
    LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR="$work/d9" OOMTRACE_DUMP=crash \
        OOMTRACE_FLUSH_MS=20 LD_PRELOAD="$PWD/build/liboomtrace.so" \
        unshare --pid --fork --kill-child build/tests/crash_workload exit 100 >/dev/null 2>"$work/err" ||
        fail "the second run: $(cat "$work/err")"
    [ -f "$one" ] || fail "the second run as PID 1 removed the first run's flush file (left: $(ls -A "$work/d9"))"
    [ "$(cksum <"$one")" = "$sum" ] || fail "the second run as PID 1 replaced the first run's flush file"
    for f in $left; do
        [ -e "$work/d9/$f" ] || fail "the second run removed the first run's fresh temporary file $f"
        rm -f "$work/d9/$f"
    done
    [ "$(ls -A "$work/d9" | wc -l)" -eq 1 ] || fail "left after the second run: $(ls -A "$work/d9")"
    build/oomtrace-read "$one" >"$work/report" 2>&1 || fail "oomtrace-read on the flush file: $(cat "$work/report")"
    grep -q 'did not finish' "$work/report" || fail "a flush file does not read as unfinished"
else
    echo "snapshot_files: skipped item 9 (no PID namespace here)"
fi

# 11: no count cap, a byte budget of 40 KiB (a snapshot here is about 2 KiB): the files stop within it.
mkdir "$work/d11"
OOMTRACE_MAX_SNAPSHOTS=0 OOMTRACE_MAX_BYTES=40K traced "$work/d11" build/tests/hostile oomloop 200 ||
    fail "hostile oomloop with a byte budget: $(cat "$work/err")"
bytes=$(cat "$work"/d11/*.oomt | wc -c)
n=$(ls "$work/d11" | wc -l)
[ "$bytes" -le 40960 ] || fail "$n snapshots of $bytes bytes in all over a budget of 40960"
[ "$n" -ge 10 ] || fail "only $n snapshots within a budget of 40 KiB"
[ "$(grep -c 'snapshot budget of 40960 bytes (OOMTRACE_MAX_BYTES) reached; no more snapshots from this process' "$work/err")" -eq 1 ] ||
    fail "not one line for the byte budget: $(grep -v 'snapshot written' "$work/err")"
[ -z "$(ls -A "$work/d11" | grep -v '\.oomt$')" ] || fail "left beside the snapshots: $(ls -A "$work/d11" | grep -v '\.oomt$')"
# The count cap stays, and ends the same way.
mkdir "$work/d11c"
OOMTRACE_MAX_SNAPSHOTS=3 traced "$work/d11c" build/tests/hostile oomloop 20 || fail "hostile oomloop with a count cap"
[ "$(ls "$work/d11c" | wc -l)" -eq 3 ] || fail "count cap 3: $(ls "$work/d11c" | wc -l) snapshots"
[ "$(grep -c 'snapshot budget of 3 snapshots (OOMTRACE_MAX_SNAPSHOTS) reached; no more snapshots from this process' "$work/err")" -eq 1 ] ||
    fail "not one line for the count cap: $(grep -v 'snapshot written' "$work/err")"
# Walk 6, #29: the program's own dumps (one per epoch) spend the budget; the first out-of-memory snapshot and the
# exit one are written all the same, and the budget's line says so. Three dumps under a count cap of 2, then an
# out-of-memory, then a second one (within the cap's reach no more), then the exit.
cp tests/py/drv.py "$work/"
cat >"$work/dumps.py" <<'PY'
from drv import cuda, ctypes, dump
p = ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 64 << 20) == 0
for epoch in range(3):
    dump(b"end of epoch %d" % epoch)
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 4 << 30) == 2
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 4 << 30) == 2
PY
mkdir "$work/d29"
OOMTRACE_MAX_SNAPSHOTS=2 OOMTRACE_DUMP=oom,exit traced "$work/d29" python3 "$work/dumps.py" || fail "dumps.py: $(cat "$work/err")"
got=$(ls "$work/d29" | sed 's/.*-\([0-9]*-[a-z]*\)\.oomt$/\1/' | sort -n | tr '\n' ' ')
[ "$got" = "1-dump 2-dump 4-oom 6-exit " ] || fail "a count cap spent by dumps: $got"
[ "$(grep -c 'snapshot budget of 2 snapshots (OOMTRACE_MAX_SNAPSHOTS) reached; no more snapshots from this process, except its first out-of-memory one and its exit one$' "$work/err")" -eq 1 ] ||
    fail "the budget's line: $(grep -v 'snapshot written' "$work/err")"
# A byte budget too small for any file: the dumps are refused, the first out-of-memory and the exit written.
mkdir "$work/d29b"
OOMTRACE_MAX_BYTES=1K OOMTRACE_DUMP=oom,exit traced "$work/d29b" python3 "$work/dumps.py" || fail "dumps.py: $(cat "$work/err")"
got=$(ls "$work/d29b" | sed 's/.*-\([0-9]*-[a-z]*\)\.oomt$/\1/' | sort -n | tr '\n' ' ')
[ "$got" = "4-oom 6-exit " ] || fail "a byte budget spent: $got"
# Walk 7, #2: threads whose allocations fail at the same moment each publish their own snapshot. They shared
# one temporary name per process: one thread's leftover removal took another's file being written, a rename
# published a file under another snapshot's number, and the first out-of-memory snapshot could be lost.
mkdir "$work/d2"
OOMTRACE_MAX_SNAPSHOTS=0 traced "$work/d2" build/tests/hostile oomthreads 16 ||
    fail "hostile oomthreads 16: $(cat "$work/err")"
grep -q 'cannot write' "$work/err" && fail "a snapshot of threads failing together was lost: $(grep 'cannot write' "$work/err")"
for i in $(seq 1 16); do
    set -- "$work"/d2/oomtrace-*-"$i"-oom.oomt
    [ -f "$1" ] || fail "snapshot $i of 16 threads failing together was not published: $(ls -A "$work/d2")"
    seq=$(build/oomtrace-read --format json "$1" | sed -n 's/.*"snapshot_seq": *\([0-9]*\).*/\1/p')
    [ "$seq" = "$i" ] || fail "$(basename "$1") holds snapshot $seq"
done
# Walk 7, #34: the threads' names are in the snapshot (JSON threads was always empty).
set -- "$work"/d2/oomtrace-*-1-oom.oomt
build/oomtrace-read --format json "$1" | tr -d ' \n' | grep -q '"threads":\[{[^]]*"name":"worker-[0-9]*"' ||
    fail "the threads' names: $(build/oomtrace-read --format json "$1" | tr -d ' \n' | grep -o '"threads":\[[^]]*]')"
# ... and the text and HTML reports name the failing thread by it (walk 7, #34: "thread 25507").
build/oomtrace-read "$1" | grep -q '^  at .*, seq [0-9]*, thread [0-9]* (worker-[0-9]*)$' ||
    fail "the failed request's thread is not named: $(build/oomtrace-read "$1" | grep '^  at ')"
build/oomtrace-read --format html "$1" | grep -q ', thread [0-9]* (worker-[0-9]*))\.</p>' ||
    fail "HTML: the failed request's thread is not named"
[ -z "$(ls -A "$work/d2" | grep -v '\.oomt$')" ] || fail "left beside the snapshots: $(ls -A "$work/d2" | grep -v '\.oomt$')"
# Walk 7, #22: the reader reads what the tracer writes. Half a million live 2 KiB allocations make a 1.6 MB file
# (sequential addresses compress well) whose model takes ~90 MB: the budget of 32 x the file's size + 32 MiB
# refused it ("past the reader's memory budget"); it is 128 x now (model/snapshot.h).
mkdir "$work/d22"
traced "$work/d22" build/tests/hostile smallfill 2048 || fail "hostile smallfill 2048: $(cat "$work/err")"
set -- "$work"/d22/oomtrace-*-oom.oomt
build/oomtrace-read "$1" >"$work/report" 2>&1 || fail "the reader refused the tracer's own snapshot: $(tail -1 "$work/report")"
grep -q 'CUDA OUT OF MEMORY' "$work/report" || fail "no report of 512K live allocations: $(head -3 "$work/report")"
# Walk 7, #27: memory kept by a plugin that dlclose unloaded is blamed on the plugin, not on its caller: the
# snapshot keeps the unloaded library's record, so its frames still resolve (they read "(no module)"). Also when
# another library was unloaded first (only the first unloaded library's record was written).
for first in "" "$PWD/build/tests/libplugin_idle.so"; do
    rm -rf "$work/d27"
    mkdir "$work/d27"
    traced "$work/d27" build/tests/hostile dlclosed "$PWD/build/tests/libplugin_alloc.so" $first ||
        fail "hostile dlclosed $first: $(cat "$work/err")"
    set -- "$work"/d27/oomtrace-*-oom.oomt
    build/oomtrace-read --native "$1" >"$work/report" 2>&1 || fail "oomtrace-read: $(tail -1 "$work/report")"
    grep -q 'no module' "$work/report" &&
        fail "an unloaded plugin's frames read (no module), ${first:-no} library unloaded first: $(grep -m1 'no module' "$work/report")"
    grep -q 'held the memory' "$work/report" && sed -n '/held the memory/,/^$/p' "$work/report" | grep -q plugin_warm ||
        fail "the memory the unloaded plugin keeps is not named by it, ${first:-no} library unloaded first: $(sed -n '/held the memory/,/^$/p' "$work/report")"
done
# Walk 7, #11: a process whose directory was removed after its first allocation made it (the launcher's run
# directory under a process left running, a job's cleanup) makes it again when it writes, by the same rule:
# mode 0700, parents too, never through a symbolic link. The snapshot was lost ("No such file or directory").
cat >"$work/gone.py" <<'PY'
import os, shutil, sys
from drv import try_alloc, MiB
assert try_alloc(MiB)[0] == 0
shutil.rmtree(sys.argv[1])
if len(sys.argv) > 2:
    os.symlink(sys.argv[2], sys.argv[1])
assert try_alloc(4 << 30)[0] == 2
PY
cp tests/py/drv.py "$work/"
traced "$work/d11/run/sub" python3 "$work/gone.py" "$work/d11/run" || fail "gone.py: $(cat "$work/err")"
set -- "$work"/d11/run/sub/oomtrace-*-1-oom.oomt
[ -f "$1" ] || fail "no snapshot once the directory was removed: $(cat "$work/err")"
[ "$(stat -c %a "$work/d11/run") $(stat -c %a "$work/d11/run/sub")" = "700 700" ] ||
    fail "the directory made again: modes $(stat -c %a "$work/d11/run") $(stat -c %a "$work/d11/run/sub")"
traced "$work/d11b/sub" python3 "$work/gone.py" "$work/d11b/sub" "$work/d11b/elsewhere" ||
    fail "gone.py with a link: $(cat "$work/err")"
[ -e "$work/d11b/elsewhere" ] && fail "the directory was made through a symbolic link"
grep -q "^oomtrace: cannot write the out-of-memory snapshot to $work/d11b/sub: No such file or directory\$" "$work/err" ||
    fail "a directory gone for a link: $(cat "$work/err")"
# Walk 7, #7: a write that fails names the file it was to be (it named one without the snapshot's number).
mkdir "$work/d7"
(trap '' XFSZ && ulimit -f 2 && traced "$work/d7" build/tests/hostile oomloop 1)
grep -q "^oomtrace: cannot write snapshot $work/d7/oomtrace-[^/]*-[0-9]*-1-oom\.oomt: File too large; removed the partial file\$" "$work/err" ||
    fail "the failed write's line: $(cat "$work/err")"
echo "snapshot_files: ok"
