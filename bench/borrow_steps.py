"""borrow_steps: how often a native thread's borrows read the waiting thread's frames, step after step
(issue 16's eighth pass). Each step: the main thread, 11 Python frames deep, allocates 8 times (a forward:
its own walks, so the next borrow cannot take the lender as unchanged), then waits in one call while a
thread kept for the process (registered with Python, as autograd's device threads are) allocates 40 times
(a backward, borrowing the main thread's stack); then SLEEP seconds (a step's length on the H200: 3 ms).

    strace -f -qq -e trace=process_vm_readv -o TRACE env LD_PRELOAD=build/liboomtrace.so \\
        python3.12 bench/borrow_steps.py build/tests/libnative_thread.so [STEPS [SLEEP]]
    # the allocating thread's lines of TRACE, counted by their number of buffers: one buffer, a walk's
    # read (or a frame's first interning); more, a check of the lender
Runs against the stand-in driver (LD_LIBRARY_PATH=build/fake FAKECUDA_CAPACITY=1T)."""
import ctypes
import sys
import time

cuda = ctypes.CDLL("libcuda.so.1")
lib = ctypes.CDLL(sys.argv[1])  # CDLL: each call releases the GIL
lib.ot_native_worker_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int]
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 50
SLEEP = float(sys.argv[3]) if len(sys.argv) > 3 else 0.003
p = ctypes.c_uint64()


def forward():
    for _ in range(8):
        cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 16))


def backward():
    return lib.ot_native_worker_alloc(1 << 16, 40)


def step():
    forward()
    backward()


def deep(k):
    if k:
        return deep(k - 1)
    for _ in range(STEPS):
        step()
        time.sleep(SLEEP)


def main():
    assert cuda.cuInit(0) == 0
    lib.ot_native_worker_register()
    deep(10)
    lib.ot_native_worker_stop()


if __name__ == "__main__":
    main()
