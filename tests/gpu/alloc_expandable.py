"""PyTorch with expandable segments (run.sh sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True).

The caching allocator then maps memory with the driver's VMM API (cuMemCreate / cuMemMap, released with
cuMemUnmap / cuMemRelease by empty_cache). A small training loop runs, then a 1 GiB and a 3 GiB tensor are held
while oomtrace.dump("measure") runs: the report's tracked bytes (category vmm) should equal memory_reserved().
Then the 3 GiB tensor is freed and empty_cache() unmaps it: the second dump should show tracked fall with it.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

torch.manual_seed(0)
dev = torch.device("cuda")
g.out(f"PYTORCH_CUDA_ALLOC_CONF={os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '')}")

model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
for i in range(5):
    x = torch.randn(512, 1024, device=dev)
    loss = model(x).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    g.out(f"step {i} loss={loss.item():.4f} reserved={torch.cuda.memory_reserved()}")

a = torch.empty(1 * g.GiB, dtype=torch.uint8, device=dev)
b = torch.empty(3 * g.GiB, dtype=torch.uint8, device=dev)
a.fill_(1)
b.fill_(2)
torch.cuda.synchronize()
segs = torch.cuda.memory_snapshot()
nexp = sum(1 for s in segs if s.get("is_expandable"))
g.out(f"holding 1GiB+3GiB tensors: segments={len(segs)} expandable={nexp}")
g.check(phase="measure", held_bytes=a.numel() + b.numel(), allocated=torch.cuda.memory_allocated(),
        reserved=torch.cuda.memory_reserved())
g.dump("measure")

del b
torch.cuda.empty_cache()
torch.cuda.synchronize()
g.check(phase="after-free", held_bytes=a.numel(), allocated=torch.cuda.memory_allocated(),
        reserved=torch.cuda.memory_reserved())
g.dump("after-free-3GiB")
g.out(f"checksum a={int(a[:4096].sum().item())}")
