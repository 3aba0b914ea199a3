"""A batch-size search, for the allocator's view that is older than a snapshot: the program tries a batch,
catches PyTorch's OutOfMemoryError and halves it, trains a few steps at the batch that fits, then a longer
sequence runs out (uncaught, exit 1). Each out-of-memory writes its driver-level snapshots (the caching
allocator's cudaMalloc that failed, and its retry) and a fatal framework one. The companion collects only at
the framework's own OOM, so every driver-level snapshot after the first caught OOM carries that OOM's view.
Expected: those snapshots' reports show it as "Allocator's view, earlier (... at PyTorch's own out-of-memory
error; N device allocations and M frees came between: not the state at the failure ...)" and no statement or
remedy reads it; each fatal snapshot's view is its own (no "earlier"), with the failing line of this file."""
import torch

from gpucommon import out

torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = True  # the memory is the point, not the arithmetic
D = 1024
layers = [torch.nn.Linear(D, D, device="cuda") for _ in range(4)]
opt = torch.optim.Adam([p for m in layers for p in m.parameters()])


def step(batch, seq):
    h = torch.randn(batch, seq, D, device="cuda")  # LINE:input
    for m in layers:
        h = torch.nn.functional.gelu(m(h))  # LINE:forward
    h.float().pow(2).mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


batch = 65536
while True:
    try:
        step(batch, 64)
        break
    except torch.OutOfMemoryError:
        out(f"batch {batch}: out of memory, halving")
        batch //= 2
out(f"batch {batch} fits")
for _ in range(3):
    step(batch, 64)
torch.cuda.synchronize()
out("longer sequences")
step(batch, 1024)
