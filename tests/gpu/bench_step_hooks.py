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

Each step is measured in several figures at once (step_probes.py): the wall clock, the thread's CPU time, and
the thread's cycles and instructions where the kernel counts them (perf_event_open). The verdict reads the
thread's CPU time (--clock): the step is CPU-bound and the companion works on its thread, so what it adds
there is what the user's step pays, without the scheduler's noise the wall clock carries (run 24: an A/A
interval 67 us wide on a 4.2 ms step). It says whether `all` is inside the A/A interval, how wide that
interval is, and whether the upper end of `all`'s own 95% interval is under 0.3% of the step (then the cost
is below 0.3% whatever the A/A's width). Instructions counted by callgrind on CPU: bench/step_hook_ir.py.

The companion is the real one, attached by the tracer: its hooks are found in sys.modules["_oomtrace_steps"]
._hook and switched by the companion's own switches (the hook's `off` flag, its register()/unregister(); RAISE
events through a sys.monitoring tool of the benchmark's with the companion's callback), never by editing torch.

  GPU (the step of tests/gpu/bench_alloc_pair.py, traced, companion attached; about 3.5 minutes on one H200):
    mkdir -p $OUT/snap; PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync OOMTRACE_QUIET=1 OOMTRACE_DIR=$OUT/snap \\
        LD_PRELOAD=$PWD/build/liboomtrace.so LD_LIBRARY_PATH=$PWD/.carry/lib taskset -c 4-7 \\
        python3 tests/gpu/bench_step_hooks.py >$OUT/hooks.jsonl 2>$OUT/hooks.txt; cat $OUT/hooks.txt
  CPU (Debian's torch 1.13, which has no global step hook: the benchmark registers the companion's hooks
  through a stand-in of torch 2's registry and calls them around opt.step() as torch 2 does):
    OOMTRACE_QUIET=1 LD_PRELOAD=build/liboomtrace.so LD_LIBRARY_PATH=build/fake /usr/bin/python3 \\
        tests/gpu/bench_step_hooks.py --cpu
  sys.monitoring (Python 3.12+, no torch): does a RAISE callback slow code that raises nothing, what does each
  raise cost, and what does switching events cost a model of a step's Python side:
    ~/.pyenv/versions/3.12.1/bin/python3 tests/gpu/bench_step_hooks.py --pure

Pieces (each against the same step without it; "base" is what both halves share):
  none             nothing switched, the companion attached: the method's own bias and spread (an A/A test)
  all              the companion as attached (this change): the optimizer's step post hook registered and
                   working, counters read every READ_SPACING x a read's cost, the model's inputs sampled at
                   most every SAMPLE_SPACING_NS (nothing on the model between samples); no RAISE events (its
                   OOM classes are watched by their creation). The answer: issue 12 asks it to be inside
                   none's interval, or under 0.3%
  work             the hooks' work (the `off` flag), hooks registered either way
  C hook           the optimizer's step post hook itself in C (lib/runtime/companion_step.c, _step_hook),
                   against the hook in Python (post_step, then the C path for the STEPS entry and marker)
  post hook        only the global optimizer step post hook, returning at once: torch's hook call
  raise            RAISE events with the companion's callback on, against off (3.12+)
  toggle           RAISE events switched on and off again before the half, none during it: what the
                   benchmark's switching costs by itself (3.12 instruments every code object anew)
  memoryStats      one more torch._C._cuda_memoryStats(device) a step: what reading the counters at every step
                   would cost
  mark             one more step marker a step, with the companion's label
  shapes           one more shape text of the model's inputs a step: what building it at every step would cost
A half's figure is the mean of its middle steps: a step that pays a rare cost (a counter read, a garbage
collection, the first step after a switch) tends to fall outside it, so the pieces give the per-step costs, and
the counters' sampled reads are counted separately (counter_reads_per_step, added_steady_ns), as are the
sampled steps (samples_per_step; a sampled call's cost is timed right after a step, and the verdict adds its
share a step in a steady run: min(1, step / SAMPLE_SPACING_NS) x that cost).
Then, timed directly: each callback, the step marker with a busy Python thread wanting the GIL (CDLL
against PyDLL), the RAISE callback, and the exceptions a step raises (where: the RAISE callback's calls).
On the GPU, last: a torch OutOfMemoryError raised and caught must still write the framework's snapshot
(cudaMallocAsync has no OOM observer: the companion sees it at its creation).
Prints one JSON line per piece and a table on stderr."""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from step_hooks_direct import PLAIN_CALL, SAMPLED_CALL, direct  # noqa: E402
from step_probes import Probes, UNITS  # noqa: E402
from step_stats import column, figures_table, paired, report, summary, verdict  # noqa: E402
COMPANION = os.path.join(os.path.dirname(os.path.dirname(HERE)), "lib", "companion")


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

    # A model of a training step's Python side: 400 distinct functions (torch 2's eager step runs a few
    # hundred), an nn.Module-like object whose __getattr__ raises AttributeError for a missing name, and 3
    # hasattr() misses a step (the raises a PyTorch 2 step makes: docs/validation.md, run 17).
    src = "".join("def f%d(x):\n    return x + %d\n" % (i, i) for i in range(400))
    ns = {}
    exec(compile(src, "<model>", "exec"), ns)
    funcs = [ns["f%d" % i] for i in range(400)]

    class Module:
        def __init__(self):
            self._parameters = {"weight": 1}

        def __getattr__(self, name):
            p = self.__dict__.get("_parameters", {})
            if name in p:
                return p[name]
            raise AttributeError(name)

    mod = Module()

    def model_step(n):
        acc = 0
        for _ in range(n):
            for f in funcs:
                acc = f(acc)
            acc += mod.weight
            for _ in range(3):
                acc += hasattr(mod, "_missing")
        return acc

    on = lambda: mon.set_events(tool, mon.events.RAISE)  # noqa: E731
    off = lambda: mon.set_events(tool, 0)  # noqa: E731

    def toggle():
        on()
        off()
    nop = lambda: None  # noqa: E731
    rows = []
    for name, fn, per, pon, poff in (("monitoring, no raises", calls, 2000, on, off),
                                     ("monitoring, raises", raises, 2000, on, off),
                                     ("monitoring, a model's step", model_step, 1, on, off),
                                     ("switching events (instrumenting anew), a model's step", model_step, 1, toggle, nop)):
        def run_block(steps, state, fn=fn, per=per):
            out = []
            for _ in range(steps):
                t0 = time.perf_counter_ns()
                fn(per)
                out.append(time.perf_counter_ns() - t0)
            return out
        for _ in range(3):
            run_block(a.steps, False)
        diffs, base = paired(run_block, pon, poff, a.blocks, a.steps)
        s = summary(column(diffs, 0))
        rows.append({"case": "raise_monitoring", "piece": name, "unit": "ns per %d-iteration call" % per,
                     "added_ns": s, "base": "%d-iteration call" % per, "base_ns": summary(column(base, 0))["median"],
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


def setup(a, width=16):
    """The step with the companion attached by the tracer and its step hook watching the model: a namespace
    of torch, optmod, step, model, opt, x, sync, comp (the companion), hook (its _StepHook), adapter (its
    Torch adapter). Also used by bench/step_hook_ir.py (instructions counted by callgrind)."""
    os.environ.setdefault("GPU_TEST_WATCHDOG", "235")  # gpucommon's: a hang still ends the process (4 minutes)
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
        # CPU torch makes no device allocation, which is what starts the companion: one through the
        # stand-in driver (LD_LIBRARY_PATH=build/fake) does, at the next pending call.
        try:
            import ctypes
            cu = ctypes.CDLL("libcuda.so.1")
            ptr = ctypes.c_uint64()
            if cu.cuInit(0) == 0 and cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20)) == 0:
                for _ in range(10000):  # safe points, where the pending call runs
                    pass
        except OSError:
            pass
    if a.cpu and "_oomtrace_companion" not in sys.modules:
        # No stand-in driver: the companion's source, started the way the library does (needs the library
        # preloaded for its entry points; the marker then goes through ctypes, not the library's builtin).
        sys.path.insert(0, COMPANION)
        import _oomtrace_roles  # noqa: F401  (the library loads every module of the companion)
        import _oomtrace_steps  # noqa: F401
        import _oomtrace_companion
        _oomtrace_companion._start()
    if a.cpu:
        # Width 16 on one thread: a ~3.6 ms step on this 2-core machine, as CPU-bound as the H200's 3.2 ms
        # one (width 256 takes 75 ms on CPU, which would hide every Python cost).
        torch.set_num_threads(1)
        step, model, opt, x = make_step(with_model=True, device="cpu", width=width)
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
    steps_mod = sys.modules.get("_oomtrace_steps")
    comp = getattr(comp_mod, "_companion", None)
    hook = getattr(steps_mod, "_hook", None)
    adapter = comp.attached.get("torch") if comp is not None else None
    if hook is None or adapter is None or not hook.watched:
        sys.exit("bench_step_hooks: the companion is not attached to torch with its step hook (preload "
                 "build/liboomtrace.so with OOMTRACE_FRAMEWORKS=1; %s)" %
                 ("companion started" if comp else "no companion"))
    import types
    return types.SimpleNamespace(torch=torch, optmod=optmod, step=step, model=model, opt=opt, x=x, sync=sync,
                                 comp=comp, hook=hook, adapter=adapter)


def training(a):
    s = setup(a)
    torch, optmod, step, opt, x, sync, model = s.torch, s.optmod, s.step, s.opt, s.x, s.sync, s.model
    comp, hook, adapter = s.comp, s.hook, s.adapter
    if a.cpu and a.stand_in_us > 0:
        # CPU torch has no allocator counters: a stand-in that costs what the H200's read costs, so that the
        # "work" and "all" pieces include the sampled reads as on the GPU.
        adapter.cuda_ready = True
        adapter.memory_stats = lambda: spin_us(a.stand_in_us)
    mon = getattr(sys, "monitoring", None)
    # The companion takes RAISE events only where an OOM class refuses its creation wrapper (not the case
    # with torch); the "raise" and "before" pieces register the companion's own callback, as it did before.
    own_tool = None
    if mon is not None:
        own_tool = next((t for t in range(6) if mon.get_tool(t) == "oomtrace"), None)
    tool = own_tool
    if mon is not None and tool is None:
        tool = next((t for t in (4, 3, 5, 2, 1, 0) if mon.get_tool(t) is None), None)
        if tool is not None:
            mon.use_tool_id(tool, "oomtrace-bench")
            mon.register_callback(tool, mon.events.RAISE, comp.on_raise)
    raise_on = (lambda: mon.set_events(tool, mon.events.RAISE)) if tool is not None else (lambda: None)
    raise_off = (lambda: mon.set_events(tool, 0)) if tool is not None else (lambda: None)
    raise_as_attached = raise_on if own_tool is not None else raise_off

    def toggle():  # events on and off again: every code object run next is instrumented anew (3.12)
        raise_on()
        raise_off()
    sys.path.insert(0, COMPANION)
    from _oomtrace_steps import _shape_text
    dev = None if a.cpu else torch.cuda.current_device()
    label = b"step 1000 " + _shape_text((x,), {}, torch).encode()
    extra = {"memoryStats": (lambda: torch._C._cuda_memoryStats(dev)) if not a.cpu else (lambda: spin_us(a.stand_in_us)),
             "mark": lambda: comp.mark_fn(label),
             "shapes": lambda: _shape_text((x,), {}, torch)}

    # Every step: the wall clock, the thread's CPU time and, where the kernel counts them, its cycles and
    # instructions (step_probes.py). The verdict reads a.clock's figure, the others are shown beside it.
    probes = Probes(counters=not a.no_counters)
    read = probes.read
    figures = probes.names
    verdict_k = figures.index("thread_ns" if a.clock == "thread" else "wall_ns")

    def run_block(steps, state, fn=None):
        """Each step's figures; the device is drained before the first and after the last (the step is
        CPU-bound: the device idles most of it, so a step's launches do not wait for the one before)."""
        sync()
        out = []
        r0 = read()
        for _ in range(steps):
            step()
            if fn is not None and state:
                fn()
            r1 = read()
            out.append(tuple(y - x for x, y in zip(r0, r1)))
            r0 = r1
        sync()
        return out

    def set_hooks(on):
        if on and not hook.handles:
            hook.register(optmod)
        elif not on and hook.handles:
            hook.unregister()

    spacing = adapter.counters.spacing

    def all_on():  # the companion as it is attached
        set_hooks(True)
        hook.off = False
        adapter.counters.spacing = spacing
        raise_as_attached()

    def all_off():
        set_hooks(False)
        raise_off()

    c_post = hook.c_post

    def c_hook(on):  # the step hook itself in C (lib/runtime/companion_step.c), or post_step in Python
        def f():
            set_hooks(False)
            hook.c_post = c_post if on else None
            set_hooks(True)
        return f

    def work(on):
        def f():
            set_hooks(True)
            hook.off = not on
        return f

    # The post hook alone, registered with its work off (it returns at once).
    solo = []

    def solo_hooks(on):
        def f():
            hook.off = True
            set_hooks(False)
            for h in solo:
                h.remove()
            del solo[:]
            if on:
                solo.append(optmod.register_optimizer_step_post_hook(hook.c_post or hook.post_step))
        return f

    nop = lambda: None  # noqa: E731
    # (name, on, off, extra call a step, blocks, base: what every half starts from)
    big, small = a.main_blocks, a.blocks
    pieces = [("none", nop, nop, None, a.aa_blocks or big, all_on),
              ("all", all_on, all_off, None, big, all_off),
              ("work", work(True), work(False), None, small, all_on),
              ("C hook", c_hook(True), c_hook(False), None, small, all_on),
              ("post hook", solo_hooks(True), solo_hooks(False), None, small, all_off)]
    if tool is not None:
        pieces.append(("raise", raise_on, raise_off, None, small, all_on))
        pieces.append(("toggle", toggle, nop, None, small, all_on))
    if not a.cpu or a.stand_in_us > 0:
        pieces.append(("memoryStats", nop, nop, extra["memoryStats"], small, all_on))
    pieces += [("mark", nop, nop, extra["mark"], small, all_on), ("shapes", nop, nop, extra["shapes"], small, all_on)]
    if a.only:
        pieces = [p for p in pieces if p[0] in a.only.split(",")]
    rows = []
    for name, on, off, fn, blocks, base_state in pieces:
        reads0, steps0, samples0 = adapter.counters.reads, hook.step, hook.samples
        base_state()
        for _ in range(2):
            run_block(a.steps, False)
        diffs, base = paired(lambda n, s, fn=fn: run_block(n, s, fn), on, off, blocks, a.steps)
        off()
        for h in solo:
            h.remove()
        del solo[:]
        all_on()
        s = summary(column(diffs, verdict_k))
        # Shares are of the wall-clock step: on the GPU its thread waits for the backward pass about half of it.
        b = summary(column(base, figures.index("wall_ns")))["median"]
        row = {"case": "step_hooks", "piece": name, "unit": "ns/step", "added_ns": s, "base": "step",
               "base_ns": b, "share_pct": 100.0 * s["median"] / b, "figure": figures[verdict_k],
               "figures": {f: {"added": summary(column(diffs, k)), "base": summary(column(base, k))["median"]}
                           for k, f in enumerate(figures)},
               # Each block's difference in the verdict's figure, in block order (even blocks ran the piece
               # first): what a later look at the method (order effects, drift) needs, kept to the nanosecond.
               "diffs_ns": [round(d) for d in column(diffs, verdict_k)]}
        if name in ("all", "work"):
            row["samples_per_step"] = (hook.samples - samples0) / max(1, hook.step - steps0)
            # The off halves' time counts toward the spacing too, so the blocks read the counters more often
            # than a run that never switches; a steady run reads once per spacing x cost of steps.
            row["counter_reads_per_step"] = (adapter.counters.reads - reads0) / max(1, hook.step - steps0)
            if adapter.counters.cost:
                cost = adapter.counters.cost
                row["steady_reads_per_step"] = min(1.0, b / (cost * spacing))
                row["added_steady_ns"] = s["median"] - (row["counter_reads_per_step"] - row["steady_reads_per_step"]) * cost
        rows.append(row)
    common = {"python": sys.version.split()[0], "torch": torch.__version__, "cpu": bool(a.cpu), "clock": a.clock,
              "probes": probes.describe(),
              "traced": "liboomtrace" in os.environ.get("LD_PRELOAD", ""),
              "counter_read_ns": adapter.counters.cost, "read_spacing": spacing,
              "companion_raise_events": own_tool is not None}
    for r in rows:
        r.update(common)
    report(rows)
    figures_table(rows, figures)
    direct_rows = direct(a, torch, hook, adapter, comp, opt, model, x, label, extra, step, mon, tool)
    for r in direct_rows:
        r.update(common)
        print(json.dumps(r), flush=True)
    # The sampled steps fall outside a half's middle mean: their share a step in a steady run, added.
    cold = {r["piece"]: r["median_ns"] for r in direct_rows if r.get("case") == "step_hooks_in_step"}
    sample_ns, plain_ns = cold.get(SAMPLED_CALL), cold.get(PLAIN_CALL)
    step_ns = next((r["base_ns"] for r in rows if r["piece"] == "all"), None)
    sampling = None
    if sample_ns is not None and plain_ns is not None and step_ns:
        from _oomtrace_steps import SAMPLE_SPACING_NS
        per = min(1.0, step_ns / SAMPLE_SPACING_NS)
        sampling = {"sampled_call_added_ns": sample_ns - plain_ns, "samples_per_step_steady": per,
                    "added_per_step_ns": per * max(0.0, sample_ns - plain_ns)}
        sys.stderr.write("\nsampling the model's inputs: a sampled call adds %.1f us right after a step (the hook "
                         "armed, called, removed: %.1f against %.1f us); at most one every %.0f ms: %.4f samples a "
                         "step of %.2f ms, %+.2f us a step (%+.3f%%), added to the verdict\n" % (
                             (sample_ns - plain_ns) / 1e3, sample_ns / 1e3, plain_ns / 1e3, SAMPLE_SPACING_NS / 1e6,
                             per, step_ns / 1e6, sampling["added_per_step_ns"] / 1e3,
                             100.0 * sampling["added_per_step_ns"] / step_ns))
        print(json.dumps(dict(sampling, case="step_hooks_sampling", **common)), flush=True)
    sys.stderr.write("(%s; the verdict reads the %s)\n" % (probes.describe(), UNITS[figures[verdict_k]][0]))
    for f in figures:
        verdict(rows, f, f == figures[verdict_k], sampling if f.endswith("_ns") else None)
    if not a.cpu:
        r = oom_seen(torch)
        r.update(common)
        print(json.dumps(r), flush=True)


def oom_seen(torch):
    """A torch OutOfMemoryError raised and caught (cudaMallocAsync: no OOM observer) must still write the
    framework's snapshot: the companion sees it by its creation, not by RAISE events (issue 12)."""
    d = os.environ.get("OOMTRACE_DIR", "")
    before = set(os.listdir(d)) if d and os.path.isdir(d) else set()
    caught = ""
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError as e:
        caught = type(e).__name__
    new = sorted(set(os.listdir(d)) - before) if d and os.path.isdir(d) else []
    ok = bool(caught) and any("framework-oom" in f for f in new)
    sys.stderr.write("torch OOM caught: %s; new snapshots: %s: %s\n" % (caught or "none", new or "none",
                                                                   "seen" if ok else "NOT SEEN"))
    return {"case": "step_hooks_oom", "caught": caught, "snapshots": new, "framework_oom_written": ok}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="Debian's CPU torch, no CUDA")
    ap.add_argument("--pure", action="store_true", help="sys.monitoring alone, no torch")
    ap.add_argument("--blocks", type=int, default=40, help="paired blocks per piece, but the next three")
    ap.add_argument("--main-blocks", type=int, default=900,
                    help="paired blocks of the pieces none (A/A) and all (the answer)")
    ap.add_argument("--aa-blocks", type=int, default=0,
                    help="paired blocks of the A/A alone (default: --main-blocks): the verdict's bound is all's own "
                         "interval, so its blocks narrow it most where a call's time is short")
    ap.add_argument("--steps", type=int, default=8, help="steps per half block")
    ap.add_argument("--only", default="", help="comma-separated pieces")
    ap.add_argument("--calls", type=int, default=5000, help="calls per loop of the direct timings")
    ap.add_argument("--cold-steps", type=int, default=1400,
                    help="steps of the in-step timings (each followed by one call, in turn)")
    ap.add_argument("--stand-in-us", type=float, default=20.0,
                    help="--cpu: what the stand-in counter read costs (the H200's: ~20 us); 0: none")
    ap.add_argument("--clock", choices=("wall", "thread"), default="thread",
                    help="the figure the verdict reads: the thread's CPU time (default) or the wall clock; both "
                         "are shown, and the thread's cycles and instructions where the kernel counts them")
    ap.add_argument("--no-counters", action="store_true", help="do not ask the kernel for cycle counters")
    a = ap.parse_args()
    if a.pure:
        pure(a)
    else:
        training(a)


if __name__ == "__main__":
    main()
