"""A native thread kept for the process (as autograd's device threads are) allocates while the main thread
waits, at two places in turn; it must take the stack of the place the main thread waits at now, though
its last borrow is reused without reading the main thread's frames while nothing says it moved
(lib/capture/pyborrow.c, borrow_quick):
  wait_a, wait_b   the main thread waits at one line, then at another one, in functions at the same
                   depth; 4 allocations each (8 and 9 MiB);
  between them     the main thread allocates (1 MiB: its own stack), or, in the second loop, sleeps
                   5 ms without allocating;
  wait_via         then it waits at a third line while the thread allocates through two native call
                   sites in turn (10 MiB via_left, 11 MiB via_right): borrowed stacks that differ only in
                   their native frames (each kept apart by the merged stacks by place, pyframes.c);
  from_x, from_y   then it waits at one line (wait_inner) called from two callers in turn, alike to the
                   byte (the same depth, the same frame sizes: the waiting frame at the same address, at
                   the same instruction, under the same _PyCFrame), allocating between them: only a frame
                   further out differs, and each allocation must name its own caller (12 and 13 MiB).
  wait_deep        then, after allocating, it waits under 150 frames of recursion (deeper than a chain keeps
                   whole), while the thread allocates through the two native call sites in turn (14 MiB
                   via_left, 15 MiB via_right): the second site's first stack merges a borrow that read
                   nothing, and must still keep the chain's outermost frames (main) and say it was cut.
Ends the thread, then writes a snapshot (oomtrace_dump)."""
import ctypes
import sys
import time

MiB = 1 << 20
cuda = ctypes.CDLL("libcuda.so.1")
alloc = cuda.cuMemAlloc_v2
alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
lib = ctypes.CDLL(sys.argv[1])  # CDLL: each call releases the GIL
lib.ot_native_worker_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int]
lib.ot_native_worker_alloc_via.argtypes = [ctypes.c_size_t, ctypes.c_int]


def wait_a():
    return lib.ot_native_worker_alloc(8 * MiB, 4)  # LINE:wait_a


def wait_b():
    return lib.ot_native_worker_alloc(9 * MiB, 4)  # LINE:wait_b


def wait_via():
    return lib.ot_native_worker_alloc_via(10 * MiB, 4)  # LINE:wait_via


def wait_inner(size):
    return lib.ot_native_worker_alloc(size, 4)  # LINE:wait_inner


def from_x():
    return wait_inner(12 * MiB)  # LINE:from_x


def from_y():
    return wait_inner(13 * MiB)  # LINE:from_y


def wait_deep():
    return lib.ot_native_worker_alloc_via(14 * MiB, 4)  # LINE:wait_deep


def deep(k):
    if k == 0:
        return wait_deep()
    return deep(k - 1)  # LINE:deep


def own():
    p = ctypes.c_uint64()
    assert alloc(ctypes.byref(p), 1 * MiB) == 0  # LINE:own


def main():
    assert cuda.cuInit(0) == 0
    for _ in range(3):
        assert wait_a() == 0
        own()
        assert wait_b() == 0
        own()
    for _ in range(2):
        assert wait_a() == 0
        time.sleep(0.005)
        assert wait_b() == 0
        time.sleep(0.005)
    for _ in range(3):
        assert wait_via() == 0
    for _ in range(3):
        own()
        assert from_x() == 0
        own()
        assert from_y() == 0
    for _ in range(2):
        own()
        assert deep(150) == 0  # LINE:deep_call
    lib.ot_native_worker_stop()
    dump = getattr(ctypes.CDLL(None), "oomtrace_dump", None)
    assert dump is not None and dump(b"borrow_again") == 0


if __name__ == "__main__":
    main()
