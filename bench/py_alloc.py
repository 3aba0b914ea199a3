"""py_alloc: cuMemAlloc_v2 / cuMemFree_v2 through ctypes from a 20-deep recursive Python function.

Run by bench/run.sh three ways, alternating over several rounds: untraced, traced with
OOMTRACE_PYTHON=0 (native frames only) and traced with OOMTRACE_PYTHON=1 (native + Python frames). The
process shape is the same in all three; (PYTHON=1) - (PYTHON=0) is the extra cost per event of reading
the Python frames, (PYTHON=1) - untraced the whole tracer cost per event in a Python program.

Allocations and frees are timed in batches (time.perf_counter_ns around BATCH calls); the Python loop's
own cost is in all three runs and cancels in the differences. The calls are made in REPS passes and
each figure is the median pass.

Prints: result kind=pyalloc|pyfree depth=<python frames> ns=<per call> n=<calls>"""
import ctypes
import statistics
import sys
import time

BATCH = 64
# --depth N: N levels of recurse() and work() instead of 20 (1: a shallow stack)
PY_DEPTH = int(sys.argv[sys.argv.index("--depth") + 1]) if "--depth" in sys.argv else 20
REPS = 5
CALLS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 16384

cuda = ctypes.CDLL("libcuda.so.1")
alloc = cuda.cuMemAlloc_v2
alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
alloc.restype = ctypes.c_int
free = cuda.cuMemFree_v2
free.argtypes = [ctypes.c_uint64]
free.restype = ctypes.c_int


def work(calls, timed):
    ptrs = [ctypes.c_uint64() for _ in range(BATCH)]
    refs = [ctypes.byref(p) for p in ptrs]
    sizes = [(1 + (k & 3)) << 16 for k in range(BATCH)]
    ta = tf = 0
    clock = time.perf_counter_ns
    for _ in range(calls // BATCH):
        t0 = clock()
        for k in range(BATCH):
            alloc(refs[k], sizes[k])
        t1 = clock()
        for k in range(BATCH - 1, -1, -1):
            free(ptrs[k].value)
        t2 = clock()
        ta += t1 - t0
        tf += t2 - t1
    if ptrs[0].value == 0:
        raise SystemExit("py_alloc: cuMemAlloc_v2 failed")
    return ta, tf


def recurse(left, calls, timed):
    """The Python frames: PY_DEPTH levels of this function, then work()."""
    if left > 1:
        return recurse(left - 1, calls, timed)
    return work(calls, timed)


def main():
    assert cuda.cuInit(0) == 0
    # work() is the innermost Python frame, recurse() x (PY_DEPTH-1) above it: PY_DEPTH frames from
    # main() down, plus main and the module frame.
    recurse(PY_DEPTH - 1, CALLS // 8 + BATCH, False)  # warm-up: first sight of every frame
    # REPS passes; each figure is the median pass (a burst of other work moves one pass, not the figure).
    per = max(BATCH, CALLS // REPS // BATCH * BATCH)
    va, vf = [], []
    for _ in range(REPS):
        ta, tf = recurse(PY_DEPTH - 1, per, True)
        va.append(ta / per)
        vf.append(tf / per)
    n = per * REPS
    print(f"result kind=pyalloc depth={PY_DEPTH} ns={statistics.median(va):.1f} n={n}")
    print(f"result kind=pyfree depth={PY_DEPTH} ns={statistics.median(vf):.1f} n={n}")
    if "--check-dump" in sys.argv:  # a snapshot, to check the stack the tracer kept
        dump = getattr(ctypes.CDLL(None), "oomtrace_dump", None)
        if dump is None or dump(b"py_alloc depth check") != 0:
            print("py_alloc: no snapshot written (untraced?)", file=sys.stderr)


if __name__ == "__main__":
    main()
