"""What the Python companion's step hook adds to a training step, counted in instructions (callgrind), not timed:
a count does not move with the host's load, so it says what a wall-clock interval of +-33 us cannot.

    /usr/bin/python3 bench/step_hook_ir.py [--steps N] [--cache] [--top K] [--pieces 'all;none (A/A)']

runs itself under valgrind (callgrind, --dump-before=getppid) with build/liboomtrace.so preloaded against the
stand-in driver, Debian's CPU torch (1.13: the benchmark's stand-in of torch 2's global optimizer hook registry,
tests/gpu/bench_step_hooks.py, Registry) and the companion attached as the tracer attaches it; the start runs
uninstrumented. For each piece X, four blocks of N steps, U X X U (U: the step hook's handles removed, so torch
takes its hook-free paths), each after its switch and two uncounted steps, are parts of the profile (a
getppid() call ends each: callgrind dumps there); the piece adds (X1 + X2 - U1 - U2) / 2N a step, in which a
drift linear in time cancels. "none (A/A)" switches nothing: what the count moves by itself.

"Ir outside malloc" leaves out glibc's allocator (malloc, free, posix_memalign ... inclusive): CPU torch
allocates every tensor there, at a cost that follows the heap's state (the A/A moves by ~7,000 Ir a step with
it, ~300 without); on the GPU tensors come from the CUDA caching allocator. The garbage collector is off while
counting (collected before each block), so that a collection does not fall into one block and not the other;
what a piece leaves to the collector instead is counted (gc-tracked objects left a step, gc.get_count()).

--cache adds callgrind's cache simulation (D1 and LL misses; D1=49152,12,64 and LL=2097152,16,64 unless D1= or
LL= say otherwise): the companion's own misses a step, with the caches as warm as a loop of steps leaves them.
The sampled read of the allocator's counters (torch._C._cuda_memoryStats) does not exist on CPU torch: it is
left out (its due time pushed past the run); it costs ~1/READ_SPACING of the time (docs/PERFORMANCE.md).
Prints a table (and with --top, where "all" adds its instructions, by C function); --json writes the figures.
The model's inputs are sampled at most once a second of the real clock, which under callgrind is every few
steps: the pieces take no sample but "a sample every step" (a step's share of a sample is that piece's count x
steps per second). About 4 minutes here. --calls N instead counts each callback (and the model's call with the sampled
hook armed) in a loop of N calls: a count does not depend on the caches, so a loop's count a call is the call's in a step.
"""
import argparse
import gc
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU = os.path.join(ROOT, "tests", "gpu")

# The pieces, each against "unregistered" (the step hook's handles removed, so torch's hook paths are its fast
# ones); "none (A/A)" switches nothing: what the count moves by itself between blocks.
PIECES = ("none (A/A)", "all", "all, the hook in Python (post_step, then the C path)",
          "all, Python's path after a step", "registered, returning at once", "a sample every step",
          "one more marker a step")
# glibc's allocator entry points: CPU torch allocates every tensor there, and their cost depends on the heap's
# state, which drifts; on the GPU the tensors come from the CUDA caching allocator.
C_ALLOC = ("malloc", "free", "posix_memalign", "realloc", "calloc", "memalign", "aligned_alloc", "cfree")


def inner(a):
    """Runs under callgrind: for each piece X, blocks U X X U of N steps each (U: unregistered), each block
    after its switch and 2 uncounted steps, between getppid() calls (callgrind dumps a part at each)."""
    sys.path.insert(0, GPU)
    from bench_step_hooks import setup
    s = setup(argparse.Namespace(cpu=True))
    hook, adapter, optmod = s.hook, s.adapter, s.optmod
    adapter.cuda_ready = True  # as on the GPU: torch set CUDA up, the answer is kept
    adapter.counters.due = float("inf")  # the sampled counter read exists only on CUDA torch: left out
    # The start (torch's import, the companion's) runs uninstrumented (--instr-atstart=no): ~10 times faster.
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    from _oomtrace_steps import _shape_text
    label = b"step 1000 " + _shape_text((s.x,), {}, s.torch).encode()
    mark = s.comp.mark_fn
    step = s.step
    def every_step():  # the sampled forward pre hook armed after every step: what a sample costs
        clear()
        hook.register(optmod)

        def arm():
            hook.due = 0
        return arm

    fast = hook.fast

    c_post = hook.c_post

    def clear():
        hook.due = float("inf")  # under callgrind a step takes ~0.2 s: no sample unless a piece asks for one
        hook.unregister()
        hook.off = False
        hook.fast, hook.c_post = fast, c_post
        return None

    def registered(off, python=0):
        def f():
            clear()
            if python:
                hook.c_post = None  # post_step, Python's, is the hook (before _step_hook)
            if python > 1:
                hook.fast = None  # on_step in Python at every step, as before lib/runtime/companion_step.c
            hook.register(optmod)
            hook.off = off
        return f

    def marker():
        clear()
        return lambda: mark(label)

    switch = {"none (A/A)": clear, "registered, returning at once": registered(True), "all": registered(False),
              "all, the hook in Python (post_step, then the C path)": registered(False, python=1),
              "all, Python's path after a step": registered(False, python=2),
              "a sample every step": every_step,
              "one more marker a step": marker}
    parts = []  # what ran in each part: None (a switch and its warm-up), or (piece, "U" or "X", gc objects left)
    os.getppid()
    parts.append(None)
    for name in a.pieces.split(";"):
        for role in "UXXU":
            fn = (switch[name] if role == "X" else clear)()
            gc.collect()
            gc.disable()
            for _ in range(2):
                step()
                if fn is not None:
                    fn()
            os.getppid()  # callgrind dumps before it: the part that ran since the last one ends here
            parts.append(None)
            c0 = gc.get_count()[0]
            for _ in range(a.steps):
                step()
                if fn is not None:
                    fn()
            left = gc.get_count()[0] - c0
            os.getppid()
            parts.append((name, role, left))
            gc.enable()
    clear()
    hook.register(optmod)
    with open(a.inner, "w") as f:
        json.dump({"parts": parts, "shapes": _shape_text((s.x,), {}, s.torch), "python": sys.version.split()[0],
                   "torch": s.torch.__version__}, f)


def annotate(path, inclusive):
    """({function: count of the first event}, {event: total}) of one callgrind part."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=%s" % ("yes" if inclusive else "no"),
                          "--threshold=100", path], capture_output=True, text=True).stdout
    d = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(\S.*?)\s*$", line)
        if not m or ":" not in m.group(2):
            continue
        fn = m.group(2).split(":", 1)[1].split(" [")[0].strip()
        d[fn] = d.get(fn, 0) + int(m.group(1).replace(",", ""))
    events, tot = None, None
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("totals:") or (tot is None and line.startswith("summary:")):
                tot = [int(x) for x in line.split()[1:]]
    return d, dict(zip(events, tot))


def hwy_without_rdtscp(out):
    """Debian's torch loads libhwy (through OpenCV and libjxl), whose initializer runs rdtscp; valgrind 3.19
    decodes it only where the CPU advertises it, which this machine's virtual CPU does not (SIGILL). A copy
    with each rdtscp (0f 01 f9) turned into rdtsc; nop (0f 31 90) goes first on the library path: a timer's
    read without the processor id, which nothing counted here uses."""
    src = "/usr/lib/x86_64-linux-gnu/libhwy.so.1"
    if not os.path.exists(src):
        return False
    data = open(os.path.realpath(src), "rb").read()
    if b"\x0f\x01\xf9" not in data:
        return False
    with open(os.path.join(out, "libhwy.so.1"), "wb") as f:
        f.write(data.replace(b"\x0f\x01\xf9", b"\x0f\x31\x90"))
    return True


def inner_calls(a):
    """Runs under callgrind: each of the companion's callbacks (and a sampled model call) in a loop of a.calls
    calls, between getppid() calls. An instruction count does not depend on the caches, so a loop's count
    per call is what the call costs in a step."""
    sys.path.insert(0, GPU)
    from bench_step_hooks import setup
    s = setup(argparse.Namespace(cpu=True))
    hook, adapter, opt, model, x = s.hook, s.adapter, s.opt, s.model, s.x
    adapter.cuda_ready = True
    adapter.counters.due = float("inf")
    hook.due = float("inf")  # no sample but the one asked for
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    from _oomtrace_steps import _shape_text
    shapes = _shape_text((x,), {}, s.torch)
    fast = hook.fast
    args, kw = (), {}
    parts = [None]
    os.getppid()

    def empty(o, a, k):
        return None

    def loop(name, fn):
        for _ in range(10):
            fn()
        os.getppid()
        parts.append(None)
        for _ in range(a.calls):
            fn()
        os.getppid()
        parts.append(name)
    loop("an empty loop", lambda: None)
    loop("an empty Python function, called as torch calls a hook", lambda: empty(opt, args, kw))
    if hook.c_post is not None:
        loop("the step hook in C (_step_hook)", lambda: hook.c_post(opt, args, kw))
    loop("post_step with the C path", lambda: hook.post_step(opt, args, kw))
    hook.fast = None
    loop("post_step with on_step in Python", lambda: hook.post_step(opt, args, kw))
    hook.fast = fast
    if fast is not None:
        loop("the C path alone (_step_fast)", lambda: fast(1000, shapes))
    loop("on_step alone", lambda: adapter.on_step(1000, shapes))
    loop("the inputs' shape text", lambda: _shape_text((x,), {}, s.torch))
    hook.unregister()
    loop("the model's call", lambda: model(x))

    def sampled():
        hook.arm()
        hook.due = float("inf")
        model(x)
    loop("the model's call, the sampled hook armed (armed, the sample, removed)", sampled)
    hook.register(s.optmod)
    with open(a.inner, "w") as f:
        json.dump({"parts": parts, "python": sys.version.split()[0], "torch": s.torch.__version__}, f)


def counted(a, args):
    """Runs this file with args under callgrind; (the profiles' folder, the inner run's meta.json)."""
    out = tempfile.mkdtemp(prefix="step_hook_ir.")
    meta = os.path.join(out, "meta.json")
    tool = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-before=getppid",
            "--callgrind-out-file=%s/cg.out" % out]
    if a.cache:
        tool += ["--cache-sim=yes", "--D1=" + os.environ.get("D1", "49152,12,64"),
                 "--LL=" + os.environ.get("LL", "2097152,16,64")]
    libs = [os.path.join(ROOT, "build", "fake")]
    if hwy_without_rdtscp(out):
        libs.append(out)
    env = dict(os.environ, LD_PRELOAD=os.path.join(ROOT, "build", "liboomtrace.so"),
               LD_LIBRARY_PATH=":".join(libs), OOMTRACE_QUIET="1", OOMTRACE_DUMP="none",
               FAKECUDA_CAPACITY="1T", PYTHONHASHSEED="0", GPU_TEST_WATCHDOG="3600")  # valgrind is ~50 x slower
    cmd = tool + [sys.executable, os.path.abspath(__file__), "--inner", meta] + args
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0 or not os.path.exists(meta):
        sys.stderr.write(r.stderr[-4000:])
        sys.exit("step_hook_ir: the counted run failed (exit %d)" % r.returncode)
    return out, json.load(open(meta))


def outer_calls(a):
    out, info = counted(a, ["--calls", str(a.calls)])
    w = sys.stdout.write
    w("instructions a call (callgrind, loops of %d calls; Python %s, torch %s)\n| call | Ir | less the empty "
      "loop's |\n|---|---:|---:|\n" % (a.calls, info["python"], info["torch"]))
    base = None
    for k, what in enumerate(info["parts"], start=1):
        if what is None:
            continue
        ir = annotate(os.path.join(out, "cg.out.%d" % k), False)[1]["Ir"] / a.calls
        base = ir if base is None else base
        w("| %s | %.0f | %+.0f |\n" % (what, ir, ir - base))
    if not a.keep:
        subprocess.run(["rm", "-rf", out])


def outer(a):
    out, info = counted(a, ["--steps", str(a.steps), "--pieces", a.pieces])
    blocks = {}  # piece -> [(role, totals, inclusive by function, self by function, gc objects left)]
    for k, what in enumerate(info["parts"], start=1):
        if what is None:
            continue
        name, role, left = what
        path = os.path.join(out, "cg.out.%d" % k)
        inc, tot = annotate(path, True)
        tot["Ir outside malloc"] = tot["Ir"] - sum(v for f, v in inc.items() if f in C_ALLOC)
        blocks.setdefault(name, []).append((role, tot, inc, annotate(path, False)[0] if name == a.top_piece else {},
                                            left))
    n = 2 * a.steps

    def added(name, pick):
        """(X1 + X2 - U1 - U2) / 2N for one figure: a drift linear in time cancels in U X X U."""
        return sum((1 if b[0] == "X" else -1) * pick(b) for b in blocks[name]) / n
    pieces = a.pieces.split(";")
    u = [b for name in pieces for b in blocks[name] if b[0] == "U"]
    base = {e: sum(b[1][e] for b in u) / (len(u) * a.steps) for e in u[0][1]}
    evs = ["Ir", "Ir outside malloc"] + ([e for e in ("I1mr", "ILmr", "D1mr", "D1mw", "DLmr", "DLmw") if e in base]
                                        if a.cache else [])
    w = sys.stdout.write
    w("Counted a step (callgrind, blocks U X X U of %d steps; Python %s, torch %s, input shapes %s); the step "
      "unregistered: %s\n" % (a.steps, info["python"], info["torch"], info["shapes"],
                              ", ".join("%s %.0f" % (e, base[e]) for e in evs)))
    w("| piece | " + " | ".join("%s added" % e for e in evs) + " | share of Ir | gc-tracked objects left |\n")
    w("|---" * (len(evs) + 3) + "|\n")
    rows = []
    for name in pieces:
        add = {e: added(name, lambda b, e=e: b[1][e]) for e in evs}
        objs = added(name, lambda b: b[4])
        w("| %s | %s | %+.3f%% | %+.2f |\n" % (name, " | ".join("%+.0f" % add[e] for e in evs),
                                             100.0 * add["Ir"] / base["Ir"], objs))
        rows.append({"piece": name, "added": add, "gc_objects_left": objs, "base": base})
    if a.top and a.top_piece in blocks:
        for kind, at in (("self", 3), ("inclusive", 2)):
            fns = set()
            for b in blocks[a.top_piece]:
                fns |= set(b[at])
            d = {f: added(a.top_piece, lambda b, f=f, at=at: b[at].get(f, 0)) for f in fns}
            top = sorted(d.items(), key=lambda kv: -abs(kv[1]))[:a.top]
            w("\n%s Ir a step that \"%s\" adds, by function (top %d):\n" % (kind, a.top_piece, a.top))
            for k, v in top:
                w("  %+9.0f  %s\n" % (v, k))
            rows.append({"by_function": kind, "top": top})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if not a.keep:
        subprocess.run(["rm", "-rf", out])
    else:
        w("profiles kept in %s\n" % out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=16, help="N: steps a block")
    ap.add_argument("--pieces", default=";".join(PIECES), help="semicolon-separated, of: " + "; ".join(PIECES))
    ap.add_argument("--cache", action="store_true", help="callgrind's cache simulation too (D1, LL misses)")
    ap.add_argument("--top", type=int, default=25, help="functions shown for --top-piece (0: none)")
    ap.add_argument("--top-piece", default="all", help="the piece whose functions --top shows")
    ap.add_argument("--json", default="", help="write the figures to this file")
    ap.add_argument("--keep", action="store_true", help="keep the profiles")
    ap.add_argument("--calls", type=int, default=0,
                    help="instead: each callback in a loop of this many calls, counted a call")
    ap.add_argument("--inner", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inner:
        (inner_calls if a.calls else inner)(a)
    else:
        (outer_calls if a.calls else outer)(a)


if __name__ == "__main__":
    main()
