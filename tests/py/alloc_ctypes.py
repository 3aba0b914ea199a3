"""Allocates through the stand-in driver with ctypes (which releases the GIL around each call), from
three named functions, so tests can check the exact Python file, line and function in the snapshot.
Runs the same scenario as tests/doors/scenario.h. With --threads N, N threads each run a small loop
concurrently (the deadlock check)."""
import ctypes
import sys
import threading

MiB = 1 << 20
cuda = ctypes.CDLL("libcuda.so.1")
alloc = cuda.cuMemAlloc_v2
alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
free = cuda.cuMemFree_v2
free.argtypes = [ctypes.c_uint64]


def load_weights():
    p = ctypes.c_uint64()
    assert alloc(ctypes.byref(p), 256 * MiB) == 0  # LINE:load_weights
    return p.value


def make_activations():
    p = ctypes.c_uint64()
    assert alloc(ctypes.byref(p), 128 * MiB) == 0  # LINE:make_activations
    return p.value


def grow_cache():
    p = ctypes.c_uint64()
    assert alloc(ctypes.byref(p), 192 * MiB) == 0  # LINE:grow_cache
    return p.value


def request_too_big():
    p = ctypes.c_uint64(0xDEADBEEF)
    rc = alloc(ctypes.byref(p), 700 * MiB)  # LINE:request_too_big
    assert p.value == 0xDEADBEEF
    return rc


def scenario():
    w = load_weights()
    acts = [make_activations() for _ in range(2)]
    for a in acts:
        assert free(a) == 0
    c = grow_cache()
    rc = request_too_big()
    print("request_too_big returned", rc)
    assert free(c) == 0 and free(w) == 0
    return rc


def worker(n):
    for _ in range(n):
        p = ctypes.c_uint64()
        if alloc(ctypes.byref(p), 1 * MiB) == 0:
            free(p.value)


def main():
    assert cuda.cuInit(0) == 0
    if len(sys.argv) > 2 and sys.argv[1] == "--threads":
        threads = [threading.Thread(target=worker, args=(2000,), name=f"w{i}") for i in range(int(sys.argv[2]))]
        for t in threads:
            t.start()
        rc = scenario()
        for t in threads:
            t.join()
    else:
        rc = scenario()
    sys.exit(0 if rc == 2 else 1)


if __name__ == "__main__":
    main()
