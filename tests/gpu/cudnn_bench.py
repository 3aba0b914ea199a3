"""Convolutions with torch.backends.cudnn.benchmark=True: for each new shape cuDNN times several algorithms,
each with its own workspace from PyTorch's caching allocator, so allocation traffic is bursty. Forward and
backward of 4 shapes, then a snapshot while the modules are alive.

Which algorithm wins can change between runs, so stdout carries only values rounded to 4 significant digits
(TF32 off) and the memory numbers go to stderr as CHECK lines.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.manual_seed(0)
dev = torch.device("cuda")
g.out(f"cudnn enabled={torch.backends.cudnn.enabled} benchmark={torch.backends.cudnn.benchmark}")

shapes = [(32, 64, 56, 56, 64, 3), (32, 128, 28, 28, 128, 3), (32, 256, 14, 14, 256, 3), (16, 3, 224, 224, 64, 7)]
keep = []
for (n, c, h, w, k, r) in shapes:
    conv = nn.Conv2d(c, k, r, padding=r // 2).to(dev)
    x = torch.randn(n, c, h, w, device=dev, requires_grad=True)
    for _ in range(2):
        y = conv(x)
        y.pow(2).mean().backward()
    torch.cuda.synchronize()
    g.out(f"conv n={n} c={c} hw={h}x{w} k={k} r={r}: mean(y^2)={y.pow(2).mean().item():.4g} "
          f"mean(dx^2)={x.grad.pow(2).mean().item():.4g}")
    keep.append((conv, x, y))

g.check(stream=sys.stderr, allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
        max_reserved=torch.cuda.max_memory_reserved())
g.dump("after benchmark")
