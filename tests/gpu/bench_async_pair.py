"""Raw latency of one cudaMallocAsync + cudaFreeAsync pair from a warm pool, called through the CUDA
runtime with ctypes (the GIL is released around each call, as in a framework). Run once plain and once
under the tracer by the runner; prints one JSON line with the per-pair times of each batch in ns."""
import ctypes
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon  # noqa: E402,F401


def cudart():
    import torch  # noqa: F401  (its wheel carries libcudart.so.13; importing it puts it in the process)
    for name in ("libcudart.so.13", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    for p in glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*", "lib", "libcudart.so*")):
        return ctypes.CDLL(p)
    raise SystemExit("libcudart not found")


def main():
    rt = cudart()
    stream = ctypes.c_void_p()
    assert rt.cudaStreamCreate(ctypes.byref(stream)) == 0
    ptr = ctypes.c_void_p()
    size = ctypes.c_size_t(1 << 20)
    alloc, free = rt.cudaMallocAsync, rt.cudaFreeAsync
    for _ in range(1000):  # warm the pool
        assert alloc(ctypes.byref(ptr), size, stream) == 0
        assert free(ptr, stream) == 0
    rt.cudaStreamSynchronize(stream)
    batches, n = [], 2000
    for _ in range(25):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            alloc(ctypes.byref(ptr), size, stream)
            free(ptr, stream)
        batches.append((time.perf_counter_ns() - t0) / n)
    rt.cudaStreamSynchronize(stream)
    print(json.dumps({"pair_ns": batches, "traced": "liboomtrace" in os.environ.get("LD_PRELOAD", "")}))


if __name__ == "__main__":
    main()
