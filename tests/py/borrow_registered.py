"""A native thread kept for the process and registered with Python (a thread state, no frame: autograd's
device threads) allocates 64 times while the main thread waits in one call, then 64 more in a second call
at the same place (the main thread allocated once before, as a forward does). Its borrows must not read the waiting thread's frames each time (tests/sh/borrow_reads.sh
counts the process_vm_readv calls): the main thread has not moved, and the borrower's own walks (its thread
state has no frame) say nothing about the lender."""
import ctypes
import sys

cuda = ctypes.CDLL("libcuda.so.1")
lib = ctypes.CDLL(sys.argv[1])  # CDLL: each call releases the GIL
lib.ot_native_worker_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int]


def wait_here():
    return lib.ot_native_worker_alloc(1 << 20, 64)


def main():
    assert cuda.cuInit(0) == 0
    p = ctypes.c_uint64()  # one allocation of the main thread's own first, as a training step's forward
    assert cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
    lib.ot_native_worker_register()
    assert wait_here() == 0
    assert wait_here() == 0
    lib.ot_native_worker_stop()


if __name__ == "__main__":
    main()
