#!/bin/sh
# The merged view of a run's directory (walk 7, #20 and #36): a row's peak is the process's largest over its
# snapshots (what a gate on the directory measures), the "then" lines are in the order the processes failed,
# at most 8 of them, and processes that report the same rank are said.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "merged_view: FAIL: $*"; exit 1; }
R=$PWD/build/oomtrace-read
for f in "$R" build/liboomtrace.so build/fake/libcuda.so.1; do
    [ -e "$f" ] || fail "$f is missing (make test-build)"
done
command -v python3 >/dev/null 2>&1 || { echo "merged_view: skipped, no python3"; exit 0; }
work=$(mktemp -d /tmp/oomtrace-merged.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp tests/py/drv.py "$work/"
cat >"$work/fail.py" <<'PY'
import sys
from drv import try_alloc
assert try_alloc(int(sys.argv[1]) << 20)[0] == 0
assert try_alloc(4096 << 20)[0] != 0
if len(sys.argv) > 2:  # a batch-size search: it goes on with less, and higher than at its failure
    assert try_alloc(int(sys.argv[2]) << 20)[0] == 0
PY
traced() { # traced RANK ARGS...
    r=$1
    shift
    env LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1 OOMTRACE_DIR="$work/run" \
        OOMTRACE_DUMP=oom,exit RANK="$r" WORLD_SIZE=12 LD_PRELOAD="$PWD/build/liboomtrace.so" python3 "$work/fail.py" "$@" \
        >>"$work/programs.log" 2>&1
}
# Ranks 9 down to 0 fail one after the other: the table is by rank, the "then" lines by time.
for r in 9 8 7 6 5 4 3 2 1 0; do
    traced "$r" $((10 + r)) || fail "rank $r: $(tail -3 "$work/programs.log")"
done
traced 3 33 || fail "the second rank 3"
traced 11 200 512 || fail "rank 11"
"$R" "$work/run" >"$work/out.txt" 2>&1 || fail "status $?: $(tail -3 "$work/out.txt")"
grep -q "^First failure: rank 9 " "$work/out.txt" || fail "first failure: $(grep -m1 'First failure' "$work/out.txt")"
then=$(grep "^  then " "$work/out.txt" | sed 's/^  then rank \([0-9]*\) .*/\1/' | paste -sd' ' -)
[ "$then" = "8 7 6 5 4 3 2 1" ] || fail "the then lines are not in time order, or not 8: $then"
grep -q "^  and 3 more processes failed after them\$" "$work/out.txt" || fail "no line for the rest: $(grep '^  and' "$work/out.txt")"
grep -q "^2 processes report rank 3 (pid [0-9]*, [0-9]*): snapshots of more than one job in this directory, or RANK set alike for several processes\.\$" "$work/out.txt" ||
    fail "two processes with rank 3 are not said"
grep -q "^  11 .* 712 MiB  *200 MiB  *yes " "$work/out.txt" ||
    fail "rank 11's peak is not its largest: $(grep '^  11 ' "$work/out.txt")"
"$R" --format json "$work/run" | python3 -c '
import json, sys
r = json.load(sys.stdin)
x = [p for p in r["ranks"] if p["rank"] == 11][0]
assert x["peak_bytes"] == 712 << 20 and x["max_peak_bytes"] == 712 << 20 and x["at_failure_bytes"] == 200 << 20, x
assert r["imbalance"]["max_peak_bytes"] == 712 << 20, r["imbalance"]
' || fail "JSON: rank 11's peak"

# Walk 8, #15: no imbalance between processes that are not ranks of one job (a parent and the child it runs, with
# other command lines), nor between equal peaks.
mkdir "$work/norank" "$work/equal"
for args in 300 "64 200"; do
    env LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1 OOMTRACE_DIR="$work/norank" \
        OOMTRACE_DUMP=oom,exit LD_PRELOAD="$PWD/build/liboomtrace.so" python3 "$work/fail.py" $args >/dev/null 2>&1
done
for r in 0 1; do
    env LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1 OOMTRACE_DIR="$work/equal" \
        OOMTRACE_DUMP=oom,exit RANK=$r LD_PRELOAD="$PWD/build/liboomtrace.so" python3 "$work/fail.py" 100 >/dev/null 2>&1
done
for d in norank equal; do
    "$R" "$work/$d" >"$work/$d.txt" 2>&1 || fail "$d: status $?"
    grep -q "Imbalance" "$work/$d.txt" && fail "$d: $(grep Imbalance "$work/$d.txt")"
    "$R" --format json "$work/$d" | python3 -c 'import json,sys; assert json.load(sys.stdin)["imbalance"] is None' ||
        fail "$d: an imbalance object in JSON"
done

# Walk 8, #20: a program restarted as PID 1 on one host name and volume (a container after its OOM) is a process
# per run, told apart by when its tracer started, not one process with the older run's failure as "its first".
if unshare -p -f --mount-proc true 2>/dev/null; then
    for i in 1 2; do
        unshare -p -f --mount-proc env LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1 \
            OOMTRACE_DIR="$work/pid1" OOMTRACE_DUMP=oom,exit LD_PRELOAD="$PWD/build/liboomtrace.so" \
            python3 "$work/fail.py" $((100 * i)) >/dev/null 2>&1
    done
    "$R" "$work/pid1" >"$work/pid1.txt" 2>&1 || fail "pid 1 twice: status $?"
    host=$(hostname)
    grep -q "^oomtrace-read: run in .*: 4 snapshot files, 4 readable, 2 processes\$" "$work/pid1.txt" &&
        grep -q "^2 processes were pid 1 on $host, started [0-9-]* [0-9:.]* UTC (oomtrace-[^ ]*-1-oom\.oomt), [0-9-]* [0-9:.]* UTC (oomtrace-[^ ]*-1-oom\.1\.oomt): a program restarted with the same pid (a container's PID 1 on one host name and volume), each run a process of its own\.\$" "$work/pid1.txt" ||
        fail "pid 1 twice: $(head -12 "$work/pid1.txt")"
else
    echo "merged_view: no PID namespace here (unshare -p): the case of a process restarted as PID 1 is skipped"
fi
# helper-91 #2: the first failure of a run whose processes failed in PyTorch's own pool names who refused in
# the report's words ("PyTorch's allocator"), as the single snapshot's report does, not the format's name.
mkdir -p "$work/fw"
cp tests/h200/ut_gpt2_batch.oomt tests/h200/fw_fraction.oomt "$work/fw/"
for fmt in text markdown html; do
    "$R" --format $fmt "$work/fw" >"$work/fw.out" 2>&1
    grep -q "by PyTorch's allocator on device 0" "$work/fw.out" && ! grep -q framework_allocator "$work/fw.out" ||
        fail "the first failure in PyTorch's pool ($fmt): $(grep -i 'first failure' "$work/fw.out" | head -2)"
done
echo "merged_view: ok"
