"""Training-step time under each recorder, for docs/PERFORMANCE.md (issue: fast enough to leave on).

One process measures, interleaved round by round, the step time of two models:
  transformer  a small transformer LM (d_model 1024, 4 layers, seq 512, batch 16), AdamW
  mlp          a 96-layer MLP (width 1024, batch 512): about 600 allocation events per step under
               backend:cudaMallocAsync, like PyTorch's own published overhead figure
under these modes, switched on and off inside the process:
  none    no PyTorch recorder (the process may or may not run under liboomtrace.so: the runner starts
          one plain and one traced process, alternately)
  python  torch.cuda.memory._record_memory_history(stacks="python")
  all     torch.cuda.memory._record_memory_history(stacks="all")
Prints one JSON line per (model, mode) with every step time in ms, and the allocation events per step.
The tracer is never told anything: whether it is there is the runner's business (LD_PRELOAD)."""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon  # noqa: E402,F401  (watchdog)


def transformer():
    torch.manual_seed(0)
    d, layers, vocab = 1024, 4, 8192
    layer = nn.TransformerEncoderLayer(d, 16, 4 * d, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.Embedding(vocab, d), nn.TransformerEncoder(layer, layers), nn.Linear(d, vocab)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, vocab, (16, 512), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())
        loss.backward()
        opt.step()
    return step


def mlp():
    torch.manual_seed(0)
    mods = []
    for _ in range(96):
        mods += [nn.Linear(1024, 1024), nn.ReLU()]
    model = nn.Sequential(*mods).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(512, 1024, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
    return step


_recording = False


def set_mode(mode):
    # Only ever called with "none" when the recorder may be on: under backend:cudaMallocAsync PyTorch's
    # recorder is not supported at all, and even switching it off raises there.
    global _recording
    rec = torch.cuda.memory._record_memory_history
    if mode == "none":
        if _recording:
            rec(enabled=None)
        _recording = False
    else:
        rec(enabled="all", stacks=mode, max_entries=100000)
        _recording = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="none,python,all")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per (model, mode, round)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    modes = args.modes.split(",")
    models = {"transformer": transformer(), "mlp": mlp()}
    for step in models.values():
        for _ in range(5):  # warm up: kernels loaded, caches filled, autotuning done
            step()
    torch.cuda.synchronize()
    times = {(m, mode): [] for m in models for mode in modes}
    events = {}
    for r in range(args.rounds):
        for name, step in models.items():
            order = modes if r % 2 == 0 else list(reversed(modes))
            for mode in order:
                set_mode(mode)
                step()  # the first step after a switch pays for the switch
                torch.cuda.synchronize()
                before = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
                for _ in range(args.steps):
                    t0 = time.perf_counter()
                    step()
                    torch.cuda.synchronize()
                    times[(name, mode)].append((time.perf_counter() - t0) * 1e3)
                after = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
                events[name] = (after - before) / args.steps
                set_mode("none")
    for (name, mode), v in times.items():
        print(json.dumps({"model": name, "mode": mode, "ms": v, "allocs_per_step": events.get(name),
                          "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default"),
                          "traced": "liboomtrace" in os.environ.get("LD_PRELOAD", "")}), flush=True)


if __name__ == "__main__":
    main()
