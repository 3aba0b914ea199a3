#!/bin/sh
# Walk 9, #10c: a call site in a multiprocessing worker is named by the user's line, never by multiprocessing's own
# frames or its start-up code: a spawned worker's outermost frame is `python -c "from multiprocessing.spawn import
# spawn_main; ..."` ("<string>:1 in <module>"), which is not the user's. Without a user's frame in the worker
# (the task is a library's function), the site reads "a multiprocessing worker → the library's line".
set -u
cd "$(dirname "$0")/../.."
fail() { echo "mp_userline: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-mpline.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lib/site-packages"
cp tests/py/drv.py "$work/"
cp tests/py/drv.py "$work/lib/site-packages/alloclib.py"
# The tasks hold their memory until the Pool's end (terminate() at the end of the `with` block), whose SIGTERM
# writes each worker's exit snapshot.
cat >"$work/lib/site-packages/holdlib.py" <<'PY'
import time
from alloclib import try_alloc
def hold(n):
    try_alloc(n)
    time.sleep(60)
PY
cat >"$work/pool.py" <<'PY'
import multiprocessing as mp, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "site-packages"))
import ctypes, holdlib
from drv import cuda, try_alloc, MiB
def mine(n):
    try_alloc(n)
    time.sleep(60)
def direct(n):
    p = ctypes.c_uint64()
    cuda.cuMemAlloc_v2(ctypes.byref(p), n)
    time.sleep(60)
if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    task = {"library": holdlib.hold, "mine": mine, "direct": direct}[sys.argv[2]]
    with ctx.Pool(1) as pool:
        pool.apply_async(task, (300 * MiB,))
        for _ in range(400):
            if any(f.endswith(".oomt") or f.startswith(".oomtrace-used") for f in os.listdir(os.environ["OOMTRACE_DIR"])):
                break
            time.sleep(0.05)
        time.sleep(0.5)
PY
# site CONTEXT TASK: the first site at the peak of the worker's exit snapshot (its report in $work/rep-CONTEXT-TASK)
site() {
    OOMTRACE_QUIET=1 LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G timeout 120 tools/oomtrace run \
        --dir "$work/d-$1-$2" -- /usr/bin/python3 "$work/pool.py" "$1" "$2" >"$work/out-$1-$2" 2>&1
    snap=$(ls "$work"/d-$1-$2/run-*/oomtrace-*-exit.oomt 2>/dev/null | head -1)
    [ -n "$snap" ] || { echo "no exit snapshot: $(grep '^oomtrace' "$work/out-$1-$2")"; return; }
    build/oomtrace-read --top 1 "$snap" >"$work/rep-$1-$2" 2>&1
    sed -n 's/^   1\. [^:]*: \(.*\) (stack [0-9]*)$/\1/p' "$work/rep-$1-$2" | head -1
}
got=$(site spawn library)
[ "$got" = "a multiprocessing worker → alloclib.py:17 in try_alloc" ] ||
    fail "spawn, a library's task: '$got': $(grep -A4 '^Top call sites at the peak' "$work/rep-spawn-library")"
# Nor in what held the memory, or in the Why: multiprocessing's start-up is nobody's line.
grep -v '^ *#' "$work/rep-spawn-library" | grep -q "<string>" &&
    fail "spawn: multiprocessing's start-up named as the user's line: $(grep -v '^ *#' "$work/rep-spawn-library" | grep '<string>' | head -3)"
got=$(site fork library)
[ "$got" = "pool.py:15 in <module> → alloclib.py:17 in try_alloc" ] || fail "fork, a library's task: '$got'"
got=$(site spawn mine)
[ "$got" = "drv.py:17 in try_alloc" ] || fail "spawn, the user's task: '$got'"
grep -q "called from pool.py:6 in mine" "$work/rep-spawn-mine" || fail "spawn, the user's task: $(grep -m1 'Most of the peak' "$work/rep-spawn-mine")"
# The task itself allocates: its caller is multiprocessing's worker loop (its pool.py, named as the user's file
# here), which says nothing of the user's code and is not named (walk 10, #15).
got=$(site spawn direct)
[ "$got" = "pool.py:10 in direct" ] || fail "spawn, the task allocates itself: '$got'"
grep -q "called from pool.py:[0-9]* in mapstar\|called from pool.py:[0-9]* in worker" "$work/rep-spawn-direct" &&
    fail "spawn, the task allocates itself: multiprocessing's frame named as its caller: $(grep -m1 'called from' "$work/rep-spawn-direct")"
echo "mp_userline: ok"
