"""What the Python companion's per-step work costs a small CPU-bound training step, resolved to ~1% inside ONE
process (issue 12: "the step hook adds no measurable cost to a training step").

Between processes the step's speed varies by +-10% on the H200 host, and between 300 ms windows of one process
by +-130 us (docs/validation.md, run 17). So each piece is switched on and off in short blocks (--steps steps
on, then as many off, the order flipping every block) many times (--blocks), each step timed alone; a half's
figure is the mean of its middle steps (a step hit by the scheduler does not count), and the piece's figure the
median of the per-block paired differences (on - off, per step), with its quartiles and a 95% confidence
interval of the median (order statistics): drift slower than a block cancels. The "none" piece switches
nothing (an A/A test): its interval is the method's resolution in that process. Then the companion's
callbacks are timed directly in tight loops (their own cost, to ~0.1 us).

The companion is the real one, attached by the tracer: its hooks are found in sys.modules["_oomtrace_roles"]
._hook and switched by the companion's own switches (the hook's `off` flag, its register()/unregister(), the
sys.monitoring tool it took), never by editing torch.

  GPU (the step of tests/gpu/bench_alloc_pair.py, traced, companion attached; about 90 s on one H200):
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync OOMTRACE_QUIET=1 LD_PRELOAD=$PWD/build/liboomtrace.so \\
        LD_LIBRARY_PATH=$PWD/.carry/lib taskset -c 4-7 python3 tests/gpu/bench_step_hooks.py
  CPU (Debian's torch 1.13, which has no global step hook: the benchmark registers the companion's hooks
  through a stand-in of torch 2's registry and calls them around opt.step() as torch 2 does):
    LD_PRELOAD=build/liboomtrace.so LD_LIBRARY_PATH=build/fake /usr/bin/python3 tests/gpu/bench_step_hooks.py --cpu
  sys.monitoring (Python 3.12+, no torch): does the companion's RAISE callback slow code that raises nothing,
  and what does each raise cost:
    ~/.pyenv/versions/3.12.1/bin/python3 tests/gpu/bench_step_hooks.py --pure

Pieces:
  none         nothing switched: the method's own bias and spread (an A/A test), companion attached
  all          the whole companion: hooks registered and working, RAISE events on; against none of it
  work         the hooks' work (the `off` flag), hooks registered either way
  hooks        the hooks registered with their work off, against unregistered: torch's dispatch and the
               model's call taking nn.Module's hook path
  monitoring   the companion's sys.monitoring RAISE events on, against off (3.12+)
  memoryStats  one more torch._C._cuda_memoryStats(device) a step: what reading the counters at every step
               would cost (the companion reads them at most every READ_SPACING x their cost)
  mark         one more step marker a step, with the companion's label
  shapes       one more shape text of the model's inputs a step: what building it at every step would cost
Prints one JSON line per piece and a table on stderr."""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
COMPANION = os.path.join(os.path.dirname(os.path.dirname(HERE)), "lib", "companion")


def summary(diffs):
    """median, quartiles and a 95% confidence interval of the median (order statistics of n values)."""
    v = sorted(diffs)
    n = len(v)
    q = lambda f: v[min(n - 1, max(0, int(round(f * (n - 1)))))]  # noqa: E731
    h = 0.98 * n ** 0.5  # 1.96 * sqrt(n) / 2
    lo, hi = int(n / 2 - h), int(n / 2 + h)
    return {"median": q(0.5), "q25": q(0.25), "q75": q(0.75),
            "ci95": [v[max(0, lo)], v[min(n - 1, hi)]], "blocks": n}


def middle(v):
    """Mean of the middle half of v: a step hit by the scheduler or a page fault does not count."""
    v = sorted(v)
    k = len(v) // 4
    mid = v[k:len(v) - k] or v
    return sum(mid) / len(mid)


def paired(run_block, on, off, blocks, steps):
    """Per block: `steps` steps with the piece on and `steps` with it off (order flipping), each step timed
    alone; the difference of the halves' middle means (ns per step), and the off halves' middle means."""
    diffs, base = [], []
    for b in range(blocks):
        t = {}
        for state in ((True, False) if b % 2 == 0 else (False, True)):
            (on if state else off)()
            t[state] = middle(run_block(steps, state))
        off()
        diffs.append(t[True] - t[False])
        base.append(t[False])
    return diffs, base


def report(rows):
    for r in rows:
        print(json.dumps(r), flush=True)
    w = sys.stderr.write
    w("| piece | added, median | 95%% CI of the median | quartiles | of the %s, median | share |\n" % rows[0]["base"])
    w("|---|---:|---:|---:|---:|---:|\n")
    for r in rows:
        s = r["added_ns"]
        w("| %s | %+.2f us | %+.2f .. %+.2f | %+.1f .. %+.1f | %.1f us | %+.2f%% |\n" % (
            r["piece"], s["median"] / 1e3, s["ci95"][0] / 1e3, s["ci95"][1] / 1e3, s["q25"] / 1e3,
            s["q75"] / 1e3, r["base_ns"] / 1e3, 100.0 * s["median"] / r["base_ns"]))
    for r in rows:
        if "added_steady_ns" in r:
            w("%s: %.3f counter reads per step in the blocks, %.3f in a steady run: %+.2f us per step "
              "steady (%+.2f%%)\n" % (r["piece"], r["counter_reads_per_step"], r["steady_reads_per_step"],
                                      r["added_steady_ns"] / 1e3, 100.0 * r["added_steady_ns"] / r["base_ns"]))


# ---- --pure: sys.monitoring's RAISE callback against code that raises nothing, and code that raises ----

def pure(a):
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        sys.exit("bench_step_hooks --pure: Python %s has no sys.monitoring (3.12+)" % sys.version.split()[0])
    sys.path.insert(0, COMPANION)
    import _oomtrace_companion as C
    comp = C.Companion.__new__(C.Companion)  # the real on_raise, without the library's entry points
    tool = next(t for t in (4, 3, 5, 2, 1, 0) if mon.get_tool(t) is None)
    mon.use_tool_id(tool, "oomtrace")
    mon.register_callback(tool, mon.events.RAISE, comp.on_raise)

    def calls(n):  # function calls, attribute reads, a dict: no raise
        class P:
            def __init__(self, x):
                self.x = x

            def f(self, y):
                return self.x + y
        d, acc = {}, 0
        for i in range(n):
            p = P(i)
            acc += p.f(i)
            d[i & 63] = acc
        return acc

    def raises(n):  # a caught KeyError each time round
        d, acc = {}, 0
        for i in range(n):
            try:
                acc += d[i]
            except KeyError:
                acc += 1
        return acc

    rows = []
    for name, fn, per in (("no raises", calls, 2000), ("raises", raises, 2000)):
        def run_block(steps, state, fn=fn, per=per):
            out = []
            for _ in range(steps):
                t0 = time.perf_counter_ns()
                fn(per)
                out.append(time.perf_counter_ns() - t0)
            return out
        on = lambda: mon.set_events(tool, mon.events.RAISE)  # noqa: E731
        off = lambda: mon.set_events(tool, 0)  # noqa: E731
        for _ in range(3):
            run_block(a.steps, False)
        diffs, base = paired(run_block, on, off, a.blocks, a.steps)
        s = summary(diffs)
        rows.append({"case": "raise_monitoring", "piece": "monitoring, %s" % name, "unit": "ns per %d-iteration call" % per,
                     "added_ns": s, "base": "%d-iteration call" % per, "base_ns": summary(base)["median"],
                     "added_per_iteration_ns": s["median"] / per, "python": sys.version.split()[0]})
    report(rows)


# ---- the training step, with the companion attached ----

class Registry:
    """torch 2's global optimizer hook registry for a torch without it (Debian's 1.13): the companion
    registers through it, the step calls the hooks around opt.step() as torch 2's wrapper does."""

    class Handle:
        def __init__(self, d, k):
            self.d, self.k = d, k

        def remove(self):
            self.d.pop(self.k, None)

    def __init__(self, optmod):
        self.pre, self.post, self.n = {}, {}, 0
        optmod.register_optimizer_step_pre_hook = lambda h: self.add(self.pre, h)
        optmod.register_optimizer_step_post_hook = lambda h: self.add(self.post, h)

    def add(self, d, h):
        self.n += 1
        d[self.n] = h
        return Registry.Handle(d, self.n)

    def wrap(self, opt):
        step = opt.step

        def wrapped(*args, **kwargs):
            for h in list(self.pre.values()):
                h(opt, args, kwargs)
            out = step(*args, **kwargs)
            for h in list(self.post.values()):
                h(opt, args, kwargs)
            return out
        opt.step = wrapped


def spin_us(us):
    """A stand-in for torch._C._cuda_memoryStats on CPU: busy for `us` microseconds, returns its shape."""
    end = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < end:
        pass
    return {"allocated_bytes": {"all": {"current": 1}}, "reserved_bytes": {"all": {"current": 2}}}


def training(a):
    os.environ.setdefault("GPU_TEST_WATCHDOG", "170")  # gpucommon's: a hang still ends the process
    sys.path.insert(0, HERE)
    if not a.cpu:
        from bench_alloc_pair import need_async_backend
        need_async_backend("bench_step_hooks")
    from bench_alloc_pair import make_step
    import torch
    import torch.optim.optimizer as optmod
    registry = None
    if not hasattr(optmod, "register_optimizer_step_post_hook"):
        if not a.cpu:
            sys.exit("bench_step_hooks: torch %s has no global optimizer step hook" % torch.__version__)
        registry = Registry(optmod)
    if a.cpu and "_oomtrace_companion" not in sys.modules:
        # No device allocation starts it on CPU: start the embedded companion's source the way the library
        # does (needs the library preloaded for its entry points).
        sys.path.insert(0, COMPANION)
        import _oomtrace_roles  # noqa: F401  (the library loads every module of the companion)
        import _oomtrace_companion
        _oomtrace_companion._start()
    if a.cpu:
        # Width 16 on one thread: a ~3.6 ms step on this 2-core machine, as CPU-bound as the H200's 3.2 ms
        # one (width 256 takes 75 ms on CPU, which would hide every Python cost).
        torch.set_num_threads(1)
        step, model, opt, x = make_step(with_model=True, device="cpu", width=16)
        sync = lambda: None  # noqa: E731
    else:
        torch.cuda.init()
        step, model, opt, x = make_step(with_model=True)
        sync = torch.cuda.synchronize
    if registry is not None:
        registry.wrap(opt)
    for _ in range(20):
        step()
    sync()
    comp_mod = sys.modules.get("_oomtrace_companion")
    roles = sys.modules.get("_oomtrace_roles")
    comp = getattr(comp_mod, "_companion", None)
    hook = getattr(roles, "_hook", None)
    adapter = comp.attached.get("torch") if comp is not None else None
    if hook is None or adapter is None or not hook.watched:
        sys.exit("bench_step_hooks: the companion is not attached to torch with its step hook (preload "
                 "build/liboomtrace.so with OOMTRACE_FRAMEWORKS=1; %s)" %
                 ("companion started" if comp else "no companion"))
    if a.cpu and a.stand_in_us > 0:
        # CPU torch has no allocator counters: a stand-in that costs what the H200's read costs, so that the
        # "work" and "all" pieces include the sampled reads as on the GPU.
        adapter.cuda_ready = True
        adapter.memory_stats = lambda: spin_us(a.stand_in_us)
    mon = getattr(sys, "monitoring", None)
    tool = None
    if mon is not None:
        tool = next((t for t in range(6) if mon.get_tool(t) == "oomtrace"), None)
    raise_on = (lambda: mon.set_events(tool, mon.events.RAISE)) if tool is not None else (lambda: None)
    raise_off = (lambda: mon.set_events(tool, 0)) if tool is not None else (lambda: None)
    sys.path.insert(0, COMPANION)
    from _oomtrace_roles import _shape_text
    dev = None if a.cpu else torch.cuda.current_device()
    label = b"step 1000 " + hook.shapes.encode()
    extra = {"memoryStats": (lambda: torch._C._cuda_memoryStats(dev)) if not a.cpu else (lambda: spin_us(a.stand_in_us)),
             "mark": lambda: comp.mark_fn(label),
             "shapes": lambda: _shape_text((x,), {}, torch)}

    clock = time.perf_counter_ns

    def run_block(steps, state, fn=None):
        """Each step's time; the device is drained before the first and after the last (the step is
        CPU-bound: the device idles most of it, so a step's launches do not wait for the one before)."""
        sync()
        out = []
        t0 = clock()
        for _ in range(steps):
            step()
            if fn is not None and state:
                fn()
            t1 = clock()
            out.append(t1 - t0)
            t0 = t1
        sync()
        return out

    def set_hooks(on):
        if on and not hook.handles:
            hook.register(optmod)
        elif not on and hook.handles:
            hook.unregister()

    def all_on():
        set_hooks(True)
        hook.off = False
        raise_on()

    def all_off():
        set_hooks(False)
        raise_off()

    def work(on):
        def f():
            set_hooks(True)
            hook.off = not on
        return f

    def hooks(on):
        def f():
            hook.off = True
            set_hooks(on)
        return f

    nop = lambda: None  # noqa: E731
    pieces = [("none", nop, nop, None), ("all", all_on, all_off, None), ("work", work(True), work(False), None),
              ("hooks", hooks(True), hooks(False), None)]
    if tool is not None:
        pieces.append(("monitoring", raise_on, raise_off, None))
    if not a.cpu or a.stand_in_us > 0:
        pieces.append(("memoryStats", nop, nop, extra["memoryStats"]))
    pieces += [("mark", nop, nop, extra["mark"]), ("shapes", nop, nop, extra["shapes"])]
    if a.only:
        pieces = [p for p in pieces if p[0] in a.only.split(",")]
    rows = []
    for name, on, off, fn in pieces:
        reads0, steps0 = adapter.counters.reads, hook.step
        # The pieces that time an extra call run with the companion as attached; the others start from it.
        all_on()
        blocks = a.blocks * (2 if name in ("none", "all") else 1)  # the A/A test and the answer: tighter
        diffs, base = paired(lambda n, s, fn=fn: run_block(n, s, fn), on, off, blocks, a.steps)
        all_on()
        s = summary(diffs)
        b = summary(base)["median"]
        row = {"case": "step_hooks", "piece": name, "unit": "ns/step", "added_ns": s, "base": "step",
               "base_ns": b, "share_pct": 100.0 * s["median"] / b}
        if name in ("all", "work"):
            # The off halves' time counts toward the spacing too, so the blocks read the counters more often
            # than a run that never switches; a steady run reads once per spacing x cost of steps.
            row["counter_reads_per_step"] = (adapter.counters.reads - reads0) / max(1, hook.step - steps0)
            if adapter.counters.cost:
                cost = adapter.counters.cost
                row["steady_reads_per_step"] = min(1.0, b / (cost * adapter.counters.spacing))
                row["added_steady_ns"] = s["median"] - (row["counter_reads_per_step"] - row["steady_reads_per_step"]) * cost
        rows.append(row)
    common = {"python": sys.version.split()[0], "torch": torch.__version__, "cpu": bool(a.cpu),
              "traced": "liboomtrace" in os.environ.get("LD_PRELOAD", ""),
              "counter_read_ns": adapter.counters.cost, "read_spacing": adapter.counters.spacing}
    for r in rows:
        r.update(common)
    report(rows)
    for r in direct(a, torch, hook, adapter, comp, opt, x, label, extra):
        r.update(common)
        print(json.dumps(r), flush=True)


def timed(fn, n, repeats=5):
    """Least ns per call of fn over `repeats` loops of n calls: the call's own cost, without the step's
    noise around it."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def direct(a, torch, hook, adapter, comp, opt, x, label, extra):
    """The companion's callbacks called directly, as torch calls them at each step, in tight loops: their
    own cost to ~0.1 us, which the paired blocks (the whole effect, caches included) cannot resolve on a
    noisy host. Steps counted here are taken back afterwards."""
    n = a.calls
    rows = []
    hook.off = False
    saved = (hook.step, list(adapter.steps), hook.started)
    due = adapter.counters

    def one_step():  # what torch 2 calls at a step: pre hook, the model's forward pre hook, post hook
        hook.pre_step(opt, (), {})
        hook.pre_forward(None, (x,), {})
        hook.post_step(opt, (), {})

    def forced():  # the same with the counters read at every step (no sampling)
        due.due = 0
        one_step()

    shapes = [(torch.zeros(4, i % 7 + 1),) for i in range(8)]
    k = [0]

    def new_shapes():  # inputs whose shapes change at every call: the text is built each time
        k[0] += 1
        hook.pre_forward(None, shapes[k[0] & 7], {})

    ident = torch.nn.Identity()
    plain = timed(lambda: ident(x), n)
    h = hook.watch_forward(ident)
    hooked = timed(lambda: ident(x), n)
    h.remove()
    cases = [("callbacks of one step (counters sampled)", one_step),
             ("callbacks of one step (counters read every step)", forced),
             ("forward pre hook, same shapes", lambda: hook.pre_forward(None, (x,), {})),
             ("forward pre hook, new shapes", new_shapes),
             ("step marker (ctypes + record)", extra["mark"]),
             ("counter read (memoryStats)", extra["memoryStats"])]
    for name, fn in cases:
        rows.append({"case": "step_hooks_direct", "piece": name, "unit": "ns/call", "ns": timed(fn, n)})
    rows.append({"case": "step_hooks_direct", "piece": "nn.Module call through the forward pre hook path",
                 "unit": "ns/call", "ns": hooked - plain, "plain_call_ns": plain})
    hook.step, hook.started = saved[0], saved[2]
    adapter.steps.clear()
    adapter.steps.extend(saved[1])
    w = sys.stderr.write
    w("\n| direct call | ns |\n|---|---:|\n")
    for r in rows:
        w("| %s | %.0f |\n" % (r["piece"], r["ns"]))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="Debian's CPU torch, no CUDA")
    ap.add_argument("--pure", action="store_true", help="sys.monitoring alone, no torch")
    ap.add_argument("--blocks", type=int, default=150, help="paired blocks per piece (none and all: twice)")
    ap.add_argument("--steps", type=int, default=8, help="steps per half block")
    ap.add_argument("--only", default="", help="comma-separated pieces")
    ap.add_argument("--calls", type=int, default=5000, help="calls per loop of the direct timings")
    ap.add_argument("--stand-in-us", type=float, default=20.0,
                    help="--cpu: what the stand-in counter read costs (the H200's: ~20 us); 0: none")
    a = ap.parse_args()
    if a.pure:
        pure(a)
    else:
        training(a)


if __name__ == "__main__":
    main()
