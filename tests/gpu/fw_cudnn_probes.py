"""Framework layer (issue 11): one OOM, many driver-level failures. A conv net (cuDNN, benchmark off) whose
forward hook keeps every output, run on growing batches until PyTorch raises its OOM: cuDNN's workspace
probes and PyTorch's retries fail at the driver first. Expected: one fatal framework-oom snapshot carrying
PyTorch's request, listing the driver-level OOM snapshots before it as its probes; the launcher and the
directory view show it first. Not caught: exit 1."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

torch.manual_seed(0)
torch.backends.cudnn.benchmark = False
net = nn.Sequential(*[nn.Conv2d(64 if i else 3, 64, 3, padding=1) for i in range(8)]).cuda()
kept = []
for m in net:
    m.register_forward_hook(lambda mod, inp, out: kept.append(out))
g.out("conv net ready")
batch = 64
with torch.no_grad():
    for step in range(100):
        net(torch.randn(batch, 3, 512, 512, device="cuda"))
        g.err(f"step {step} batch {batch} allocated {torch.cuda.memory_allocated()}")
        batch *= 2
g.out("UNEXPECTED: no OOM")
