"""py_borrow: what borrowing a waiting thread's Python stack costs a native thread's allocations.

A thread with no Python frame (build/tests/libnative_thread.so) allocates and frees in batches of 64,
timed on that thread, while the main thread, 20 Python frames deep, waits for it:
  wait: through ctypes.CDLL, which releases the GIL: the main thread is waiting, its stack is borrowed;
  hold: through ctypes.PyDLL, which keeps the GIL: nobody waits, the allocations stay native-only.
Run by bench/run.sh untraced and traced; (traced wait) - (traced hold) is the cost of borrowing per
allocation-and-free pair. Prints: result kind=borrow mode=wait|hold ns=<per pair> n=<pairs>"""
import ctypes
import statistics
import sys

REPS = 7
PY_DEPTH = 20
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 16384

cuda = ctypes.CDLL("libcuda.so.1")
waiting = ctypes.CDLL(sys.argv[1])
holding = ctypes.PyDLL(sys.argv[1])
for lib in (waiting, holding):
    lib.ot_native_alloc_free_ns.restype = ctypes.c_longlong
    lib.ot_native_alloc_free_ns.argtypes = [ctypes.c_int]


def recurse(left, lib, calls):
    if left > 1:
        return recurse(left - 1, lib, calls)
    return lib.ot_native_alloc_free_ns(calls)


def main():
    assert cuda.cuInit(0) == 0
    for mode, lib in (("wait", waiting), ("hold", holding), ("wait", waiting), ("hold", holding)):
        recurse(PY_DEPTH - 1, lib, CALLS // 8)  # warm-up: first sight of every frame
    for mode, lib in (("wait", waiting), ("hold", holding)):
        v = [recurse(PY_DEPTH - 1, lib, CALLS // REPS) for _ in range(REPS)]
        if min(v) < 0:
            raise SystemExit("py_borrow: the allocating thread did not start")
        print(f"result kind=borrow mode={mode} ns={statistics.median(v):.1f} n={CALLS // REPS * REPS}")


if __name__ == "__main__":
    main()
