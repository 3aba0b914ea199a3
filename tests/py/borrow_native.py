"""A native thread allocates while the main thread waits in a C call that released the GIL (as autograd's
device thread allocates the gradients while the main thread waits in loss.backward()): those allocations
must carry the main thread's Python stack, marked borrowed. Then the same thread allocates while the main
thread holds the GIL (running Python): no thread waits, so nothing is borrowed. Then a request too big for
the device, made on the native thread while the main thread waits: the OOM snapshot's failed request is
borrowed too. Prints "pid N"."""
import ctypes
import os
import sys

MiB = 1 << 20
cuda = ctypes.CDLL("libcuda.so.1")
native = ctypes.CDLL(sys.argv[1])  # CDLL: each call releases the GIL
holding = ctypes.PyDLL(sys.argv[1])  # PyDLL: the GIL stays held
for lib in (native, holding):
    for f in (lib.ot_native_run, lib.ot_native_start):
        f.argtypes = [ctypes.c_size_t, ctypes.c_int]


def backward():
    return native.ot_native_run(64 * MiB, 3)  # LINE:backward


def busy():
    assert holding.ot_native_start(32 * MiB, 2) == 0
    spins = 0
    while not holding.ot_native_done():
        spins += 1
    return holding.ot_native_join()


def too_big():
    return native.ot_native_run(1 << 40, 1)  # LINE:too_big


def main():
    assert cuda.cuInit(0) == 0
    print("pid", os.getpid(), flush=True)
    assert backward() == 0
    assert busy() == 0
    assert too_big() == 1
    sys.exit(0)


if __name__ == "__main__":
    main()
