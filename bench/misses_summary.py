"""Per event Ir, I1, D1 and LL misses by part of the tracer and of the program, from two cachegrind runs
(bench/misses_per_event.sh). LL counts data and instruction misses (before issue 16's seventeenth pass, data
only). "The program" is everything outside lib/, the libc and Python C API calls the tracer makes included."""
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
    ("  native walk", lambda k: ours(k) and k[0].endswith(("capture/backtrace.c", "capture/walkmemo.c", "capture/walker.h"))),
    ("  Python frames", lambda k: ours(k) and "/capture/py" in "/" + k[0]),
    ("  stack table", lambda k: ours(k) and k[0].endswith("capture/stacks.c")),
    ("  record, ring, clock", lambda k: ours(k) and ("/record/" in k[0] or "/common/" in k[0])),
    # by function (what is inlined into it counts there): the record stages under the lock, the wrappers
    ("  record_alloc", lambda k: ours(k) and k[1] == "ot_record_alloc"),
    ("  record_free", lambda k: ours(k) and k[1] == "ot_record_free"),
    ("  the wrappers", lambda k: ours(k) and "/intercept/" in "/" + k[0]),
    ("libc memcmp, memcpy", lambda k: k[1].startswith(("__memcmp", "__memcpy"))),
    ("the program (not lib/)", lambda k: not ours(k)),
    ("whole process", lambda k: True),
]
print(f"{'per event':24s} {'Ir':>8s} {'I1 miss':>8s} {'D1 miss':>8s} {'LL miss':>8s}")
for name, pred in PARTS:
    t = [0.0] * 9
    for k in set(a) | set(b):
        if pred(k):
            va, vb = a.get(k, [0] * 9), b.get(k, [0] * 9)
            t = [s + (y - x) / n for s, x, y in zip(t, va, vb)]
    ll = t[ix['DLmr']] + t[ix['DLmw']] + t[ix['ILmr']]
    print(f"{name:24s} {t[ix['Ir']]:8.0f} {t[ix['I1mr']]:8.1f} {t[ix['D1mr']] + t[ix['D1mw']]:8.1f} {ll:8.2f}")
