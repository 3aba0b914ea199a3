"""CuPy: arrays of known sizes through CuPy's default memory pool (cudaMalloc underneath), a pinned host buffer,
a snapshot while they are held, then an over-large allocation whose OutOfMemoryError is caught and printed.

Report check: tracked device bytes should equal pool.total_bytes() (what the pool has cudaMalloc'd, CuPy rounds
each request up to 512 bytes); the pinned buffer shows as host_pinned.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import cupy as cp  # noqa: E402

pool = cp.get_default_memory_pool()
a = cp.empty(1 * g.GiB, dtype=cp.uint8)
b = cp.zeros(128 * g.MiB, dtype=cp.float32)  # 512 MiB
c = cp.zeros(3 * g.MiB + 100, dtype=cp.uint8)
pinned = cp.cuda.alloc_pinned_memory(64 * g.MiB)
cp.cuda.Device(0).synchronize()
g.out(f"arrays: a={a.nbytes} b={b.nbytes} c={c.nbytes} bytes; pinned host={pinned.size()} bytes")
g.check(held_bytes=a.nbytes + b.nbytes + c.nbytes, pool_used=pool.used_bytes(), pool_total=pool.total_bytes(),
        host_pinned_bytes=pinned.size())
g.dump("measure")

try:
    huge = cp.empty(200 * g.GiB, dtype=cp.uint8)
    g.out("UNEXPECTED: a 200 GiB allocation succeeded")
    del huge
except cp.cuda.memory.OutOfMemoryError as e:
    g.out(f"{type(e).__module__}.{type(e).__name__}: {e}")
g.check(phase="after-oom", pool_used=pool.used_bytes(), pool_total=pool.total_bytes())

try:  # the only part that compiles kernels (NVRTC): last, so a compiler problem cannot hide the checks above
    b[:1024] = 2.0
    g.out(f"checksum b[:1024].sum()={float(b[:1024].sum()):.1f}")
except Exception as e:
    g.out(f"kernel check failed: {type(e).__name__}")
    g.err(f"kernel check failed: {e!r}")
