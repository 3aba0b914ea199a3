"""Native threads allocate while Python threads wait; the allocations must carry the stack of the right
waiting thread, marked borrowed (lib/capture/pyframes.c, borrow):
  backward      a thread with no Python thread state allocates while the main thread waits in a C call
                that released the GIL (autograd's device thread while the main thread waits in
                loss.backward()): the main thread's stack;
  registered    the same from a thread that has a Python thread state and no frame (autograd's threads);
  busy          a thread allocates while the main thread holds the GIL, and no other thread waits:
                nothing to borrow;
  waiter        the main thread holds the GIL; a Python thread waits in a C call; a newer thread has a
                thread state and no frame: the waiting Python thread's stack;
  too_big       a request too big for the device, while the main thread waits: the OOM snapshot's failed
                request is borrowed too.
Prints "pid N" and "waiter_lender N" (the waiting thread's OS id, 0 where CPython keeps none: 3.9, 3.10)."""
import ctypes
import os
import sys
import threading
import time

MiB = 1 << 20
cuda = ctypes.CDLL("libcuda.so.1")
native = ctypes.CDLL(sys.argv[1])  # CDLL: each call releases the GIL
holding = ctypes.PyDLL(sys.argv[1])  # PyDLL: the GIL stays held
for lib in (native, holding):
    for f in (lib.ot_native_run, lib.ot_native_start):
        f.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_int]


def backward():
    return native.ot_native_run(64 * MiB, 3, 0)  # LINE:backward


def registered():
    return native.ot_native_run(48 * MiB, 2, 1)  # LINE:registered


def hold_while(size, count, registered_thread):
    """Keeps the GIL while a native thread allocates."""
    assert holding.ot_native_start(size, count, registered_thread) == 0
    spins = 0
    while not holding.ot_native_done():
        spins += 1
    return holding.ot_native_join()


def busy():
    return hold_while(32 * MiB, 2, 0)


def waiter():
    native.ot_native_block()  # LINE:waiter


def waiting_thread():
    t = threading.Thread(target=waiter, name="waiter")
    t.start()
    while native.ot_native_blocked() < 1:
        time.sleep(0.001)
    assert native.ot_native_frameless_start() == 0
    while native.ot_native_blocked() < 2:  # the frameless thread has its thread state, and waits
        time.sleep(0.001)
    print("waiter_lender", t.native_id if sys.version_info >= (3, 11) else 0, flush=True)
    rc = hold_while(16 * MiB, 2, 1)
    native.ot_native_release()
    t.join()
    native.ot_native_frameless_join()
    return rc


def too_big():
    return native.ot_native_run(1 << 40, 1, 0)  # LINE:too_big


def main():
    assert cuda.cuInit(0) == 0
    print("pid", os.getpid(), flush=True)
    assert backward() == 0
    assert registered() == 0
    assert busy() == 0
    assert waiting_thread() == 0
    assert too_big() == 1
    sys.exit(0)


if __name__ == "__main__":
    main()
