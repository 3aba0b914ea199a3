"""Two ranks (torchrun --nproc_per_node=2), one GPU each: a DDP model trains a few steps (its gradients are
all-reduced by NCCL) and a 256 MiB tensor is all-reduced explicitly; each rank then writes a snapshot.

NCCL allocates its buffers through the driver's VMM API (cuMem*), so the reports should show vmm allocations
beside PyTorch's cudaMalloc segments, and each snapshot should carry its rank (RANK / LOCAL_RANK).
Only rank 0 prints, after gathering every rank's numbers, so stdout is deterministic.
NVLink multicast must stay off: run.sh exports NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NVSHMEM_DISABLE_NVLS=1, and this script refuses to start without them.
"""
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    if os.environ.get(k) != v:
        g.err(f"refusing to run: {k} must be {v}")
        sys.exit(3)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

rank = int(os.environ["RANK"])
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dev = torch.device("cuda", local_rank)
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60), device_id=dev)
world = dist.get_world_size()

torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(dev), device_ids=[local_rank])
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
torch.manual_seed(1 + rank)  # different data on each rank
losses = []
for step in range(4):
    x = torch.randn(256, 1024, device=dev)
    loss = model(x).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(round(loss.item(), 4))

t = torch.full((64 * g.MiB,), float(rank + 1), device=dev)  # 256 MiB
dist.all_reduce(t)
torch.cuda.synchronize()
want = world * (world + 1) / 2
mine = {"rank": rank, "losses": losses, "min": t.min().item(), "max": t.max().item(),
        "param0": round(next(model.parameters()).double().sum().item(), 4),
        "reserved": torch.cuda.memory_reserved(), "allocated": torch.cuda.memory_allocated()}
g.mark(f"rank {rank} after all_reduce")
g.dump(f"rank{rank} after all_reduce")
allv = [None] * world
dist.all_gather_object(allv, mine)
if rank == 0:
    for m in allv:
        g.out(f"rank {m['rank']}: losses={m['losses']} all_reduce min={m['min']} max={m['max']} (want {want}) "
              f"param0_sum={m['param0']}")
        g.check(stream=sys.stderr, rank=m["rank"], reserved=m["reserved"], allocated=m["allocated"])
    same = len({m["param0"] for m in allv}) == 1
    g.out(f"parameters identical on all ranks: {same}")
dist.barrier()
dist.destroy_process_group()
