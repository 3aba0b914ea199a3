"""Per-pair cost where every tensor reaches the driver (issue 16): PyTorch with
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, so each torch.empty is a cuMemAllocAsync and each del a
cuMemFreeAsync. One process measures one case and prints one JSON line on stdout:

  pair      loops of 20,000 torch.empty(4096) + del, from a shallow Python stack
  pair20    the same from 20 extra Python frames
  step      a small CPU-bound training step: 12 x Linear(256) + ReLU, batch 32, Adam

Each figure is the minimum over --loops timed loops (after one warm loop): the least disturbed loop of the
process. Whether the tracer is preloaded is the runner's business (tests/gpu/bench_alloc_pair.sh alternates
bare and traced processes); this script never asks it anything."""
import argparse
import json
import os
import sys
import time


def need_async_backend(who):
    if "backend:cudaMallocAsync" not in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        sys.exit("%s: run with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" % who)


import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon  # noqa: E402,F401  (watchdog)

PAIRS = 20000


def pair_loop():
    empty = torch.empty
    t0 = time.perf_counter_ns()
    for _ in range(PAIRS):
        x = empty(4096, device="cuda")
        del x
    return (time.perf_counter_ns() - t0) / PAIRS


def nested(depth, fn):
    """fn called from depth extra Python frames."""
    if depth == 0:
        return fn()
    return nested(depth - 1, fn)


def make_step(with_model=False, device="cuda", width=256):
    torch.manual_seed(0)
    mods = []
    for _ in range(12):
        mods += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*mods).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(32, width, device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
    return (step, model, opt, x) if with_model else step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["pair", "pair20", "step"])
    ap.add_argument("--loops", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200, help="steps per timed loop (case step)")
    a = ap.parse_args()
    need_async_backend("bench_alloc_pair")
    torch.cuda.init()
    per = []
    if a.case in ("pair", "pair20"):
        depth = 20 if a.case == "pair20" else 0
        nested(depth, pair_loop)  # warm: the pool, the tracer's tables, every cache on the path
        for _ in range(a.loops):
            per.append(nested(depth, pair_loop))
        unit = "ns/pair"
    else:
        step = make_step()
        for _ in range(20):
            step()
        torch.cuda.synchronize()
        for _ in range(a.loops):
            t0 = time.perf_counter_ns()
            for _ in range(a.steps):
                step()
            torch.cuda.synchronize()
            per.append((time.perf_counter_ns() - t0) / a.steps)
        unit = "ns/step"
    print(json.dumps({"case": a.case, "unit": unit, "min": min(per), "loops": per,
                      "traced": "liboomtrace" in os.environ.get("LD_PRELOAD", "")}), flush=True)


if __name__ == "__main__":
    main()
