#!/bin/sh
# OOMTRACE_SIGNAL beside the program's own use of that signal (walk 7, #21): the snapshot is written and the
# signal then does what it does untraced. A handler the program set before the tracer took the signal (at the
# first allocation) runs, and so does one set after it; a signal whose default action ends the process
# (TERM, INT, HUP) still ends it, with the snapshot written first; USR1 left at its default is the tracer's
# (a snapshot of a running job, the variable's purpose); a program reading the disposition sees its own.
# Before, the tracer's handler replaced the program's: SIGUSR1 handlers never ran, TERM and INT no longer
# stopped the process, and a handler set later silently took the snapshot's place.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "signal_chain: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-sigchain.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp tests/py/drv.py "$work/"
n=0
traced() { # traced SIGNAL PROGRAM.py: a fresh directory $work/dN, stdout in $work/out, the status in $st
    n=$((n + 1))
    mkdir "$work/d$n"
    LD_LIBRARY_PATH="$PWD/build/fake" OOMTRACE_DIR="$work/d$n" OOMTRACE_SIGNAL=$1 \
        LD_PRELOAD="$PWD/build/liboomtrace.so" timeout 20 /usr/bin/python3 "$2" >"$work/out" 2>"$work/err"
    st=$?
}
snapshots() { ls "$work/d$n" | grep -c -- '-signal\.oomt$'; }

cat >"$work/before.py" <<'PY'
import os, signal, time
from drv import try_alloc, MiB
got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
assert try_alloc(100 * MiB)[0] == 0  # the tracer takes the signal here
os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0.3)
print("ran", len(got), signal.getsignal(signal.SIGUSR1) is not signal.SIG_DFL)
PY
traced USR1 "$work/before.py"
[ "$st" -eq 0 ] && [ "$(cat "$work/out")" = "ran 1 True" ] ||
    fail "a SIGUSR1 handler set before the first allocation: status $st, $(cat "$work/out" "$work/err")"
[ "$(snapshots)" -eq 1 ] || fail "no snapshot for SIGUSR1 with the program's handler: $(cat "$work/err")"

cat >"$work/after.py" <<'PY'
import ctypes, os, signal, time
from drv import try_alloc, MiB
assert try_alloc(100 * MiB)[0] == 0
got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
# The C library's view of the disposition is the program's own: a handler, not the tracer's.
class Sa(ctypes.Structure):
    _fields_ = [("handler", ctypes.c_void_p), ("rest", ctypes.c_char * 512)]
sa = Sa()
assert ctypes.CDLL(None).sigaction(signal.SIGUSR1, None, ctypes.byref(sa)) == 0
os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0.3)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # ignored from here: the snapshot, nothing else
os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0.3)
print("ran", len(got), sa.handler not in (None, 0, 1))
PY
traced USR1 "$work/after.py"
[ "$st" -eq 0 ] && [ "$(cat "$work/out")" = "ran 1 True" ] ||
    fail "a SIGUSR1 handler set after the first allocation, then SIG_IGN: status $st, $(cat "$work/out" "$work/err")"
[ "$(snapshots)" -eq 2 ] || fail "want 2 snapshots (handler, then ignored), have $(snapshots): $(cat "$work/err")"

cat >"$work/graceful.py" <<'PY'
import os, signal, sys, time
from drv import try_alloc, MiB
def graceful(s, f):
    print("checkpoint saved")
    sys.exit(0)
signal.signal(signal.SIGTERM, graceful)
assert try_alloc(100 * MiB)[0] == 0
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(2)
print("not reached")
PY
traced TERM "$work/graceful.py"
[ "$st" -eq 0 ] && [ "$(cat "$work/out")" = "checkpoint saved" ] ||
    fail "a graceful SIGTERM handler: status $st, $(cat "$work/out" "$work/err")"

for sig in TERM:15 INT:2 HUP:1 USR1:0; do
    num=${sig#*:}
    sig=${sig%:*}
    cat >"$work/plain.py" <<PY
import os, signal, time
from drv import try_alloc, MiB
signal.signal(signal.SIG$sig, signal.SIG_DFL)
assert try_alloc(100 * MiB)[0] == 0
os.kill(os.getpid(), signal.SIG$sig)
time.sleep(0.5)
print("went on")
PY
    traced "$sig" "$work/plain.py"
    if [ "$num" -eq 0 ]; then
        [ "$st" -eq 0 ] && [ "$(cat "$work/out")" = "went on" ] ||
            fail "SIG$sig left at its default: status $st, want the tracer's alone: $(cat "$work/out" "$work/err")"
    else
        [ "$st" -eq $((128 + num)) ] && [ ! -s "$work/out" ] ||
            fail "SIG$sig under its default action: status $st (want $((128 + num))), $(cat "$work/out" "$work/err")"
    fi
    [ "$(snapshots)" -eq 1 ] || fail "SIG$sig under its default action: no snapshot: $(cat "$work/err")"
done

# The same, every SIGALRM raised inside the driver's cuMemFree with its lock held (the stand-in's
# FAKECUDA_ALARM_IN_FREE): the exit snapshot would wait for that lock in cuMemGetInfo. The tracer took
# dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), its own wrapper, for the driver, and hung ~1 run in 50 (CI, 2026-12-02).
for i in 1 2 3; do
    mkdir "$work/drv$i"
    LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_ALARM_IN_FREE=1 OOMTRACE_DIR="$work/drv$i" OOMTRACE_DUMP=oom,exit \
        LD_PRELOAD="$PWD/build/liboomtrace.so" timeout 10 build/tests/hostile sigexit >/dev/null 2>"$work/err"
    st=$?
    [ "$st" -eq 3 ] && grep -q "interrupted the C library, the loader, the driver or the tracer" "$work/err" ||
        fail "exit(3) from a SIGALRM handler inside the driver: status $st ($(cat "$work/err"))"
done

# Walk 7, #35: a handler that calls exit() while the program allocates. Under the exit snapshot it hung (the
# recorder's lock or malloc's held by the interrupted code) or aborted in malloc about half the time. Now the
# exit snapshot is left out there, with one line, and the status is the program's, every time. A handler that
# interrupts a wait still gets its exit snapshot.
runs=""
for i in 1 2 3 4 5 6 7 8 9 10; do
    mkdir "$work/x$i"
    LD_LIBRARY_PATH="$PWD/build/fake" OOMTRACE_DIR="$work/x$i" OOMTRACE_DUMP=oom,exit \
        LD_PRELOAD="$PWD/build/liboomtrace.so" timeout 10 build/tests/hostile sigexit >/dev/null 2>"$work/err"
    st=$?
    runs="$runs $st"
    [ "$st" -eq 3 ] || fail "exit(3) from a SIGALRM handler while allocating: statuses$runs ($(cat "$work/err"))"
    [ -z "$(ls "$work/x$i")" ] || grep -q -- '-exit\.oomt' "$work/err" ||
        fail "left in the directory without a snapshot written: $(ls -A "$work/x$i")"
    grep -v 'snapshot written' "$work/err" | grep -qv 'no exit snapshot (it could hang the process)$' &&
        fail "exit(3) from a SIGALRM handler: $(cat "$work/err")"
done
mkdir "$work/xw"
LD_LIBRARY_PATH="$PWD/build/fake" OOMTRACE_DIR="$work/xw" OOMTRACE_DUMP=oom,exit \
    LD_PRELOAD="$PWD/build/liboomtrace.so" timeout 10 build/tests/hostile sigexitwait >/dev/null 2>"$work/err"
st=$?
[ "$st" -eq 3 ] && ls "$work/xw" | grep -q -- '-exit\.oomt$' ||
    fail "exit(3) from a handler that interrupted a wait: status $st, no exit snapshot: $(cat "$work/err")"
echo "signal_chain: ok"
