"""Step time with the framework companion on against OOMTRACE_FRAMEWORKS=0 (issue 11's overhead targets: at
most 1% on a small CPU-bound step, 0.2% on a GPU-bound one). One process measures both models, after a
warm-up; the runner starts it under the preload with the companion on and off, alternately:

    for r in 1 2 3; do for fw in 1 0; do OOMTRACE_FRAMEWORKS=$fw LD_PRELOAD=build/liboomtrace.so \\
        python3 tests/gpu/bench_companion.py; done; done | python3 tests/gpu/bench_companion.py --summary

  small   12 x Linear(256), batch 32, Adam, on the GPU (launch-bound: the CPU's step)
  big     12 x Linear(8192), batch 4096, Adam (GPU-bound)
Prints one JSON line: {"frameworks": "1"|"0", "companion": bool, "small_ms": [...], "big_ms": [...]}."""
import json
import os
import statistics
import sys
import time


def measure():
    import torch
    import torch.nn as nn

    def model(width, batch):
        torch.manual_seed(0)
        m = nn.Sequential(*[nn.Linear(width, width) for _ in range(12)]).cuda()
        opt = torch.optim.Adam(m.parameters())
        x = torch.randn(batch, width, device="cuda")

        def step():
            opt.zero_grad(set_to_none=True)
            m(x).sum().backward()
            opt.step()
        return step

    out = {"frameworks": os.environ.get("OOMTRACE_FRAMEWORKS", "1")}
    for name, (width, batch, n) in (("small", (256, 32, 400)), ("big", (8192, 4096, 8))):
        step = model(width, batch)
        for _ in range(20):
            step()
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) / n * 1e3)
        out[name + "_ms"] = times
    out["companion"] = "_oomtrace_companion" in sys.modules
    print(json.dumps(out), flush=True)


def summary():
    rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
    for name in ("small", "big"):
        on = [statistics.median(r[name + "_ms"]) for r in rows if r["frameworks"] == "1"]
        off = [statistics.median(r[name + "_ms"]) for r in rows if r["frameworks"] == "0"]
        if on and off:
            a, b = statistics.median(on), statistics.median(off)
            print("%s step: companion on %.4f ms, off %.4f ms (medians of %d/%d processes): ratio %.4f" %
                  (name, a, b, len(on), len(off), a / b))
    print("companion started in the 'on' processes:", all(r["companion"] for r in rows if r["frameworks"] == "1"))


if __name__ == "__main__":
    summary() if "--summary" in sys.argv else measure()
