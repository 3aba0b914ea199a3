"""Framework layer (issue 11), run 10's finding: under PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync PyTorch
refuses to attach its OOM observer ("cudaMallocAsync does not yet support attachOutOfMemoryObserver"), and the
companion used to give torch up. 8 GiB tensors until PyTorch raises its OutOfMemoryError, which the program
catches and survives (then holds 1 GiB and exits 0). Expected: exactly one fatal framework-oom snapshot, with
torch's own message (the ERROR text starts "CUDA out of memory") and the allocator's statistics; the
companion's one stderr line says the observer is not available and that OOMs are recorded where they reach
Python; stdout and exit status the same with and without the preload."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402

g.out("backend", torch.cuda.get_allocator_backend())
held = []
try:
    while len(held) < 1000:
        held.append(torch.empty(8 * g.GiB, dtype=torch.uint8, device="cuda"))
    g.out("UNEXPECTED: no OOM")
except torch.OutOfMemoryError as e:
    g.out("caught", type(e).__name__)
    g.err(f"held {len(held) * 8} GiB before the OOM: {str(e)[:200]}")
held.clear()
torch.cuda.synchronize()
keep = torch.ones(g.GiB, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
g.out("survived: holds", g.gib(keep.numel()))
