#!/bin/sh
# make install into a scratch prefix (a fresh virtual environment, so that its python is the one whose path
# the install must reach), then the installed launcher: it finds the library beside itself, passes the
# command's exit status through, writes the exit snapshot into a fresh directory per run, checks its gate
# before the command runs, and fails (1) only when a gate fails or cannot be checked.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "launcher: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-launch.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
python3 -m venv --without-pip "$prefix" || fail "python3 -m venv"
make -s install PREFIX="$prefix" PYTHON="$prefix/bin/python" >"$work/install.out" 2>&1 ||
    fail "make install: $(tail -3 "$work/install.out")"
for f in bin/oomtrace bin/oomtrace-read lib/liboomtrace.so include/oomtrace.h share/man/man1/oomtrace.1 \
    share/man/man1/oomtrace-read.1 lib/oomtrace/oomtrace-supervise lib/oomtrace/oomtrace-report.sh share/doc/oomtrace/README.md \
    share/doc/oomtrace/JSON.md share/doc/oomtrace/FORMATS.md share/doc/oomtrace/FORMAT.md; do
    [ -e "$prefix/$f" ] || fail "install is missing $f"
done
# import oomtrace works with the prefix's python as it is, and python -m oomtrace reaches the launcher.
"$prefix/bin/python" -c 'import oomtrace; oomtrace.mark("x"); oomtrace.dump()' 2>"$work/import.err" ||
    fail "import oomtrace after make install: $(tail -1 "$work/import.err")"
"$prefix/bin/python" -m oomtrace --help 2>&1 | head -1 | grep -q '^usage: oomtrace run' || fail "python -m oomtrace --help"
# The installed manual lists every variable of the README's options table.
for v in $(sed -n 's/^| `\(OOMTRACE_[A-Z_]*\)`.*/\1/p' README.md); do
    grep -q "^\.B $v\$" "$prefix/share/man/man1/oomtrace.1" || fail "the installed oomtrace(1) does not list $v"
done
[ -n "$(sed -n 's/^| `\(OOMTRACE_[A-Z_]*\)`.*/\1/p' README.md)" ] || fail "no variables found in README.md"

export LD_LIBRARY_PATH="$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1
unset OOMTRACE_DIR OOMTRACE_DUMP
run() { "$prefix/bin/oomtrace" run "$@"; }
door=$PWD/build/tests/door_linked

# The command's own status comes back (door_linked exits 0 after its out-of-memory scenario).
run --dir "$work/a" -- "$door" >"$work/a.out" 2>&1
[ $? -eq 0 ] || fail "status of a passing command"
grep -q "Failed request: 700 MiB" "$work/a.out" || fail "no report printed"
grep -q "could not" "$work/a.out" && fail "a good snapshot reported as unreadable: $(grep 'could not' "$work/a.out")"
[ "$(ls "$work"/a/run-*/ | grep -c -- '-exit.oomt')" -eq 1 ] || fail "no exit snapshot in the run's directory"

# The command's standard output stays the command's (a command whose output is data, `> preds.jsonl` or
# `| jq`): the report, like the launcher's other lines, goes to standard error.
"$door" >"$work/so-untraced.out" 2>/dev/null
run --dir "$work/so" --max-peak 1G -- "$door" >"$work/so.out" 2>"$work/so.err"
[ $? -eq 0 ] || fail "status of the run whose outputs are split"
cmp -s "$work/so.out" "$work/so-untraced.out" ||
    fail "the command's standard output is not what it is untraced: $(diff "$work/so-untraced.out" "$work/so.out" | head -5)"
grep -q "Failed request: 700 MiB" "$work/so.err" || fail "the report is not on standard error"

# The command sees the signal dispositions and mask it would see untraced.
want=$(sh -c 'grep -E "^Sig(Ign|Blk|Cgt):" /proc/self/status')
got=$(run --dir "$work/sig" -- sh -c 'grep -E "^Sig(Ign|Blk|Cgt):" /proc/self/status' 2>/dev/null)
[ "$got" = "$want" ] || fail "the command's signals differ under the launcher: $got; untraced: $want"

# Waits until the command whose pid is in $work/cmd.pid has exec'd its sleep (the point where a signal to the
# launcher must reach it); $1 names the case in the failure.
wait_for_sleep() {
    n=0
    while [ ! -s "$work/cmd.pid" ] || ! grep -q "^sleep" "/proc/$(cat "$work/cmd.pid")/cmdline" 2>/dev/null; do
        n=$((n + 1))
        [ "$n" -lt 200 ] || fail "$1: the command did not start"
        sleep 0.05
    done
}

# A signal sent to the launcher's process id alone (a supervisor, a job script's kill PID, a CI cancel) is
# passed on to the command; the launcher waits for it to end, then reports what it wrote, with its status.
# The command allocates (door_linked, which writes its exit snapshot), then waits in sleep.
for s in TERM:15 HUP:1; do
    num=${s#*:} s=${s%:*}
    rm -f "$work/cmd.pid"
    "$prefix/bin/oomtrace" run --dir "$work/sig$s" -- sh -c 'echo $$ >"$0"; "$1"; exec sleep 30' "$work/cmd.pid" "$door" \
        >"$work/sig.out" 2>&1 &
    launcher=$!
    wait_for_sleep "SIG$s"
    kill -s "$s" "$launcher"
    wait "$launcher"
    rc=$?
    cmd=$(cat "$work/cmd.pid")
    [ -d "/proc/$cmd" ] && { kill "$cmd"; fail "SIG$s to the launcher left the command running"; }
    [ "$rc" -eq $((128 + num)) ] || fail "SIG$s: status $rc, want the command's $((128 + num))"
    grep -q "^oomtrace: SIG$s passed on to sh; its report follows when it ends\$" "$work/sig.out" ||
        fail "SIG$s: not said: $(head -3 "$work/sig.out")"
    grep -q "Failed request: 700 MiB" "$work/sig.out" || fail "SIG$s: no report after the command ended: $(tail -3 "$work/sig.out")"
done

# Walk 10, #2: the launcher is found as it was started. Its command line reads "oomtrace run -- CMD ..." (not
# oomtrace-supervise's internal arguments), pgrep -f "oomtrace run" finds it, and its witness (oomtrace-watch)
# does not match: a pkill -f of the launcher's line passes the signal on to the command, once.
rm -f "$work/cmd.pid"
tag=29.$$ # a sleep no other test's launcher runs
"$prefix/bin/oomtrace" run --dir "$work/pg" -- sh -c 'echo $$ >"$0"; exec sleep "$1"' "$work/cmd.pid" "$tag" \
    >"$work/pg.out" 2>&1 &
launcher=$!
wait_for_sleep "pgrep"
args=$(ps -o args= -p "$launcher")
case $args in
"oomtrace run -- sh -c "*" $work/cmd.pid $tag") ;;
*) kill "$launcher"; fail "the launcher's command line is '$args', not 'oomtrace run -- sh -c …'" ;;
esac
pgrep -f "oomtrace run" | grep -qx "$launcher" || { kill "$launcher"; fail "pgrep -f 'oomtrace run' does not find the launcher"; }
[ "$(pgrep -f "oomtrace run -- sh -c .* $tag\$" | tr '\n' ' ')" = "$launcher " ] ||
    { kill "$launcher"; fail "pgrep -f finds more than the launcher: $(pgrep -af "$tag")"; }
[ "$(pgrep -x -P "$launcher" oomtrace-watch | wc -l)" -eq 1 ] || { kill "$launcher"; fail "no witness beside the launcher"; }
pkill -TERM -f "oomtrace run -- sh -c .* $tag\$"
wait "$launcher"
rc=$?
[ "$rc" -eq 143 ] || fail "pkill -f of the launcher: status $rc, want the command's 143"
[ "$(grep -c "^oomtrace: SIGTERM passed on to sh" "$work/pg.out")" -eq 1 ] ||
    fail "pkill -f of the launcher: the signal was not passed on once: $(head -3 "$work/pg.out")"

# A SIGKILL to the launcher cannot be passed on: the command gets SIGTERM (its parent-death signal) rather
# than running on orphaned with its device memory held.
rm -f "$work/cmd.pid"
"$prefix/bin/oomtrace" run --dir "$work/sigKILL" -- sh -c 'echo $$ >"$0"; exec sleep 30' "$work/cmd.pid" >/dev/null 2>&1 &
launcher=$!
wait_for_sleep SIGKILL
kill -s KILL "$launcher"
wait "$launcher"
cmd=$(cat "$work/cmd.pid")
n=0
while [ -d "/proc/$cmd" ] && ! grep -q '^State:.*Z' "/proc/$cmd/status" 2>/dev/null; do
    n=$((n + 1))
    [ "$n" -lt 100 ] || { kill "$cmd"; fail "SIGKILL to the launcher left the command running, orphaned"; }
    sleep 0.05
done

# A second run into the same directory reads only its own snapshots, from a fresh directory.
run --dir "$work/a" -- "$door" >"$work/a2.out" 2>&1
[ $? -eq 0 ] || fail "status of the second run"
[ "$(ls -d "$work"/a/run-* | wc -l)" -eq 2 ] || fail "two runs did not make two run directories"
grep -q "== oomtrace: 2 snapshots from 1 process" "$work/a2.out" ||
    fail "the second run mixed in the first: $(grep '== oomtrace' "$work/a2.out")"
[ "$(stat -c %a "$(ls -d "$work"/a/run-* | head -1)")" = 700 ] || fail "the run directory is not 0700"
# --dir, with its missing parents, is made 0700 as the library makes a missing OOMTRACE_DIR.
run --dir "$work/new/sub" -- "$door" >/dev/null 2>&1
for d in "$work/new" "$work/new/sub"; do
    [ "$(stat -c %a "$d")" = 700 ] || fail "--dir made $d with mode $(stat -c %a "$d"), not 0700"
done

# OOMTRACE_DIR is where runs go when --dir is not given.
OOMTRACE_DIR=$work/env run -- "$door" >/dev/null 2>&1
ls "$work"/env/run-*/oomtrace-*-exit.oomt >/dev/null 2>&1 || fail "OOMTRACE_DIR was ignored"

# --summary FILE: a CI job summary, appended: the run's directory, then the report as markdown. A FILE that
# cannot be written is refused before the command runs.
printf 'earlier step\n' >"$work/summary.md"
run --dir "$work/s" --summary "$work/summary.md" -- "$door" >/dev/null 2>&1
[ $? -eq 0 ] || fail "--summary: status"
[ "$(head -1 "$work/summary.md")" = "earlier step" ] || fail "--summary did not append"
grep -q "^\`oomtrace run\`: the snapshots are in \`$work/s/run-[^\`]*\`\$" "$work/summary.md" ||
    fail "--summary does not name the run directory: $(head -5 "$work/summary.md")"
grep -q "^## oomtrace: " "$work/summary.md" && grep -q "Failed request:\*\* 700 MiB" "$work/summary.md" ||
    fail "--summary holds no markdown report: $(head -8 "$work/summary.md")"
run --dir "$work/s2" --summary "$work/nodir/x.md" -- touch "$work/summary-ran" >"$work/sbad.out" 2>&1
[ $? -eq 2 ] && [ ! -e "$work/summary-ran" ] && [ "$(wc -l <"$work/sbad.out")" -eq 1 ] &&
    grep -q "^oomtrace: cannot write --summary $work/nodir/x.md: No such file or directory ($work/nodir does not exist); touch was not run\$" "$work/sbad.out" ||
    fail "an unwritable --summary: $(cat "$work/sbad.out")"

# A failing command keeps its status.
run --dir "$work/b" -- sh -c 'exit 3' >/dev/null 2>&1
[ $? -eq 3 ] || fail "status of a failing command"

# The gate: a peak of 512 MiB passes 1G and fails 256M; both forms of an option's value work.
run --dir "$work/c" --max-peak 1G -- "$door" >"$work/c.out" 2>&1
[ $? -eq 0 ] || fail "gate that should pass"
# A CI log shows that a passing gate ran, in one line with its numbers.
[ "$(grep -c 'gate --max-peak' "$work/c.out")" -eq 1 ] &&
    grep -q "^oomtrace: gate --max-peak passed: peak 512 MiB (536870912 bytes) on device 0 in $work/c/run-.*\.oomt is within 1.00 GiB (1073741824 bytes)\$" "$work/c.out" ||
    fail "a passing gate did not say one line: $(grep 'gate' "$work/c.out")"
run --dir "$work/d" --max-peak=256M -- "$door" >"$work/d.out" 2>&1
[ $? -eq 1 ] || fail "gate that should fail"
grep -q "^oomtrace: gate --max-peak failed: peak 512 MiB" "$work/d.out" ||
    fail "the failed gate's line does not name the launcher: $(grep 'max-peak' "$work/d.out")"
base=$(ls "$work"/c/run-*/*-exit.oomt)
run --dir "$work/e" --baseline="$base" --max-growth=5 -- "$door" >"$work/e.out" 2>&1
[ $? -eq 0 ] || fail "a growth gate against the same program's baseline"
grep -q "^oomtrace: gate --max-growth passed: peak 512 MiB (536870912 bytes) in .* is 0% above the baseline's 512 MiB (536870912 bytes) in $base, within 5%\$" "$work/e.out" ||
    fail "a passing growth gate did not say so: $(grep 'gate' "$work/e.out")"
# A baseline typed as a relative path is named the way the new snapshot is: by its full path.
wabs=$(cd "$work" && pwd -P)
(cd "$work" && run --dir e2 --baseline="c/${base#"$work"/c/}" --max-growth=5 -- "$door") >"$work/e2.out" 2>&1 ||
    fail "a growth gate against a relative baseline: $(cat "$work/e2.out")"
grep -q "^oomtrace: gate --max-growth passed: peak 512 MiB (536870912 bytes) in $wabs/e2/run-[^ ]*\.oomt is 0% above the baseline's 512 MiB (536870912 bytes) in $wabs/c/run-[^ ]*-exit\.oomt, within 5%\$" "$work/e2.out" ||
    fail "a relative baseline's path is not given as the new snapshot's: $(grep 'gate' "$work/e2.out")"

# Walk 6, #27: the gate measures each process's largest peak over all its snapshots, as oomtrace-read DIR does,
# not the snapshot the report shows. A batch-size search: 200 MiB kept, a 2 GiB request fails (the report shows
# that failure, peak 200 MiB then), 512 MiB fits, and the process exits with a peak of 712 MiB.
cp tests/py/drv.py "$work/"
cat >"$work/bsfind.py" <<'PY'
from drv import cuda, ctypes
w, act = ctypes.c_uint64(), ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(w), 200 << 20) == 0
assert cuda.cuMemAlloc_v2(ctypes.byref(act), 2048 << 20) != 0
assert cuda.cuMemAlloc_v2(ctypes.byref(act), 512 << 20) == 0
PY
run --dir "$work/bs" --max-peak 500M --summary "$work/bs.md" -- python3 "$work/bsfind.py" >"$work/bs.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -q "^oomtrace: gate --max-peak failed: peak 712 MiB (746586112 bytes) on device 0 in $work/bs/run-[^ ]*-exit\.oomt exceeds 500 MiB" "$work/bs.out" ||
    fail "a process that recovered from an out-of-memory and went higher: status $rc: $(grep 'gate' "$work/bs.out")"
grep -q "Failed request: 2.00 GiB" "$work/bs.out" || fail "the report is not of the first failure"
grep -q "^== oomtrace: the process went on after its out-of-memory and exited 0 (its exit snapshot: oomtrace-[^ ]*-exit\.oomt); the report below is of the first failure\$" "$work/bs.out" ||
    fail "the process's going on after its failure is not said: $(grep '^==' "$work/bs.out")"
run --dir "$work/bs" --baseline "$base" --max-growth 5 -- python3 "$work/bsfind.py" >"$work/bs.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -q "^oomtrace: gate --max-growth failed: peak 712 MiB .* is 39.1% above the baseline's 512 MiB" "$work/bs.out" ||
    fail "a growth gate on a process that recovered: status $rc: $(grep 'gate' "$work/bs.out")"
# Walk 6, #8: the CI summary gives each gate's line, near the top; and the line saying why no snapshot was
# written when there is none.
sed -n 1,6p "$work/bs.md" | grep -q "^\*\*gate --max-peak failed:\*\* peak 712 MiB (746586112 bytes) on device 0 in .* exceeds 500 MiB" ||
    fail "the summary does not give the gate's result: $(head -6 "$work/bs.md")"
run --dir "$work/bs" --max-peak 1G --summary "$work/none.md" -- true >/dev/null 2>&1
grep -q "^\`oomtrace run\`: no snapshot was written: .*; the gate could not be checked, so it fails\$" "$work/none.md" ||
    fail "the summary of a run without a snapshot: $(cat "$work/none.md")"

# ... and a process that did not go on (status 1 after its failure) is not said to have.
run --dir "$work/bs" -- sh -c '"$0" || exit 1; exit 1' "$door" >"$work/bs1.out" 2>&1
grep -q "went on after" "$work/bs1.out" && fail "a command that failed is said to have gone on"
# Walk 7, #37: ... nor a program that a script ran and that exited 1, when the script exits 0: the status is the
# script's, not the program's.
cat >"$work/oom1.py" <<'PY'
import sys
from drv import try_alloc
assert try_alloc(64 << 20)[0] == 0
assert try_alloc(4096 << 20)[0] != 0
sys.exit(1)
PY
run --dir "$work/bs" -- sh -c 'python3 "$0"; exit 0' "$work/oom1.py" >"$work/bs2.out" 2>&1
grep -q "went on after" "$work/bs2.out" && fail "a program that a script ran is said to have exited 0: $(grep '^==' "$work/bs2.out")"

# Walk 7, #9: a failed gate whose peak is in another snapshot than the one reported shows that snapshot's call
# sites at the peak; the summary carries the line said before the report.
grep -q "^== oomtrace: the gate's peak is in oomtrace-[^ ]*-exit\.oomt, not in the snapshot reported above; its call sites at the peak:\$" "$work/bs.out" ||
    fail "a failed gate does not show what made its peak: $(grep '^==' "$work/bs.out")"
grep -q "^Top call sites at the peak of device 0: 712 MiB" "$work/bs.out" || fail "no call sites at the gate's peak"
# ... only those: the other snapshot's own Why and What to try would stand beside the reported one's (run 36).
[ "$(sed -n "/^== oomtrace: the gate's peak is in/,\$p" "$work/bs.out" | grep -c '^Why\|^What to try\|^Failed request')" -eq 0 ] ||
    fail "the gate's snapshot is shown whole: $(sed -n "/^== oomtrace: the gate's peak is in/,\$p" "$work/bs.out" | head -12)"
# Run 36: a torch OOM writes the driver's snapshot first, then the framework's (reported); both carry the same
# peak, and the gate naming the first is not a second snapshot to show.
run --dir "$work/fw" --max-peak 1M -- python3 tests/py/companion_workload.py torch >"$work/fw.out" 2>&1
grep -q "^oomtrace: gate --max-peak failed: peak 16.0 MiB" "$work/fw.out" && grep -q "OUT OF MEMORY in a framework's allocator" "$work/fw.out" ||
    fail "the torch program's gate or report: $(grep 'gate\|OUT OF' "$work/fw.out")"
grep -q "the gate's peak is in" "$work/fw.out" && fail "the same peak shown again: $(grep -A3 "the gate's peak is in" "$work/fw.out")"
grep -q "^\`oomtrace run\`: the process went on after its out-of-memory and exited 0" "$work/bs.md" ||
    fail "the summary does not say the process went on: $(head -8 "$work/bs.md")"

# Walk 6, #34: an oomtrace run inside the command: the outer one says where the inner one's snapshots are, and
# its gate reads them there.
run --dir "$work/no" --max-peak 100M --summary "$work/nest.md" -- "$prefix/bin/oomtrace" run --dir "$work/ni" -- "$door" \
    >"$work/nest.out" 2>&1
rc=$?
inner=$(ls -d "$work"/ni/run-*)
[ "$rc" -eq 1 ] && grep -q "^== oomtrace: the snapshots were written by an inner oomtrace run, into $inner (the reports above); the gate reads them there\$" "$work/nest.out" &&
    grep -q "^oomtrace: gate --max-peak failed: peak 512 MiB .* in $inner/" "$work/nest.out" ||
    fail "oomtrace run inside oomtrace run: status $rc: $(grep '^oomtrace\|^==' "$work/nest.out")"
grep -q "^\*\*gate --max-peak failed:\*\*" "$work/nest.md" || fail "the nested run's summary: $(cat "$work/nest.md")"
grep -q "no snapshot was written" "$work/nest.out" && fail "the outer run says no snapshot was written"
run --dir "$work/no" -- "$prefix/bin/oomtrace" run --dir "$work/ni2" -- "$door" >"$work/nest.out" 2>&1 || fail "nested run: status"
grep -q "^oomtrace: no snapshot was written: an inner oomtrace run wrote them, into $work/ni2/run-" "$work/nest.out" ||
    fail "oomtrace run inside oomtrace run, no gate: $(grep '^oomtrace\|^==' "$work/nest.out")"

# Walk 7, #37 and #5: the outer gate reads its own directory and every inner run's: a script that runs one program
# directly (64 MiB) and one through an inner oomtrace run (512 MiB) fails a 300M gate; one that runs two inner
# runs is measured over both, not "could not be checked".
cat >"$work/small.py" <<'PY'
from drv import try_alloc
assert try_alloc(64 << 20)[0] == 0
PY
run --dir "$work/om" --max-peak 300M -- sh -c 'python3 "$0"; "$1" run --dir "$2" -- "$3"' "$work/small.py" \
    "$prefix/bin/oomtrace" "$work/om-inner" "$door" >"$work/om.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -q "^oomtrace: gate --max-peak passed: peak 64.0 MiB .* in $work/om/run-" "$work/om.out" &&
    grep -q "^oomtrace: gate --max-peak failed: peak 512 MiB .* in $work/om-inner/run-" "$work/om.out" ||
    fail "a gate over a direct program and an inner run: status $rc: $(grep '^oomtrace\|^==' "$work/om.out")"
run --dir "$work/o2" --max-peak 1G -- sh -c '"$0" run --dir "$1" -- "$2" && "$0" run --dir "$1" -- python3 "$3"' \
    "$prefix/bin/oomtrace" "$work/o2-inner" "$door" "$work/small.py" >"$work/o2.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] && [ "$(grep -c "^oomtrace: gate --max-peak passed: .* in $work/o2-inner/run-" "$work/o2.out")" -eq 2 ] &&
    grep -q "^== oomtrace: the snapshots were written by 2 inner oomtrace runs, into $work/o2-inner/run-[^ ]* and $work/o2-inner/run-[^ ]* (the reports above)" "$work/o2.out" ||
    fail "a gate over two inner runs: status $rc: $(grep '^oomtrace\|^==' "$work/o2.out")"

# Walk 7, #8: a run directory whose name is not text in the locale: the out-of-memory is reported, not the exit
# snapshot, and grep says nothing of binary files.
bad=$(printf "$work/bad\377\376dir")
LC_ALL=C.UTF-8 run --dir "$bad" -- "$door" >"$work/bad.out" 2>&1
grep -q "binary file" "$work/bad.out" && fail "non-UTF-8 run directory: $(grep 'binary file' "$work/bad.out")"
grep -q "Failed request: 700 MiB" "$work/bad.out" || fail "non-UTF-8 run directory: the out-of-memory is not reported"

# Walk 7, #19: a launcher and library under a path with a space (a venv in "My Projects"): LD_PRELOAD splits at
# spaces, so the library is preloaded through a link, and the command is traced.
cp -R "$prefix" "$work/my tools"
"$work/my tools/bin/oomtrace" run --dir "$work/sp" -- "$door" >"$work/sp.out" 2>&1
grep -q "cannot be preloaded" "$work/sp.out" && fail "a library path with a space: $(grep -m1 'preloaded' "$work/sp.out")"
grep -q "Failed request: 700 MiB" "$work/sp.out" || fail "a library path with a space: not traced: $(tail -2 "$work/sp.out")"
ls -d "${TMPDIR:-/tmp}"/oomtrace-lib.* 2>/dev/null | grep -q . && fail "the library's link is left behind: $(ls -d "${TMPDIR:-/tmp}"/oomtrace-lib.*)"

# Walk 7, #11: a process that the command leaves running in the background keeps its run directory, and its
# snapshot arrives there; the launcher says so instead of "allocated no GPU memory".
cat >"$work/sleeper.py" <<'PY'
import time
from drv import try_alloc
assert try_alloc(300 << 20)[0] == 0
time.sleep(1.5)
PY
run --dir "$work/bg" -- sh -c 'python3 "$0" >/dev/null 2>&1 &' "$work/sleeper.py" >"$work/bg.out" 2>&1
grep -q "allocated no GPU memory" "$work/bg.out" && fail "a background process: $(cat "$work/bg.out")"
grep -Eq "^oomtrace: no snapshot was written yet: (a process of the run still running \(pid [0-9]+\) may write its own|the run's processes still running \(pids [0-9 ]+\) may write theirs) into $work/bg/run-" "$work/bg.out" ||
    fail "a background process still running is not said: $(cat "$work/bg.out")"
n=0
until ls "$work"/bg/run-*/oomtrace-*-exit.oomt >/dev/null 2>&1; do
    n=$((n + 1))
    [ "$n" -lt 200 ] || break
    sleep 0.05
done
ls "$work"/bg/run-*/oomtrace-*-exit.oomt >/dev/null 2>&1 || fail "the background process's exit snapshot is lost: $(ls -R "$work/bg")"

# Walk 7, #25: OOMTRACE_DISABLE as the library reads it (yes, true, on): the closing line names it.
OOMTRACE_DISABLE=yes run --dir "$work/dis" -- "$door" >"$work/dis.out" 2>&1
grep -q "^oomtrace: no snapshot was written: OOMTRACE_DISABLE=yes is set, so nothing was traced\$" "$work/dis.out" ||
    fail "OOMTRACE_DISABLE=yes: $(tail -1 "$work/dis.out")"

# Walk 7, #7: a full file system: the closing line says so, not that the command allocated nothing (where a
# small tmpfs can be mounted: root).
mkdir "$work/tiny"
if mount -t tmpfs -o size=16k tmpfs "$work/tiny" 2>/dev/null; then
    dd if=/dev/zero of="$work/tiny/fill" bs=1k count=64 2>/dev/null
    run --dir "$work/tiny" -- "$door" >"$work/tiny.out" 2>&1
    umount "$work/tiny"
    grep -q "^oomtrace: no snapshot was written: the file system of $work/tiny is full ([0-9]* KiB free), so the library could not write them" "$work/tiny.out" ||
        fail "a full file system: $(tail -1 "$work/tiny.out")"
fi

# Walk 7, #14: a --dir that is a symbolic link to nothing says so, not "File exists".
ln -s "$work/nowhere/sub" "$work/dangle"
run --dir "$work/dangle" -- touch "$work/dangle-ran" >"$work/dangle.out" 2>&1
[ $? -eq 2 ] && [ ! -e "$work/dangle-ran" ] &&
    grep -q "^oomtrace: cannot create a run directory in $work/dangle: it is a symbolic link to $work/nowhere/sub, which does not exist (not created through a link); touch was not run" "$work/dangle.out" ||
    fail "a dangling symbolic link as --dir: $(cat "$work/dangle.out")"

# Walk 7, #28: with OOMTRACE_DUMP=crash, CMD killed by SIGKILL: the launcher says what it saw before the flush's
# report, which alone cannot tell a kill from a process still running.
cat >"$work/k9.py" <<'PY'
import os, signal, time
from drv import try_alloc
assert try_alloc(64 << 20)[0] == 0
time.sleep(0.4)
os.kill(os.getpid(), signal.SIGKILL)
PY
OOMTRACE_DUMP=crash OOMTRACE_FLUSH_MS=50 run --dir "$work/k9" -- python3 "$work/k9.py" >"$work/k9.out" 2>&1
grep -q "^== oomtrace: python3 was killed by SIGKILL (the kernel's out-of-memory killer sends it: see dmesg); the report below is its last flush\$" "$work/k9.out" ||
    fail "CMD killed by SIGKILL with a flush file: $(grep '^==\|^oomtrace' "$work/k9.out")"

# Walk 6, #30: "first" and "last" are by the snapshot's number, not by its name (-10- sorts before -9-). A dump
# (#1), an out-of-memory of 3 GiB (#2), seven dumps, an out-of-memory of 5 GiB (#10), the exit (#11): the report
# is #2's. Ten dumps and the exit (#11): the report is the exit's.
cat >"$work/order.py" <<'PY'
import sys
from drv import cuda, ctypes, dump
p = ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 1 << 20) == 0
ooms = sys.argv[1] == "ooms"
dump(b"one")
if ooms:
    cuda.cuMemAlloc_v2(ctypes.byref(p), 3 << 30)
for i in range(7 if ooms else 9):
    dump(b"d%d" % i)
if ooms:
    cuda.cuMemAlloc_v2(ctypes.byref(p), 5 << 30)
PY
run --dir "$work/or" -- python3 "$work/order.py" ooms >"$work/or.out" 2>&1 || fail "order.py ooms: $(tail -3 "$work/or.out")"
grep -q "== oomtrace: 11 snapshots from 1 process" "$work/or.out" && grep -q "Failed request: 3.00 GiB" "$work/or.out" ||
    fail "the first out-of-memory of eleven snapshots is not #2's: $(grep 'Failed request\|^==' "$work/or.out")"
run --dir "$work/or" -- python3 "$work/order.py" dumps >"$work/or.out" 2>&1 || fail "order.py dumps: $(tail -3 "$work/or.out")"
grep -q "^oomtrace: snapshot at process exit" "$work/or.out" ||
    fail "the last of eleven snapshots is not the exit's: $(grep -m2 '^oomtrace:\|reason:' "$work/or.out")"

# Bad gates: usage error (2), one line, and the command never runs.
bad_gate() { # bad_gate WHAT ARGS...: the gate ARGS must be refused before the command starts
    what=$1
    shift
    rm -f "$work/ran"
    run --dir "$work/bad" "$@" -- touch "$work/ran" >"$work/bad.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "$what: exit status $rc, want 2"
    [ -e "$work/ran" ] && fail "$what: the command ran"
    [ "$(wc -l <"$work/bad.out")" -eq 1 ] || fail "$what: not one line: $(cat "$work/bad.out")"
    # every refusal said alike: what was wrong, and that the command did not run
    grep -q "^oomtrace: bad gate, touch was not run: " "$work/bad.out" || fail "$what: said otherwise: $(cat "$work/bad.out")"
}
bad_gate "a missing baseline" --baseline /nonexistent.oomt --max-growth 5
bad_gate "an unreadable baseline" --baseline "$work/a.out" --max-growth 5
bad_gate "a malformed size" --max-peak lots
bad_gate "a fraction of a byte (meant as 1.5G)" --max-peak 1.5
bad_gate "a malformed growth" --baseline "$base" --max-growth much
bad_gate "growth without a baseline" --max-growth 5
bad_gate "a baseline without growth" --baseline "$base"
bad_gate "an empty size" --max-peak=
bad_gate "an empty growth" --baseline "$base" --max-growth=
[ -e "$work/bad" ] && fail "a bad gate created the run directory"

# A run directory that cannot be made: one line with the reason, saying the command was not run, status 2.
# DIR under a regular file (its own mkdir fails), and a DIR that exists where no directory can be made.
no_rundir() { # no_rundir DIR REASON_PATTERN
    rm -f "$work/ran"
    run --dir "$1" --max-peak 1G -- touch "$work/ran" >"$work/nodir.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "--dir $1: exit status $rc, want 2"
    [ -e "$work/ran" ] && fail "--dir $1: the command ran"
    [ "$(wc -l <"$work/nodir.out")" -eq 1 ] &&
        grep -q "^oomtrace: cannot create a run directory in $1: $2; touch was not run (--dir or OOMTRACE_DIR picks another)\$" "$work/nodir.out" ||
        fail "--dir $1: $(cat "$work/nodir.out")"
}
: >"$work/plain"
no_rundir "$work/plain/sub" "Not a directory"
no_rundir "$work/plain" "Not a directory" # walk 6, #20: not "File exists", which reads as an earlier run's name
[ -d /sys/kernel ] && no_rundir /sys/kernel "[A-Z][A-Za-z -]*"

# Walk 6, #6: a forgotten value does not take the next option: --dir -- CMD ran with its snapshots in $HOME.
for opt in --dir --summary --baseline --max-peak; do
    rm -f "$work/ran"
    (cd "$work" && HOME=$work/home run "$opt" -- touch "$work/ran") >"$work/nov.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] && [ ! -e "$work/ran" ] && [ ! -e "$work/home" ] && [ "$(wc -l <"$work/nov.out")" -eq 1 ] &&
        grep -q "^oomtrace: $opt needs a value, got the option '--'" "$work/nov.out" ||
        fail "$opt -- CMD: status $rc: $(cat "$work/nov.out")"
done
# A DIR named like an option, given after '=', is a directory of that name.
(cd "$work" && run --dir=-x -- "$door") >/dev/null 2>&1 || fail "--dir=-x: status"
ls "$work"/-x/run-*/oomtrace-*-exit.oomt >/dev/null 2>&1 || fail "--dir=-x did not put the run in ./-x"

# Walk 6, #14: a command that cannot be executed: the shell's 126 and one line, no line about snapshots.
for c in /etc/passwd "$work"; do
    run --dir "$work/nx" -- "$c" >"$work/nx.out" 2>&1
    rc=$?
    [ "$rc" -eq 126 ] && [ "$(wc -l <"$work/nx.out")" -eq 1 ] && grep -q "^oomtrace: $c: \(Permission denied\|Is a directory\)\$" "$work/nx.out" ||
        fail "a command that cannot be executed ($c): status $rc: $(cat "$work/nx.out")"
done

# Walk 6, #19: an OOMTRACE_DUMP the library would drop whole (and the exit snapshot with it) is refused before the
# command runs, as a bad gate is; the valid forms run.
for v in garbage oom,none exit,bogus; do
    rm -f "$work/ran"
    OOMTRACE_DUMP=$v run --dir "$work/dv" -- touch "$work/ran" >"$work/dv.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] && [ ! -e "$work/ran" ] && [ "$(wc -l <"$work/dv.out")" -eq 1 ] &&
        grep -q "^oomtrace: invalid OOMTRACE_DUMP=\"$v\": it takes oom, exit, crash (a comma list) or none alone; touch was not run\$" "$work/dv.out" ||
        fail "OOMTRACE_DUMP=$v: status $rc: $(cat "$work/dv.out")"
done
for v in oom crash oom:crash "oom exit" ""; do
    OOMTRACE_DUMP=$v run --dir "$work/dv" -- "$door" >"$work/dv.out" 2>&1 || fail "OOMTRACE_DUMP='$v': $(tail -2 "$work/dv.out")"
done

# Walk 6, #15: --version names the version, the library and the reader.
"$prefix/bin/oomtrace" --version >"$work/v.out" 2>&1 || fail "oomtrace --version: status"
grep -q "^oomtrace [0-9][0-9.]* (the launcher, " "$work/v.out" && grep -q "^library: $prefix/lib/liboomtrace.so\$" "$work/v.out" &&
    grep -q "^reader: oomtrace-read [0-9]" "$work/v.out" || fail "oomtrace --version: $(cat "$work/v.out")"

# A gate with nothing to check (no snapshot) fails instead of passing.
run --dir "$work/f" --max-peak 1G -- true >"$work/f.out" 2>&1
[ $? -eq 1 ] || fail "a gate with no snapshot did not fail"
[ "$(wc -l <"$work/f.out")" -eq 1 ] && grep -q "^oomtrace: no snapshot was written.*the gate could not be checked, so it fails\$" "$work/f.out" ||
    fail "a gate with no snapshot: not one line: $(cat "$work/f.out")"

# Walk 6, #32: a process that ends by _exit (os._exit) after allocating runs no exit handlers and leaves no
# exit snapshot: the line does not say that it allocated nothing.
cat >"$work/uexit.py" <<'PY'
import os
from drv import cuda, ctypes
p = ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 300 << 20) == 0
if os.environ.get("OOMTRACE_FLUSH_MS"):
    import time
    time.sleep(0.5)  # a worker that ran a while: its crash-surviving file was written
os._exit(0)
PY
run --dir "$work/ux" --max-peak 100M -- python3 "$work/uexit.py" >"$work/ux.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -q "^oomtrace: no snapshot was written: .*ended without an exit snapshot: by _exit or os._exit (no exit handlers run), or killed by a signal (SIGTERM from multiprocessing's Pool or a supervisor).*; the gate could not be checked, so it fails\$" "$work/ux.out" ||
    fail "a process that ended by os._exit: status $rc: $(cat "$work/ux.out")"
OOMTRACE_DUMP=crash OOMTRACE_FLUSH_MS=50 run --dir "$work/ux" --max-peak 100M -- python3 "$work/uexit.py" >"$work/ux.out" 2>&1
[ $? -eq 1 ] && grep -q "^oomtrace: gate --max-peak failed: peak 300 MiB" "$work/ux.out" ||
    fail "OOMTRACE_DUMP=crash does not keep the state of a process that ended by os._exit: $(tail -3 "$work/ux.out")"

# No snapshot from a command that did allocate: the line says why, never that it allocated nothing. Killed by a
# signal before its exit snapshot (here SIGKILL, after 64 MiB); the same under a shell, which exits 128+N; and
# snapshots turned off with OOMTRACE_DUMP=none.
cat >"$work/killed.py" <<'PY'
import os, signal
from drv import cuda, ctypes
p = ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 64 << 20) == 0
os.kill(os.getpid(), signal.SIGKILL)
PY
run --dir "$work/k" -- python3 "$work/killed.py" >"$work/k.out" 2>&1
rc=$?
[ "$rc" -eq 137 ] && [ "$(wc -l <"$work/k.out")" -eq 1 ] &&
    grep -q "^oomtrace: no snapshot was written: python3 was killed by SIGKILL before its exit snapshot; OOMTRACE_DUMP=crash keeps one for a crashing process\$" "$work/k.out" ||
    fail "a command killed after allocating: status $rc: $(cat "$work/k.out")"
run --dir "$work/k" -- sh -c 'python3 "$0"' "$work/killed.py" >"$work/k.out" 2>&1
rc=$?
[ "$rc" -eq 137 ] && [ "$(grep -c oomtrace "$work/k.out")" -eq 1 ] &&
    grep -q "^oomtrace: no snapshot was written: sh exited with status 137, as a shell does for a command killed by SIGKILL; OOMTRACE_DUMP=crash keeps a snapshot of a crashing process\$" "$work/k.out" ||
    fail "a shell whose command was killed: status $rc: $(cat "$work/k.out")"
OOMTRACE_DUMP=none run --dir "$work/k" --max-peak 1G -- "$door" >"$work/k.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$work/k.out")" -eq 1 ] &&
    grep -q "^oomtrace: no snapshot was written: OOMTRACE_DUMP=none is set, which turns them off; the gate could not be checked, so it fails\$" "$work/k.out" ||
    fail "OOMTRACE_DUMP=none: status $rc: $(cat "$work/k.out")"

# A framework's own out-of-memory (the fatal one) is reported before the driver-level ones of the same process
# that came before it (its retries and probes), and the launcher says how many there were; a driver-level one
# after it is no probe of it. The command only copies snapgen's snapshots into the run's directory, whose path
# holds a space.
src=$work/fwsrc
mkdir -p "$src"
for i in 1 2 3; do
    build/snapgen --seed "$i" --events 200 -o "$src/oomtrace-snapgen-host-4242-$i-oom.oomt" || fail "snapgen $i"
done
build/snapgen --seed 10 --events 3000 -o "$src/oomtrace-snapgen-host-4242-10-oom.oomt" || fail "snapgen 10"
build/snapgen --trigger framework-oom --framework torch --probes 3 --events 300 \
    -o "$src/oomtrace-snapgen-host-4242-4-framework-oom.oomt" || fail "snapgen framework-oom"
run --dir "$work/fw dir" -- sh -c 'cp "$0"/*.oomt "$OOMTRACE_DIR"/' "$src" >"$work/fw.out" 2>&1
grep -q "== oomtrace: 5 snapshots from 1 process" "$work/fw.out" ||
    fail "a framework out-of-memory counted as another process: $(grep '== oomtrace' "$work/fw.out")"
grep -q "== oomtrace: the framework's out-of-memory (the fatal one) is reported; 3 driver-level snapshots before it were the framework's retries and probes" "$work/fw.out" ||
    fail "the probes before the fatal snapshot are not said: $(grep '== oomtrace' "$work/fw.out")"
grep -q "OUT OF MEMORY in a framework's allocator (the fatal one)" "$work/fw.out" ||
    fail "the report is not the fatal snapshot's: $(grep -m1 'OUT OF MEMORY' "$work/fw.out")"
# The reader's directory view keeps the fatal snapshot for the process and says the same, from the snapshot's
# own list of probes; without that list, from the process's driver-level ones of the seconds before it.
build/oomtrace-read "$src" >"$work/fwdir.out" 2>&1 || fail "oomtrace-read DIR: $(tail -1 "$work/fwdir.out")"
grep -q "^Report of the first process to fail, rank 3 (oomtrace-snapgen-host-4242-4-framework-oom.oomt)" "$work/fwdir.out" ||
    fail "the directory view does not report the fatal snapshot: $(grep '^Report' "$work/fwdir.out")"
grep -q "^  the framework's own out-of-memory, the fatal one; 3 driver-level snapshots before it were the framework's retries and probes\$" "$work/fwdir.out" ||
    fail "the directory view does not count the probes: $(grep 'fatal one' "$work/fwdir.out")"
build/oomtrace-read --format json "$src" | grep -q '"probes_before": 3' || fail "no probes_before in the JSON run view"
build/snapgen --trigger framework-oom --framework torch --no-probes --events 300 \
    -o "$src/oomtrace-snapgen-host-4242-4-framework-oom.oomt" || fail "snapgen --no-probes"
build/oomtrace-read "$src" >"$work/fwdir2.out" 2>&1 || fail "oomtrace-read DIR: $(tail -1 "$work/fwdir2.out")"
grep -q "fatal one; 3 driver-level snapshots before it were the framework's retries and probes (this process's out-of-memory snapshots of the seconds before it)" "$work/fwdir2.out" ||
    fail "without its list, the probes are not counted from the process's snapshots: $(grep 'fatal one' "$work/fwdir2.out")"

# A process killed after an out-of-memory leaves its crash-surviving file (named by its run id, not by a
# sequence number) beside its snapshot: one process, and its out-of-memory snapshot is the one reported.
src=$work/flushsrc
mkdir -p "$src"
build/snapgen --seed 3 --events 200 -o "$src/oomtrace-snapgen-host-4243-rank1-2-oom.oomt" || fail "snapgen oom"
build/snapgen --seed 4 --events 200 -o "$src/oomtrace-snapgen-host-4243-rank1-r18ed1cca00690fec785903d1-flush.oomt" ||
    fail "snapgen flush"
run --dir "$work/flush" -- sh -c 'cp "$0"/*.oomt "$OOMTRACE_DIR"/' "$src" >"$work/flush.out" 2>&1
grep -q "== oomtrace: 2 snapshots from 1 process" "$work/flush.out" ||
    fail "a crash-surviving file counted as another process: $(grep '== oomtrace' "$work/flush.out")"
grep -q "^Report of the first process to fail" "$work/flush.out" &&
    fail "one process's files reported as a merged view of several"

# A process killed while writing a snapshot leaves its hidden temporary file: the launcher removes it once
# the command is over and says so; a live process's stays.
host=$(hostname | tr '/ ' '__')
dead=$(sh -c 'echo $$')
run --dir "$work/cut" -- sh -c ': >"$OOMTRACE_DIR/.oomtrace-$1-$2-oom.oomt.tmp-r1"; : >"$OOMTRACE_DIR/.oomtrace-$1-$3-oom.oomt.tmp-r1"; exec "$4"' \
    sh "$host" "$dead" "$$" "$door" >"$work/cut.out" 2>&1 || fail "the run that leaves temporary files"
grep -q "== oomtrace: 1 snapshot cut off while being written (the process died); its unfinished file is removed" "$work/cut.out" ||
    fail "the cut-off snapshot is not said: $(grep '== oomtrace' "$work/cut.out")"
[ -e "$(ls -d "$work"/cut/run-*)/.oomtrace-$host-$dead-oom.oomt.tmp-r1" ] && fail "a dead process's temporary file stays"
[ -e "$(ls -d "$work"/cut/run-*)/.oomtrace-$host-$$-oom.oomt.tmp-r1" ] || fail "a live process's temporary file was removed"

# Usage: --help prints the usage on stdout (status 0), no arguments print it on stderr (status 2); neither
# shows the script's own lines.
"$prefix/bin/oomtrace" --help >"$work/help.out" 2>&1
[ $? -eq 0 ] || fail "--help status"
"$prefix/bin/oomtrace" >"$work/none.out" 2>&1
[ $? -eq 2 ] || fail "no-argument status"
# --help lists every variable of the README's options table: the wheel installs neither the README nor the
# manual, and --help is what its user has.
for v in $(sed -n 's/^| `\(OOMTRACE_[A-Z_]*\)`.*/\1/p' README.md); do
    grep -q "^  $v " "$work/help.out" || fail "oomtrace --help does not list $v"
done
for f in help none; do
    head -1 "$work/$f.out" | grep -q '^usage: oomtrace run ' || fail "$f: no usage line: $(head -1 "$work/$f.out")"
    grep -q 'set -u\|me=\|\$(' "$work/$f.out" && fail "$f: prints the script: $(grep -m1 'set -u\|me=' "$work/$f.out")"
done
"$prefix/bin/oomtrace" bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "usage error status"

# A command that does not exist: the shell's 127 and one line of ours (not the script's line number), and no run
# directory; a command that never used the GPU leaves no empty run directory behind.
mkdir -p "$work/nocmd"
"$prefix/bin/oomtrace" run --dir "$work/nocmd" -- "$work/no-such-command" >"$work/nocmd.out" 2>&1
rc=$?
[ "$rc" -eq 127 ] || fail "missing command: status $rc, not 127"
[ "$(wc -l <"$work/nocmd.out")" -eq 1 ] && grep -q "^oomtrace: $work/no-such-command: command not found\$" "$work/nocmd.out" ||
    fail "missing command: $(cat "$work/nocmd.out")"
"$prefix/bin/oomtrace" run --dir "$work/nocmd" -- true >/dev/null 2>&1 || fail "true: not status 0"
[ -z "$(ls -A "$work/nocmd")" ] || fail "runs that wrote nothing left: $(ls -A "$work/nocmd")"
echo "launcher: ok"
