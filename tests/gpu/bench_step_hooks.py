"""What each piece of the Python companion's per-step work costs a small CPU-bound training step (issue 12:
"the step hook adds no measurable cost"; issue 16's step case). One process, no tracer needed: the pieces are
switched on and off in turn inside it (the order flips every round), so the host's per-process speed
(docs/validation.md, run 14) cancels out. Prints one JSON line: per piece, the least ns/step over the rounds,
and the added ns/step against "none" measured in the same rounds.

  PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync python3 tests/gpu/bench_step_hooks.py [--rounds 8]

Pieces (each alone):
  monitoring   a sys.monitoring RAISE callback that looks at the type's name, as the companion's on_raise
  opt_hook     a global optimizer step post hook doing nothing
  stats_hook   the same hook reading torch._C._cuda_memoryStats(device), as the companion's on_step
  shapes_hook  a forward pre hook on the model writing its input shapes, as the companion's pre_forward
  ctypes_call  one ctypes call a step (oomtrace_mark when the tracer is preloaded, else getpid)"""
import argparse
import ctypes
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_alloc_pair import make_step  # noqa: E402  (exits unless backend:cudaMallocAsync)
import torch  # noqa: E402
import torch.optim.optimizer as optmod  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "lib", "companion"))
try:
    from _oomtrace_roles import _shape_text  # the companion's own shape text
except Exception:  # pragma: no cover
    def _shape_text(args, kwargs, torch):
        return " ".join("x".join(str(d) for d in a.shape) for a in args if hasattr(a, "shape"))

raises = [0]


def on_raise(code, offset, exc):
    raises[0] += 1
    n = type(exc).__name__
    if n != "XlaRuntimeError" and n != "JaxRuntimeError" and n != "OutOfMemoryError":
        return


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=100)
    a = ap.parse_args()
    torch.cuda.init()
    step, model = make_step(with_model=True)
    dev = torch.cuda.current_device()
    lib = ctypes.CDLL(None)
    fn = getattr(lib, "oomtrace_mark", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_char_p]
        fn.restype = ctypes.c_int
        call = lambda: fn(b"step")  # noqa: E731
    else:
        g = lib.getpid
        call = lambda: g()  # noqa: E731
    mon = getattr(sys, "monitoring", None)
    tool = None
    if mon is not None:
        for t in (4, 3, 5, 2, 1, 0):
            if mon.get_tool(t) is None:
                tool = t
                mon.use_tool_id(t, "bench")
                mon.register_callback(t, mon.events.RAISE, on_raise)
                break

    def stats_hook(opt, args, kwargs):
        raw = torch._C._cuda_memoryStats(dev)
        return raw["allocated_bytes"]["all"]["current"] + raw["reserved_bytes"]["all"]["current"]

    def shapes_hook(module, args, kwargs=None):
        _shape_text(args, kwargs or {}, torch)

    def on(piece):
        if piece == "monitoring" and tool is not None:
            mon.set_events(tool, mon.events.RAISE)
            return lambda: mon.set_events(tool, 0)
        if piece == "opt_hook":
            return optmod.register_optimizer_step_post_hook(lambda o, a, k: None).remove
        if piece == "stats_hook":
            return optmod.register_optimizer_step_post_hook(stats_hook).remove
        if piece == "shapes_hook":
            return model.register_forward_pre_hook(shapes_hook, with_kwargs=True).remove
        return lambda: None

    pieces = ["none", "monitoring", "opt_hook", "stats_hook", "shapes_hook", "ctypes_call"]
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    best = {p: float("inf") for p in pieces}
    added = {p: [] for p in pieces}
    for r in range(a.rounds):
        order = pieces if r % 2 == 0 else pieces[::-1]
        got = {}
        for p in order:
            off = on(p)
            raises[0] = 0
            t0 = time.perf_counter_ns()
            for _ in range(a.steps):
                step()
                if p == "ctypes_call":
                    call()
            torch.cuda.synchronize()
            got[p] = (time.perf_counter_ns() - t0) / a.steps
            if p == "monitoring":
                got["raises_per_step"] = raises[0] / a.steps
            off()
        for p in pieces:
            best[p] = min(best[p], got[p])
            added[p].append(got[p] - got["none"])
        rps = got.get("raises_per_step")
    t0 = time.perf_counter_ns()
    for _ in range(1000):
        torch._C._cuda_memoryStats(dev)
    stats_ns = (time.perf_counter_ns() - t0) / 1000
    med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    print(json.dumps({"case": "step_hooks", "unit": "ns/step", "least": best,
                      "added_median": {p: med(v) for p, v in added.items()},
                      "raises_per_step": rps, "memoryStats_ns_per_call": stats_ns,
                      "python": sys.version.split()[0], "torch": torch.__version__,
                      "traced": "liboomtrace" in os.environ.get("LD_PRELOAD", "")}), flush=True)


if __name__ == "__main__":
    main()
