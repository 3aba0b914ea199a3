#!/bin/sh
# Instructions and data-cache misses per event of the tracer's parts (cachegrind with a cache simulation),
# as the difference between two runs of one program that differ only in length, divided by the events
# between them (as bench/ir_per_event.sh does for instructions alone). In a step's mix the tracer's cost is
# its misses more than its instructions (docs/PERFORMANCE.md, issue 16's fifth pass on a step's capture).
#
#   bench/misses_per_event.sh EVENTS 'CMD SHORT' 'CMD LONG'
#   e.g. bench/misses_per_event.sh 4100 'python3.12 bench/step_mix.py 20 --loops 1' 'python3.12 bench/step_mix.py 60 --loops 1'
# Runs under LD_PRELOAD=build/liboomtrace.so (LIB= to name another) against the stand-in driver, with a
# 48 KB 12-way D1 and a 2 MB 16-way LL (D1= and LL= to change them: cachegrind's size,assoc,line).
# Prints per event: Ir, D1 misses (reads and writes) and LL misses, for the tracer (functions in lib/), its
# parts, the libc copies and compares it calls (memcmp, memcpy: the program's own are in them too), and
# the whole process.
set -eu
cd "$(dirname "$0")/.."
N=$1
LIB=${LIB:-$PWD/build/liboomtrace.so}
D1=${D1:-49152,12,64}
LL=${LL:-2097152,16,64}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=0
for cmd in "$2" "$3"; do
    i=$((i + 1))
    LD_LIBRARY_PATH=$PWD/build/fake FAKECUDA_CAPACITY=1T OOMTRACE_DUMP=none OOMTRACE_FRAMEWORKS=0 OOMTRACE_QUIET=1 \
        valgrind --tool=cachegrind --cache-sim=yes --D1="$D1" --LL="$LL" --trace-children=yes \
        --cachegrind-out-file="$out/cg.$i.%p" env LD_PRELOAD="$LIB" $cmd >/dev/null 2>"$out/err.$i" ||
        { cat "$out/err.$i" >&2; exit 1; }
done
python3 - "$out" "$N" <<'PY'
import collections, glob, os, sys
out, n = sys.argv[1], int(sys.argv[2])
def read(i):
    path = max(glob.glob(f"{out}/cg.{i}.*"), key=os.path.getsize)  # the traced program, not env
    ev, fl, fn, d = None, None, None, collections.defaultdict(lambda: [0] * 9)
    for line in open(path):
        if line.startswith("events:"):
            ev = line.split()[1:]
        elif line.startswith("fl="):
            fl = line[3:].strip()
        elif line.startswith("fn="):
            fn = (fl, line[3:].strip())
        elif line[:1].isdigit() and fl:
            v = d[fn]
            for k, x in enumerate(line.split()[1:]):
                v[k] += int(x)
    return ev, d
ev, a = read(1)
_, b = read(2)
ix = {e: k for k, e in enumerate(ev)}
def ours(k):
    return "/lib/" in k[0] and not k[0].startswith("/usr") or k[0].startswith("lib/")
PARTS = [
    ("tracer (lib/)", lambda k: ours(k)),
    ("  native walk", lambda k: ours(k) and k[0].endswith("capture/backtrace.c")),
    ("  Python frames", lambda k: ours(k) and "/capture/py" in "/" + k[0]),
    ("  stack table", lambda k: ours(k) and k[0].endswith("capture/stacks.c")),
    ("  record, ring, clock", lambda k: ours(k) and ("/record/" in k[0] or "/common/" in k[0])),
    ("libc memcmp, memcpy", lambda k: k[1].startswith(("__memcmp", "__memcpy"))),
    ("whole process", lambda k: True),
]
print(f"{'per event':24s} {'Ir':>8s} {'D1 miss':>8s} {'LL miss':>8s}")
for name, pred in PARTS:
    t = [0.0] * 9
    for k in set(a) | set(b):
        if pred(k):
            va, vb = a.get(k, [0] * 9), b.get(k, [0] * 9)
            t = [s + (y - x) / n for s, x, y in zip(t, va, vb)]
    print(f"{name:24s} {t[ix['Ir']]:8.0f} {t[ix['D1mr']] + t[ix['D1mw']]:8.1f} {t[ix['DLmr']] + t[ix['DLmw']]:8.2f}")
PY
