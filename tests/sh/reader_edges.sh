#!/bin/sh
# The reader's smaller edges (issue 13, items 7 and 15): memviz refuses a terminal; --diff with one file says
# what is missing; one process is no imbalance; a ring whose chunks are not compressed yet does not read as
# empty; a growth percentage as people write it; an unknown NVML reads once as unknown.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "reader_edges: FAIL: $*"; exit 1; }
READER=${READER:-$PWD/build/oomtrace-read}
work=$(mktemp -d /tmp/oomtrace-edges.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The stand-in driver without the stand-in NVML beside it, so that NVML is not found.
mkdir "$work/drv" "$work/snaps"
ln -s "$PWD/build/fake/libcuda.so.1" "$work/drv/libcuda.so.1"
(cd "$work/snaps" && LD_LIBRARY_PATH="$work/drv" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1 OOMTRACE_DUMP=oom,exit \
    LD_PRELOAD="$OLDPWD/build/liboomtrace.so" "$OLDPWD/build/tests/door_linked") >/dev/null 2>&1 || fail "door_linked"
oom=$(ls "$work"/snaps/*-oom.oomt | head -1)
exitsnap=$(ls "$work"/snaps/*-exit.oomt | head -1)
[ -f "$oom" ] && [ -f "$exitsnap" ] || fail "no snapshots from door_linked"

# 7: memviz on a terminal is refused with one line; to a pipe it is written.
if command -v script >/dev/null 2>&1; then
    script -qec "$READER --format memviz $oom; echo rc=\$?" /dev/null >"$work/tty.out" 2>&1
    grep -q 'rc=2' "$work/tty.out" || fail "memviz to a terminal: $(head -c 300 "$work/tty.out")"
    grep -q 'give -o FILE' "$work/tty.out" || fail "memviz to a terminal: no line saying what to do"
else
    echo "reader_edges: note: no script(1), the terminal case is not checked"
fi
"$READER" --format memviz "$oom" | head -c 2 | od -An -tx1 | grep -q '80' || fail "memviz to a pipe is not a pickle"

# 15: --diff with one file names what is missing.
"$READER" --diff "$oom" >/dev/null 2>"$work/diff.err"
[ $? -eq 2 ] || fail "--diff with one file: status"
grep -q -- "--diff .* needs the new snapshot" "$work/diff.err" || fail "--diff with one file: $(cat "$work/diff.err")"
# Walk 6, #11: --diff with three files counts what --diff was given, not "got 2 files".
"$READER" --diff "$oom" "$oom" "$oom" >/dev/null 2>"$work/diff3.err"
[ $? -eq 2 ] || fail "--diff with three files: status"
grep -qx -- "oomtrace-read: --diff takes BASE and NEW, got 3 snapshots (usage: oomtrace-read --diff BASE NEW)" "$work/diff3.err" ||
    fail "--diff with three files: $(cat "$work/diff3.err")"

# A directory that `oomtrace run --dir D` wrote into holds run-* directories, no snapshot: the line names
# them and the latest, for the `--dir D` user who reads D; the gate's baseline says the same.
mkdir -p "$work/runs/run-20261201T100000Z-1" "$work/runs/run-20261201T110000Z-2" "$work/runs/other"
cp "$oom" "$work/runs/run-20261201T110000Z-2/"
"$READER" "$work/runs" >/dev/null 2>"$work/runs.err"
[ $? -eq 2 ] || fail "directory of run directories: status"
grep -q "holds 2 run directories of oomtrace run: read one, e.g. the latest, $work/runs/run-20261201T110000Z-2\$" \
    "$work/runs.err" || fail "directory of run directories: $(cat "$work/runs.err")"
[ "$(wc -l <"$work/runs.err")" -eq 1 ] || fail "directory of run directories: more than one line"
grep -q "no \*.oomt snapshot in the directory itself (its subdirectories are not read), which holds" "$work/runs.err" ||
    fail "directory of run directories: the line does not say why: $(cat "$work/runs.err")"
# Walk 10, #20: the docs say what a directory means (its own files, not its subdirectories) and what reading
# a directory of run directories does (exit 2, one line naming the latest).
"$READER" --help | tr '\n' ' ' | grep -q "DIR's own files, not its subdirectories. A DIR that oomtrace run --dir filled holds run-\* directories, one per run, and no snapshot of its own: it is refused (exit 2) with one line" ||
    fail "--help does not say what a directory of run directories does"
grep -q "Only the directory's own files are read, not its subdirectories" docs/man/oomtrace-read.1 ||
    fail "the man page does not say what a directory of run directories does"
grep -q "^A directory is read whole, its own \`\*.oomt\` files only, not its subdirectories." README.md ||
    fail "README does not say what a directory of run directories does"
"$READER" --baseline "$work/runs" --max-growth 5 "$oom" >/dev/null 2>"$work/runs_gate.err"
[ $? -eq 2 ] || fail "baseline directory of run directories: status"
grep -q "holds 2 run directories" "$work/runs_gate.err" || fail "baseline: $(cat "$work/runs_gate.err")"
"$READER" "$work/runs/other" 2>&1 | grep -q 'no \*.oomt snapshot in the directory$' || fail "empty directory line"
# folded and memviz read one snapshot: a run directory is refused in one line that names a file in it.
"$READER" --format folded "$work/runs/run-20261201T110000Z-2" >/dev/null 2>"$work/folded_dir.err"
[ $? -eq 2 ] && [ "$(wc -l <"$work/folded_dir.err")" -eq 1 ] &&
    grep -q "^oomtrace-read: --format folded reads one snapshot, not a directory: give one of its files, e.g. $work/runs/run-20261201T110000Z-2/.*\.oomt (its largest peak)\$" "$work/folded_dir.err" ||
    fail "folded of a run directory: $(cat "$work/folded_dir.err")"
# --diff takes directories (each side its largest peak), and names the run directories of D as the others do.
"$READER" --diff "$work/runs" "$oom" >/dev/null 2>"$work/runs_diff.err"
[ $? -eq 2 ] && [ "$(wc -l <"$work/runs_diff.err")" -eq 1 ] && grep -q "holds 2 run directories" "$work/runs_diff.err" ||
    fail "--diff of a directory of run directories: $(cat "$work/runs_diff.err")"
"$READER" --diff "$work/runs/run-20261201T110000Z-2" "$work/runs/run-20261201T110000Z-2" >"$work/dirdiff.txt" 2>&1 ||
    fail "--diff of two run directories: $(tail -1 "$work/dirdiff.txt")"
grep -q "(picked from $work/runs/run-20261201T110000Z-2: its only snapshot)" "$work/dirdiff.txt" ||
    fail "--diff of two run directories does not say what it picked: $(head -4 "$work/dirdiff.txt")"

# 15: one process (two snapshots, no rank) is no imbalance: no line naming one pid as both ends.
"$READER" "$work/snaps" >"$work/dir.txt" 2>&1 || fail "directory report"
grep -q 'Imbalance' "$work/dir.txt" && fail "one process shown as an imbalance: $(grep Imbalance "$work/dir.txt")"
"$READER" --format json "$work/snaps" | python3 -c 'import json,sys; assert json.load(sys.stdin)["imbalance"] is None' ||
    fail "JSON: one process has an imbalance object"

# 15: the ring of a small run has no compressed chunk yet: said so, not "0 B of 64.0 MiB".
"$READER" "$oom" >"$work/oom.txt" 2>&1 || fail "text report"
grep -q 'ring 0 B of' "$work/oom.txt" && fail "the ring reads as empty: $(grep 'ring 0 B' "$work/oom.txt")"
grep -q 'no chunk compressed yet (the kept events are in the chunk being filled)' "$work/oom.txt" || fail "no ring wording"

# 15: NVML not found: "unknown" once, with the reason.
grep -q 'other processes: unknown (libnvidia-ml.so.1 not found)$' "$work/oom.txt" ||
    fail "other processes: $(grep 'other processes' "$work/oom.txt")"
# ... said with the devices, before the host's pinned memory (it followed that line, away from its device).
sed -n '/^Devices/,/^Host pinned memory/p' "$work/oom.txt" | grep -q 'other processes: unknown' ||
    fail "the unknown other processes are not said among the devices: $(grep -n 'other processes\|^Host pinned' "$work/oom.txt")"

# 15: the growth percentage of a gate: tests/e2e/test_readmodes.c (test_gate_eval).
# Walk 6, #35: -o naming the snapshot being read (or another snapshot) is refused, exit 2, one line, and the
# snapshot is left whole; -o onto a plain file still writes the report.
cp "$oom" "$work/self.oomt"
cp "$oom" "$work/other.oomt"
sum=$(cksum <"$oom")
for out in self other; do
    "$READER" -o "$work/$out.oomt" "$work/self.oomt" >"$work/o.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] && [ "$(wc -l <"$work/o.out")" -eq 1 ] && grep -q "^oomtrace-read: -o $work/$out.oomt is " "$work/o.out" ||
        fail "-o onto $out.oomt: status $rc: $(head -c 300 "$work/o.out")"
    [ "$(cksum <"$work/$out.oomt")" = "$sum" ] || fail "-o onto $out.oomt changed the snapshot"
done
"$READER" --format html -o "$work/self.oomt" "$work/snaps" >/dev/null 2>&1 && fail "-o onto a snapshot, reading its directory"
"$READER" -o "$work/report.txt" "$work/self.oomt" >/dev/null 2>&1 && grep -q "OUT OF MEMORY" "$work/report.txt" ||
    fail "-o onto a plain file"
"$READER" -o "$work/report.txt" "$work/self.oomt" >/dev/null 2>&1 || fail "-o onto an earlier report"
# Walk 7, #22: a snapshot over the memory budget is refused with one line that says so in the user's words and
# names --max-memory, which sets the budget: the tracer's own snapshot of half a million live 2 KiB allocations
# (read by default: snapshot_files.sh) against --max-memory 20M, then 1G; and a kilobyte bomb (a live set that
# claims a gigabyte) against the default.
mkdir "$work/many"
LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR="$work/many" OOMTRACE_QUIET=1 \
    LD_PRELOAD="$PWD/build/liboomtrace.so" build/tests/hostile smallfill 2048 >/dev/null 2>&1 || fail "hostile smallfill"
many=$(ls "$work"/many/*-oom.oomt)
"$READER" --max-memory 20M "$many" >/dev/null 2>"$work/many.err"
rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$work/many.err")" -eq 1 ] &&
    grep -q ": the snapshot needs more memory than the reader allows for it: its 524288 records would pass 20971520 bytes (--max-memory); in the live set[a-z ]*, at byte [0-9]* of the file$" "$work/many.err" &&
    ! grep -q "PEAK_REF\|section [0-9]" "$work/many.err" ||
    fail "half a million live allocations under --max-memory 20M: exit $rc, $(cat "$work/many.err")"
"$READER" --max-memory 1G "$many" >"$work/many.txt" 2>"$work/many.err" && grep -q "CUDA OUT OF MEMORY" "$work/many.txt" ||
    fail "--max-memory 1G does not read it: $(cat "$work/many.err")"
"$READER" --max-memory 0 "$many" >/dev/null 2>&1 && fail "--max-memory 0 accepted"
build/snapgen --live 100 --events 1000 -o "$work/base.oomt" >/dev/null 2>&1 && build/bombs live-seq "$work/bomb.oomt" "$work/base.oomt" ||
    fail "bombs live-seq"
"$READER" "$work/bomb.oomt" 2>&1 >/dev/null | grep -q ": the snapshot needs more memory than the reader allows for it: a part that decompresses to [0-9]* bytes would pass [0-9]* bytes (128 x the file's size + 32 MiB; --max-memory SIZE raises it); in [a-zA-Z ']*, at byte [0-9]* of the file$" ||
    fail "the bomb's line: $("$READER" "$work/bomb.oomt" 2>&1 >/dev/null)"
# Walk 7, #6: an option where --diff's BASE goes is said as such, not counted as a snapshot ("got 4 snapshots").
"$READER" --diff --format markdown "$oom" "$exitsnap" >/dev/null 2>"$work/diff.err"
rc=$?
[ "$rc" -eq 2 ] && [ "$(cat "$work/diff.err")" = "oomtrace-read: --diff takes BASE right after it, got the option '--format' (usage: oomtrace-read [OPTIONS] --diff BASE NEW)" ] ||
    fail "--diff --format markdown A B: exit $rc, $(cat "$work/diff.err")"
"$READER" --format markdown --diff "$oom" "$exitsnap" >/dev/null 2>&1 || fail "--format markdown --diff A B"
echo "reader_edges: ok"

