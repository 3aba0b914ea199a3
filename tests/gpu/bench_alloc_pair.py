"""Per-pair cost where every tensor reaches the driver (issue 16): PyTorch with
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, so each torch.empty is a cuMemAllocAsync and each del a
cuMemFreeAsync. One process measures one case and prints one JSON line on stdout:

  pair      loops of 20,000 torch.empty(4096) + del, from a shallow Python stack
  pair20    the same from 20 extra Python frames
  step      a small CPU-bound training step: 12 x Linear(256) + ReLU, batch 32, Adam

--inproc, under the stage or the pass-through build (make bench-stages: build/bench/liboomtrace-stages.so and
liboomtrace-pass.so): one process, --loops rounds of two blocks (--steps steps, or --pairs pairs), one traced
and one passed through (oomtrace_mark "stage: traced" and "stage: pass-through": every wrapper then calls the
driver and records nothing), in the order ABBA so that a drift cancels (--loops even). A step block ends with
torch.cuda.synchronize(); a pair block needs none. Prints each block's ns a step or pair;
tests/gpu/bench_inproc.py sets each round's traced block over its passed one: the tracer's whole cost, its
effect on the host's caches included, within one process, whose speed does not move as the host's does between
processes (docs/validation.md, run 14). What it leaves out: the wrapper's own call and checks, which a
passed-through call still makes (a few ns).

Each figure is the minimum over --loops timed loops (after one warm loop): the least disturbed loop of the
process. Whether the tracer is preloaded is the runner's business (tests/gpu/bench_alloc_pair.sh alternates
bare and traced processes). The one thing this script tells a tracer it finds in the process: where the step's
timed loops begin and end (oomtrace_mark "timed loops" and "timed loops end"), so that the stage build
(tests/gpu/bench_pair_parts.sh) counts the tracer's time within them, apart from the setup and warm steps.

  serve     a fork server: imports torch once, then for each request on stdin ("CASE LOOPS N", N the pairs
            or steps a loop) forks a child that initialises CUDA, measures, and writes its JSON line; the
            server prints it (or {"error": ...}) on stdout. A child is a new process with its own CUDA
            context, which is what the host's two speeds attach to (docs/validation.md, run 14), and costs
            no interpreter start or torch import: tests/gpu/bench_alloc_rounds.py runs 20+ of them a variant
            in the time 6 whole processes took.

BENCH_DEVICE=cpu runs the same on the CPU (a check of the runner's mechanics on a machine without a GPU)."""
import argparse
import faulthandler
import json
import os
import select
import sys
import time


DEVICE = os.environ.get("BENCH_DEVICE", "cuda")


def need_async_backend(who):
    if DEVICE == "cuda" and "backend:cudaMallocAsync" not in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        sys.exit("%s: run with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" % who)


import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon  # noqa: E402,F401  (watchdog)

PAIRS = 20000


def pair_loop(pairs=PAIRS):
    empty, device = torch.empty, DEVICE
    t0 = time.perf_counter_ns()
    for _ in range(pairs):
        x = empty(4096, device=device)
        del x
    return (time.perf_counter_ns() - t0) / pairs


def mark(label):
    """oomtrace_mark(label) when a tracer is in the process (its status: 0 when it took the mark); None
    otherwise (a bare run)."""
    try:
        import ctypes
        fn = ctypes.CDLL(None).oomtrace_mark
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_char_p], ctypes.c_int
    return fn(label.encode())


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def nested(depth, fn):
    """fn called from depth extra Python frames."""
    if depth == 0:
        return fn()
    return nested(depth - 1, fn)


def make_step(with_model=False, device=DEVICE, width=256):
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


def warm_block(case, n):
    """The case's block of work, warmed: one call runs n pairs (and returns pair_loop's ns a pair) or n steps
    (ending with a sync, to be timed whole)."""
    if DEVICE == "cuda":
        torch.cuda.init()
    if case == "step":
        step = make_step()
        for _ in range(20):
            step()
        sync()

        def block():
            for _ in range(n):
                step()
            sync()
    else:
        depth = 20 if case == "pair20" else 0

        def block():
            return nested(depth, lambda: pair_loop(n))
        block()  # warm: the pool, the tracer's tables, every cache on the path
    return block


def measure(case, loops, n):
    """One process's figures: the JSON object it prints. n: pairs a loop (pair cases), steps a loop (step)."""
    block = warm_block(case, n)
    per = []
    if case in ("pair", "pair20"):
        for _ in range(loops):
            per.append(block())
        unit = "ns/pair"
    else:
        mark("timed loops")
        for _ in range(loops):
            t0 = time.perf_counter_ns()
            block()
            per.append((time.perf_counter_ns() - t0) / n)
        mark("timed loops end")
        unit = "ns/step"
    return {"case": case, "unit": unit, "min": min(per), "loops": per,
            "traced": "liboomtrace" in os.environ.get("LD_PRELOAD", ""), "pid": os.getpid()}


def measure_inproc(case, rounds, n):
    """--inproc: --loops rounds of two blocks (n steps, or n pairs), one traced and one passed through, in the
    order ABBA; each block timed whole."""
    block = warm_block(case, n)
    # BENCH_INPROC_NULL=1: the "passed-through" blocks are traced too, so the ratio's own bias and spread show
    passed = "stage: traced" if os.environ.get("BENCH_INPROC_NULL") == "1" else "stage: pass-through"
    blocks = []
    for r in range(rounds):
        for traced in ((True, False) if r % 2 == 0 else (False, True)):
            # a switch the tracer did not take (no stage build, or not ready) makes the rounds meaningless
            if mark("stage: traced" if traced else passed) != 0:
                raise RuntimeError("oomtrace_mark refused the switch: --inproc needs the stage or pass-through build "
                                   "preloaded")
            t0 = time.perf_counter_ns()
            block()
            blocks.append({"traced": traced, "ns": (time.perf_counter_ns() - t0) / n})
    mark("stage: traced")
    return {"case": case, "inproc": True, "unit": "ns/step" if case == "step" else "ns/pair", "blocks": blocks,
            "traced": "liboomtrace" in os.environ.get("LD_PRELOAD", "")}


def child(case, loops, n, w):
    """In the forked child: measure, write the line to w, and leave at once (no interpreter teardown, no
    exit snapshot: the parent's state is not ours to finalise)."""
    code = 0
    try:
        faulthandler.dump_traceback_later(100, exit=True)
        line = json.dumps(measure(case, loops, n))
    except BaseException as e:  # noqa: B036  (anything, SystemExit included, must still reach the parent)
        line, code = json.dumps({"case": case, "error": repr(e)}), 3
    try:
        os.write(w, (line + "\n").encode())
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve():
    """Fork server: one child a request line "CASE LOOPS N"; its JSON line, or an error line, on stdout."""
    faulthandler.cancel_dump_traceback_later()  # gpucommon's watchdog is for one run, not for a server
    for req in sys.stdin:
        if not req.strip():
            continue
        case, loops, n = req.split()[:3]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child(case, int(loops), int(n), w)
        os.close(w)
        got, deadline = b"", time.monotonic() + 120
        while time.monotonic() < deadline:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(r, 65536) if ready else b""
            if not chunk:
                break
            got += chunk
        os.close(r)
        if not got:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
        line = got.decode(errors="replace").strip()
        if not line:
            line = json.dumps({"case": case, "error": f"child exited without a result (status {status})"})
        print(line, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["pair", "pair20", "step", "serve"])
    ap.add_argument("--inproc", action="store_true", help="traced and passed-through blocks in this one process "
                    "(the stage or the pass-through build)")
    ap.add_argument("--loops", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200, help="steps per timed loop (case step)")
    ap.add_argument("--pairs", type=int, default=PAIRS, help="pairs per timed loop (cases pair, pair20)")
    a = ap.parse_args()
    need_async_backend("bench_alloc_pair")
    if a.case == "serve":
        serve()
        return
    if a.inproc:
        if a.case == "serve" or a.loops % 2:
            sys.exit("bench_alloc_pair: --inproc takes pair, pair20 or step, and an even --loops (ABBA rounds)")
        res = measure_inproc(a.case, a.loops, a.steps if a.case == "step" else a.pairs)
        print(json.dumps(res), flush=True)
        return
    res = measure(a.case, a.loops, a.steps if a.case == "step" else a.pairs)
    del res["pid"]
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
