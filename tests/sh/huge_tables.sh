#!/bin/sh
# The tracer's tables on 2 MiB pages once hot (lib/common/tables.h): a Python thread that makes 300 allocations has
# its walker (2 MiB) and its merged stacks (6 MiB) moved, as does the live set (2 MiB) at the process's 256th event;
# a thread that makes 10 keeps 4 KiB pages, one that makes 300 too has its own moved; OOMTRACE_HUGE_PAGES=0 moves nothing. Read from the process's own
# /proc/self/smaps: the VMAs flagged hg (MADV_HUGEPAGE), summed, less the untraced process's.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "huge_tables: FAIL: $*"; exit 1; }
[ -d /sys/kernel/mm/transparent_hugepage ] || { echo "huge_tables: no transparent huge pages in this kernel: skipped"; exit 0; }
work=$(mktemp -d /tmp/oomtrace-huge.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp tests/py/drv.py "$work/"
cat >"$work/prog.py" <<'PY'
import sys
import threading
from drv import try_alloc, free


def allocate(n, depth=8):
    if depth:
        return allocate(n, depth - 1)
    for _ in range(n):
        status, addr = try_alloc(1 << 20)
        assert status == 0, status
        free(addr)


def hg_kib():
    total, flags_hg, size = 0, False, 0
    for line in open("/proc/self/smaps"):
        head = line.split()
        if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            size = (hi - lo) // 1024
        elif head[0] == "VmFlags:" and "hg" in head[1:]:
            total += size
    return total


hot, other = (int(x) for x in sys.argv[1:3])
done, measured = threading.Event(), threading.Event()


def thread():
    allocate(other)
    done.set()
    measured.wait()  # alive while measured: a thread's tables go with it


t = threading.Thread(target=thread)
t.start()
done.wait()
allocate(hot)
print(hg_kib())
measured.set()
t.join()
PY
run() { # run [VAR=VALUE...] python3 prog.py HOT OTHER: prints the KiB of the process's VMAs flagged hg
    env LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1T OOMTRACE_DUMP=none OOMTRACE_FRAMEWORKS=0 "$@" 2>"$work/err"
}
base=$(run python3 "$work/prog.py" 300 10) || fail "untraced: $(cat "$work/err")"
on=$(run LD_PRELOAD="$PWD/build/liboomtrace.so" python3 "$work/prog.py" 300 10) || fail "traced: $(cat "$work/err")"
off=$(run LD_PRELOAD="$PWD/build/liboomtrace.so" OOMTRACE_HUGE_PAGES=0 python3 "$work/prog.py" 300 10) ||
    fail "traced, OOMTRACE_HUGE_PAGES=0: $(cat "$work/err")"
# the hot thread's 2 + 6 MiB and the live set's 2; the thread that made 10 allocations moved nothing
[ $((on - base)) -eq 10240 ] || fail "flagged hg: $((on - base)) KiB more than untraced, want 10240 (2 + 6 + 2 MiB)"
[ "$off" -eq "$base" ] || fail "OOMTRACE_HUGE_PAGES=0: flagged hg: $((off - base)) KiB more than untraced, want 0"
# Two hot threads: both threads' tables.
two=$(run LD_PRELOAD="$PWD/build/liboomtrace.so" python3 "$work/prog.py" 300 300) || fail "traced, two hot threads: $(cat "$work/err")"
[ $((two - base)) -eq 18432 ] || fail "two hot threads: flagged hg: $((two - base)) KiB more than untraced, want 18432"
echo "huge_tables: ok (flagged hg, KiB more than untraced: one hot thread $((on - base)), two $((two - base)), off $((off - base)))"
