"""A request that grows every step under PyTorch's default caching allocator (session 11's open question: the
growing request was tested on the stand-in driver only, where every tensor reaches the driver). A curriculum
that lengthens the input each step: step n's batch holds (n + 1) x 16,384 tokens of 4,096 floats (256 MiB a
step more), through an elementwise model (memory-bound, so a step stays milliseconds), with Adam; nothing is
kept between steps. The caching allocator cannot reuse the last step's blocks for the larger ones, so each step
reserves new segments; when the driver refuses, torch empties its cache and retries, and in the end refuses
the request itself (not caught: exit status 1). No markers and no oomtrace import: the step markers are the
companion's.

Expected in the framework OOM's report: Why names the request that grew step after step at this script's
line (`growing_request`: its rate a step, from which step to which), not a leak; What to try bounds the input's
length or the batch (`bound_input`), not checkpointing alone."""
import torch

from gpucommon import out

torch.manual_seed(0)
WIDTH, TOKENS = 4096, 16384
w = torch.nn.Parameter(torch.ones(WIDTH, device="cuda"))
opt = torch.optim.Adam([w], lr=1e-3)


def train():
    for step in range(100000):
        x = torch.randn((step + 1) * TOKENS, WIDTH, device="cuda")  # LINE:batch (the growing request)
        loss = (x * w).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, loss


out("grow_request")
train()
