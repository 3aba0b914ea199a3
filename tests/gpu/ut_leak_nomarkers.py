"""Issue 12: growth without markers. CuPy with its memory pool off (every array is its own cudaMalloc and
cudaFree), in a loop that frees a 128 MiB temporary each iteration and keeps a 128 MiB result in a list (the
leak), until the device is full. No torch, so no optimizer-step markers, and no oomtrace.mark. Expected: the
report cuts the event ring into windows and states the growing site (this file's kept line) with its growth
(a rate per second over a second or more, else bytes over the span and per allocation kept), and What to try
ends with the leak remedy, not checkpointing. Not caught: exit 1."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import cupy as cp  # noqa: E402

cp.cuda.set_allocator(None)  # no pool: the driver sees every allocation and every free


def iteration(kept):
    tmp = cp.ones(128 * g.MiB // 4, dtype=cp.float32)
    kept.append(tmp * 2)  # LINE:kept (one result kept per iteration)
    del tmp
    cp.cuda.Device(0).synchronize()


g.out("cupy loop, no pool, no markers")
kept = []
while True:
    iteration(kept)
    if len(kept) > 4000:
        g.out("UNEXPECTED: no OOM")
        break
