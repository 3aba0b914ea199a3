"""A native thread allocates and frees without pause while the main thread waits in C (ctypes releases the
GIL) at the bottom of recursions of changing depth, through functions whose frames are large: its frame
stack grows into new chunks and gives them back (CPython unmaps a chunk as soon as it empties), so the
frames the borrowing thread last read are unmapped again and again under it. The borrowing thread reads them
with plain loads only while no unmap came since it read them through the kernel
(lib/capture/pyborrow.c, common/unmaps.h); a plain load of an unmapped chunk would kill the process.

    python3 borrow_unmap.py LIBNATIVE SECONDS
Prints: pairs=N waits=N"""
import ctypes
import sys
import time

lib = ctypes.CDLL(sys.argv[1])
lib.ot_native_churn_start.argtypes = [ctypes.c_size_t]
lib.ot_native_churn_stop.restype = ctypes.c_long
libc = ctypes.CDLL(None)  # usleep through CDLL: the GIL released while the main thread waits
libc.usleep.argtypes = [ctypes.c_uint]
cuda = ctypes.CDLL("libcuda.so.1")


def own(wait):
    """An allocation of the main thread's own before each wait (as a forward before a backward): the
    borrowing thread then checks the whole chain, which it reads with plain loads while nothing was
    unmapped since its last read through the kernel."""
    p = ctypes.c_uint64()
    assert cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
    libc.usleep(wait)
    assert cuda.cuMemFree_v2(p) == 0

# ~400 locals a frame (3.2 KB of the frame stack): a chunk of 16 KB holds a handful of them.
names = [f"v{i}" for i in range(400)]
src = "def big(n, wait):\n    " + " = ".join(names) + " = n\n" + \
      "    if n:\n        return big(n - 1, wait) + v0\n    waits(wait)\n    return v399\n"


def waits(wait):
    for _ in range(4):
        own(wait)  # the same line each time: the borrowing thread's check finds the chain it read


scope = {"waits": waits}
exec(src, scope)
big = scope["big"]


def main():
    seconds = float(sys.argv[2])
    assert cuda.cuInit(0) == 0
    assert lib.ot_native_churn_start(4096) == 0
    n_waits = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for depth in (1, 9, 3, 14, 6, 20, 2, 11):
            big(depth, 50 + depth * 10)
            n_waits += 4
    pairs = lib.ot_native_churn_stop()
    assert pairs > 0
    print(f"pairs={pairs} waits={n_waits}")


main()
