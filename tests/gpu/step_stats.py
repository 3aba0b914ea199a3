"""The statistics and the verdict of tests/gpu/bench_step_hooks.py: paired on/off blocks, the median of their
differences with a 95% interval (order statistics), the tables, and issue 12's verdict line. Kept apart from
the benchmark's pieces (moved unchanged from bench_step_hooks.py)."""
import json
import sys

from step_probes import UNITS


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
    """Per block: `steps` steps with the piece on and `steps` with it off (order flipping), each step measured
    alone (run_block gives a number a step, or a tuple of figures a step); per figure, the difference of the
    halves' middle means (per step), and the off halves' middle means: lists of tuples, one a block."""
    diffs, base = [], []
    for b in range(blocks):
        t = {}
        for state in ((True, False) if b % 2 == 0 else (False, True)):
            (on if state else off)()
            rows = run_block(steps, state)
            cols = zip(*rows) if isinstance(rows[0], tuple) else (rows,)
            t[state] = [middle(c) for c in cols]
        off()
        diffs.append(tuple(x - y for x, y in zip(t[True], t[False])))
        base.append(tuple(t[False]))
    return diffs, base


def column(rows, k):
    return [r[k] for r in rows]


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


def figures_table(rows, figures):
    """Each piece's median and 95% interval in every figure read: the thread's CPU time beside the wall clock
    (and counted cycles and instructions where the kernel gives them)."""
    w = sys.stderr.write
    w("\n| piece | " + " | ".join("%s (%s) | 95%% CI" % UNITS[f][:2] for f in figures) + " |\n")
    w("|---|" + "---:|---:|" * len(figures) + "\n")
    for r in rows:
        cells = []
        for f in figures:
            s, u = r["figures"][f]["added"], UNITS[f][2]
            cells.append("%+.2f | %+.2f .. %+.2f" % (s["median"] / u, s["ci95"][0] / u, s["ci95"][1] / u))
        w("| %s | %s |\n" % (r["piece"], " | ".join(cells)))


SMALL_PCT = 0.3  # issue 12's "no measurable cost": under 0.3% of the step


def verdict(rows, figure, main, sampling=None):
    """issue 12's criterion, in one figure: the companion's cost a step against the A/A interval (and its
    width), and whether the upper end of its own 95% interval is under 0.3% of the step (then it is below 0.3%).
    A time's figure includes the sampled steps' share a step (sampling: what the halves' middle means leave out)."""
    by = {r["piece"]: r for r in rows}
    if "none" not in by or "all" not in by:
        return
    aa, al = by["none"]["figures"][figure]["added"], dict(by["all"]["figures"][figure]["added"])
    if sampling:
        add = sampling["added_per_step_ns"]
        al["median"] += add
        al["ci95"] = [al["ci95"][0] + add, al["ci95"][1] + add]
    # A time's share is of the wall-clock step (what the user waits for); a count's, of the step's count.
    step = by["all"]["figures"]["wall_ns" if figure.endswith("_ns") else figure]["base"]
    name, unit, div = UNITS[figure]
    pct = lambda v: 100.0 * v / step  # noqa: E731
    inside = aa["ci95"][0] <= al["median"] <= aa["ci95"][1]
    width = aa["ci95"][1] - aa["ci95"][0]
    under = al["ci95"][1] < SMALL_PCT / 100.0 * step
    sys.stderr.write("\n%sthe companion (all), %s: %+.2f %s a step (%+.3f%%), 95%% interval %+.2f .. %+.2f "
                     "(%+.3f%% .. %+.3f%%); the A/A interval %+.2f .. %+.2f, %.2f %s wide (%.3f%% of the step): "
                     "%s; the interval's upper end under %.1f%% of the step: %s\n" % (
                         "VERDICT: " if main else "", name, al["median"] / div, unit, pct(al["median"]),
                         al["ci95"][0] / div, al["ci95"][1] / div, pct(al["ci95"][0]), pct(al["ci95"][1]),
                         aa["ci95"][0] / div, aa["ci95"][1] / div, width / div, unit, pct(width),
                         "inside" if inside else "outside", SMALL_PCT, "yes" if under else "no"))
    print(json.dumps({"case": "step_hooks_verdict", "figure": figure, "verdict": main, "all": al, "aa": aa,
                      "step": step, "inside_aa": inside, "aa_width_pct": pct(width), "share_pct": pct(al["median"]),
                      "upper_pct": pct(al["ci95"][1]), "under_0_3_pct": under}), flush=True)
