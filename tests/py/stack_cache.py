"""Allocations that a thread's caches of its last stack must tell apart (lib/capture/pywalk.c keeps the
thread's last Python chain, lib/capture/pyframes.c its last merged stack): each loop alternates two
allocations whose stacks differ in one place only, and every allocation stays live.
  lines     the same native frames; the innermost Python frame at two lines (3 and 2 MiB);
  callers   the same native frames and innermost Python frame; its caller at two lines (5 and 4 MiB);
  natives   the same Python frames (one call instruction); the native frames differ: the library
            reaches the driver through via_left or via_right (6 and 7 MiB).
Ends with a snapshot (oomtrace_dump)."""
import ctypes
import sys

MiB = 1 << 20
cuda = ctypes.CDLL("libcuda.so.1")
alloc = cuda.cuMemAlloc_v2
alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
lib = ctypes.CDLL(sys.argv[1])
lib.ot_native_alloc_via.argtypes = [ctypes.c_int, ctypes.c_size_t]


def lines():
    for i in range(6):
        p = ctypes.c_uint64()
        if i % 2:
            assert alloc(ctypes.byref(p), 3 * MiB) == 0  # LINE:odd
        else:
            assert alloc(ctypes.byref(p), 2 * MiB) == 0  # LINE:even


def inner(size):
    p = ctypes.c_uint64()
    assert alloc(ctypes.byref(p), size) == 0  # LINE:inner


def callers():
    for i in range(6):
        if i % 2:
            inner(5 * MiB)  # LINE:caller_odd
        else:
            inner(4 * MiB)  # LINE:caller_even


def natives():
    for i in range(6):
        assert lib.ot_native_alloc_via(i % 2, (6 + i % 2) * MiB) == 0  # LINE:via


def main():
    assert cuda.cuInit(0) == 0
    lines()
    callers()
    natives()
    dump = getattr(ctypes.CDLL(None), "oomtrace_dump", None)
    assert dump is not None and dump(b"stack_cache") == 0


if __name__ == "__main__":
    main()
