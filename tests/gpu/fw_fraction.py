"""Framework layer (issue 11): torch.cuda.set_per_process_memory_fraction(0.4), then 1 GiB tensors until
PyTorch refuses by itself (free memory is left on the device: no driver call fails, so before the companion
no snapshot was written). Expected: exactly one fatal framework-oom snapshot, request 1 GiB, the fraction in
its settings and its limit in its statistics. The OOM is not caught (exit status 1)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402

torch.cuda.set_per_process_memory_fraction(0.4)
g.out("fraction 0.4")
g.check(request_bytes=g.GiB, fraction_ppm=400000)
held = []
while True:
    held.append(torch.empty(g.GiB, dtype=torch.uint8, device="cuda"))
    if len(held) > 1000:
        g.out("UNEXPECTED: no OOM under the fraction")
        break
