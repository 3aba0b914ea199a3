"""Issue 12: a loss summed as a tensor (total_loss += loss), no markers in the script. Each step keeps its
graph alive through total_loss, so memory grows until OOM. Expected: the report states the growth per step
(the companion's optimizer-step hook makes the step markers) and names the site in train(); What to try
says loss.item()."""
import torch

from gpucommon import out

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)


def train():
    total_loss = 0
    for step in range(100000):
        x = torch.randn(16384, 4096, device="cuda")
        loss = model(x).square().mean()
        loss.backward(retain_graph=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        total_loss += loss  # LINE:train (keeps every step's graph)
    return total_loss


out("summed loss")
train()
