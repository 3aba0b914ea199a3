"""Framework layer (issue 11): CuPy memory the program freed but CuPy's pool keeps, then a PyTorch OOM. A
64 GiB CuPy array is made and dropped (the pool keeps its 64 GiB), then torch is imported (after the tracer's
companion started: it must attach late) and takes 1 GiB tensors until OOM. Expected: the fatal snapshot's
CuPy statistics show ~64 GiB as pool_free_bytes (pool cache, not a live holder). Not caught: exit 1."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import cupy as cp  # noqa: E402

a = cp.empty(64 * g.GiB, dtype=cp.uint8)
del a
pool = cp.get_default_memory_pool()
g.out(f"cupy pool: used {pool.used_bytes()} total {pool.total_bytes()}")
g.check(cupy_pool_free=pool.free_bytes())
import time  # noqa: E402

time.sleep(1.2)  # the companion looks for newly imported frameworks at most once a second of allocations
import torch  # noqa: E402

held = []
while True:
    held.append(torch.empty(g.GiB, dtype=torch.uint8, device="cuda"))
    if len(held) > 1000:
        g.out("UNEXPECTED: no OOM")
        break
