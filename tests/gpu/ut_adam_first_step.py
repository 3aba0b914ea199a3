"""Issue 12: Adam at its first step. 40 x Linear(16384, 16384) in fp32 (40 GiB of parameters, 40 GiB of
gradients) OOM while Adam creates its state (80 GiB more) on one H200. The report's breakdown must show
parameters, gradients and optimizer state within 1% of the sums printed here (CHECK), and no row
"no Python frames" (autograd's device thread borrows the waiting thread's stack)."""
import sys

import torch

from gpucommon import GiB, check, out

torch.manual_seed(0)
layers = [torch.nn.Linear(16384, 16384, bias=False, device="cuda") for _ in range(40)]
model = torch.nn.Sequential(*layers)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
x = torch.randn(64, 16384, device="cuda")


def train_step():
    loss = model(x).square().mean()
    loss.backward()
    opt.step()


try:
    train_step()
except torch.OutOfMemoryError:
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    state = sum(v.untyped_storage().nbytes() for s in opt.state.values() for v in s.values() if torch.is_tensor(v))
    out(f"params {params // GiB} GiB, grads {grads // GiB} GiB")
    check(params_bytes=params, grads_bytes=grads)
    check(stream=sys.stderr, optimizer_state_bytes=state)
    raise
