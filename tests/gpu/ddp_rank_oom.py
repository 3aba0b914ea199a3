"""Two ranks (torchrun --nproc_per_node=2): a DDP job in which rank 1 gets 4x longer "sequences" than rank 0,
doubling each step, so rank 1 runs out of memory first (rows x 4096 fp32: x, y, y^2 and their grads; at ~4 M
rows on rank 1 that is > 190 GB). Rank 1 does not catch the OOM; torchrun then stops rank 0 (which waits in the
gradient all-reduce). Both ranks write into one OOMTRACE_DIR; run.sh then tries `oomtrace-read DIR`.

stdout is not compared (how far rank 0 got before it was stopped varies); the exit status is.
NVLink multicast must stay off (see nccl_allreduce.py); this script refuses to start without the variables.
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
torch.backends.cuda.matmul.allow_tf32 = True

torch.manual_seed(0)
model = DDP(nn.Linear(4096, 4096).to(dev), device_ids=[local_rank])
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
rows = 32768 * (4 if rank == 1 else 1)
for step in range(8):
    g.mark(f"rank {rank} step {step} rows={rows}")
    x = torch.randn(rows, 4096, device=dev)
    loss = model(x).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    g.out(f"rank {rank} step {step} rows={rows} loss={loss.item():.3f} reserved={torch.cuda.memory_reserved()}")
    del x, loss
    rows *= 2
g.out(f"rank {rank}: reached the step cap without running out of memory")
dist.destroy_process_group()
