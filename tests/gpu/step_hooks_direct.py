"""The direct timings of tests/gpu/bench_step_hooks.py: each of the companion's callbacks in a tight loop (hot)
and right after a step (cold), the step marker with a busy Python thread wanting the GIL, and the exceptions a
step raises. Kept apart from the paired-block benchmark, which imports `direct` from here."""
import os
import sys
import time


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


def count_raises(step, mon, tool, steps=20):
    """Exceptions raised in Python code a step: RAISE events (3.12+: one per frame an exception passes,
    what the companion's callback received) and the distinct exceptions, with the places that raise most."""
    import collections
    where = collections.Counter()
    ids = {}  # id -> the exception, kept while counting: a freed one's id comes back
    events = [0]
    if mon is not None and tool is not None:
        def on(code, offset, exc):
            events[0] += 1
            ids[id(exc)] = exc
            where["%s %s:%s" % (type(exc).__name__, os.path.basename(code.co_filename), code.co_name)] += 1
        prev = mon.get_events(tool)
        prev_cb = mon.register_callback(tool, mon.events.RAISE, on)
        mon.set_events(tool, mon.events.RAISE)
        try:
            for _ in range(steps):
                step()
        finally:
            mon.set_events(tool, prev)
            mon.register_callback(tool, mon.events.RAISE, prev_cb)
        how = "sys.monitoring RAISE"
    else:
        def tracer(frame, event, arg):  # 'exception' events: one per frame; the raising frame has no tb_next
            if event == "exception":
                events[0] += 1
                ids[id(arg[1])] = arg[1]
                if arg[2] is not None and arg[2].tb_next is None:
                    where["%s %s:%s" % (type(arg[1]).__name__, os.path.basename(frame.f_code.co_filename),
                                        frame.f_code.co_name)] += 1
            return tracer
        sys.settrace(tracer)
        try:
            for _ in range(steps):
                step()
        finally:
            sys.settrace(None)
        how = "sys.settrace exception events"
    n = len(ids)
    ids.clear()
    return {"case": "step_hooks_raises", "piece": "raises a step", "unit": "per step", "how": how,
            "events_per_step": events[0] / steps, "exceptions_per_step": n / steps,
            "where": dict(where.most_common(8))}


def marker_with_thread(label, builtin, calls=1000):
    """The step marker while another Python thread wants the GIL (a busy one: the worst case of a
    DataLoader's pin-memory thread or a progress bar's): through CDLL (the GIL given up for the call, then
    taken back, which can wait for the other thread's switch interval) and through PyDLL (kept, as the
    companion binds it). Mean ns a call, each call after ~20 us of Python work."""
    import ctypes
    import threading
    fns = []
    for how, lib in (("GIL given up (CDLL)", ctypes.CDLL(None)), ("GIL kept (PyDLL, the companion's)", ctypes.PyDLL(None))):
        f = lib.oomtrace_mark
        f.argtypes = [ctypes.c_char_p]
        f.restype = ctypes.c_int
        fns.append((how, f))
    if type(builtin).__name__ == "builtin_function_or_method":
        fns.append(("GIL kept (the library's builtin, the companion's)", builtin))
    fns[1] = ("GIL kept (PyDLL)", fns[1][1])
    stop = []

    def spin():
        n = 0
        while not stop:
            n += 1
    t = threading.Thread(target=spin, daemon=True)
    t.start()
    rows = []
    try:
        for how, f in fns + fns:
            ts = []
            for _ in range(calls):
                t0 = time.perf_counter_ns()
                f(label)
                ts.append(time.perf_counter_ns() - t0)
                k = 0
                for i in range(300):
                    k += i
            ts.sort()
            rows.append({"case": "step_hooks_direct", "piece": "step marker, a busy Python thread, " + how,
                         "unit": "ns/call, mean", "ns": sum(ts) / len(ts), "median_ns": ts[len(ts) // 2],
                         "p90_ns": ts[len(ts) * 9 // 10], "calls": calls,
                         "waited_1ms": sum(1 for v in ts if v >= 10 ** 6)})
    finally:
        stop.append(1)
        t.join()
    return rows[len(fns):]  # the second round of each: the first warms up


def _empty():
    pass


def in_step(step, cands, steps):
    """Each candidate called right after a training step, one a step in turn, timed alone (perf_counter: a
    vDSO read): what it costs with the caches as the step leaves them (the companion's callbacks run
    there), against its cost in a tight loop. The timer's own cost (an empty timed region, in turn with the
    others) is taken off. ns: the mean; median_ns: the median."""
    clock = time.perf_counter_ns
    cands = [("(the timer)", None)] + list(cands)
    got = [[] for _ in cands]
    for i in range(steps):
        step()
        k = i % len(cands)
        f = cands[k][1]
        if f is None:
            t0 = clock()
            t1 = clock()
        else:
            t0 = clock()
            f()
            t1 = clock()
        got[k].append(t1 - t0)
    base = sorted(got[0])[len(got[0]) // 2]
    rows = []
    for (name, _), v in zip(cands[1:], got[1:]):
        v = sorted(x - base for x in v)
        rows.append({"case": "step_hooks_in_step", "piece": name, "unit": "ns/call after a step",
                     "ns": sum(v) / len(v), "median_ns": v[len(v) // 2], "calls": len(v), "timer_ns": base})
    return rows


PLAIN_CALL = "the model's call, nothing armed"
SAMPLED_CALL = "the model's call with the sampled hook armed (armed, the sample, removed)"


def direct(a, torch, hook, adapter, comp, opt, model, x, label, extra, step, mon, tool):
    """The companion's callbacks called directly, as torch calls them at each step, in tight loops: their
    own cost to ~0.1 us, which the paired blocks (the whole effect, caches included) cannot resolve on a
    noisy host. Steps counted here are taken back afterwards."""
    import _oomtrace_steps
    n = a.calls
    rows = []
    hook.off = False
    saved = (hook.step, list(adapter.steps), hook.seen, hook.samples)
    due = adapter.counters

    post = hook.c_post or hook.post_step

    def one_step():  # what torch 2 calls at a step: the optimizer's step post hook (in C where the library gives it)
        post(opt, (), {})

    def forced():  # the same with the counters read at every step (no sampling)
        due.due = 0
        one_step()

    def sampled():  # the model's call with the sampled forward pre hook armed, as after a step
        if hook.sampling is None:
            hook.arm()
        model(x)

    shapes = [(torch.zeros(4, i % 7 + 1),) for i in range(8)]
    k = [0]

    def shape_text():  # what a sample builds (and the failure path)
        k[0] += 1
        _oomtrace_steps._shape_text(shapes[k[0] & 7], {}, torch)

    cases = [("callbacks of one step (counters sampled)", one_step),
             ("callbacks of one step (counters read every step)", forced),
             ("the inputs' shape text", shape_text),
             ("step marker, as the companion calls it (+ record)", extra["mark"]),
             ("counter read (memoryStats)", extra["memoryStats"])]
    kerr = KeyError("not an OOM")
    cases.append(("RAISE callback (on_raise), an exception that is not an OOM", lambda: comp.on_raise(None, 0, kerr)))
    cases.append(("one Python call of an empty function", _empty))
    cases.append(("post_step in Python (the hook where the C one is missing)", lambda: hook.post_step(opt, (), {})))
    for name, fn in cases:
        rows.append({"case": "step_hooks_direct", "piece": name, "unit": "ns/call", "ns": timed(fn, n)})
    plain = timed(lambda: model(x), max(1, n // 10))
    rows.append({"case": "step_hooks_direct", "piece": PLAIN_CALL, "unit": "ns/call", "ns": plain})
    rows.append({"case": "step_hooks_direct", "piece": SAMPLED_CALL, "unit": "ns/call",
                 "ns": timed(sampled, max(1, n // 10))})
    hook.step, hook.seen, hook.samples = saved[0], saved[2], saved[3]
    adapter.steps.clear()
    adapter.steps.extend(saved[1])
    w = sys.stderr.write
    w("\n| direct call | ns |\n|---|---:|\n")
    for r in rows:
        w("| %s | %.0f |\n" % (r["piece"], r["ns"]))
    for r in marker_with_thread(label, comp.mark_fn):
        rows.append(r)
        w("| %s | %.0f (median %.0f; %d of %d calls waited 1 ms or more) |\n" % (
            r["piece"], r["ns"], r["median_ns"], r["waited_1ms"], r["calls"]))
    cold = in_step(step, [("callbacks of one step (counters sampled)", one_step),
                          ("post_step in Python (the hook where the C one is missing)", lambda: hook.post_step(opt, (), {})),
                          ("step marker, as the companion calls it (+ record)", extra["mark"]),
                          ("RAISE callback (on_raise), an exception that is not an OOM", lambda: comp.on_raise(None, 0, kerr)),
                          ("one Python call of an empty function", _empty),
                          (PLAIN_CALL, lambda: model(x)),
                          (SAMPLED_CALL, sampled)],
                   a.cold_steps)
    hot = {r["piece"]: r["ns"] for r in rows}
    w("\n| called right after a step (cold caches), %d steps | median ns | mean ns | timed directly (hot) | cold / hot |\n"
      "|---|---:|---:|---:|---:|\n" % a.cold_steps)
    for r in cold:
        h = hot.get(r["piece"])
        r["hot_ns"] = h
        w("| %s | %.0f | %.0f | %s | %s |\n" % (r["piece"], r["median_ns"], r["ns"], "%.0f" % h if h else "",
                                               "%.1f" % (r["median_ns"] / h) if h and h > 0 else ""))
        rows.append(r)
    hook.step, hook.seen, hook.samples = saved[0], saved[2], saved[3]
    adapter.steps.clear()
    adapter.steps.extend(saved[1])
    rc = count_raises(step, mon, tool)
    w("\nraises a step (%s): %.2f events, %.2f exceptions; %s\n" % (
        rc["how"], rc["events_per_step"], rc["exceptions_per_step"],
        ", ".join("%s x%d" % kv for kv in rc["where"].items()) or "none"))
    rows.append(rc)
    return rows
