"""PyTorch on the stream-ordered allocator (run.sh sets PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync).

Every tensor is then a cudaMallocAsync / cudaFreeAsync from the device's default pool (category async). A loop
allocates and frees tensors of mixed sizes, then 2 GiB + 512 MiB + 64 MiB stay held while oomtrace.dump("measure")
runs: the report's live async bytes should equal memory_allocated() (the async backend asks for exact sizes);
the pool's reserved bytes (POOLS section) may be larger.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402

torch.manual_seed(0)
dev = torch.device("cuda")
g.out(f"allocator backend={torch.cuda.get_allocator_backend()}")

sizes_mib = [8, 64, 256, 16, 128, 4, 512, 32]
acc = 0.0
for i in range(24):
    n = sizes_mib[i % len(sizes_mib)] * g.MiB // 4
    t = torch.full((n,), float(i % 7), device=dev)
    acc += t[:1024].sum().item()
    del t
g.out(f"loop done: checksum={acc:.1f}")

hold = [torch.empty(s, dtype=torch.uint8, device=dev) for s in (2 * g.GiB, 512 * g.MiB, 64 * g.MiB)]
for t in hold:
    t.fill_(3)
torch.cuda.synchronize()
held = sum(t.numel() for t in hold)
g.out(f"holding {held} bytes in {len(hold)} tensors")
g.check(held_bytes=held, allocated=torch.cuda.memory_allocated())
g.check(stream=sys.stderr, reserved=torch.cuda.memory_reserved(), max_reserved=torch.cuda.max_memory_reserved())
g.dump("measure")
del hold
torch.cuda.synchronize()
g.check(phase="after-free", allocated=torch.cuda.memory_allocated())
