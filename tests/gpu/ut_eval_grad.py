"""Issue 12: an evaluation loop with grad on. Each batch's outputs are kept with their graphs until the card
is full. As in a real loop, each batch comes from the host and moves to the device on the model's line (one
pinned host tensor, reused, so the host side costs no time). Expected: the report's first call-site row names this file's evaluate() line (the user's line,
before linear.py's Linear.forward) with at least 90% of the peak; What to try names activations."""
import torch

from gpucommon import out

torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192, device="cuda") for _ in range(4)])


def evaluate(batches):
    outputs = []
    for x in batches:
        outputs.append(model(x.to("cuda", non_blocking=True)))  # LINE:evaluate (grad on: every activation stays alive)
    return outputs


def batches():
    host = torch.randn(32768, 8192).pin_memory()
    while True:
        yield host


out("eval with grad on")
evaluate(batches())
