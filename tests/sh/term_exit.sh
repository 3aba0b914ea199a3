#!/bin/sh
# SIGTERM at its default writes the exit snapshot first (walk 7, #33): multiprocessing's Pool ends its workers
# with SIGTERM at the end of a `with` block (torchrun and Slurm stop ranks the same way), and such a process
# wrote no snapshot: the launcher said the command allocated nothing. With exit snapshots asked for
# (OOMTRACE_DUMP=oom,exit, as the launcher sets), the process still dies by SIGTERM (status 143, or
# WTERMSIG for its parent), its exit snapshot written first, reason "ended by SIGTERM". A program that sets
# its own SIGTERM handler keeps it and reads SIG_DFL before; one that inherited SIGTERM ignored keeps ignoring
# it; without exit snapshots nothing changes.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "term_exit: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-term.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp tests/py/drv.py "$work/"
n=0
traced() { # traced DUMP CMD...: a fresh directory $work/dN, stdout in $work/out, the status in $st
    n=$((n + 1))
    mkdir "$work/d$n"
    dump=$1
    shift
    LD_LIBRARY_PATH="$PWD/build/fake" OOMTRACE_DIR="$work/d$n" OOMTRACE_DUMP=$dump FAKECUDA_CAPACITY=1G \
        LD_PRELOAD="$PWD/build/liboomtrace.so" timeout 30 "$@" >"$work/out" 2>"$work/err"
    st=$?
}
# reasons: each exit snapshot's reason and live bytes in MiB, one line each, sorted
reasons() {
    for f in "$work/d$n"/*-exit.oomt; do
        [ -f "$f" ] || continue
        build/oomtrace-read --format json "$f" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
print("%s %d" % (j["reason"], j["live"]["bytes"] >> 20))'
    done | sort
}

cat >"$work/term.py" <<'PY'
import os, signal, time
from drv import try_alloc, MiB
assert try_alloc(300 * MiB)[0] == 0
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(5)
print("not reached")
PY
traced oom,exit /usr/bin/python3 "$work/term.py"
[ "$st" -eq 143 ] && [ ! -s "$work/out" ] || fail "SIGTERM at its default: status $st (want 143), $(cat "$work/out" "$work/err")"
[ "$(reasons)" = "ended by SIGTERM 300" ] || fail "SIGTERM's exit snapshot: $(reasons); $(cat "$work/err")"
traced oom /usr/bin/python3 "$work/term.py"
[ "$st" -eq 143 ] && [ -z "$(ls "$work/d$n")" ] || fail "SIGTERM without exit snapshots: status $st, $(ls "$work/d$n")"

# Pool(3) ends its workers by SIGTERM: each worker that allocated leaves its exit snapshot, 900 MiB in all.
# The workers are still inside their task when the `with` block ends (they wait for the parent, which has
# heard from all three), so terminate() reaches each one: an idle worker could instead read the pool's
# end-of-work sentinel and exit on its own first, whose snapshot says "exit".
cat >"$work/pool.py" <<'PY'
import multiprocessing as mp, time
from drv import try_alloc, MiB
def init(q):
    global told
    told = q
def work(i):
    told.put(try_alloc(300 * MiB)[0])
    time.sleep(60)
if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with ctx.Pool(3, initializer=init, initargs=(q,)) as pool:
        for i in range(3):
            pool.apply_async(work, (i,))
        print(sorted(q.get(timeout=20) for _ in range(3)))
PY
traced oom,exit /usr/bin/python3 "$work/pool.py"
[ "$st" -eq 0 ] && [ "$(cat "$work/out")" = "[0, 0, 0]" ] || fail "pool.py: status $st, $(cat "$work/out" "$work/err")"
total=$(reasons | awk '$1 == "ended" { s += $4 } END { print s + 0 }')
[ "$total" -eq 900 ] || fail "the Pool's workers ended by SIGTERM: exit snapshots $(reasons | tr '\n' ';') ($(cat "$work/err"))"

# A forked child, ended by its parent: it dies by SIGTERM, after its exit snapshot; it read SIG_DFL.
traced oom,exit build/tests/hostile termchild
[ "$st" -eq 0 ] || fail "hostile termchild: status $st, $(cat "$work/err")"
[ "$(reasons | sed 's/ [0-9]*$//' | tr '\n' ';')" = "ended by SIGTERM;exit;" ] ||
    fail "hostile termchild: exit snapshots $(reasons | tr '\n' ';') ($(cat "$work/err"))"
# The run's table says how each one ended: the parent finished, the child was ended by SIGTERM (its exit snapshot
# written then), never "finished yes" for both; the JSON's stopped_by says the same.
build/oomtrace-read "$work/d$n" >"$work/table" 2>&1
got=$(awk '$1 == "?" { print $(NF - 2) }' "$work/table" | sort | tr '\n' ' ')
[ "$got" = "SIGTERM yes " ] || fail "hostile termchild's run table, finished column: '$got': $(cat "$work/table")"
got=$(build/oomtrace-read --format json "$work/d$n" | /usr/bin/python3 -c '
import json, sys
print(sorted("%s %s" % (r["finished"], r["stopped_by"]) for r in json.load(sys.stdin)["ranks"]))')
[ "$got" = "['True None', 'True SIGTERM']" ] || fail "hostile termchild's run in JSON: finished, stopped_by: $got"

# The program's own handler, set after the first allocation, runs; SIGTERM read before it is SIG_DFL.
cat >"$work/own.py" <<'PY'
import ctypes, os, signal, sys, time
from drv import try_alloc, MiB
assert try_alloc(100 * MiB)[0] == 0
class Sa(ctypes.Structure):
    _fields_ = [("handler", ctypes.c_void_p), ("rest", ctypes.c_char * 512)]
sa = Sa()
assert ctypes.CDLL(None).sigaction(signal.SIGTERM, None, ctypes.byref(sa)) == 0
def graceful(s, f):
    print("checkpoint saved", sa.handler in (None, 0))
    sys.exit(0)
signal.signal(signal.SIGTERM, graceful)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(5)
print("not reached")
PY
traced oom,exit /usr/bin/python3 "$work/own.py"
[ "$st" -eq 0 ] && [ "$(cat "$work/out")" = "checkpoint saved True" ] ||
    fail "a SIGTERM handler set after the first allocation: status $st, $(cat "$work/out" "$work/err")"
[ "$(reasons)" = "exit 100" ] || fail "own.py's exit snapshot: $(reasons)"

# Inherited as ignored: still ignored.
cat >"$work/ign.py" <<'PY'
import os, signal, time
from drv import try_alloc, MiB
assert try_alloc(100 * MiB)[0] == 0
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.3)
print("went on")
PY
traced oom,exit sh -c 'trap "" TERM; exec /usr/bin/python3 "$0"' "$work/ign.py"
[ "$st" -eq 0 ] && [ "$(cat "$work/out")" = "went on" ] && [ "$(reasons)" = "exit 100" ] ||
    fail "SIGTERM inherited as ignored: status $st, $(cat "$work/out" "$work/err"), exit snapshots $(reasons)"
# Walk 9, #9: Ctrl-C of a Python job whose KeyboardInterrupt goes uncaught. Python then finalizes, sets SIGINT
# back to its default and kills itself with it (status 130): no exit handler of the C library runs, and no
# snapshot was written at all. SIGINT at its default is taken like SIGTERM: the exit snapshot "ended by SIGINT"
# first, then the default action; so when the program sets it back to its default after a handler of its own.
cat >"$work/kbint.py" <<'PY'
import os, signal, time
from drv import try_alloc, MiB
assert try_alloc(300 * MiB)[0] == 0
os.kill(os.getpid(), signal.SIGINT)
time.sleep(5)
print("not reached")
PY
# dflint CMD...: CMD with SIGINT at its default, as a terminal's shell starts it (sh's background commands ignore it)
cat >"$work/dflint" <<'PY'
#!/usr/bin/python3
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])
PY
chmod +x "$work/dflint"
dflint=$work/dflint
traced oom,exit "$dflint" /usr/bin/python3 "$work/kbint.py"
[ "$st" -eq 130 ] && [ ! -s "$work/out" ] || fail "KeyboardInterrupt uncaught: status $st (want 130), $(cat "$work/out" "$work/err")"
[ "$(reasons)" = "ended by SIGINT 300" ] || fail "KeyboardInterrupt's exit snapshot: '$(reasons)'; $(cat "$work/err")"
cat >"$work/dfl.py" <<'PY'
import os, signal
from drv import try_alloc, MiB
assert try_alloc(200 * MiB)[0] == 0
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.kill(os.getpid(), signal.SIGINT)
PY
traced oom,exit "$dflint" /usr/bin/python3 "$work/dfl.py"
[ "$st" -eq 130 ] && [ "$(reasons)" = "ended by SIGINT 200" ] || fail "SIGINT set to its default: status $st, '$(reasons)'"
# The launcher: the report, the gate judging the peak, the command's own status. The run's table (several
# processes) says which signal ended each, as its JSON's stopped_by.
lrun() { OOMTRACE_QUIET=1 LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G "$dflint" tools/oomtrace run "$@"; }
lrun --dir "$work/l" --max-peak 1G -- /usr/bin/python3 "$work/kbint.py" >"$work/l.out" 2>&1
st=$?
[ "$st" -eq 130 ] && grep -q "gate --max-peak passed: peak 300 MiB" "$work/l.out" &&
    grep -q "^== oomtrace: /usr/bin/python3 was ended by SIGINT (Ctrl-C or a SIGINT to its process group); the launcher's status is 130 (the gate passed)\$" "$work/l.out" ||
    fail "oomtrace run --max-peak 1G, KeyboardInterrupt: status $st: $(grep '^oomtrace\|^==' "$work/l.out")"
grep -q "ended by SIGINT" "$work/l.out" || fail "the report does not say it ended by SIGINT: $(head -20 "$work/l.out")"
cat >"$work/kbtwo.py" <<'PY'
import os, subprocess, sys
from drv import try_alloc, MiB
assert try_alloc(100 * MiB)[0] == 0
subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "kbint.py")])
raise KeyboardInterrupt
PY
lrun --dir "$work/l2" -- /usr/bin/python3 "$work/kbtwo.py" >"$work/l2.out" 2>&1
build/oomtrace-read "$work"/l2/run-* >"$work/table" 2>&1
got=$(awk '$1 == "?" { print $(NF - 2) }' "$work/table" | sort | tr '\n' ' ')
[ "$got" = "SIGINT SIGINT " ] || fail "two processes ended by SIGINT, the run's table: '$got': $(cat "$work/table")"
got=$(build/oomtrace-read --format json "$work"/l2/run-* | /usr/bin/python3 -c '
import json, sys
print(sorted("%s" % r["stopped_by"] for r in json.load(sys.stdin)["ranks"]))')
[ "$got" = "['SIGINT', 'SIGINT']" ] || fail "two processes ended by SIGINT, in JSON: stopped_by $got"
echo "term_exit: ok"
