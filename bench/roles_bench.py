"""Cost of the companion's roles module (lib/companion/_oomtrace_roles.py), CPU only (Debian python3-torch
is enough): collect() at snapshot time against the size of the Python heap, and the step hook per
optimizer step against a training step without it. Prints one line per figure.
   /usr/bin/python3 bench/roles_bench.py"""
import gc
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib", "companion"))
import _oomtrace_roles as roles  # noqa: E402


def best(fn, reps=5):
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(12)])
opt = torch.optim.Adam(model.parameters())
x = torch.randn(32, 256)


def step():
    opt.zero_grad(set_to_none=True)
    model(x).sum().backward()
    opt.step()


for _ in range(3):
    step()

ballast = []
for extra in (0, 1_000_000, 5_000_000):
    ballast.extend([None] for _ in range(extra - len(ballast)))  # lists: gc tracks them
    n = len(gc.get_objects())
    t = best(lambda: roles.collect(torch, include_cpu=True))
    print("collect: %.1f ms with %d objects tracked by gc (%d roles found)"
          % (t * 1e3, n, len(roles.collect(torch, include_cpu=True))))
del ballast

# The step hook: the same function torch >= 2.0 calls after every step, timed per call, and a training step
# (12 x Linear(256), batch 32, Adam) for scale.
h = roles._StepHook(torch, lambda s, shapes: None)
h.post_step(opt)  # the first call finds the outermost modules (once)
N = 100_000
t = best(lambda: [h.post_step(opt) for _ in range(N)], 3) / N
ts = best(lambda: [step() for _ in range(50)], 3) / 50
pre = best(lambda: [h.pre_forward(model, (x,)) for _ in range(N)], 3) / N
print("step hook: %.2f us per step + %.2f us per forward of the outermost module; training step %.0f us (%.3f%%)"
      % (t * 1e6, pre * 1e6, ts * 1e6, 100 * (t + pre) / ts))
